"""Building the on-disk pre-training corpus: raw text tokenized once into memory-mapped arrays.

Input is Google's layout (google-research/bert `create_pretraining_data.py`): one sentence or
paragraph per line, a blank line between documents (a new file also starts a new document).
Plain-text files are that layout; JSON Lines, CSV, TSV, Parquet files, folders and saved
`datasets` are read as it, a record one document (`bertlab.corpus.sources`). Each line is
split into sentences (`split_sentences`, English or Chinese rules, chosen per file) and every
sentence is tokenized without special tokens.

This module is the entry point, `build_corpus`; the work is split along the way data flows
(`bertlab.corpus` lists the folder):

    format.py     the files of a corpus directory, fingerprints, `TokenizedCorpus` (reader)
    encode.py     reading chunks of lines, splitting and tokenizing them in worker processes,
                  appending the results to the files
    preflight.py  `preflight_report` and `check_objective`, run before training

The directory is assembled under a temporary name next to `out_dir` and renamed into place at the
end, so a failure never leaves a half-written corpus. When `meta.json` records the same
fingerprints and options, `build_corpus` opens the existing directory and returns.

Bad input is refused before anything is written where it can be (a missing file, an empty folder,
a binary file, a broken gzip header, a file whose start does not fit its format) and otherwise by
removing the temporary directory (a later line that does not fit, a file mostly not UTF-8, an
empty corpus): each with one line naming the file.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path

from tqdm.auto import tqdm

from bertlab.core.atomic import atomic_directory, write_json
from bertlab.core.wording import Worded
from bertlab.corpus.encode import (
    BYTES_PER_MEGABYTE,
    ChunkEncoder,
    CorpusWriter,
    encoded_chunks,
    read_tasks,
    sniff_lang,
)
from bertlab.corpus.format import (
    CORPUS_FILES,
    FORMAT_VERSION,
    META_FILE,
    TokenizedCorpus,
    corpus_fingerprint,
    tokenizer_fingerprint,
)
from bertlab.corpus.readers import ReadCounts
from bertlab.corpus.sources import LANGS, CorpusReading, CorpusSource, open_corpus
from bertlab.corpus.text_files import check_mostly_utf8
from bertlab.tokenizer.wordpiece import Tokenizer

logger = logging.getLogger(__name__)


def _cached(out_dir: Path, expected: dict) -> TokenizedCorpus | None:
    meta_path = out_dir / META_FILE
    if not meta_path.is_file():
        return None
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    if any(meta.get(key) != value for key, value in expected.items()):
        return None
    try:
        return TokenizedCorpus.open(out_dir)
    except (OSError, ValueError) as error:
        logger.warning("rebuilding the corpus at %s: %s", out_dir, error)
        return None


def _check_replaceable(out_dir: Path) -> None:
    """Refuse to build a corpus in place of a folder that holds anything but a corpus (it is
    replaced whole); say so when an earlier corpus is replaced."""
    if not out_dir.exists() or not any(out_dir.iterdir()):
        return
    if not (out_dir / META_FILE).is_file():
        raise ValueError(f"{out_dir} exists and is not a bertlab corpus; choose another out_dir")
    others = sorted(path.name for path in out_dir.iterdir() if path.name not in CORPUS_FILES)
    if others:
        raise ValueError(
            Worded(
                "{corpus_cache} {path} holds {names}, which are not the corpus's: building it "
                "again (for another tokenizer or settings) would delete them; move them out, or "
                "choose another {corpus_cache}",
                path=out_dir,
                names=", ".join(others),
            )
        )
    logger.warning(
        "the corpus in %s was tokenized for another tokenizer, corpus or settings: tokenizing "
        "it again",
        out_dir,
    )


def default_num_workers() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def build_corpus(
    paths: Sequence[str | os.PathLike],
    tokenizer: Tokenizer,
    out_dir: str | os.PathLike,
    lang: str = "auto",
    show_progress: bool = True,
    whole_word: bool = False,
    num_workers: int | None = None,
    reading: CorpusReading | None = None,
) -> TokenizedCorpus:
    """Tokenize a corpus once into `out_dir`, or reuse it if already built.

    Example:
        >>> corpus = build_corpus(["wiki.txt.gz"], tokenizer, "cache/wiki")  # doctest: +SKIP
        >>> corpus.num_documents, corpus.document(0)[0][:3]  # doctest: +SKIP
        (36183, memmap([ 4926, 22517, 7767], dtype=uint16))

    Args:
        paths: files, folders or patterns (`bertlab.corpus.sources`): plain text in
            Google's layout (blank line between documents), JSON Lines, CSV, TSV, Parquet, a
            saved dataset; gzipped or not.
        tokenizer: encodes every sentence, without [CLS]/[SEP].
        out_dir: the corpus directory; replaced when stale, returned as is when up to date.
        lang: sentence-splitting rules, `"en"`, `"zh"` or `"auto"` (decided per file from the
            share of CJK ideographs at its start).
        show_progress: a progress bar over the bytes read.
        whole_word: also write `word_starts.bin` (Chinese words found with jieba: slower).
        num_workers: worker processes; one per available core when None, 0 for in-process.
        reading: the format and the text's column; None: each file by its suffix, "text".

    Returns:
        The memory-mapped corpus.

    Raises:
        FileNotFoundError: a corpus file is missing.
        ValueError: no files, a binary / mostly non-UTF-8 / broken gzip file, a file that does
            not fit its format (named with its line), an empty corpus, an unknown `lang`, or an
            `out_dir` that holds something other than a corpus.
    """
    if lang not in LANGS:
        raise ValueError(f"unknown lang {lang!r}; choose one of {LANGS}")
    sources = open_corpus(paths, reading)
    out_dir = Path(out_dir)
    expected = {
        "format_version": FORMAT_VERSION,
        "tokenizer_fingerprint": tokenizer_fingerprint(tokenizer),
        "corpus_fingerprint": corpus_fingerprint(sources),
        "lang": lang,
        "whole_word": whole_word,
    }
    cached = _cached(out_dir, expected)
    if cached is not None:
        logger.info("reusing the tokenized corpus at %s", out_dir)
        return cached
    _check_replaceable(out_dir)
    langs = [sniff_lang(source, lang) for source in sources]
    num_workers = default_num_workers() if num_workers is None else num_workers
    with atomic_directory(out_dir) as staging:
        meta = _write(sources, langs, tokenizer, staging, whole_word, num_workers, show_progress)
        meta.update(expected)
        meta["langs"] = langs
        write_json(staging / META_FILE, meta)
    return TokenizedCorpus.open(out_dir)


def _write(
    sources: list[CorpusSource],
    langs: list[str],
    tokenizer: Tokenizer,
    directory: Path,
    whole_word: bool,
    num_workers: int,
    show_progress: bool,
) -> dict:
    """Stream every source through the workers into `directory`; return the metadata."""
    encoder = ChunkEncoder(tokenizer, whole_word)
    writer = CorpusWriter(directory, len(sources), tokenizer.unk_token_id, whole_word)
    sizes = [source.size() for source in sources]
    read_counts = [ReadCounts() for _ in sources]
    total_mb = sum(sizes) / BYTES_PER_MEGABYTE
    progress = tqdm(
        total=total_mb,
        unit="MB",
        bar_format="{l_bar}{bar}| {n:.0f}/{total:.0f} MB [{elapsed}<{remaining}]",
        desc="tokenizing corpus",
        disable=not show_progress,
    )
    try:
        with progress:
            tasks = read_tasks(sources, langs, read_counts, progress)
            for chunk in encoded_chunks(tasks, encoder, num_workers):
                writer.add(chunk)
            progress.update(total_mb - progress.n)
    finally:
        writer.close()
    counts = writer.counts
    for source, lines, skipped in zip(sources, counts.file_lines, counts.file_skipped, strict=True):
        check_mostly_utf8(source.path, lines, skipped)
    if counts.tokens == 0:
        note = f" ({counts.skipped_lines} lines were not UTF-8)" if counts.skipped_lines else ""
        names = ", ".join(str(source.path) for source in sources)
        raise ValueError(f"corpus is empty: no sentence with a token in {names}{note}")
    num_duplicate_lines = writer.finish()
    if counts.skipped_lines:
        logger.warning("skipped %d lines that are not valid UTF-8", counts.skipped_lines)
    return {
        "format_version": FORMAT_VERSION,
        "dtype": encoder.dtype.name,
        "whole_word": whole_word,
        "unk_token_id": tokenizer.unk_token_id,
        "counts": {
            "documents": counts.documents,
            "sentences": counts.sentences,
            "tokens": counts.tokens,
            "lines": counts.lines,
            "duplicate_lines": num_duplicate_lines,
            "checked_lines": counts.hashed_lines,
            "skipped_lines": counts.skipped_lines,
            "tokenless_lines": counts.tokenless_lines,
            "unk_tokens": counts.unk_tokens,
        },
        "files": [
            {
                "path": str(source.path),
                "bytes": size,
                "reader": source.reader.name,
                "read_as": source.read_as,
                "records": read.records if source.reader.kind else None,
                "empty_records": read.empty_records,
                "documents": documents,
            }
            for source, size, read, documents in zip(
                sources, sizes, read_counts, counts.file_documents, strict=True
            )
        ],
    }
