"""The BERT model (Devlin et al. 2018), in the order the paper explains it.

Module attribute names are the Hugging Face checkpoint keys, so `state_dict()` loads into and out of
`transformers` without renaming. `LayerNorm` is the one sanctioned break from snake_case, kept for
those key names.
"""

# Shapes: B batch, L sequence length, H hidden_size, N attention heads, D = H // N head size,
#         I intermediate_size, V vocab, C labels, K choices, P masked positions per sequence.

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from bertlab.core.config import BertConfig
from bertlab.core.runtime import host_reads_are_free
from bertlab.network import checkpoint
from bertlab.network.layer_groups import HEAD, INPUT, OTHER, LayerGroup, head_modules

IGNORE_INDEX = -100  # label value that the losses skip (PyTorch's and HF's convention)
NUM_NSP_CLASSES = 2  # BERT paper Sec. 3.1 Task #2: IsNext / NotNext


def _gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    return F.gelu(x, approximate="tanh")


# `hidden_act` names as in HF config.json. "gelu" is the exact erf form BERT used.
ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "gelu": F.gelu,
    "gelu_new": _gelu_tanh,
    "relu": F.relu,
}


@dataclass
class ModelOutput:
    """What `BertModel` returns.

    last_hidden_state: (B, L, H). pooler_output: (B, H), or None without a pooler.
    hidden_states: the embeddings then each layer's output, each (B, L, H), when asked for.
    attentions: each layer's attention probabilities (B, N, L, L), when asked for.
    """

    last_hidden_state: torch.Tensor
    pooler_output: torch.Tensor | None = None
    hidden_states: tuple[torch.Tensor, ...] | None = None
    attentions: tuple[torch.Tensor, ...] | None = None


@dataclass
class PreTrainingOutput:
    """What `BertForPreTraining` returns.

    mlm_logits: (B, P, V) at the masked positions, or (B, L, V) everywhere. nsp_logits: (B, 2).
    loss = mlm_loss + nsp_loss over those whose labels were given; each is a float32 scalar.
    """

    mlm_logits: torch.Tensor
    nsp_logits: torch.Tensor
    loss: torch.Tensor | None = None
    mlm_loss: torch.Tensor | None = None
    nsp_loss: torch.Tensor | None = None
    hidden_states: tuple[torch.Tensor, ...] | None = None
    attentions: tuple[torch.Tensor, ...] | None = None


def attention_bias(
    attention_mask: torch.Tensor | None,
    is_causal: bool,
    seq_len: int,
    dtype: torch.dtype,
    device: torch.device,
) -> torch.Tensor | None:
    """The one place where masks become an additive attention bias.

    Args:
        attention_mask: (B, L) with 1 for real tokens and 0 for padding, or None (all real).
        is_causal: also hide every later position (left-to-right attention).
        seq_len: L. dtype: the dtype attention scores are computed in.

    Returns:
        None when nothing is hidden; else a bias that is 0 where attention is allowed and
        `finfo(dtype).min` where it is not: (B, 1, 1, L), or (B or 1, 1, L, L) when causal.
    """
    if attention_mask is None and not is_causal:
        return None
    minimum = torch.finfo(dtype).min
    allowed = None
    if attention_mask is not None:
        allowed = attention_mask[:, None, None, :].bool()  # (B, 1, 1, L)
    if is_causal:
        causal = torch.ones(seq_len, seq_len, dtype=torch.bool, device=device).tril()
        causal = causal[None, None]  # (1, 1, L, L)
        allowed = causal if allowed is None else allowed & causal  # (B, 1, L, L)
    bias = torch.zeros(allowed.shape, dtype=dtype, device=device)
    return bias.masked_fill(~allowed, minimum)


