"""Examples -> padded tensors whose keys are the keyword arguments of the model's `forward`.

Pre-training examples (`collate_pretraining`) and task features (`collate_task_batch`) are padded
here, each batch only to its own longest sequence. Grouping sequences of similar length into the
same batch keeps that padding small: training draws a fresh, shuffled grouping each epoch from an
explicit `random.Random` (`length_grouped_batches`); evaluation uses a fixed longest-first order
(`sorted_length_batches`).
"""

# Shapes: B batch, L sequence length, P masked positions per sequence, K choices.

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from bertlab.data.masking import PretrainingExample

IGNORE_INDEX = -100  # label value that the losses skip (PyTorch's and HF's convention)
PADDED_POSITION = 0  # a padded prediction slot gathers [CLS]; its label is IGNORE_INDEX
# HF `LengthGroupedSampler`: sort by length inside random "megabatches" of 50 batches, so that
# batches are of similar length but still differ from epoch to epoch.
MEGABATCH_BATCHES = 50
SEGMENT_PAD_ID = 0  # padding positions take segment A
POSITION_KEYS = ("start_positions", "end_positions")  # QA labels, one token index per sequence


def pad_rows(rows: Sequence[Sequence[int] | np.ndarray], length: int, value: int) -> torch.Tensor:
    """Rows of ids of different lengths -> one (B, length) int64 tensor, filled with `value`.

    Example: [[4, 5, 6], [7]], length 3, value 0 -> [[4, 5, 6], [7, 0, 0]].
    """
    batch = torch.full((len(rows), length), value, dtype=torch.int64)
    for index, row in enumerate(rows):
        batch[index, : len(row)] = torch.as_tensor(row, dtype=torch.int64)
    return batch  # (B, length)


def _all_or_none(examples: Sequence[PretrainingExample], name: str) -> bool:
    present = [getattr(example, name) is not None for example in examples]
    if any(present) and not all(present):
        raise ValueError(f"{name} is set in {sum(present)} of {len(present)} examples, not all")
    return all(present)


def collate_pretraining(
    examples: Sequence[PretrainingExample],
    pad_token_id: int,
    pad_to_length: int | None = None,
    pad_to_predictions: int | None = None,
) -> dict[str, torch.Tensor]:
    """Pad pre-training examples into a batch for `BertForPreTraining.forward(**batch)`.

    Example (two masked-LM + NSP examples of lengths 5 and 4):
        keys: input_ids, attention_mask, token_type_ids (2, 5); masked_positions, labels (2, P)
        padded with position 0 and label -100; next_sentence_label (2,).

    Masked-LM examples give sparse `masked_positions` and `labels` (B, P). Causal-LM examples
    (`masked_positions` None) give `labels` (B, L) already shifted: position t is labelled with
    token t + 1 (the next token), and the last real position and padding with -100, so the loss
    of `BertForPreTraining` is the left-to-right LM loss as it stands.

    Args:
        examples: from `make_example`, all built for the same objective.
        pad_token_id: id written into padded `input_ids` positions.
        pad_to_length: pad L to this instead of the longest example (fixed shapes).
        pad_to_predictions: pad P to this (e.g. `max_predictions_per_seq`) instead of the most.

    Returns:
        int64 tensors: input_ids, attention_mask (1 real / 0 padding), token_type_ids (B, L);
        masked_positions and labels (B, P), or labels (B, L) for causal LM; next_sentence_label
        (B,) when the examples have one.

    Raises:
        ValueError: for an empty batch, examples of mixed objectives, or a requested padding
            shorter than an example.
    """
    if not examples:
        raise ValueError("cannot collate an empty batch")
    length = max(len(example.input_ids) for example in examples)
    if pad_to_length is not None:
        if pad_to_length < length:
            raise ValueError(f"pad_to_length {pad_to_length} < longest example {length}")
        length = pad_to_length
    input_ids = pad_rows([e.input_ids for e in examples], length, pad_token_id)
    attention_mask = pad_rows([np.ones(len(e.input_ids), np.int64) for e in examples], length, 0)
    batch = {
        "input_ids": input_ids,  # (B, L)
        "attention_mask": attention_mask,  # (B, L)
        "token_type_ids": pad_rows([e.token_type_ids for e in examples], length, 0),  # (B, L)
    }
    if _all_or_none(examples, "masked_positions"):
        num_predictions = max(len(e.masked_positions) for e in examples)
        if pad_to_predictions is not None:
            if pad_to_predictions < num_predictions:
                raise ValueError(
                    f"pad_to_predictions {pad_to_predictions} < most predictions {num_predictions}"
                )
            num_predictions = pad_to_predictions
        positions = [e.masked_positions for e in examples]
        labels = [e.masked_labels for e in examples]
        batch["masked_positions"] = pad_rows(positions, num_predictions, PADDED_POSITION)  # (B, P)
        batch["labels"] = pad_rows(labels, num_predictions, IGNORE_INDEX)  # (B, P)
    else:
        next_tokens = input_ids.masked_fill(attention_mask == 0, IGNORE_INDEX)  # (B, L)
        batch["labels"] = torch.cat(  # (B, L): position t predicts token t + 1
            [next_tokens[:, 1:], torch.full_like(next_tokens[:, :1], IGNORE_INDEX)], dim=1
        )
    if _all_or_none(examples, "next_sentence_label"):
        labels = [e.next_sentence_label for e in examples]
        batch["next_sentence_label"] = torch.tensor(labels, dtype=torch.int64)  # (B,)
    return batch


