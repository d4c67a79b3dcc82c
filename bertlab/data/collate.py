"""Examples -> padded tensors whose keys are the keyword arguments of the model's `forward`."""

# Shapes: B batch, L sequence length, P masked positions per sequence.

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from bertlab.data.pretraining import PretrainingExample

IGNORE_INDEX = -100  # label value that the losses skip (PyTorch's and HF's convention)
PADDED_POSITION = 0  # a padded prediction slot gathers [CLS]; its label is IGNORE_INDEX


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
