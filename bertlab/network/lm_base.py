"""What bertlab's LSTM-era language models share (`nnlm`, `elmo`, `awd_lstm`, `ulmfit`): their
output, the next- and previous-piece targets, the per-piece loss, the input checks, the reversal
of each sequence within its own length, and `config.json` + `model.safetensors` checkpoints.

One convention for targets, the one bertlab's causal-LM batches already follow
(`data.collate.collate_pretraining`): `labels` (B, L) holds at position t the piece that
position t predicts, -100 where it predicts none. A left-to-right model's position t has read
pieces 0..t and predicts piece t + 1 (`next_piece_labels`); ELMo's backward LM's position t has
read pieces t..n-1 and predicts piece t - 1 (`previous_piece_labels`). Padding is on the right
and never a target.
"""

# Shapes: B batch, L sequence length, V vocab, H_l the size of representation l.

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import nn

from bertlab.core.lstm_config import lstm_config_from_dict
from bertlab.core.runtime import host_reads_are_free
from bertlab.network import checkpoint

logger = logging.getLogger(__name__)

IGNORE_INDEX = -100  # label value that the losses skip (PyTorch's and HF's convention)


@dataclass
class LanguageModelOutput:
    """What an LSTM-era language model returns.

    loss: the mean cross-entropy per target piece (float32 scalar), with `labels`.
    logits: (B, L, V), position t's scores for the piece it predicts, when asked for.
    layers: the representations per layer, (B, L, H_l) each, lowest first: what `embed` and
        ELMo's scalar mix read.
    """

    loss: torch.Tensor | None = None
    logits: torch.Tensor | None = None
    layers: tuple[torch.Tensor, ...] = ()


