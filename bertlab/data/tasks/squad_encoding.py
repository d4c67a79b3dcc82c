"""Extractive QA (BERT Sec. 4.2): SQuAD examples -> windowed model inputs, logits -> answers.

Encoding follows Google's `run_squad.py` (`convert_examples_to_features`):

- the question is cut to `max_query_length` pieces;
- the context is cut into windows of at most `max_seq_length - len(question) - 3` pieces, each
  laid out as `[CLS] question [SEP] context window [SEP]`, segment 0 then 1;
- `doc_stride` is, as in Google's code, the step between the starts of two windows (so two
  windows share `window length - doc_stride` pieces). HF's `run_qa.py` passes its `doc_stride` to
  the tokenizer's `stride`, which is the overlap instead; set `doc_stride` to
  `window length - HF stride` to reproduce HF's windows;
- a window's answer positions are the first and last piece of the gold answer when the whole
  answer lies inside the window, else 0 ([CLS]) for both, as Google (v1.1) and HF do;
- a context piece appears in several windows; `token_is_max_context` marks, for each piece, the
  one window where it has the most context on both sides (Google's `_check_is_max_context`), and
  only there may an answer start.

Every context piece keeps its character span in the ORIGINAL context (the `tokenizers` offsets
map through lowercasing, accent stripping and removed control characters), so the decoded answer
is `context[start of its first piece : end of its last piece]`, never detokenized text.

An answer boundary inside a piece cannot be reproduced: "gold" in "golden" (one piece) decodes
as "golden". The training target is therefore a gold answer occurrence that falls on piece
boundaries when there is one (`answer_tokens`). With it, decoding the labelled spans of the shared
SQuAD file gives exact match 100 (`tests/unit/test_squad_oracle.py`).
"""

# Shapes: B batch, L sequence length; F features (windows), Q questions (examples).

from __future__ import annotations

import bisect
import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from bertlab.data.tasks.squad import SquadExample
from bertlab.tokenizer.wordpiece import PAIR_SEGMENT_ID, Tokenizer

logger = logging.getLogger(__name__)

# google-research/bert run_squad.py flags: max_seq_length 384, doc_stride 128,
# max_query_length 64, n_best_size 20, max_answer_length 30.
MAX_SEQ_LENGTH = 384
DOC_STRIDE = 128
MAX_QUERY_LENGTH = 64
N_BEST_SIZE = 20
MAX_ANSWER_LENGTH = 30
NUM_SPECIAL_TOKENS_QA = 3  # [CLS] question [SEP] context [SEP]
NO_ANSWER_POSITION = 0  # the [CLS] position: "the answer is not (fully) in this window"
# run_squad.py `_check_is_max_context`: ties between windows go to the longer one.
WINDOW_LENGTH_WEIGHT = 0.01

Span = tuple[int, int]  # (start, end) characters, end exclusive


@dataclass(frozen=True)
class QAFeature:
    """One window of one question: the model inputs, the answer labels and the decoding map.

    Attributes:
        example_index: position of the question in the `examples` given to `encode_squad`.
        input_ids: (L,) `[CLS] question [SEP] context window [SEP]`.
        token_type_ids: (L,) 0 up to the first [SEP], 1 after it.
        start_positions, end_positions: token positions of the gold answer's first and last
            piece when the whole answer is in this window, else 0 ([CLS]). Named like
            `BertForQuestionAnswering.forward`'s arguments, of which they are one row.
        offsets: (L,) per token, its (start, end) characters in the example's context; None for
            special and question tokens, which can never be part of an answer.
        token_is_max_context: (L,) True for a context token whose best window is this one.
    """

    example_index: int
    input_ids: tuple[int, ...]
    token_type_ids: tuple[int, ...]
    start_positions: int
    end_positions: int
    offsets: tuple[Span | None, ...]
    token_is_max_context: tuple[bool, ...]


