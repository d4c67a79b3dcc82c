"""Pre-training instances: documents -> sentence pairs (NSP), segments or packed sequences.

Follows google-research/bert `create_pretraining_data.py` (cited below as "Google"); the masking
that makes an instance a masked-LM example is `bertlab.data.masking`, drawn afresh every epoch.
Everything here is a pure function over lists, strings and numpy arrays; all randomness comes in
as an explicit `rng: random.Random`. Nothing imports torch.

A corpus is a sequence of documents; a document is a sequence of sentences; a sentence is a sequence
of token ids (a list of ints or a numpy array, e.g. a slice of a memory-mapped file). Only `len()`
and indexing are used, so `documents` may be a lazy view. Documents and sentences must not be empty
(Google drops empty lines and empty documents while reading).
"""

# Shapes: L sequence length.

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from bertlab.core.config import objective_data
from bertlab.tokenizer.wordpiece import (
    CLS_TOKEN,
    MASK_TOKEN,
    NUM_SPECIAL_TOKENS_PAIR,
    NUM_SPECIAL_TOKENS_SINGLE,
    PAD_TOKEN,
    SEP_TOKEN,
    UNK_TOKEN,
)

RANDOM_NEXT_PROB = 0.5  # BERT paper Sec. 3.1 (NSP): "50% of the time B is the actual next sentence"
MIN_SHORT_TARGET_LENGTH = 2  # Google: `target_seq_length = rng.randint(2, max_num_tokens)`
TRUNCATE_FRONT_PROB = 0.5  # Google `truncate_seq_pair`: front or back with equal chance


@dataclass(frozen=True)
class SpecialIds:
    """Ids of the special tokens. They are never masked and never drawn as random replacements."""

    pad: int
    unk: int
    cls: int
    sep: int
    mask: int

    @classmethod
    def from_vocab(cls, vocab: dict[str, int]) -> SpecialIds:
        """Look the ids up in a token -> id vocabulary (`Tokenizer.get_vocab()`)."""
        names = {"pad": PAD_TOKEN, "unk": UNK_TOKEN, "cls": CLS_TOKEN, "sep": SEP_TOKEN}
        names["mask"] = MASK_TOKEN
        missing = [token for token in names.values() if token not in vocab]
        if missing:
            raise ValueError(f"special tokens missing from the vocabulary: {missing}")
        return cls(**{field: vocab[token] for field, token in names.items()})

    @property
    def all(self) -> frozenset[int]:
        return frozenset((self.pad, self.unk, self.cls, self.sep, self.mask))


@dataclass(frozen=True)
class Instance:
    """One pre-training sequence before packing and masking (Google's `TrainingInstance`).

    `tokens_b` is empty and `is_random_next` None for the `mlm` and `clm` objectives. The
    `is_word_start_*` lists run parallel to the tokens when word starts were given.
    """

    tokens_a: list[int]
    tokens_b: list[int]
    is_random_next: bool | None
    is_word_start_a: list[bool] | None = None
    is_word_start_b: list[bool] | None = None


def as_list(values: Sequence) -> list:
    return values.tolist() if isinstance(values, np.ndarray) else list(values)


def _truncation_counts(
    length_a: int, length_b: int, max_num_tokens: int, rng: random.Random
) -> tuple[int, int, int, int]:
    # Google's `truncate_seq_pair` loop, counting instead of deleting: one rng draw per removed
    # token, taken from the longer side, from the front or the back with equal chance.
    counts = [0, 0, 0, 0]  # front of A, back of A, front of B, back of B
    while length_a + length_b > max_num_tokens:
        side = 0 if length_a > length_b else 2
        counts[side + (0 if rng.random() < TRUNCATE_FRONT_PROB else 1)] += 1
        if side == 0:
            length_a -= 1
        else:
            length_b -= 1
    return counts[0], counts[1], counts[2], counts[3]


def _cut(values: list, front: int, back: int) -> list:
    return values[front : len(values) - back]


