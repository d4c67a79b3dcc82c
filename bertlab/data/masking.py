"""Pre-training examples: an instance -> [CLS] A [SEP] (B [SEP]), masked afresh each epoch.

Google's `create_masked_lm_predictions` (cited as "Google"), with masks drawn every time an
example is made (dynamic masking, RoBERTa Sec. 4.1) instead of once per `dupe_factor` copy. The
instances come from `bertlab.data.pretraining`. Pure functions over lists and numpy arrays; all
randomness comes in as an explicit `rng: random.Random`. Nothing imports torch.
"""

# Shapes: L sequence length, P masked positions per sequence.

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from bertlab.core.config import PretrainDataConfig, objective_data
from bertlab.data.pretraining import Instance, SpecialIds, as_list
from bertlab.tokenizer.wordpiece import PAIR_SEGMENT_ID

MASK_TOKEN_PROB = 0.8  # BERT paper Sec. 3.1: of the chosen tokens 80% [MASK], 10% random, 10% kept
RANDOM_TOKEN_PROB = 0.1  # BERT paper Sec. 3.1
KEEP_TOKEN_PROB = 1.0 - MASK_TOKEN_PROB - RANDOM_TOKEN_PROB  # BERT paper Sec. 3.1: the last 10%
IS_NEXT_LABEL = 0  # HF `next_sentence_label`: 0 = B continues A (IsNext)
NOT_NEXT_LABEL = 1  # 1 = B is a random span (NotNext)
FIRST_SEGMENT_ID = 0  # token_type_ids of [CLS], A and its [SEP]


@dataclass(frozen=True)
class MaskedTokens:
    """The result of `mask_tokens`.

    input_ids: (L,) int64, with the chosen positions replaced.
    masked_positions: (P,) int64, ascending.
    masked_labels: (P,) int64, the original ids there.
    """

    input_ids: np.ndarray
    masked_positions: np.ndarray
    masked_labels: np.ndarray


def _candidate_words(
    input_ids: Sequence[int], special_ids: frozenset[int], is_word_start: Sequence[bool] | None
) -> list[list[int]]:
    # A word is a start piece plus the continuations after it; it never spans a special token,
    # so a continuation right after [CLS] or [SEP] begins a word of its own.
    words: list[list[int]] = []
    previous_special = True
    for index, token in enumerate(input_ids):
        if token in special_ids:
            previous_special = True
            continue
        if is_word_start is None or is_word_start[index] or previous_special:
            words.append([index])
        else:
            words[-1].append(index)
        previous_special = False
    return words


def _random_token(vocab_size: int, special_ids: frozenset[int], rng: random.Random) -> int:
    while True:  # rejection sampling: uniform over the non-special ids
        token = rng.randrange(vocab_size)
        if token not in special_ids:
            return token


def mask_tokens(
    input_ids: Sequence[int] | np.ndarray,
    special: SpecialIds,
    vocab_size: int,
    mlm_probability: float,
    max_predictions_per_seq: int,
    rng: random.Random,
    is_word_start: Sequence[bool] | np.ndarray | None = None,
) -> MaskedTokens:
    """Choose masked-LM positions and replace them 80% [MASK] / 10% random / 10% unchanged.

    Google's `create_masked_lm_predictions`: `min(max_predictions_per_seq, max(1,
    round(L * mlm_probability)))` predictions, L counting the special tokens; candidate words are
    shuffled and taken in turn while they fit the budget (a word that would exceed it is skipped,
    never taken in part). Special tokens are never chosen, and random replacements are drawn
    uniformly from the non-special ids. With `is_word_start` a word is a start piece and the
    continuation pieces after it: all its pieces are chosen together and share ONE 80/10/10
    decision, as the issue specifies (Google's code draws that decision per piece).

    Example (ids 0-4 special, [MASK] = 4; 3 predictions: round(12 * 0.25)):
        >>> special = SpecialIds(pad=0, unk=1, cls=2, sep=3, mask=4)
        >>> out = mask_tokens([2, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 3], special, 100, 0.25,
        ...                   20, random.Random(1))
        >>> out.input_ids.tolist(), out.masked_positions.tolist(), out.masked_labels.tolist()
        ([2, 10, 11, 12, 13, 14, 15, 4, 17, 4, 4, 3], [7, 9, 10], [16, 18, 19])

    Args:
        input_ids: (L,) int token ids, with their special tokens.
        special: the special ids; `special.mask` replaces 80% of the chosen tokens.
        vocab_size: V; random replacements are drawn from [0, V) minus the special ids.
        mlm_probability: fraction of tokens to predict (BERT: 0.15).
        max_predictions_per_seq: cap on P.
        rng: the only source of randomness; a fresh one per epoch gives dynamic masking.
        is_word_start: optional (L,) bool for whole-word masking.

    Returns:
        MaskedTokens with P <= max_predictions_per_seq.

    Raises:
        ValueError: if `is_word_start` does not match `input_ids` in length.
    """
    ids = as_list(input_ids)
    if is_word_start is not None:
        is_word_start = as_list(is_word_start)
        if len(is_word_start) != len(ids):
            raise ValueError(f"is_word_start has length {len(is_word_start)}, input_ids {len(ids)}")
    special_ids = special.all
    words = _candidate_words(ids, special_ids, is_word_start)
    rng.shuffle(words)
    num_to_predict = min(max_predictions_per_seq, max(1, round(len(ids) * mlm_probability)))
    output = list(ids)
    positions: list[int] = []
    for word in words:
        if len(positions) >= num_to_predict:
            break
        if len(positions) + len(word) > num_to_predict:
            continue
        # Google's two draws: [MASK] with 80%, else keep or random with equal chance.
        if rng.random() < MASK_TOKEN_PROB:
            replacements = [special.mask] * len(word)
        elif rng.random() < KEEP_TOKEN_PROB / (1.0 - MASK_TOKEN_PROB):
            replacements = [ids[index] for index in word]
        else:
            replacements = [_random_token(vocab_size, special_ids, rng) for _ in word]
        for index, replacement in zip(word, replacements, strict=True):
            output[index] = replacement
        positions.extend(word)
    positions.sort()
    return MaskedTokens(
        input_ids=np.asarray(output, dtype=np.int64),
        masked_positions=np.asarray(positions, dtype=np.int64),
        masked_labels=np.asarray([ids[index] for index in positions], dtype=np.int64),
    )