class BertEmbeddings(nn.Module):
    """BERT Sec. 3.2 (Figure 2): token + segment + position embeddings, LayerNorm and dropout."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.word_embeddings = nn.Embedding(
            config.vocab_size, config.hidden_size, padding_idx=config.pad_token_id
        )
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor) -> torch.Tensor:
        """input_ids, token_type_ids: (B, L) int64 -> (B, L, H) float."""
        seq_len = input_ids.shape[1]
        positions = self.position_embeddings.weight[:seq_len]  # (L, H)
        embeddings = self.word_embeddings(input_ids) + self.token_type_embeddings(token_type_ids)
        embeddings = embeddings + positions  # (B, L, H)
        return self.dropout(self.LayerNorm(embeddings))

    @torch.no_grad()
    def init_sinusoidal_positions(self, std: float) -> None:
        """Start the (still learned) position embeddings from the Transformer's sinusoids
        (Vaswani et al. 2017 Sec. 3.5), scaled to standard deviation `std`.

        Random position vectors carry no notion of order: attention cannot look at a token's
        neighbours until max_position_embeddings independent vectors have organized themselves,
        which keeps a short pre-training run on the unigram plateau (docs/budget.md). With
        sinusoids, the embedding of position p + k is a fixed linear map of that of p, so one
        query/key matrix can attend at an offset from the first step. Only the initial values
        change: the checkpoint layout stays BERT's.
        """
        table = self.position_embeddings.weight  # (max_position_embeddings, H)
        num_positions, hidden = table.shape
        positions = torch.arange(num_positions, dtype=torch.float64)[:, None]  # (P, 1)
        frequencies = 10000.0 ** (-torch.arange(0, hidden, 2, dtype=torch.float64) / hidden)
        angles = positions * frequencies  # (P, ceil(H / 2))
        sinusoids = torch.empty(num_positions, hidden, dtype=torch.float64)
        sinusoids[:, 0::2] = torch.sin(angles)
        sinusoids[:, 1::2] = torch.cos(angles[:, : hidden // 2])
        table.copy_(sinusoids * (std / sinusoids.std()))


class BertSelfAttention(nn.Module):
    """Transformer Sec. 3.2.2: multi-head scaled dot-product attention (BERT Sec. 3: A heads)."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.num_heads = config.num_attention_heads
        self.head_size = config.head_size
        self.query = nn.Linear(config.hidden_size, config.hidden_size)
        self.key = nn.Linear(config.hidden_size, config.hidden_size)
        self.value = nn.Linear(config.hidden_size, config.hidden_size)
        self.dropout_prob = config.attention_probs_dropout_prob

    def forward(
        self, hidden_states: torch.Tensor, bias: torch.Tensor | None, return_probs: bool
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """hidden_states: (B, L, H); bias: from `attention_bias` or None.

        Returns the context (B, L, H) and, when `return_probs`, the probabilities (B, N, L, L).
        The fast path (`F.scaled_dot_product_attention`) never materializes probabilities; the
        reference path computes softmax(Q K^T / sqrt(D) + bias) V explicitly.
        """
        batch, seq_len, hidden = hidden_states.shape
        split = (batch, seq_len, self.num_heads, self.head_size)
        query = self.query(hidden_states).view(split).transpose(1, 2)  # (B, N, L, D)
        key = self.key(hidden_states).view(split).transpose(1, 2)  # (B, N, L, D)
        value = self.value(hidden_states).view(split).transpose(1, 2)  # (B, N, L, D)
        if bias is not None:
            bias = bias.to(query.dtype)
        dropout_prob = self.dropout_prob if self.training else 0.0
        if return_probs:
            scores = query @ key.transpose(-1, -2) / math.sqrt(self.head_size)  # (B, N, L, L)
            if bias is not None:
                scores = scores + bias
            probs = scores.softmax(dim=-1)  # (B, N, L, L)
            context = F.dropout(probs, dropout_prob, self.training) @ value  # (B, N, L, D)
        else:
            probs = None
            context = F.scaled_dot_product_attention(
                query, key, value, attn_mask=bias, dropout_p=dropout_prob
            )  # (B, N, L, D)
        context = context.transpose(1, 2).reshape(batch, seq_len, hidden)  # (B, L, H)
        return context, probs


class BertSelfOutput(nn.Module):
    """Transformer Sec. 5.4 / BERT Sec. 3: projection, dropout, residual, LayerNorm (post-LN)."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, hidden_states: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        """(B, L, H), (B, L, H) -> (B, L, H)."""
        return self.LayerNorm(self.dropout(self.dense(hidden_states)) + residual)


class BertAttention(nn.Module):
    """Transformer Sec. 3.1: the attention sub-layer, LayerNorm(x + Attention(x))."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.self = BertSelfAttention(config)
        self.output = BertSelfOutput(config)

    def forward(
        self, hidden_states: torch.Tensor, bias: torch.Tensor | None, return_probs: bool
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(B, L, H) -> (B, L, H), probabilities (B, N, L, L) or None."""
        context, probs = self.self(hidden_states, bias, return_probs)
        return self.output(context, hidden_states), probs


class BertIntermediate(nn.Module):
    """Transformer Sec. 3.3: the first feed-forward projection, H -> I, with GELU (BERT Sec. 3)."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.intermediate_size)
        self.activation = ACTIVATIONS[config.hidden_act]

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        """(B, L, H) -> (B, L, I)."""
        return self.activation(self.dense(hidden_states))


class BertOutput(nn.Module):
    """Transformer Sec. 3.3: second feed-forward projection I -> H, dropout, residual, LayerNorm."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(config.intermediate_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, hidden_states: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        """(B, L, I), (B, L, H) -> (B, L, H)."""
        return self.LayerNorm(self.dropout(self.dense(hidden_states)) + residual)


class BertLayer(nn.Module):
    """Transformer Sec. 3.1: one encoder layer, attention then feed-forward, each post-LN."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.attention = BertAttention(config)
        self.intermediate = BertIntermediate(config)
        self.output = BertOutput(config)

    def forward(
        self, hidden_states: torch.Tensor, bias: torch.Tensor | None, return_probs: bool
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(B, L, H) -> (B, L, H), probabilities (B, N, L, L) or None."""
        attended, probs = self.attention(hidden_states, bias, return_probs)
        return self.output(self.intermediate(attended), attended), probs


class BertEncoder(nn.Module):
    """BERT Sec. 3: a stack of L identical Transformer encoder layers."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.layer = nn.ModuleList(BertLayer(config) for _ in range(config.num_hidden_layers))

    def forward(
        self,
        hidden_states: torch.Tensor,
        bias: torch.Tensor | None,
        output_hidden_states: bool,
        output_attentions: bool,
    ) -> ModelOutput:
        """(B, L, H) embeddings -> ModelOutput without pooler output."""
        all_hidden = [hidden_states] if output_hidden_states else None
        all_probs = [] if output_attentions else None
        for layer in self.layer:
            hidden_states, probs = layer(hidden_states, bias, output_attentions)
            if all_hidden is not None:
                all_hidden.append(hidden_states)
            if all_probs is not None:
                all_probs.append(probs)
        return ModelOutput(
            last_hidden_state=hidden_states,
            hidden_states=tuple(all_hidden) if all_hidden is not None else None,
            attentions=tuple(all_probs) if all_probs is not None else None,
        )


class BertPooler(nn.Module):
    """BERT Sec. 3, 4.1: tanh(W h_[CLS] + b), the sequence representation for classification."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        """(B, L, H) -> (B, H), from the first ([CLS]) position."""
        return torch.tanh(self.dense(hidden_states[:, 0]))


class BertPreTrainedModel(nn.Module):
    """Shared by every bertlab model: BERT's initialization and Hugging Face-layout checkpoints."""

    # The `architectures` entry written to config.json; subclasses set their HF class name.
    architecture = "BertModel"
    # Prefix of the encoder's keys in this class's state_dict ("" for BertModel itself).
    base_prefix = "bert."

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.config = config

    def _init_weights(self, module: nn.Module) -> None:
        """BERT (Google's code): normal(0, initializer_range), zero biases, LayerNorm 1 and 0."""
        std = self.config.initializer_range
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, mean=0.0, std=std)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=std)
            if module.padding_idx is not None:
                with torch.no_grad():
                    module.weight[module.padding_idx].zero_()
        elif isinstance(module, nn.LayerNorm):
            nn.init.ones_(module.weight)
            nn.init.zeros_(module.bias)
        elif isinstance(module, BertLMPredictionHead):
            nn.init.zeros_(module.bias)

    def init_weights(self) -> None:
        """Initialize this model's own weights as BERT does, then tie shared weights.

        An inner model (e.g. `self.bert`) initialized itself when it was built, so it is skipped
        rather than drawn a second time.
        """
        for child in self.children():
            if not isinstance(child, BertPreTrainedModel):
                child.apply(self._init_weights)
        self.tie_weights()

    def tie_weights(self) -> None:
        """Classes with an MLM decoder tie it to the word embeddings; others have nothing to tie."""

    def layer_groups(self) -> list[LayerGroup]:
        """The groups fine-tuning's strategies act on (`network.layer_groups`), bottom-up: the
        embeddings, layers 1..L, the pooler beside layer L, and everything outside the encoder
        (the task layer, the pre-training heads) as the head, also at depth L: the top layer,
        the pooler and the head train at the full rate."""
        encoder = next(module for module in self.modules() if isinstance(module, BertModel))
        layers = list(encoder.encoder.layer)
        top = len(layers)
        groups = [LayerGroup("embeddings", (encoder.embeddings,), 0, INPUT)]
        groups += [LayerGroup(f"layer {i}", (layer,), i) for i, layer in enumerate(layers, 1)]
        if encoder.pooler is not None:
            groups.append(LayerGroup("pooler", (encoder.pooler,), top, OTHER))
        body = list(encoder.children()) if encoder is self else [encoder]
        groups.append(LayerGroup("head", head_modules(self, body), top, HEAD))
        return groups

    def extra_config(self) -> dict[str, Any]:
        """Keys a subclass adds to config.json (e.g. label names)."""
        return {}

    @classmethod
    def init_kwargs_from_config(cls, values: dict[str, Any]) -> dict[str, Any]:
        """Constructor arguments a subclass reads back from config.json (e.g. num_labels)."""
        return {}

    def save_pretrained(self, directory: str | Path) -> None:
        """Write `config.json` and `model.safetensors` in the Hugging Face layout."""
        checkpoint.save_model(
            directory,
            self.config.to_dict() | self.extra_config() | {"architectures": [self.architecture]},
            self.state_dict(),
        )

    @classmethod
    def from_pretrained(
        cls,
        directory: str | Path,
        config: BertConfig | None = None,
        *,
        revision: str | None = None,
        **kwargs: Any,
    ) -> BertPreTrainedModel:
        """Load a bertlab or Hugging Face folder, or a Hub model by id (`bert-base-uncased`).

        Weights the checkpoint lacks (e.g. heads on a body-only checkpoint) are initialized and
        logged; weights with the wrong shape are refused with a `ValueError`.

        Args:
            directory: a model folder, or a Hugging Face Hub repository id (`bertlab.core.hub`).
            config: the architecture to build instead of the folder's config.json.
            revision: the Hub revision (branch, tag or commit) of an id; None: `main`.
            **kwargs: constructor arguments of the class (e.g. `num_labels`).
        """
        config_values, state_dict = checkpoint.read_model(directory, revision)
        if config is None:
            config = BertConfig.from_dict(config_values)
        model = cls(config, **(cls.init_kwargs_from_config(config_values) | kwargs))
        checkpoint.load_into(model, state_dict, cls.base_prefix, source=str(directory))
        model.tie_weights()
        return model


def validate_inputs(
    config: BertConfig,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor | None,
    token_type_ids: torch.Tensor | None,
) -> None:
    """Raise `ValueError` naming the problem when the inputs cannot be right.

    Shapes and dtypes are checked everywhere; the values (ids within the vocabulary, masks and
    segment ids within range) only on the CPU. Reading them from a GPU would make every
    forward wait for the device, so there an out-of-range id is a device-side error (CUDA's
    index assert) instead, as in compiled runs. The training loops' ids come from a tokenizer
    checked against the model's vocabulary before the first step."""
    if not isinstance(input_ids, torch.Tensor) or input_ids.dim() != 2:
        shape = tuple(input_ids.shape) if isinstance(input_ids, torch.Tensor) else type(input_ids)
        raise ValueError(f"input_ids must be a (B, L) tensor, got {shape}")
    if input_ids.dtype not in (torch.int64, torch.int32):
        raise ValueError(f"input_ids must be int64 or int32, got {input_ids.dtype}")
    batch, seq_len = input_ids.shape
    if seq_len == 0 or batch == 0:
        raise ValueError(f"input_ids is empty: shape {tuple(input_ids.shape)}")
    if seq_len > config.max_position_embeddings:
        raise ValueError(
            f"sequence length {seq_len} exceeds max_position_embeddings "
            f"{config.max_position_embeddings}"
        )
    reads_values = host_reads_are_free(input_ids.device)  # not on a GPU (above)
    if reads_values:
        low, high = int(input_ids.min()), int(input_ids.max())
        if low < 0 or high >= config.vocab_size:
            raise ValueError(
                f"input_ids must lie in [0, {config.vocab_size}), got values in [{low}, {high}]"
            )
    for name, tensor, limit in (
        ("attention_mask", attention_mask, 2),
        ("token_type_ids", token_type_ids, config.type_vocab_size),
    ):
        if tensor is None:
            continue
        if tensor.shape != input_ids.shape:
            raise ValueError(
                f"{name} shape {tuple(tensor.shape)} differs from "
                f"input_ids {tuple(input_ids.shape)}"
            )
        if tensor.dtype.is_floating_point or tensor.dtype.is_complex:
            raise ValueError(f"{name} must be an integer or bool tensor, got {tensor.dtype}")
        if reads_values and (int(tensor.min()) < 0 or int(tensor.max()) >= limit):
            raise ValueError(f"{name} values must lie in [0, {limit})")


class BertModel(BertPreTrainedModel):
    """BERT Sec. 3: embeddings, the Transformer encoder and (optionally) the pooler."""

    architecture = "BertModel"
    base_prefix = ""

    def __init__(self, config: BertConfig, add_pooling_layer: bool = True) -> None:
        super().__init__(config)
        self.embeddings = BertEmbeddings(config)
        self.encoder = BertEncoder(config)
        self.pooler = BertPooler(config) if add_pooling_layer else None
        self.init_weights()

    def input_vectors(self) -> torch.Tensor:
        """The static vector of every piece: the word-embedding matrix (V, H), detached."""
        return self.embeddings.word_embeddings.weight.detach()

    def compute_dtype(self) -> torch.dtype:
        """The dtype attention runs in: autocast's when it is on, else the weights'."""
        weight = self.embeddings.word_embeddings.weight
        if torch.is_autocast_enabled(weight.device.type):
            return torch.get_autocast_dtype(weight.device.type)
        return weight.dtype

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        output_hidden_states: bool = False,
        output_attentions: bool = False,
    ) -> ModelOutput:
        """Encode a batch.

        Args:
            input_ids: (B, L) int64 token ids.
            attention_mask: (B, L), 1 for tokens and 0 for padding; None means no padding.
            token_type_ids: (B, L) int64 segment ids (0 for A, 1 for B); None means all 0.
            output_hidden_states: also return the embeddings and every layer's output.
            output_attentions: also return attention probabilities (uses the reference path).

        Returns:
            ModelOutput with last_hidden_state (B, L, H) and pooler_output (B, H).
        """
        # Data-dependent checks would split a `torch.compile` graph, so compiled runs skip them
        # (bad inputs then fail inside the kernels, with less helpful messages).
        if not torch.compiler.is_compiling():
            validate_inputs(self.config, input_ids, attention_mask, token_type_ids)
            # No padding: let attention skip the mask entirely. Only read on the CPU: on a GPU
            # the read would wait for the device every forward (the pre-training loop decides on
            # the host and passes None).
            if (
                attention_mask is not None
                and host_reads_are_free(attention_mask.device)
                and bool(attention_mask.all())
            ):
                attention_mask = None
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        hidden = self.embeddings(input_ids, token_type_ids)  # (B, L, H)
        bias = attention_bias(
            attention_mask,
            self.config.is_causal,
            input_ids.shape[1],
            self.compute_dtype(),
            input_ids.device,
        )
        output = self.encoder(hidden, bias, output_hidden_states, output_attentions)
        if self.pooler is not None:
            output.pooler_output = self.pooler(output.last_hidden_state)
        return output


