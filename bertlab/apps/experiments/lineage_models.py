"""The lineage experiment's models as the probes, the linear probe and the tagger read them: each
arm's frozen representations per layer, lowest first (`LayerReader`, built by `READERS` from a
model folder), and what its pre-training cost (`training_flops`).

Every arm is read the same way: a batch of WordPiece ids in, one (B, L, H_l) tensor per layer
out, the network in eval mode and never trained:

- a BERT (the budget recipe, the left-to-right one, the random twin): the embeddings and every
  layer's output (`hidden_states`);
- an LSTM-era language model: `LanguageModelOutput.layers` (NNLM: its vectors C and its tanh
  layer; ELMo: [x; x] and each biLSTM layer's [forward; backward]; AWD-LSTM: the embedding and
  each LSTM layer);
- word2vec: the piece's vector, one layer; a piece without a vector reads zeros.

Training FLOPs follow Kaplan et al. 2020 (Sec. 2.1): 6 per parameter a token passes through (2
forward, 4 backward), counting the matrices each token is multiplied by (not the lookups of an
input embedding), plus, for a Transformer, 6 n_layer n_ctx d for attention's scores and sums.
`FLOP_FORMULAS` states each network's count in words; the report prints them.
"""

# Shapes: B batch, L sequence length, H_l the width of layer l, V vocab.

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from bertlab.apps.experiments.lineage_options import (
    BERT_LAYERS,
    LM_LAYERS,
    RANDOM_BERT_LAYERS,
    VECTOR_LAYERS,
)
from bertlab.core.config import BertConfig, read_json_object
from bertlab.core.lstm_config import lstm_config_from_dict
from bertlab.network.bert import BertModel
from bertlab.network.lm_architectures import lm_architecture
from bertlab.tokenizer.wordpiece import Tokenizer
from bertlab.training.word2vec.vectors import VECTORS_FILE, load_vectors

BERT = "bert"  # the architecture of a folder whose config.json names none
WORD2VEC_FILE = "word2vec.json"  # beside the vectors: how they were trained


class LayerReader(nn.Module):
    """A frozen model's representations per layer, lowest first.

    Attributes:
        widths: H_l of each layer.
        pad_token_id: the [PAD] id its inputs are padded with.
    """

    widths: tuple[int, ...]
    pad_token_id: int

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor
    ) -> tuple[torch.Tensor, ...]:
        """(B, L) int64 ids and mask -> one (B, L, H_l) float tensor per layer."""
        raise NotImplementedError


class BertLayers(LayerReader):
    """A BERT's embeddings and every layer's output."""

    def __init__(self, model: BertModel) -> None:
        super().__init__()
        self.bert = model.eval().requires_grad_(False)
        self.widths = (model.config.hidden_size,) * (model.config.num_hidden_layers + 1)
        self.pad_token_id = model.config.pad_token_id

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor
    ) -> tuple[torch.Tensor, ...]:
        output = self.bert(input_ids, attention_mask, output_hidden_states=True)
        return tuple(output.hidden_states)


class LanguageModelLayers(LayerReader):
    """An LSTM-era language model's `layers`, without its softmax."""

    def __init__(self, model: nn.Module, widths: tuple[int, ...]) -> None:
        super().__init__()
        self.model = model.eval().requires_grad_(False)
        self.widths = widths
        self.pad_token_id = model.config.pad_token_id

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor
    ) -> tuple[torch.Tensor, ...]:
        return tuple(self.model(input_ids, attention_mask, output_logits=False).layers)


class VectorLayers(LayerReader):
    """Static vectors: each piece's row of a frozen table, one layer."""

    def __init__(self, table: torch.Tensor, pad_token_id: int) -> None:
        super().__init__()
        self.table = nn.Embedding.from_pretrained(table, freeze=True)  # (V, H)
        self.widths = (table.shape[1],)
        self.pad_token_id = pad_token_id

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor
    ) -> tuple[torch.Tensor, ...]:
        return (self.table(input_ids),)  # (B, L, H)


def architecture_of(model_dir: Path) -> str:
    """config.json's `architecture` (an LSTM-era network), or BERT for a folder without one."""
    return read_json_object(model_dir / "config.json").get("architecture") or BERT


def _bert_layers(model_dir: Path) -> LayerReader:
    return BertLayers(BertModel.from_pretrained(model_dir))


def _language_model_layers(model_dir: Path) -> LayerReader:
    _, model_class = lm_architecture(architecture_of(model_dir))
    model = model_class.from_pretrained(model_dir)
    with torch.inference_mode():  # the widths, from one forward pass of two pieces
        ids = torch.full((1, 2), model.config.pad_token_id, dtype=torch.int64)
        layers = model.eval()(ids, torch.ones_like(ids), output_logits=False).layers
    return LanguageModelLayers(model, tuple(layer.shape[-1] for layer in layers))


def _vector_layers(model_dir: Path) -> LayerReader:
    tokenizer = Tokenizer.from_pretrained(model_dir)
    return VectorLayers(vector_table(model_dir, tokenizer.vocab_size), tokenizer.pad_token_id)


def vector_table(model_dir: Path, vocab_size: int) -> torch.Tensor:
    """The word2vec vectors of a folder as a (V, H) float32 table by piece id; pieces without a
    vector (never seen in the corpus, or the special ones) are rows of zeros."""
    vectors = load_vectors(model_dir / VECTORS_FILE)
    table = np.zeros((vocab_size, vectors.vector_size), dtype=np.float32)
    for key in vectors.index_to_key:
        table[int(key)] = vectors[key]
    return torch.from_numpy(table)