# --- task features ---------------------------------------------------------------------------


def _get(feature: Mapping[str, Any] | object, key: str) -> Any:
    """A field of a feature dict (`features`) or feature dataclass (`squad_encoding.QAFeature`)."""
    if isinstance(feature, Mapping):
        return feature.get(key)
    return getattr(feature, key, None)


def collate_task_batch(
    features: Sequence[Mapping[str, Any] | object], pad_token_id: int
) -> dict[str, torch.Tensor]:
    """Pad task features into a batch for `model(**batch)`.

    Works for every family: `input_ids` that are lists of ids give (B, L) tensors; multiple-choice
    `input_ids`, K lists per feature, give (B, K, L). `labels` that are lists (one per token) are
    padded with -100; scalar labels give (B,) int64 class ids, or float32 for regression targets.
    Fields the model does not take (`word_ids`, `offsets`, ...) stay in the features.

    Example: input_ids [[2, 7, 3], [2, 3]], pad id 0 -> `input_ids [[2, 7, 3], [2, 3, 0]]`,
    `attention_mask [[1, 1, 1], [1, 1, 0]]`, `token_type_ids` zeros (B, L) when absent.

    Args:
        features: dicts from `tasks.encoding` or `squad_encoding.QAFeature`s.
        pad_token_id: the tokenizer's [PAD] id.

    Returns:
        `input_ids`, `attention_mask`, `token_type_ids`: (B, L) or (B, K, L) int64; and, when
        every feature has them, `labels` ((B,) int64/float32 or (B, L) int64) and
        `start_positions`, `end_positions` ((B,) int64).

    Raises:
        ValueError: no features; a label present in some features only; different numbers of
            choices; a token field whose length differs from `input_ids`.
    """
    if not features:
        raise ValueError("cannot collate an empty batch")
    rows = [_get(feature, "input_ids") for feature in features]
    is_multiple_choice = isinstance(rows[0][0], Sequence)
    if is_multiple_choice:
        num_choices = {len(choices) for choices in rows}
        if len(num_choices) != 1:
            raise ValueError(f"features have different numbers of choices: {sorted(num_choices)}")
        rows = [choice for choices in rows for choice in choices]  # B * K sequences
    longest = max(len(row) for row in rows)
    batch = {
        "input_ids": pad_rows(rows, longest, pad_token_id),
        "attention_mask": pad_rows([[1] * len(row) for row in rows], longest, 0),
    }
    types = _optional(features, "token_type_ids")
    if types is None:
        batch["token_type_ids"] = torch.full_like(batch["input_ids"], SEGMENT_PAD_ID)
    else:
        types = [choice for choices in types for choice in choices] if is_multiple_choice else types
        _check_lengths(types, rows, "token_type_ids")
        batch["token_type_ids"] = pad_rows(types, longest, SEGMENT_PAD_ID)
    if is_multiple_choice:
        shape = (len(features), -1, longest)
        batch = {key: value.view(shape) for key, value in batch.items()}  # (B, K, L)
    labels = _optional(features, "labels")
    if labels is not None:
        batch["labels"] = _labels(labels, rows, longest)
    for key in POSITION_KEYS:
        positions = _optional(features, key)
        if positions is not None:
            batch[key] = torch.tensor(positions, dtype=torch.int64)  # (B,)
    return batch