class BertPredictionHeadTransform(nn.Module):
    """BERT (Google's code): dense + GELU + LayerNorm before the MLM output projection."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.activation = ACTIVATIONS[config.hidden_act]
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        """(..., H) -> (..., H)."""
        return self.LayerNorm(self.activation(self.dense(hidden_states)))


class BertLMPredictionHead(nn.Module):
    """BERT Sec. 3.1 Task #1: the masked-LM output layer, decoder tied to the word embeddings."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.transform = BertPredictionHeadTransform(config)
        self.decoder = nn.Linear(config.hidden_size, config.vocab_size)
        # The output-only bias per token; the decoder's bias is this same parameter (HF layout).
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))
        self.decoder.bias = self.bias

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        """(..., H) -> (..., V) logits."""
        return self.decoder(self.transform(hidden_states))


class BertPreTrainingHeads(nn.Module):
    """BERT Sec. 3.1: the masked-LM head and the next-sentence head."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.predictions = BertLMPredictionHead(config)
        self.seq_relationship = nn.Linear(config.hidden_size, NUM_NSP_CLASSES)

    def forward(
        self, sequence_output: torch.Tensor, pooled_output: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, L or P, H), (B, H) -> MLM logits (B, L or P, V), NSP logits (B, 2)."""
        return self.predictions(sequence_output), self.seq_relationship(pooled_output)