# --- examples --------------------------------------------------------------------------------


@dataclass(frozen=True)
class PretrainingExample:
    """One model input, ready for `collate_pretraining`.

    input_ids, token_type_ids: (L,) int64.
    masked_positions, masked_labels: (P,) int64; None for `clm`.
    next_sentence_label: `IS_NEXT_LABEL` or `NOT_NEXT_LABEL`; None without NSP.
    """

    input_ids: np.ndarray
    token_type_ids: np.ndarray
    masked_positions: np.ndarray | None
    masked_labels: np.ndarray | None
    next_sentence_label: int | None


def pack_instance(instance: Instance, special: SpecialIds) -> tuple[np.ndarray, np.ndarray]:
    """[CLS] A [SEP] (B [SEP]) and its segment ids (BERT paper Sec. 3, Figure 2).

    Example:
        >>> ids, types = pack_instance(Instance([7, 8], [9], False), SpecialIds(0, 1, 2, 3, 4))
        >>> ids.tolist(), types.tolist()
        ([2, 7, 8, 3, 9, 3], [0, 0, 0, 0, 1, 1])

    Returns:
        input_ids (L,) int64 and token_type_ids (L,) int64.
    """
    ids = [special.cls, *instance.tokens_a, special.sep]
    types = [FIRST_SEGMENT_ID] * len(ids)
    if instance.tokens_b:
        ids += [*instance.tokens_b, special.sep]
        types += [PAIR_SEGMENT_ID] * (len(instance.tokens_b) + 1)
    return np.asarray(ids, dtype=np.int64), np.asarray(types, dtype=np.int64)


def _packed_word_starts(instance: Instance) -> list[bool]:
    if instance.is_word_start_a is None:
        raise ValueError("whole-word masking needs instances built with word_starts")
    starts = [True, *instance.is_word_start_a, True]
    if instance.tokens_b:
        starts += [*instance.is_word_start_b, True]
    return starts


def make_example(
    instance: Instance,
    config: PretrainDataConfig,
    special: SpecialIds,
    vocab_size: int,
    rng: random.Random,
) -> PretrainingExample:
    """Pack an instance and, unless its objective is causal (`clm`), mask it afresh.

    Calling this every epoch with a new rng (see `example_rng`) gives dynamic masking.

    Example:
        >>> config = PretrainDataConfig(objective="mlm", mlm_probability=0.2)
        >>> example = make_example(
        ...     Instance([7, 8, 9], [], None), config, SpecialIds(0, 1, 2, 3, 4), 50,
        ...     example_rng(0, 0, 0),
        ... )
        >>> example.input_ids.shape, example.masked_positions.shape, example.next_sentence_label
        ((5,), (1,), None)
    """
    input_ids, token_type_ids = pack_instance(instance, special)
    next_sentence_label = None
    if instance.is_random_next is not None:
        next_sentence_label = NOT_NEXT_LABEL if instance.is_random_next else IS_NEXT_LABEL
    if objective_data(config.objective).is_causal:  # the collator derives the targets
        return PretrainingExample(input_ids, token_type_ids, None, None, next_sentence_label)
    is_word_start = _packed_word_starts(instance) if config.do_whole_word_mask else None
    masked = mask_tokens(
        input_ids,
        special,
        vocab_size,
        config.mlm_probability,
        config.max_predictions_per_seq,
        rng,
        is_word_start,
    )
    return PretrainingExample(
        masked.input_ids,
        token_type_ids,
        masked.masked_positions,
        masked.masked_labels,
        next_sentence_label,
    )


def example_rng(seed: int, epoch: int, index: int) -> random.Random:
    """A generator for one example in one epoch: the same triple, the same masks.

    Independent of the order examples are visited in, so a resumed run masks as the uninterrupted
    one did; a new epoch gives new masks. Seeding with a string hashes it with SHA-512
    (`random.seed` version 2), which does not depend on `PYTHONHASHSEED`.

    Example:
        >>> example_rng(0, 1, 2).random() == example_rng(0, 1, 2).random()
        True
    """
    return random.Random(f"bertlab-pretraining:{seed}:{epoch}:{index}")