def next_piece_labels(input_ids: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
    """Left-to-right targets: position t is labelled with piece t + 1; the last real position
    and the padding with -100. (B, L) int64, (B, L) or None -> (B, L) int64.

    Example: ids [[5, 6, 7, 0]], mask [[1, 1, 1, 0]] -> [[6, 7, -100, -100]].
    """
    ids = input_ids if attention_mask is None else input_ids.masked_fill(attention_mask == 0, -1)
    labels = torch.full_like(input_ids, IGNORE_INDEX)
    labels[:, :-1] = ids[:, 1:]
    return labels.masked_fill(labels < 0, IGNORE_INDEX)


def previous_piece_labels(
    input_ids: torch.Tensor, attention_mask: torch.Tensor | None
) -> torch.Tensor:
    """Right-to-left targets (ELMo's backward LM): position t is labelled with piece t - 1;
    the first position and the padding with -100. (B, L) int64 -> (B, L) int64.

    Example: ids [[5, 6, 7, 0]], mask [[1, 1, 1, 0]] -> [[-100, 5, 6, -100]].
    """
    labels = torch.full_like(input_ids, IGNORE_INDEX)
    labels[:, 1:] = input_ids[:, :-1]
    if attention_mask is not None:
        labels = labels.masked_fill(attention_mask == 0, IGNORE_INDEX)
    return labels


def language_model_loss(
    logits: torch.Tensor, labels: torch.Tensor, attention_mask: torch.Tensor | None
) -> torch.Tensor:
    """Mean cross-entropy per target piece: (B, L, V), (B, L) -> float32 scalar. Positions
    labelled -100 and padding positions (mask 0) are skipped."""
    if attention_mask is not None:
        labels = labels.masked_fill(attention_mask == 0, IGNORE_INDEX)
    return F.cross_entropy(
        logits.flatten(0, 1).float(), labels.flatten(), ignore_index=IGNORE_INDEX
    )


def sequence_lengths(attention_mask: torch.Tensor | None, input_ids: torch.Tensor) -> torch.Tensor:
    """The number of real pieces per sequence: (B, L) mask or None -> (B,) int64."""
    if attention_mask is None:
        return torch.full(
            (input_ids.shape[0],), input_ids.shape[1], dtype=torch.int64, device=input_ids.device
        )
    return attention_mask.long().sum(dim=1)


def reversal_index(lengths: torch.Tensor, seq_len: int) -> torch.Tensor:
    """The positions that reverse each sequence within its own length, padding left in place:
    (B,) lengths -> (B, L) int64. Gathering with it twice gives the input back.

    Example: lengths [3], L = 5 -> [[2, 1, 0, 3, 4]].
    """
    positions = torch.arange(seq_len, device=lengths.device)  # (L,)
    real = positions[None, :] < lengths[:, None]  # (B, L)
    return torch.where(real, lengths[:, None] - 1 - positions[None, :], positions[None, :])


def gather_time(hidden: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """hidden[b, index[b, t]] for every b, t: (B, L, H), (B, L) -> (B, L, H)."""
    return hidden.gather(1, index[:, :, None].expand(-1, -1, hidden.shape[-1]))


def validate_ids(
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor | None,
    labels: torch.Tensor | None,
    vocab_size: int,
) -> None:
    """Raise `ValueError` naming the problem when the inputs cannot be right.

    Shapes and dtypes everywhere; the ids' values only where reading them is free (not on a
    GPU, as `bert.validate_inputs`). Padding must be on the right: every model reads a
    sequence's real pieces as its first `attention_mask.sum()` positions.
    """
    if not isinstance(input_ids, torch.Tensor) or input_ids.dim() != 2:
        shape = tuple(input_ids.shape) if isinstance(input_ids, torch.Tensor) else type(input_ids)
        raise ValueError(f"input_ids must be a (B, L) tensor, got {shape}")
    if input_ids.dtype not in (torch.int64, torch.int32):
        raise ValueError(f"input_ids must be int64 or int32, got {input_ids.dtype}")
    if input_ids.numel() == 0:
        raise ValueError(f"input_ids is empty: shape {tuple(input_ids.shape)}")
    for name, tensor in (("attention_mask", attention_mask), ("labels", labels)):
        if tensor is not None and tensor.shape != input_ids.shape:
            raise ValueError(
                f"{name} shape {tuple(tensor.shape)} differs from input_ids "
                f"{tuple(input_ids.shape)}"
            )
    if not host_reads_are_free(input_ids.device):
        return
    low, high = int(input_ids.min()), int(input_ids.max())
    if low < 0 or high >= vocab_size:
        raise ValueError(f"input_ids must lie in [0, {vocab_size}), got values in [{low}, {high}]")
    if attention_mask is not None:
        mask = attention_mask.long()
        if int(mask.min()) < 0 or int(mask.max()) > 1:
            raise ValueError("attention_mask values must be 0 or 1")
        if bool((mask[:, 1:] > mask[:, :-1]).any()):
            raise ValueError("attention_mask must put the padding on the right (1s, then 0s)")
        if bool((mask.sum(dim=1) == 0).any()):
            raise ValueError("every sequence needs at least one real piece")


class LanguageModel(nn.Module):
    """Shared by the LSTM-era models: `config.json` (with its `architecture`) plus
    `model.safetensors`, tied weights stored once (as Hugging Face stores them)."""

    # The config class (`core.lstm_config`) this model is built from.
    config_class: ClassVar[type]
    # Keys of weights tied to another one: left out of the file, tied again on loading.
    tied_keys: ClassVar[tuple[str, ...]] = ()
    # Keys `extra_config` adds to config.json beside the architecture's (a head's labels).
    extra_config_keys: ClassVar[tuple[str, ...]] = ()

    def __init__(self, config: Any) -> None:
        super().__init__()
        self.config = config

    def tie_weights(self) -> None:
        """Classes with tied weights tie them here; others have nothing to tie."""

    def extra_config(self) -> dict[str, Any]:
        """Keys a subclass adds to config.json (e.g. the number of labels)."""
        return {}

    @classmethod
    def init_kwargs_from_config(cls, values: dict[str, Any]) -> dict[str, Any]:
        """Constructor arguments a subclass reads back from config.json."""
        return {}

    def save_pretrained(self, directory: str | Path) -> None:
        """Write `config.json` (the config, with `architecture`, and this class's name under
        `architectures`) and `model.safetensors`, each file atomically."""
        state = {k: v for k, v in self.state_dict().items() if k not in self.tied_keys}
        values = (
            self.config.to_dict() | self.extra_config() | {"architectures": [type(self).__name__]}
        )
        checkpoint.save_model(directory, values, state)

    @classmethod
    def from_pretrained(
        cls, directory: str | Path, *, revision: str | None = None, **kwargs: Any
    ) -> LanguageModel:
        """Load a folder `save_pretrained` wrote (or a Hub id), strictly: every weight must be
        there with its shape, and no other.

        Raises:
            FileNotFoundError: no such folder, config.json or weights.
            ValueError: the folder holds another architecture, or weights that do not fit.
        """
        values, state_dict = checkpoint.read_model(directory, revision)
        init_kwargs = cls.init_kwargs_from_config(values)
        own = {"architectures", *init_kwargs, *cls.extra_config_keys}
        values = {k: v for k, v in values.items() if k not in own}
        config = lstm_config_from_dict(values)
        if not isinstance(config, cls.config_class):
            raise ValueError(
                f"{directory} holds a {config.architecture} model, not "
                f"{cls.config_class.architecture}"
            )
        model = cls.build_for_checkpoint(config, state_dict, init_kwargs | kwargs)
        load_weights(model, state_dict, source=str(directory))
        return model

    @classmethod
    def build_for_checkpoint(
        cls, config: Any, state_dict: dict[str, torch.Tensor], kwargs: dict[str, Any]
    ) -> LanguageModel:
        """The model a checkpoint's weights are loaded into; a class whose constructor needs
        more than the config (ELMo's pieces) reads it from `state_dict` here."""
        return cls(config, **kwargs)


def load_weights(
    model: LanguageModel,
    state_dict: dict[str, torch.Tensor],
    source: str,
    allowed_missing: tuple[str, ...] = (),
    allowed_unexpected: tuple[str, ...] = (),
) -> None:
    """Copy a checkpoint's weights into `model`, then tie its tied weights.

    Args:
        allowed_missing, allowed_unexpected: key prefixes that may be absent from the
            checkpoint (left as initialized: a new task head) or present but unused (the
            language model's output layer under a classifier).

    Raises:
        ValueError: a weight has the wrong shape, or keys are missing or left over beyond the
            allowed prefixes (each named).
    """
    expected = {k: v for k, v in model.state_dict().items() if k not in model.tied_keys}
    incoming = {k: v for k, v in state_dict.items() if k not in model.tied_keys}
    for key, value in incoming.items():
        if key in expected and tuple(value.shape) != tuple(expected[key].shape):
            raise ValueError(
                f"shape mismatch in {source} for {key}: checkpoint {tuple(value.shape)}, "
                f"model {tuple(expected[key].shape)}"
            )
    missing = sorted(k for k in set(expected) - set(incoming) if not k.startswith(allowed_missing))
    unexpected = sorted(
        k for k in set(incoming) - set(expected) if not k.startswith(allowed_unexpected)
    )
    if missing or unexpected:
        raise ValueError(
            f"{source} does not fit {type(model).__name__}: missing {missing or 'none'}, "
            f"unexpected {unexpected or 'none'}"
        )
    model.load_state_dict({k: v for k, v in incoming.items() if k in expected}, strict=False)
    model.tie_weights()