def truncate_seq_pair(
    tokens_a: Sequence[int], tokens_b: Sequence[int], max_num_tokens: int, rng: random.Random
) -> tuple[list[int], list[int]]:
    """Shorten the longer of A and B one token at a time, from the front or back at random.

    Google's `truncate_seq_pair`: removing from both ends avoids a bias towards sentence starts.

    Example:
        >>> truncate_seq_pair([1, 2, 3, 4, 5], [6, 7], 5, random.Random(0))
        ([1, 2, 3], [6, 7])

    Returns:
        New lists (A, B) with `len(A) + len(B) <= max_num_tokens`.
    """
    front_a, back_a, front_b, back_b = _truncation_counts(
        len(tokens_a), len(tokens_b), max_num_tokens, rng
    )
    return _cut(list(tokens_a), front_a, back_a), _cut(list(tokens_b), front_b, back_b)


def _gather(sentences: Sequence[Sequence], spans: Sequence[tuple[int, int, int]]) -> list:
    gathered: list = []
    for sentence_index, start, end in spans:
        gathered.extend(as_list(sentences[sentence_index][start:end]))
    return gathered


def _whole(document: Sequence[Sequence], indices: Iterable[int]) -> list[tuple[int, int, int]]:
    return [(index, 0, len(document[index])) for index in indices]


def _check_sentence(document: Sequence[Sequence], doc_index: int, index: int) -> int:
    length = len(document[index])
    if length == 0:
        raise ValueError(f"document {doc_index} has an empty sentence at index {index}")
    return length


def _random_other_document(num_documents: int, doc_index: int, rng: random.Random) -> int:
    # Google retries 10 times and may still return the same document; drawing from the others
    # directly guarantees NotNext B comes from a different document.
    other = rng.randrange(num_documents - 1)
    return other + 1 if other >= doc_index else other


def _random_b(
    documents: Sequence[Sequence[Sequence[int]]],
    doc_index: int,
    target_b_length: int,
    rng: random.Random,
) -> tuple[int, list[tuple[int, int, int]]]:
    """Google: sentences of another document from a random one on, until the length is reached."""
    other_index = _random_other_document(len(documents), doc_index, rng)
    other = documents[other_index]
    if len(other) == 0:
        raise ValueError(f"document {other_index} is empty")
    indices, length = [], 0
    for index in range(rng.randint(0, len(other) - 1), len(other)):
        indices.append(index)
        length += _check_sentence(other, other_index, index)
        if length >= target_b_length:
            break
    return other_index, _whole(other, indices)


def _split_chunk(
    document: Sequence[Sequence], chunk: list[int], is_random_next: bool, rng: random.Random
) -> tuple[list[tuple[int, int, int]], list[tuple[int, int, int]], int]:
    """A = the first `a_end` sentences of the chunk (a random boundary), B = the rest."""
    if len(chunk) >= 2:
        a_end = rng.randint(1, len(chunk) - 1)
        return _whole(document, chunk[:a_end]), _whole(document, chunk[a_end:]), a_end
    length = len(document[chunk[0]])
    if is_random_next or length < 2:
        return _whole(document, chunk), [], 1
    # Deviation from Google (see `create_instances_from_document`): the document's lone last
    # sentence is split at a random token when B is to be its continuation.
    cut = rng.randint(1, length - 1)
    return [(chunk[0], 0, cut)], [(chunk[0], cut, length)], 1


def _nsp_instances(
    documents: Sequence[Sequence[Sequence[int]]],
    document: Sequence[Sequence[int]],
    doc_index: int,
    target_seq_length: int,
    max_num_tokens: int,
    random_next_prob: float,
    rng: random.Random,
) -> list[tuple[list, tuple[int, list], bool, tuple[int, int, int, int]]]:
    """Google's loop over `document` (`documents[doc_index]`); returns (A spans, (doc, B spans),
    is_random_next, truncation counts)."""
    plans = []
    chunk: list[int] = []  # sentence indices
    current_length = 0
    i = 0
    while i < len(document):
        chunk.append(i)
        current_length += _check_sentence(document, doc_index, i)
        if i == len(document) - 1 or current_length >= target_seq_length:
            is_random_next = rng.random() < random_next_prob
            if len(chunk) == 1 and not is_random_next and i + 1 < len(document):
                i += 1  # Deviation from Google: the next sentence becomes B
                chunk.append(i)
                _check_sentence(document, doc_index, i)
            spans_a, spans_b, a_end = _split_chunk(document, chunk, is_random_next, rng)
            length_a = sum(end - start for _, start, end in spans_a)
            if is_random_next or not spans_b:
                is_random_next = True
                source_b = _random_b(documents, doc_index, target_seq_length - length_a, rng)
                i -= len(chunk) - a_end  # put the unused sentences back for the next chunk
            else:
                source_b = (doc_index, spans_b)
            length_b = sum(end - start for _, start, end in source_b[1])
            counts = _truncation_counts(length_a, length_b, max_num_tokens, rng)
            plans.append((spans_a, source_b, is_random_next, counts))
            chunk, current_length = [], 0
        i += 1
    return plans