def gather_positions(hidden_states: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """Pick the hidden states at given positions: (B, L, H), (B, P) int64 -> (B, P, H)."""
    index = positions.long().unsqueeze(-1).expand(-1, -1, hidden_states.shape[-1])  # (B, P, H)
    return hidden_states.gather(1, index)  # (B, P, H)


class BertForPreTraining(BertPreTrainedModel):
    """BERT Sec. 3.1: the encoder with the masked-LM and next-sentence-prediction heads."""

    architecture = "BertForPreTraining"

    def __init__(self, config: BertConfig) -> None:
        super().__init__(config)
        self.bert = BertModel(config)
        self.cls = BertPreTrainingHeads(config)
        self.init_weights()

    def tie_weights(self) -> None:
        """The MLM decoder shares the word-embedding matrix (BERT, as in Press & Wolf 2017)."""
        self.cls.predictions.decoder.weight = self.bert.embeddings.word_embeddings.weight

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        masked_positions: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        next_sentence_label: torch.Tensor | None = None,
        output_hidden_states: bool = False,
        output_attentions: bool = False,
    ) -> PreTrainingOutput:
        """Pre-training forward pass.

        Args:
            input_ids, attention_mask, token_type_ids: (B, L), as for `BertModel`.
            masked_positions: (B, P) int64 positions to predict; MLM logits are then computed
                only there (sparse prediction, as Google's BERT). None: at every position.
            labels: original token ids (B, P) with `masked_positions`, else (B, L); -100 is
                ignored (padded prediction slots, unmasked positions).
            next_sentence_label: (B,) int64, 0 = B follows A (IsNext), 1 = random (NotNext).

        Returns:
            PreTrainingOutput: mlm_logits (B, P or L, V), nsp_logits (B, 2) and, with labels,
            the float32 losses.
        """
        body = self.bert(
            input_ids,
            attention_mask,
            token_type_ids,
            output_hidden_states=output_hidden_states,
            output_attentions=output_attentions,
        )
        sequence_output = body.last_hidden_state  # (B, L, H)
        if masked_positions is not None:
            if not torch.compiler.is_compiling():
                _check_positions(masked_positions, input_ids.shape)
            sequence_output = gather_positions(sequence_output, masked_positions)  # (B, P, H)
        mlm_logits, nsp_logits = self.cls(sequence_output, body.pooler_output)
        mlm_loss = nsp_loss = loss = None
        if labels is not None:
            if labels.shape != mlm_logits.shape[:2]:
                raise ValueError(
                    f"labels shape {tuple(labels.shape)} does not match the predicted "
                    f"positions {tuple(mlm_logits.shape[:2])}"
                )
            mlm_loss = F.cross_entropy(
                mlm_logits.flatten(0, 1).float(), labels.flatten(), ignore_index=IGNORE_INDEX
            )
            loss = mlm_loss
        if next_sentence_label is not None:
            nsp_loss = F.cross_entropy(nsp_logits.float(), next_sentence_label.view(-1))
            loss = nsp_loss if loss is None else loss + nsp_loss
        return PreTrainingOutput(
            mlm_logits=mlm_logits,
            nsp_logits=nsp_logits,
            loss=loss,
            mlm_loss=mlm_loss,
            nsp_loss=nsp_loss,
            hidden_states=body.hidden_states,
            attentions=body.attentions,
        )

    def next_piece_logits(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        positions: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """A left-to-right model's (`config.is_causal`) scores of the piece after each position:
        (B, L) -> (B, L, V), or (B, P, V) at `positions` (B, P) int64 only (the LM head runs
        there alone). What `score-text` and `generate` read, as they read an LSTM-era model's
        (`lm_views.LeftToRightLanguageModel`)."""
        return self(input_ids, attention_mask, masked_positions=positions).mlm_logits


def _check_positions(masked_positions: torch.Tensor, input_shape: torch.Size) -> None:
    batch, seq_len = input_shape
    if masked_positions.dim() != 2 or masked_positions.shape[0] != batch:
        raise ValueError(
            f"masked_positions must be (B, P) with B={batch}, got {tuple(masked_positions.shape)}"
        )
    if masked_positions.dtype not in (torch.int64, torch.int32):
        raise ValueError(f"masked_positions must be int64, got {masked_positions.dtype}")
    if masked_positions.numel() and (
        int(masked_positions.min()) < 0 or int(masked_positions.max()) >= seq_len
    ):
        raise ValueError(f"masked_positions must lie in [0, {seq_len})")
