"""Token tagging (NER) sentences from CoNLL-style column files.

One token per line, whitespace-separated columns, the token first and the tag last; a blank line
ends a sentence. `-DOCSTART-` lines (CoNLL-2003 document markers) are skipped. This covers
CoNLL-2003 (`token POS chunk NER`) and character-level Chinese NER such as Resume NER
(`char TAG`, BMES).

Tag schemes: a file whose tags use only B-/I-/O is normalized to IOB2 (`to_iob2`): IOB1 files,
where B- marks only an entity that directly follows one of the same type, are converted, and IOB2
files pass through unchanged. BMES/BIOES files (any M-, E- or S- tag) keep their tags, so a model
learns and predicts the original scheme; scoring maps them to BIO prefixes
(`bertlab.core.metrics.bio_tags`) and applies CoNLL semantics with seqeval's default mode.
"""

from __future__ import annotations

import collections
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from bertlab.core.metrics import OUTSIDE_TAG, bio_tags
from bertlab.data.tasks.files import at, existing_file, require_examples, text_lines

logger = logging.getLogger(__name__)

DOCUMENT_MARKER = "-DOCSTART-"  # CoNLL-2003 document boundary, not a sentence
_BIO_PREFIXES = frozenset("BI")
_SEGMENT_PREFIXES = frozenset("BIMES")


@dataclass(frozen=True)
class TaggedSentence:
    """A sentence as tokens and one tag per token; `line` is the file line of its first token."""

    tokens: tuple[str, ...]
    tags: tuple[str, ...]
    line: int = 0


def to_iob2(tags: Sequence[str]) -> list[str]:
    """Rewrite tags so that every entity starts with B- (IOB2); BMES/BIOES become BIO first.

    An I- tag that follows O, a different type or the sentence start begins an entity, as
    conlleval reads it. Example (IOB1): `["I-PER", "I-PER", "O", "I-LOC", "B-LOC"]` ->
    `["B-PER", "I-PER", "O", "B-LOC", "B-LOC"]`.
    """
    converted = bio_tags(tags)
    for index, tag in enumerate(converted):
        if not tag.startswith("I-"):
            continue
        previous = converted[index - 1] if index else OUTSIDE_TAG
        if previous == OUTSIDE_TAG or previous[2:] != tag[2:]:
            converted[index] = "B-" + tag[2:]
    return converted


def entity_spans(tags: Sequence[str]) -> list[tuple[str, int, int]]:
    """The entities in one sentence's tags, as conlleval reads them (`to_iob2`).

    Example: `["B-PER", "I-PER", "O", "S-LOC", "I-ORG"]` ->
    `[("PER", 0, 2), ("LOC", 3, 4), ("ORG", 4, 5)]`.

    Returns:
        (entity type, first word, last word + 1) per entity, in order.

    Raises:
        ValueError: a tag that is neither `O` nor `<prefix>-<type>` with a known prefix.
    """
    spans: list[tuple[str, int, int]] = []
    for index, tag in enumerate(to_iob2(tags)):
        if tag.startswith("B-"):
            spans.append((tag[2:], index, index + 1))
        elif tag.startswith("I-"):  # after `to_iob2`, an I- tag continues the open entity
            entity_type, start, _ = spans[-1]
            spans[-1] = (entity_type, start, index + 1)
    return spans


def tag_scheme(tags: Iterable[str]) -> str:
    """`"BIO"` when every tag is O, B- or I-, else `"BMES"` (M-, E- or S- occur)."""
    prefixes = {tag.partition("-")[0] for tag in tags if tag != OUTSIDE_TAG}
    return "BIO" if prefixes <= _BIO_PREFIXES else "BMES"


def entity_types(sentences: Iterable[TaggedSentence]) -> dict[str, int]:
    """Count entities per type (after mapping to IOB2), e.g. `{"LOC": 7140, ...}`."""
    counts: dict[str, int] = {}
    for sentence in sentences:
        for tag in to_iob2(sentence.tags):
            if tag.startswith("B-"):
                counts[tag[2:]] = counts.get(tag[2:], 0) + 1
    return dict(sorted(counts.items()))


def read_tagging(path: Path | str, tag_column: int = -1) -> list[TaggedSentence]:
    """Read a column file of tokens and tags; B-/I-/O files come back in IOB2 (see module doc).

    Args:
        path: the file.
        tag_column: which whitespace-separated column holds the tag (the last by default).

    Raises:
        FileNotFoundError: the file is missing.
        ValueError: a line with one column, a tag that is not O or B/I/M/E/S-TYPE, or an empty
            file, naming file and line.
    """
    path = existing_file(path)
    sentences = _read_columns(path, tag_column)
    if tag_scheme(tag for sentence in sentences for tag in sentence.tags) == "BMES":
        return sentences
    converted = [
        TaggedSentence(sentence.tokens, tuple(to_iob2(sentence.tags)), sentence.line)
        for sentence in sentences
    ]
    num_changed = sum(a.tags != b.tags for a, b in zip(sentences, converted, strict=True))
    if num_changed:
        logger.info("%s: IOB1 tags converted to IOB2 in %d sentences", path, num_changed)
    return converted


def read_conll(path: Path | str) -> list[TaggedSentence]:
    """CoNLL-2003 (`token POS chunk NER`, `-DOCSTART-` markers), tags in IOB2."""
    return read_tagging(path)


def _read_columns(path: Path, tag_column: int) -> list[TaggedSentence]:
    """The sentences of a column file. Every token line must have the file's usual number of
    columns (its most common one): a line that lacks one would give a wrong column as the tag
    (CoNLL's chunk tag B-NP read as an entity of type NP)."""
    with text_lines(path) as file:
        lines = [(number, line, line.split()) for number, line in enumerate(file, start=1)]
    widths = collections.Counter(
        len(columns) for _, _, columns in lines if columns and columns[0] != DOCUMENT_MARKER
    )
    width = widths.most_common(1)[0][0] if widths else 0
    sentences = []
    tokens: list[str] = []
    tags: list[str] = []
    first_line = 0
    for line_number, line, columns in lines:
        if not columns or columns[0] == DOCUMENT_MARKER:
            if tokens:
                sentences.append(TaggedSentence(tuple(tokens), tuple(tags), first_line))
            tokens, tags = [], []
            continue
        if len(columns) < 2:
            raise ValueError(f"{at(path, line_number)}: expected a token and a tag: {line!r}")
        if len(columns) != width:
            raise ValueError(
                f"{at(path, line_number)}: {len(columns)} columns where the file's lines have "
                f"{width}: {line.rstrip()!r}"
            )
        tag = columns[tag_column]
        _check_tag(tag, path, line_number)
        if not tokens:
            first_line = line_number
        tokens.append(columns[0])
        tags.append(tag)
    if tokens:
        sentences.append(TaggedSentence(tuple(tokens), tuple(tags), first_line))
    return require_examples(sentences, path)


def _check_tag(tag: str, path: Path, line_number: int) -> None:
    if tag == OUTSIDE_TAG:
        return
    prefix, separator, entity_type = tag.partition("-")
    if not separator or not entity_type or prefix not in _SEGMENT_PREFIXES:
        raise ValueError(
            f"{at(path, line_number)}: tag {tag!r} is not O or B-/I-/M-/E-/S- followed by a type"
        )