def encode_squad(
    examples: Sequence[SquadExample],
    tokenizer: Tokenizer,
    max_seq_length: int = MAX_SEQ_LENGTH,
    doc_stride: int = DOC_STRIDE,
    max_query_length: int = MAX_QUERY_LENGTH,
) -> list[QAFeature]:
    """Cut each question's context into windows and label the answer in each.

    Example (max_seq_length 12, doc_stride 3): the question "Who?" (pieces "who", "?") leaves
    12 - 2 - 3 = 7 context pieces per window, so a context of 10 pieces gives two windows, over
    pieces 0-6 and 3-9. An answer on context pieces 8-9 is not inside the first window, which
    gets positions (0, 0); the second window starts with `[CLS] who ? [SEP]` and then piece 3,
    so it gets (8 - 3 + 4, 9 - 3 + 4) = (9, 10).

    Args:
        examples: questions with their contexts; the first answer is the training target.
        tokenizer: the model's WordPiece tokenizer.
        max_seq_length: length of a window including the question and special tokens.
        doc_stride: pieces between the starts of consecutive windows (Google's meaning).
        max_query_length: question pieces kept; longer questions are cut (counted in a warning).

    Returns:
        The features of every example in order, at least one per example.

    Raises:
        ValueError: a (cut) question leaves no room for the context, or `doc_stride` < 1.
    """
    if doc_stride < 1:
        raise ValueError(f"doc_stride must be at least 1, got {doc_stride}")
    backend = tokenizer.backend
    questions = backend.encode_batch_fast(
        [example.question for example in examples], add_special_tokens=False
    )
    contexts = sorted({example.context for example in examples})
    context_encodings = dict(
        zip(contexts, backend.encode_batch(contexts, add_special_tokens=False), strict=True)
    )
    features: list[QAFeature] = []
    num_cut_questions = num_unplaced_answers = 0
    for example_index, (example, question) in enumerate(zip(examples, questions, strict=True)):
        num_cut_questions += len(question.ids) > max_query_length
        question_ids = question.ids[:max_query_length]
        context = context_encodings[example.context]
        target = answer_tokens(example, context.offsets)
        num_unplaced_answers += bool(example.answers) and target is None
        window_size = max_seq_length - len(question_ids) - NUM_SPECIAL_TOKENS_QA
        if window_size < 1:
            raise ValueError(
                f"question {example.id!r}: max_seq_length {max_seq_length} leaves no context "
                f"pieces after its {len(question_ids)} question pieces and "
                f"{NUM_SPECIAL_TOKENS_QA} special tokens; lower max_query_length"
            )
        windows = context_windows(len(context.ids), window_size, doc_stride)
        for window_index in range(len(windows)):
            features.append(
                _window_feature(
                    tokenizer,
                    example_index,
                    question_ids,
                    context.ids,
                    context.offsets,
                    windows,
                    window_index,
                    target,
                )
            )
    if num_cut_questions:
        logger.warning(
            "%d of %d questions were longer than max_query_length %d pieces and were cut",
            num_cut_questions,
            len(examples),
            max_query_length,
        )
    if num_unplaced_answers:
        logger.warning(
            "%d answers cover no context piece (whitespace or removed characters only); "
            "their windows are labelled [CLS]",
            num_unplaced_answers,
        )
    return features


def context_windows(num_pieces: int, window_size: int, doc_stride: int) -> list[tuple[int, int]]:
    """(start, length) of each window over `num_pieces` context pieces (Google's `doc_spans`).

    The last window ends at the last piece. An empty context still gets one (empty) window, so
    every question gets a feature and a prediction.
    Example: `context_windows(10, 7, 3) -> [(0, 7), (3, 7)]`.
    """
    windows = []
    start = 0
    while True:
        length = min(num_pieces - start, window_size)
        windows.append((start, length))
        if start + length >= num_pieces:
            return windows
        start += min(length, doc_stride)


def is_max_context(windows: Sequence[tuple[int, int]], window_index: int, position: int) -> bool:
    """Whether context piece `position` has its most context in window `window_index`.

    Google's score is `min(pieces left, pieces right) + 0.01 * window length`; the first best
    window wins. Example: pieces 0-9 in windows (0, 7) and (3, 7): piece 4 has score
    min(4, 2) = 2 in the first and min(1, 5) = 1 in the second, so the first window is its best.
    """
    best_score, best_index = None, None
    for index, (start, length) in enumerate(windows):
        if not start <= position < start + length:
            continue
        left, right = position - start, start + length - 1 - position
        score = min(left, right) + WINDOW_LENGTH_WEIGHT * length
        if best_score is None or score > best_score:
            best_score, best_index = score, index
    return best_index == window_index