# `Arm.reading` -> model folder -> its layers. A random twin is a BERT folder.
READERS: dict[str, Callable[[Path], LayerReader]] = {
    BERT_LAYERS: _bert_layers,
    RANDOM_BERT_LAYERS: _bert_layers,
    LM_LAYERS: _language_model_layers,
    VECTOR_LAYERS: _vector_layers,
}


def load_layers(reading: str, model_dir: Path) -> LayerReader:
    """The frozen layers of the model in `model_dir`, read as `reading` says.

    Raises:
        ValueError: an unknown reading.
    """
    if reading not in READERS:
        raise ValueError(f"unknown reading {reading!r}; choose one of {', '.join(READERS)}")
    return READERS[reading](model_dir)


# --- training FLOPs -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Cost:
    """What a network's pre-training computed: `per_token` multiply-adds of weights, counted as
    parameters (Kaplan's N, without the input lookups), and `attention` FLOPs per token."""

    per_token: float
    attention: float = 0.0

    def flops(self, tokens: float) -> float:
        """6 N per token (forward and backward) plus attention's, over `tokens`."""
        return (6 * self.per_token + self.attention) * tokens


def _bert_cost(values: dict[str, Any], predicted_share: float, seq_len: int) -> Cost:
    config = BertConfig.from_dict(values)
    hidden, layers = config.hidden_size, config.num_hidden_layers
    encoder = layers * (4 * hidden * hidden + 2 * hidden * config.intermediate_size)
    head = hidden * hidden + hidden * config.vocab_size  # the MLM transform and the decoder
    return Cost(encoder + predicted_share * head, 6 * layers * seq_len * hidden)


def _nnlm_cost(values: dict[str, Any], predicted_share: float, seq_len: int) -> Cost:
    config = lstm_config_from_dict(values)
    window = config.context_size * config.embedding_size
    direct = window * config.vocab_size if config.use_direct_connections else 0
    return Cost(window * config.hidden_size + config.hidden_size * config.vocab_size + direct)


def _lstm(inputs: int, cells: int, recurrent: int) -> int:
    """The weights one LSTM step multiplies: 4 gates over the input and the recurrent state."""
    return 4 * cells * (inputs + recurrent)


def _elmo_cost(values: dict[str, Any], predicted_share: float, seq_len: int) -> Cost:
    config = lstm_config_from_dict(values)
    cells, projection = config.lstm_hidden_size, config.projection_size
    layer = _lstm(projection, cells, projection) + cells * projection  # LSTMP: and projection
    directions = 2 * config.num_hidden_layers * layer
    return Cost(directions + 2 * projection * config.vocab_size)  # both LMs' softmax


def _awd_lstm_cost(values: dict[str, Any], predicted_share: float, seq_len: int) -> Cost:
    config = lstm_config_from_dict(values)
    layers = sum(_lstm(size_in, size_out, size_out) for size_in, size_out in config.layer_sizes())
    return Cost(layers + config.embedding_size * config.vocab_size)


# config.json's architecture -> (values, share of positions predicted, sequence length) -> Cost.
COSTS: dict[str, Callable[[dict[str, Any], float, int], Cost]] = {
    BERT: _bert_cost,
    "nnlm": _nnlm_cost,
    "elmo": _elmo_cost,
    "awd-lstm": _awd_lstm_cost,
}
WORD2VEC = "word2vec"
FLOP_FORMULAS = {
    BERT: "6 x (L (4 H^2 + 2 H I) + s (H^2 + H V)) + 6 L T H per token: L layers of width H "
    "and feed-forward I, the MLM head's transform and decoder at the share s of positions it "
    "predicts (the masking rate; 1 for the left-to-right model), attention over T = the "
    "sequence length",
    "nnlm": "6 x ((n-1) m h + h V [+ (n-1) m V with direct connections]) per token",
    "elmo": "6 x (2 x layers x (4 c (P + P) + c P) + 2 P V) per token: both directions' LSTMs "
    "with projection (c cells, P projection) and both language models' softmax",
    "awd-lstm": "6 x (sum over layers of 4 h_out (h_in + h_out) + E V) per token: the LSTMs and "
    "the tied decoder",
    WORD2VEC: "6 d (1 + k) (w + 1) per word trained: skip-gram with k negative samples, vectors "
    "of d, a window of w reduced at random (on average (w + 1) / 2 words on each side)",
}


def training_flops(model_dir: Path, tokens: float, predicted_share: float, seq_len: int) -> float:
    """The FLOPs of pre-training the network in `model_dir` on `tokens` tokens (`Cost`)."""
    values = read_json_object(model_dir / "config.json")
    architecture = values.get("architecture") or BERT
    if architecture not in COSTS:
        raise ValueError(f"no FLOP count for architecture {architecture!r}")
    values = {key: value for key, value in values.items() if key != "architectures"}
    return COSTS[architecture](values, predicted_share, seq_len).flops(tokens)


def word2vec_flops(words: float, vector_size: int, negative: int, window: int) -> float:
    """Skip-gram's FLOPs over `words` trained words (FLOP_FORMULAS[WORD2VEC])."""
    return 6 * vector_size * (1 + negative) * (window + 1) * words
