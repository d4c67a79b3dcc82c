"""The layer groups a model fine-tunes by: what discriminative rates, gradual unfreezing, Keras'
staged recipe and freezing act on, declared by each model (`layer_groups()`), never found by
the fine-tuning code from its class.

A group is a set of modules at a depth: the input layer (the embeddings) at 0, layer k at k, and
the rest where the model puts them. BERT (`bert.BertPreTrainedModel.layer_groups`): the
embeddings, layers 1..L, the pooler at L and the task layer ("head") at L, so that the top
layer, the pooler and the task layer train at the full rate. ULMFiT's classifier
(`ulmfit.UlmfitForSequenceClassification.layer_groups`, fastai's `awd_lstm_clas_split`): the
embedding, LSTMs 1..n, and the classifier one depth above the last LSTM, so that each group
below the classifier trains 2.6 times slower than the one above it (Howard & Ruder 2018,
Sec. 3.2, fastai's `slice(lr / 2.6**4, lr)`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from torch import nn

# What a group is to the strategies: the input layer (frozen by `freeze_layers` and named "the
# embeddings"), a numbered layer (frozen by `freeze_layers` K up to layer K), another part of
# the encoder (the pooler: trained with the layer of its depth), the task layer.
INPUT, LAYER, OTHER, HEAD = "input", "layer", "other", "head"
ROLES = (INPUT, LAYER, OTHER, HEAD)


@dataclass(frozen=True)
class LayerGroup:
    """Modules that train together at one rate.

    Attributes:
        name: in words, for the run's records ("embeddings", "layer 2", "head").
        modules: the group's modules; a parameter in two groups (a tied weight) is counted in
            the lowest.
        depth: 0 the input layer, k layer k; a group at depth d trains at the top rate times
            D^(top depth - d) under layer-wise decay D.
        role: one of ROLES.
    """

    name: str
    modules: tuple[nn.Module, ...]
    depth: int
    role: str = LAYER

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"unknown layer group role {self.role!r}; choose one of {ROLES}")
        if self.depth < 0:
            raise ValueError(f"a layer group's depth must be >= 0, got {self.depth}")

    @property
    def is_head(self) -> bool:
        return self.role == HEAD

    def parameters(self) -> list[nn.Parameter]:
        return [param for module in self.modules for param in module.parameters()]


def head_modules(model: nn.Module, body: Sequence[nn.Module]) -> tuple[nn.Module, ...]:
    """The model's children that are not in `body` (every module of a task layer, whatever its
    names: classifier, dropout, a feature-based head's mix and BiLSTM)."""
    kept = {id(module) for module in body}
    return tuple(module for _, module in model.named_children() if id(module) not in kept)