def answer_tokens(example: SquadExample, offsets: Sequence[Span]) -> tuple[int, int] | None:
    """Context pieces (first, last) of the answer to train on, or None when there is none.

    The target is the first answer, at its given position, when its characters fall on piece
    boundaries (the pieces decode to exactly the answer text). Otherwise the first occurrence of
    any gold answer text that does, trying each answer in order and, for each, its given position
    and then its other occurrences by distance from it. This repairs positions that point inside
    another word: the shared SQuAD file places every answer at the first occurrence of its text,
    so "gold" is placed in "golden" and "2" in "12". When no occurrence is aligned, the first
    answer's pieces are used as they are (a boundary inside a piece cannot be reproduced).

    A piece belongs to the span `[start, end)` when it ends after `start` and starts before
    `end`, so whitespace around an answer text is not pulled in.

    Example: context "The golden gold." with answer ("gold", start 4) -> the pieces of the
    second "gold", (2, 2), since the pieces at 4 are "golden".
    """
    if not example.answers:
        return None
    piece_ends = [end for _, end in offsets]
    piece_starts = [start for start, _ in offsets]

    def pieces(start_char: int, text: str) -> tuple[int, int] | None:
        first = bisect.bisect_right(piece_ends, start_char)
        last = bisect.bisect_left(piece_starts, start_char + len(text)) - 1
        return (first, last) if first <= last else None

    for answer in example.answers:
        for start_char in _occurrences(example.context, answer.text, answer.start):
            found = pieces(start_char, answer.text)
            if found is not None:
                decoded = example.context[offsets[found[0]][0] : offsets[found[1]][1]]
                if decoded == answer.text.strip():
                    return found
    first_answer = example.answers[0]
    return pieces(first_answer.start, first_answer.text)


def _occurrences(context: str, text: str, given_start: int) -> list[int]:
    """Start characters of `text` in `context`: `given_start` first, then by distance from it."""
    found = []
    position = context.find(text)
    while position != -1 and text:
        found.append(position)
        position = context.find(text, position + 1)
    others = sorted((p for p in found if p != given_start), key=lambda p: abs(p - given_start))
    return [given_start, *others]


def _window_feature(
    tokenizer: Tokenizer,
    example_index: int,
    question_ids: Sequence[int],
    context_ids: Sequence[int],
    context_offsets: Sequence[Span],
    windows: Sequence[tuple[int, int]],
    window_index: int,
    target: tuple[int, int] | None,
) -> QAFeature:
    window_start, window_length = windows[window_index]
    pieces = range(window_start, window_start + window_length)
    cls_id, sep_id = tokenizer.cls_token_id, tokenizer.sep_token_id
    num_leading = len(question_ids) + 2  # [CLS] question [SEP]
    input_ids = (cls_id, *question_ids, sep_id, *(context_ids[p] for p in pieces), sep_id)
    token_type_ids = (0,) * num_leading + (PAIR_SEGMENT_ID,) * (window_length + 1)
    offsets = (None,) * num_leading + tuple(context_offsets[p] for p in pieces) + (None,)
    max_context = (
        (False,) * num_leading
        + tuple(is_max_context(windows, window_index, p) for p in pieces)
        + (False,)
    )
    start_position = end_position = NO_ANSWER_POSITION
    if target is not None:
        first, last = target
        if window_start <= first and last < window_start + window_length:
            start_position = first - window_start + num_leading
            end_position = last - window_start + num_leading
    return QAFeature(
        example_index=example_index,
        input_ids=input_ids,
        token_type_ids=token_type_ids,
        start_positions=start_position,
        end_positions=end_position,
        offsets=offsets,
        token_is_max_context=max_context,
    )