def _segment_spans(
    document: Sequence[Sequence], doc_index: int, target_seq_length: int
) -> list[list[tuple[int, int, int]]]:
    """Contiguous segments of whole sentences up to the target; longer sentences are cut."""
    segments, current, current_length = [], [], 0
    for index in range(len(document)):
        length = _check_sentence(document, doc_index, index)
        for start in range(0, length, target_seq_length):
            piece = (index, start, min(start + target_seq_length, length))
            piece_length = piece[2] - piece[1]
            if current and current_length + piece_length > target_seq_length:
                segments.append(current)
                current, current_length = [], 0
            current.append(piece)
            current_length += piece_length
    if current:
        segments.append(current)
    return segments


def create_instances_from_document(
    documents: Sequence[Sequence[Sequence[int]]],
    doc_index: int,
    max_seq_length: int,
    short_seq_prob: float,
    rng: random.Random,
    objective: str = "mlm+nsp",
    random_next_prob: float = RANDOM_NEXT_PROB,
    word_starts: Sequence[Sequence[Sequence[bool]]] | None = None,
) -> list[Instance]:
    """Build the pre-training instances of one document (Google's function of the same name).

    The target length is `max_seq_length - 3` (room for [CLS] A [SEP] B [SEP]); with probability
    `short_seq_prob` it is drawn from [2, target] instead, once per document, to lessen the
    mismatch with short fine-tuning inputs.

    - `mlm+nsp`: sentences are gathered until the target is reached (or the document ends) and
      split at a random sentence boundary into A and B. With probability `random_next_prob`, B is
      instead a span of a *different* random document starting at a random sentence, and the
      sentences of the chunk not used for A are put back for the next instance. The longer of A
      and B is then truncated from the front or back at random.

      One deviation from Google: Google makes every one-sentence chunk NotNext, which leaves only
      about 45% IsNext on typical documents (one-sentence chunks pile up at document ends, where
      NotNext puts sentences back). Here the label is drawn first and honored: an IsNext
      one-sentence chunk takes the following sentence as B, or, for the document's last sentence,
      is split at a random token. Only a one-token last sentence is forced to NotNext.
    - `mlm` and `clm`: contiguous segments of whole sentences of at most `max_seq_length - 2`
      tokens (or the short target); a sentence longer than that is cut into pieces. Every token of
      the document appears exactly once; no B, no NSP label. For `clm` the collator derives the
      next-token labels from the segment. (`pack_documents` fills every sequence instead.)

    Example (target length 7 - 3 = 4; with seed 7 every B is random: [3, 4] is put back after
    the first instance and starts the second, and B = [6, 7, 8] loses its front token to fit 4):
        >>> docs = [[[1, 2], [3, 4], [5]], [[6, 7, 8]], [[9, 10]]]
        >>> def show(instances):
        ...     return [(i.tokens_a, i.tokens_b, i.is_random_next) for i in instances]
        >>> show(create_instances_from_document(docs, 0, 7, 0.0, random.Random(5)))
        [([1, 2], [3, 4], False), ([5], [6, 7, 8], True)]
        >>> show(create_instances_from_document(docs, 0, 7, 0.0, random.Random(7)))
        [([1, 2], [7, 8], True), ([3, 4], [7, 8], True), ([5], [6, 7, 8], True)]
        >>> show(create_instances_from_document(docs, 0, 7, 0.0, random.Random(0), "mlm"))
        [([1, 2, 3, 4, 5], [], None)]

    Args:
        documents: all documents; `documents[d][s]` is sentence s of document d, token ids.
        doc_index: the document to build instances from.
        max_seq_length: L, including the special tokens.
        short_seq_prob: probability of a shorter target length (Google: 0.1).
        rng: the only source of randomness.
        objective: one of `OBJECTIVES`.
        random_next_prob: probability that B is a random span (NotNext).
        word_starts: optional, parallel to `documents`: whether each token starts a word; carried
            into the instances for whole-word masking.

    Returns:
        The instances, in document order.

    Raises:
        ValueError: for an unknown objective, a too short `max_seq_length`, fewer than two
            documents with NSP, or an empty sentence.
    """
    use_nsp = objective_data(objective).is_pair  # raises ValueError for an unknown objective
    num_special = NUM_SPECIAL_TOKENS_PAIR if use_nsp else NUM_SPECIAL_TOKENS_SINGLE
    max_num_tokens = max_seq_length - num_special
    if max_num_tokens < MIN_SHORT_TARGET_LENGTH:
        raise ValueError(f"max_seq_length {max_seq_length} leaves fewer than 2 tokens of text")
    if use_nsp and len(documents) < 2:
        raise ValueError(
            f"next-sentence prediction needs at least 2 documents, got {len(documents)}"
        )
    target_seq_length = max_num_tokens
    if rng.random() < short_seq_prob:
        target_seq_length = rng.randint(MIN_SHORT_TARGET_LENGTH, max_num_tokens)

    # The document is fetched once: a corpus view builds a document's list of sentences on each
    # access, so fetching it per instance would cost the square of a long document's length.
    own = (documents[doc_index], None if word_starts is None else word_starts[doc_index])

    def materialize(source_index: int, spans: list, front: int, back: int) -> tuple[list, list]:
        sentences, starts = own
        if source_index != doc_index:  # a random B: another document, fetched once per B
            sentences = documents[source_index]
            starts = None if word_starts is None else word_starts[source_index]
        tokens = _cut(_gather(sentences, spans), front, back)
        if starts is None:
            return tokens, None
        return tokens, _cut(_gather(starts, spans), front, back)

    instances = []
    if use_nsp:
        plans = _nsp_instances(
            documents, own[0], doc_index, target_seq_length, max_num_tokens, random_next_prob, rng
        )
        for spans_a, (source_b, spans_b), is_random_next, counts in plans:
            tokens_a, starts_a = materialize(doc_index, spans_a, counts[0], counts[1])
            tokens_b, starts_b = materialize(source_b, spans_b, counts[2], counts[3])
            instances.append(Instance(tokens_a, tokens_b, is_random_next, starts_a, starts_b))
    else:
        for spans in _segment_spans(own[0], doc_index, target_seq_length):
            tokens, starts = materialize(doc_index, spans, 0, 0)
            instances.append(Instance(tokens, [], None, starts, [] if starts is not None else None))
    return instances


