"""The pre-flight report: what a corpus holds, and what will train badly, before training starts.

`preflight_report` reads the counts that `build_corpus` recorded (which reader read each file and
the documents it made, lines, duplicates, [UNK]s) and the document and sentence boundaries;
`check_objective` refuses what cannot train at all.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bertlab.core.config import objective_data
from bertlab.corpus.encode import MIN_DUPLICATE_CHECK_BYTES
from bertlab.corpus.format import TokenizedCorpus, tokenizer_fingerprint
from bertlab.tokenizer.wordpiece import NUM_SPECIAL_TOKENS_PAIR, Tokenizer

MIN_DOCUMENT_SENTENCES = 2  # NSP draws B from the same document: one sentence gives no IsNext pair
MIN_DOCUMENT_TOKENS = 16  # below this a document adds hardly any context (our choice)
MAX_UNK_RATE = 0.01  # more [UNK] than 1% suggests a vocabulary that does not fit the corpus
MAX_DUPLICATE_LINE_RATIO = 0.10  # Lee et al. 2022: duplicated text is memorized, hurts training
MAX_SHORT_DOCUMENT_FRACTION = 0.5  # warn when most documents are short
MIN_SEQUENCES = 1000  # fewer full-length sequences than this: the model will simply memorize
NAMED_FILES = 3  # a reader's line names this many files; more are counted


@dataclass(frozen=True)
class PreflightReport:
    """What the corpus holds and what will train badly, checked before pre-training starts.

    A corpus has no empty documents: a run of blank lines is one document break, and lines without
    a token are dropped (counted in `num_tokenless_lines`). Short documents are counted instead.
    """

    objective: str
    max_seq_length: int
    num_documents: int
    num_sentences: int
    num_tokens: int
    num_lines: int
    num_checked_lines: int  # lines of at least MIN_DUPLICATE_CHECK_BYTES, checked for duplicates
    num_duplicate_lines: int
    num_skipped_lines: int  # not valid UTF-8
    num_tokenless_lines: int  # not blank, yet without a token (e.g. only control characters)
    num_single_sentence_documents: int
    num_short_documents: int  # < MIN_DOCUMENT_SENTENCES sentences or < MIN_DOCUMENT_TOKENS tokens
    num_unk_tokens: int
    warnings: list[str]
    read_as: list[str]  # one line per way of reading: the files and the documents they made
    num_empty_records: int = 0  # records (JSON objects, rows) without text

    @property
    def duplicate_line_ratio(self) -> float:
        return self.num_duplicate_lines / max(self.num_checked_lines, 1)

    @property
    def unk_rate(self) -> float:
        return self.num_unk_tokens / max(self.num_tokens, 1)

    def summary(self) -> list[str]:
        """Lines to print before training."""
        lines = [
            f"corpus: {self.num_documents:,} documents, {self.num_sentences:,} sentences, "
            f"{self.num_tokens:,} tokens",
            f"duplicate lines: {self.num_duplicate_lines:,} of {self.num_checked_lines:,} lines "
            f"of {MIN_DUPLICATE_CHECK_BYTES}+ bytes ({self.duplicate_line_ratio:.2%}); "
            f"{self.num_lines:,} lines in all",
            f"short documents (< {MIN_DOCUMENT_SENTENCES} sentences or < {MIN_DOCUMENT_TOKENS} "
            f"tokens): {self.num_short_documents:,}; one sentence long: "
            f"{self.num_single_sentence_documents:,}",
            f"[UNK] rate: {self.unk_rate:.3%}",
        ]
        lines[1:1] = self.read_as
        if self.num_empty_records:
            lines.append(f"skipped {self.num_empty_records:,} records without text")
        if self.num_skipped_lines:
            lines.append(f"skipped {self.num_skipped_lines:,} lines that are not valid UTF-8")
        if self.num_tokenless_lines:
            lines.append(f"dropped {self.num_tokenless_lines:,} lines without a single token")
        lines += [f"warning: {warning}" for warning in self.warnings]
        return lines


def preflight_report(
    corpus: TokenizedCorpus, tokenizer: Tokenizer, objective: str, max_seq_length: int = 128
) -> PreflightReport:
    """Statistics of `corpus` and warnings about what will train badly with `objective`.

    Args:
        corpus: a built corpus.
        tokenizer: the tokenizer training will use; must be the one the corpus was built with.
        objective: one of `OBJECTIVES`.
        max_seq_length: L of the training sequences (`PretrainDataConfig.max_seq_length`).

    Raises:
        ValueError: an unknown objective, or a corpus built with another tokenizer.
    """
    objective_data(objective)  # raises ValueError for an unknown objective
    if corpus.meta["tokenizer_fingerprint"] != tokenizer_fingerprint(tokenizer):
        raise ValueError(
            f"corpus at {corpus.directory} was tokenized with another tokenizer; build it again"
        )
    counts, files = corpus.meta["counts"], corpus.meta.get("files", [])
    document_offsets = np.asarray(corpus.document_offsets)
    sentences_per_document = np.diff(document_offsets)
    tokens_per_document = np.diff(np.asarray(corpus.sentence_offsets)[document_offsets])
    num_single = int(np.count_nonzero(sentences_per_document == 1))
    is_short = (sentences_per_document < MIN_DOCUMENT_SENTENCES) | (
        tokens_per_document < MIN_DOCUMENT_TOKENS
    )
    report = PreflightReport(
        objective=objective,
        max_seq_length=max_seq_length,
        num_documents=corpus.num_documents,
        num_sentences=corpus.num_sentences,
        num_tokens=corpus.num_tokens,
        num_lines=counts["lines"],
        num_checked_lines=counts["checked_lines"],
        num_duplicate_lines=counts["duplicate_lines"],
        num_skipped_lines=counts["skipped_lines"],
        num_tokenless_lines=counts["tokenless_lines"],
        num_single_sentence_documents=num_single,
        num_short_documents=int(np.count_nonzero(is_short)),
        num_unk_tokens=counts["unk_tokens"],
        warnings=[],
        read_as=read_as_lines(files),
        num_empty_records=sum(file.get("empty_records", 0) for file in files),
    )
    report.warnings.extend(_warnings(report))
    return report


def read_as_lines(files: list[dict]) -> list[str]:
    """One line per way the files were read (`meta.json`'s "files"): which files, and the
    records and documents they made.

    Example:
        >>> read_as_lines([{"path": "a.jsonl", "read_as": "JSON Lines, field 'text'",
        ...                 "records": 2000, "documents": 1998}])
        ["read as JSON Lines, field 'text': a.jsonl, 2,000 records, 1,998 documents"]
    """
    groups: dict[str, list[dict]] = {}
    for file in files:
        groups.setdefault(file.get("read_as", "plain text"), []).append(file)
    lines = []
    for read_as, group in groups.items():
        names = [file["path"] for file in group]
        if len(names) > NAMED_FILES:
            names = [f"{len(names):,} files ({names[0]} ... {names[-1]})"]
        records = [file.get("records") for file in group]
        counted = "" if None in records else f", {sum(records):,} records"
        documents = sum(file.get("documents", 0) for file in group)
        lines.append(f"read as {read_as}: {', '.join(names)}{counted}, {documents:,} documents")
    return lines


def _warnings(report: PreflightReport) -> list[str]:
    warnings = []
    if report.unk_rate > MAX_UNK_RATE:
        warnings.append(
            f"[UNK] rate {report.unk_rate:.2%} is above {MAX_UNK_RATE:.0%}: the vocabulary does "
            "not fit this corpus (wrong language or casing?); train a tokenizer on it"
        )
    if report.duplicate_line_ratio > MAX_DUPLICATE_LINE_RATIO:
        warnings.append(
            f"{report.duplicate_line_ratio:.1%} of the lines are duplicates (above "
            f"{MAX_DUPLICATE_LINE_RATIO:.0%}): deduplicate the corpus, the model will memorize them"
        )
    num_documents = max(report.num_documents, 1)
    if report.num_short_documents / num_documents > MAX_SHORT_DOCUMENT_FRACTION:
        warnings.append(
            f"{report.num_short_documents} of {report.num_documents} documents are very short; "
            "is there a blank line after every line instead of between documents?"
        )
    if (
        objective_data(report.objective).is_pair
        and report.num_single_sentence_documents / num_documents > MAX_SHORT_DOCUMENT_FRACTION
    ):
        warnings.append(
            f"{report.num_single_sentence_documents} of {report.num_documents} documents are one "
            "sentence long: NSP will see few true next sentences; consider objective 'mlm'"
        )
    sequences = report.num_tokens // max(report.max_seq_length - NUM_SPECIAL_TOKENS_PAIR, 1)
    if sequences < MIN_SEQUENCES:
        warnings.append(
            f"only about {sequences} sequences of {report.max_seq_length} tokens (fewer than "
            f"{MIN_SEQUENCES}): the model will memorize the corpus rather than learn from it"
        )
    if report.num_skipped_lines:
        warnings.append(f"{report.num_skipped_lines} lines were skipped as not valid UTF-8")
    return warnings


def check_objective(report: PreflightReport, objective: str) -> None:
    """Refuse an objective the corpus cannot train.

    Raises:
        ValueError: next-sentence prediction on a corpus of fewer than two documents.
    """
    if objective_data(objective).is_pair and report.num_documents < 2:
        raise ValueError(
            f"NSP needs at least two documents (random B sentences come from another document), "
            f"but the corpus has {report.num_documents}; separate documents with a blank line "
            "or use objective 'mlm'"
        )