def decode_squad(
    features: Sequence[QAFeature],
    start_logits: Sequence[Sequence[float]] | np.ndarray,
    end_logits: Sequence[Sequence[float]] | np.ndarray,
    examples: Sequence[SquadExample],
    n_best_size: int = N_BEST_SIZE,
    max_answer_length: int = MAX_ANSWER_LENGTH,
) -> dict[str, str]:
    """The best answer text of each question from the start and end scores of its windows.

    As Google's `write_predictions`: in each window, the `n_best_size` best starts and ends are
    paired; a span counts when both ends are context tokens, the start is in its best window
    (`token_is_max_context`), end >= start and it has at most `max_answer_length` pieces. The
    best sum of start and end score over all windows wins, and its text is cut from the
    original context by character offsets. A question without a valid span gets "".

    Example: a window `[CLS] who ? [SEP] ada lovelace wrote [SEP]` whose start score peaks on
    "ada" and end score on "lovelace" gives `{id: "Ada Lovelace"}` (the context's own casing).

    Args:
        features: from `encode_squad(examples, ...)`, in any order.
        start_logits, end_logits: (F, L) float, one row per feature; a row may be longer than
            its feature (batch padding), the extra scores are ignored.
        examples: the examples the features were made from.
        n_best_size: starts and ends considered per window.
        max_answer_length: the longest answer, in pieces.

    Returns:
        {question id: answer text} for every example.

    Raises:
        ValueError: the logits do not have one row per feature, or a row is shorter than its
            feature.
    """
    best = best_spans(
        features, start_logits, end_logits, len(examples), n_best_size, max_answer_length
    )
    answers = {}
    for example, found in zip(examples, best, strict=True):
        answers[example.id] = "" if found is None else example.context[found[1][0] : found[1][1]]
    return answers


def best_spans(
    features: Sequence[QAFeature],
    start_logits: Sequence[Sequence[float]] | np.ndarray,
    end_logits: Sequence[Sequence[float]] | np.ndarray,
    num_examples: int,
    n_best_size: int = N_BEST_SIZE,
    max_answer_length: int = MAX_ANSWER_LENGTH,
) -> list[tuple[float, Span] | None]:
    """The best valid span of each question over all its windows, chosen as `decode_squad` does.

    Example: the window of `decode_squad`'s example gives `[(score, (0, 12))]`, where score is the
    start score of "ada" plus the end score of "lovelace" and (0, 12) are the characters of
    "Ada Lovelace" in the context.

    Args:
        features: from `encode_squad`, in any order, each naming its question (`example_index`).
        start_logits, end_logits: (F, L) float, one row per feature, as for `decode_squad`.
        num_examples: Q, the number of questions the features were made from.
        n_best_size: starts and ends considered per window.
        max_answer_length: the longest answer, in pieces.

    Returns:
        Per question, in order, (start score + end score, (start, end) characters in its
        context, end exclusive), or None when no window has a valid span.

    Raises:
        ValueError: the logits do not have one row per feature, or a row is shorter than its
            feature.
    """
    if len(start_logits) != len(features) or len(end_logits) != len(features):
        raise ValueError(
            f"{len(features)} features but {len(start_logits)} start and {len(end_logits)} end "
            "logit rows"
        )
    best: list[tuple[float, Span] | None] = [None] * num_examples
    for feature, starts, ends in zip(features, start_logits, end_logits, strict=True):
        found = _best_span(
            feature, np.asarray(starts), np.asarray(ends), n_best_size, max_answer_length
        )
        current = best[feature.example_index]
        if found is not None and (current is None or found[0] > current[0]):
            best[feature.example_index] = found
    return best


def _best_span(
    feature: QAFeature,
    start_logits: np.ndarray,
    end_logits: np.ndarray,
    n_best_size: int,
    max_answer_length: int,
) -> tuple[float, Span] | None:
    """(score, character span) of the best valid span of one window, or None."""
    length = len(feature.input_ids)
    if start_logits.shape[0] < length or end_logits.shape[0] < length:
        raise ValueError(
            f"logit rows of lengths {start_logits.shape[0]} and {end_logits.shape[0]} are "
            f"shorter than the feature's {length} tokens"
        )
    start_logits, end_logits = start_logits[:length], end_logits[:length]  # (L,) each
    top_starts = np.argsort(-start_logits, kind="stable")[:n_best_size]
    top_ends = np.argsort(-end_logits, kind="stable")[:n_best_size]
    best = None
    for start in top_starts.tolist():
        if feature.offsets[start] is None or not feature.token_is_max_context[start]:
            continue
        for end in top_ends.tolist():
            if feature.offsets[end] is None or not 0 <= end - start < max_answer_length:
                continue
            score = float(start_logits[start] + end_logits[end])
            if best is None or score > best[0]:
                best = (score, (feature.offsets[start][0], feature.offsets[end][1]))
    return best