def pack_documents(
    documents: Sequence[Sequence[Sequence[int]]],
    doc_indices: Sequence[int],
    max_seq_length: int,
    separator: int,
    word_starts: Sequence[Sequence[Sequence[bool]]] | None = None,
) -> list[Instance]:
    """Full sequences for `mlm`/`clm` (RoBERTa's FULL-SENTENCES): the documents' tokens one after
    another, `separator` between two documents, cut every `max_seq_length - 2` tokens. Only the
    last sequence is short, so almost no compute goes to padding; every token appears once.

    Example:
        >>> docs = [[[5, 6], [7]], [[8, 9, 10]]]
        >>> [i.tokens_a for i in pack_documents(docs, [0, 1], 6, separator=3)]
        [[5, 6, 7, 3], [8, 9, 10]]
    """
    length = max_seq_length - NUM_SPECIAL_TOKENS_SINGLE
    if length < MIN_SHORT_TARGET_LENGTH:
        raise ValueError(f"max_seq_length {max_seq_length} leaves fewer than 2 tokens of text")
    tokens: list[int] = []
    starts: list[bool] = []
    for position, doc_index in enumerate(doc_indices):
        if position:
            tokens.append(separator)
            starts.append(True)
        document = documents[doc_index]  # once: see create_instances_from_document
        document_starts = None if word_starts is None else word_starts[doc_index]
        for index, sentence in enumerate(document):
            _check_sentence(document, doc_index, index)
            tokens += as_list(sentence)
            if document_starts is not None:
                starts += as_list(document_starts[index])
    return [
        Instance(
            tokens[start : start + length],
            [],
            None,
            starts[start : start + length] if word_starts is not None else None,
            [] if word_starts is not None else None,
        )
        for start in range(0, len(tokens), length)
    ]
