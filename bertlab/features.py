"""Feature extraction: run a frozen encoder over many sequences, fast.

The fast inference path groups sequences of similar length into a batch (so a batch is padded
only to its own longest sequence, and little compute goes to padding), runs under
`torch.inference_mode`, optionally in bf16 autocast, and returns results in the input order.
"""

# Shapes: B batch, L sequence length, H hidden_size, N attention heads, D = H // N head size,
#         I intermediate_size, V vocab, C labels, K choices, P masked positions per sequence.

from __future__ import annotations

from collections.abc import Iterator, Sequence

import torch

from bertlab.data.collate import pad_rows, sorted_length_batches
from bertlab.modeling import BertModel


def pad_sequences(
    sequences: Sequence[Sequence[int]], pad_value: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Pad to the longest sequence: -> values (B, L) int64 and attention_mask (B, L) int64."""
    longest = max(len(sequence) for sequence in sequences)
    values = pad_rows(sequences, longest, pad_value)  # (B, L)
    attention_mask = pad_rows([[1] * len(sequence) for sequence in sequences], longest, 0)
    return values, attention_mask


def iterate_encoded(
    model: BertModel,
    input_ids: Sequence[Sequence[int]],
    token_type_ids: Sequence[Sequence[int]] | None = None,
    batch_size: int = 32,
    use_bf16: bool = False,
) -> Iterator[tuple[list[int], torch.Tensor, torch.Tensor, torch.Tensor]]:
    """Encode sequences in length-grouped batches.

    Args:
        model: a `BertModel` (put it in eval mode first).
        input_ids: token ids per sequence, of different lengths.
        token_type_ids: segment ids per sequence, or None for all 0.
        batch_size: sequences per batch.
        use_bf16: run under bf16 autocast (faster on CPUs and GPUs with bf16 units).

    Yields:
        (indices into `input_ids`, last_hidden_state (B, L, H) float32,
        pooler_output (B, H) float32 or empty, attention_mask (B, L)).
    """
    if not input_ids:
        return
    if any(len(sequence) == 0 for sequence in input_ids):
        raise ValueError("every sequence needs at least one token")
    device = model.embeddings.word_embeddings.weight.device
    pad_id = model.config.pad_token_id
    lengths = [len(sequence) for sequence in input_ids]
    for indices in sorted_length_batches(lengths, batch_size):
        ids, mask = pad_sequences([input_ids[i] for i in indices], pad_id)
        types = None
        if token_type_ids is not None:
            types, _ = pad_sequences([token_type_ids[i] for i in indices], 0)
            types = types.to(device)
        with (
            torch.inference_mode(),
            torch.autocast(device.type, dtype=torch.bfloat16, enabled=use_bf16),
        ):
            output = model(ids.to(device), mask.to(device), types)
        pooled = output.pooler_output
        pooled = pooled.float() if pooled is not None else torch.empty(0)
        yield indices, output.last_hidden_state.float(), pooled, mask


def pooled_features(
    model: BertModel,
    input_ids: Sequence[Sequence[int]],
    token_type_ids: Sequence[Sequence[int]] | None = None,
    batch_size: int = 32,
    use_bf16: bool = False,
) -> torch.Tensor:
    """The pooled `[CLS]` vector of each sequence, in input order: (number of sequences, H)."""
    if model.pooler is None:
        raise ValueError("this model has no pooler; use iterate_encoded for token features")
    features = torch.empty(len(input_ids), model.config.hidden_size)
    for indices, _, pooled, _ in iterate_encoded(
        model, input_ids, token_type_ids, batch_size, use_bf16
    ):
        features[indices] = pooled.cpu()
    return features