def _optional(features: Sequence[Mapping[str, Any] | object], key: str) -> list | None:
    values = [_get(feature, key) for feature in features]
    present = [value is not None for value in values]
    if any(present) and not all(present):
        raise ValueError(f"{key} is set in {sum(present)} of {len(present)} features, not all")
    return values if all(present) else None


def _check_lengths(values: Sequence[Sequence], rows: Sequence[Sequence[int]], key: str) -> None:
    for value, row in zip(values, rows, strict=True):
        if len(value) != len(row):
            raise ValueError(f"{key} has {len(value)} entries for {len(row)} input_ids")


def _labels(labels: list, rows: Sequence[Sequence[int]], longest: int) -> torch.Tensor:
    if isinstance(labels[0], Sequence):  # token tagging: one label per token
        _check_lengths(labels, rows, "labels")
        return pad_rows(labels, longest, IGNORE_INDEX)  # (B, L)
    if any(isinstance(label, float) for label in labels):  # regression targets
        return torch.tensor(labels, dtype=torch.float32)  # (B,)
    return torch.tensor(labels, dtype=torch.int64)  # (B,)


def feature_lengths(features: Sequence[Mapping[str, Any] | object]) -> list[int]:
    """Sequence length of each feature; for multiple choice, its longest choice."""
    lengths = []
    for feature in features:
        input_ids = _get(feature, "input_ids")
        if input_ids and isinstance(input_ids[0], Sequence):
            lengths.append(max(len(choice) for choice in input_ids))
        else:
            lengths.append(len(input_ids))
    return lengths


def length_grouped_batches(
    lengths: Sequence[int], batch_size: int, rng: random.Random
) -> list[list[int]]:
    """Training batches of similar length, in a random order drawn from `rng`.

    The indices are shuffled, cut into megabatches of `MEGABATCH_BATCHES * batch_size`, sorted
    by length (longest first) within each, cut into batches, and the batches are shuffled. Every
    index appears exactly once; at most one batch is short.

    Example: lengths [5, 2, 9, 3], batch_size 2 -> [[3, 1], [2, 0]] or [[2, 0], [3, 1]], the
    batch order drawn from `rng` (equally seeded rngs give equal orders).
    """
    if batch_size <= 0:
        raise ValueError(f"batch_size must be positive, got {batch_size}")
    order = list(range(len(lengths)))
    rng.shuffle(order)
    megabatch = MEGABATCH_BATCHES * batch_size
    batches = []
    for start in range(0, len(order), megabatch):
        group = sorted(order[start : start + megabatch], key=lambda i: -lengths[i])
        batches += [group[i : i + batch_size] for i in range(0, len(group), batch_size)]
    rng.shuffle(batches)
    return batches


def sorted_length_batches(lengths: Sequence[int], batch_size: int) -> list[list[int]]:
    """Evaluation batches: indices sorted longest first (ties by index), then cut.

    Example: lengths [5, 2, 9, 3], batch_size 2 -> [[2, 0], [3, 1]].
    """
    if batch_size <= 0:
        raise ValueError(f"batch_size must be positive, got {batch_size}")
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    return [order[start : start + batch_size] for start in range(0, len(order), batch_size)]
