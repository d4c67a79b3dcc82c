"""ELECTRA's replaced-token detection (Clark et al. 2020) as a pre-training objective for a BERT.

A small masked-LM generator fills the masked positions with tokens it samples; the BERT encoder
(the discriminator) then tells, at every position of the input, whether its token is the original
or a replacement. The discriminator learns from every token instead of the 15-40% that masked LM
predicts, which is what makes ELECTRA sample-efficient (ELECTRA Sec. 3 and Table 1).

    masked input  --embeddings--> project H -> Hg --> generator encoder --> MLM head (tied)
                                                                          |  sample (no grad)
    original with the samples at the masked positions --embeddings--> BERT encoder --> RTD head

The generator and the discriminator share the embeddings module (token, position and segment
embeddings and their LayerNorm: ELECTRA Sec. 3.2, "weight sharing"); the generator has the
discriminator's depth and `generator_size` of its width (ELECTRA-Small: 1/4, Table 7). The
generator's output layer is tied to the shared word embeddings. What fine-tuning uses is the
discriminator: `save_discriminator` writes it as a Hugging Face `BertModel`.

Loss = generator MLM loss + `rtd_weight` x replaced-token detection loss (ELECTRA Sec. 3:
lambda = 50); a sampled token that equals the original counts as original. The sampling is not
differentiated through: the generator learns from its MLM loss only.
"""

# Shapes: B batch, L sequence length, H hidden_size, Hg the generator's hidden size, V vocab,
#         P masked positions per sequence.

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from bertlab.core.config import BertConfig, ElectraConfig
from bertlab.core.runtime import host_reads_are_free
from bertlab.network import checkpoint
from bertlab.network.bert import (
    ACTIVATIONS,
    IGNORE_INDEX,
    BertEncoder,
    BertModel,
    BertPreTrainedModel,
    PreTrainingOutput,
    attention_bias,
    gather_positions,
)

FEED_FORWARD_MULTIPLIER = 4  # the generator keeps BERT's intermediate size of 4 x its width
GENERATOR_ARCHITECTURE = "ElectraForMaskedLM"  # OUT/generator, in transformers' layout


def generator_config(config: BertConfig, generator_size: float) -> BertConfig:
    """The generator's architecture: the discriminator's depth at `generator_size` of its width
    (ELECTRA-Small: 256 -> 64 hidden, 4 -> 1 heads), without dropout changes."""
    hidden = max(1, round(config.hidden_size * generator_size))
    heads = max(1, round(config.num_attention_heads * generator_size))
    while hidden % heads:
        heads -= 1
    return config.replace(
        hidden_size=hidden,
        num_attention_heads=heads,
        intermediate_size=FEED_FORWARD_MULTIPLIER * hidden,
    )


@dataclass
class ElectraOutput(PreTrainingOutput):
    """`PreTrainingOutput` with the discriminator's side.

    mlm_logits and mlm_loss are the generator's, at the masked positions. rtd_logits: (B, L),
    > 0 for "replaced"; rtd_labels: (B, L) 1 where the input was replaced, 0 where it is
    original, -100 at padding; rtd_loss: the mean binary cross-entropy over the real positions;
    rtd_weight: lambda, the weight of rtd_loss in `loss`.
    """

    rtd_logits: torch.Tensor | None = None
    rtd_labels: torch.Tensor | None = None
    rtd_loss: torch.Tensor | None = None
    rtd_weight: float = 0.0


class ElectraGeneratorHead(nn.Module):
    """ELECTRA's generator head: dense Hg -> H, activation, LayerNorm, then the tied decoder."""

    def __init__(self, config: BertConfig, embedding_size: int) -> None:
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, embedding_size)
        self.activation = ACTIVATIONS[config.hidden_act]
        # HF layout name, as in bert.py: `LayerNorm` is not snake_case.
        self.LayerNorm = nn.LayerNorm(embedding_size, eps=config.layer_norm_eps)
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))

    def forward(self, hidden_states: torch.Tensor, word_embeddings: torch.Tensor) -> torch.Tensor:
        """(..., Hg), (V, H) -> (..., V) logits."""
        transformed = self.LayerNorm(self.activation(self.dense(hidden_states)))  # (..., H)
        return F.linear(transformed, word_embeddings, self.bias)


class ElectraDiscriminatorHead(nn.Module):
    """ELECTRA's replaced-token detection head: dense, activation, one logit per position."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.activation = ACTIVATIONS[config.hidden_act]
        self.dense_prediction = nn.Linear(config.hidden_size, 1)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        """(B, L, H) -> (B, L) logits, > 0 for "replaced"."""
        return self.dense_prediction(self.activation(self.dense(hidden_states))).squeeze(-1)


class ElectraGenerator(nn.Module):
    """The small masked-LM generator over the shared embeddings (ELECTRA Sec. 3.2)."""

    def __init__(self, config: BertConfig, embedding_size: int) -> None:
        super().__init__()
        self.config = config
        self.embeddings_project = nn.Linear(embedding_size, config.hidden_size)
        self.encoder = BertEncoder(config)
        self.predictions = ElectraGeneratorHead(config, embedding_size)

    def forward(
        self,
        embedded: torch.Tensor,
        bias: torch.Tensor | None,
        masked_positions: torch.Tensor,
        word_embeddings: torch.Tensor,
    ) -> torch.Tensor:
        """(B, L, H) embeddings of the masked input -> (B, P, V) logits at the masked positions."""
        hidden = self.encoder(self.embeddings_project(embedded), bias, False, False)
        at_masks = gather_positions(hidden.last_hidden_state, masked_positions)  # (B, P, Hg)
        return self.predictions(at_masks, word_embeddings)


class ElectraForPreTraining(BertPreTrainedModel):
    """ELECTRA Sec. 3: a generator and a BERT discriminator trained together."""

    architecture = "ElectraForPreTraining"  # bertlab's training checkpoint; see save_discriminator

    def __init__(self, config: BertConfig, electra: ElectraConfig | None = None) -> None:
        super().__init__(config)
        self.electra = electra or ElectraConfig()
        self.bert = BertModel(config)  # the discriminator; its embeddings are shared
        self.discriminator_predictions = ElectraDiscriminatorHead(config)
        self.generator = ElectraGenerator(
            generator_config(config, self.electra.generator_size), config.hidden_size
        )
        self.init_weights()

    def extra_config(self) -> dict[str, Any]:
        return {"electra": self.electra.to_dict()}

    @classmethod
    def init_kwargs_from_config(cls, values: dict[str, Any]) -> dict[str, Any]:
        if "electra" not in values:
            return {}
        return {"electra": ElectraConfig(**values["electra"])}

    def init_weights(self) -> None:
        """BERT's initialization for the heads and the generator (the body did its own)."""
        for child in (self.discriminator_predictions, self.generator):
            child.apply(self._init_weights)
        nn.init.zeros_(self.generator.predictions.bias)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        masked_positions: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        next_sentence_label: torch.Tensor | None = None,
    ) -> ElectraOutput:
        """Generator, sampling, discriminator.

        Args:
            input_ids: (B, L) int64, masked as for masked LM.
            attention_mask, token_type_ids: (B, L), as for `BertModel`.
            masked_positions: (B, P) int64 positions the generator predicts and fills.
            labels: (B, P) int64 original tokens at those positions, -100 at padded slots.
            next_sentence_label: not used (ELECTRA has no NSP); must be None.

        Returns:
            ElectraOutput with the generator's MLM logits and loss, the discriminator's logits
            and labels, rtd_loss, and loss = mlm_loss + rtd_weight * rtd_loss.
        """
        if masked_positions is None or labels is None:
            raise ValueError("ELECTRA needs masked_positions and labels (the original tokens)")
        if next_sentence_label is not None:
            raise ValueError("ELECTRA has no next-sentence prediction; use objective electra")
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        embeddings = self.bert.embeddings
        bias = attention_bias(
            attention_mask, False, input_ids.shape[1], self.bert.compute_dtype(), input_ids.device
        )
        embedded = embeddings(input_ids, token_type_ids)  # (B, L, H)
        word_embeddings = embeddings.word_embeddings.weight  # (V, H)
        mlm_logits = self.generator(embedded, bias, masked_positions, word_embeddings)  # (B, P, V)
        mlm_loss = F.cross_entropy(
            mlm_logits.flatten(0, 1).float(), labels.flatten(), ignore_index=IGNORE_INDEX
        )
        with torch.no_grad():
            sampled = sample_tokens(mlm_logits)  # (B, P)
            replaced_input, rtd_labels = replace_tokens(
                input_ids, masked_positions, labels, sampled, attention_mask
            )
        body = self.bert(replaced_input, attention_mask, token_type_ids)
        rtd_logits = self.discriminator_predictions(body.last_hidden_state)  # (B, L)
        real = rtd_labels != IGNORE_INDEX  # (B, L)
        if host_reads_are_free(rtd_logits.device):
            rtd_loss = F.binary_cross_entropy_with_logits(
                rtd_logits.float()[real], rtd_labels[real].float()
            )
        else:  # the same mean without boolean indexing, whose size would wait for the GPU
            losses = F.binary_cross_entropy_with_logits(
                rtd_logits.float(), rtd_labels.clamp(min=0).float(), reduction="none"
            )  # (B, L)
            rtd_loss = torch.where(real, losses, 0.0).sum() / real.sum()
        weight = self.electra.rtd_weight
        return ElectraOutput(
            mlm_logits=mlm_logits,
            nsp_logits=None,
            loss=mlm_loss + weight * rtd_loss,
            mlm_loss=mlm_loss,
            rtd_logits=rtd_logits,
            rtd_labels=rtd_labels,
            rtd_loss=rtd_loss,
            rtd_weight=weight,
        )

    def save_discriminator(self, directory: str | Path) -> None:
        """The discriminator as a Hugging Face `BertModel` folder: what fine-tuning uses."""
        self.bert.save_pretrained(directory)

    def save_electra_discriminator(self, directory: str | Path) -> None:
        """The discriminator with its replaced-token head as a Hugging Face
        `ElectraForPreTraining` folder: transformers' ELECTRA classes load it with the same
        hidden states and logits (no pooler: ELECTRA has none)."""
        state = {
            f"electra.{key}": value
            for key, value in self.bert.state_dict().items()
            if not key.startswith("pooler.")
        }
        state |= dict(_prefixed(self, "discriminator_predictions"))
        values = _electra_values(self.config, self.config.hidden_size, "ElectraForPreTraining")
        checkpoint.save_model(directory, values, state)

    def save_generator(self, directory: str | Path) -> None:
        """The generator as a Hugging Face `ElectraForMaskedLM` folder (the shared embeddings
        included; the output layer is tied to them, as transformers ties it)."""
        generator = self.generator
        state = {f"electra.embeddings.{k}": v for k, v in self.bert.embeddings.state_dict().items()}
        state |= {f"electra.{k}": v for k, v in _prefixed(generator, "embeddings_project")}
        state |= {f"electra.{k}": v for k, v in _prefixed(generator, "encoder")}
        head = generator.predictions
        for name in ("dense", "LayerNorm"):
            for key, value in getattr(head, name).state_dict().items():
                state[f"generator_predictions.{name}.{key}"] = value
        state["generator_lm_head.bias"] = head.bias
        values = _electra_values(generator.config, self.config.hidden_size, GENERATOR_ARCHITECTURE)
        checkpoint.save_model(directory, values | {"tie_word_embeddings": True}, state)


def _electra_values(body: BertConfig, embedding_size: int, architecture: str) -> dict[str, Any]:
    """config.json of a transformers ELECTRA model with `body`'s shape over embeddings of
    `embedding_size` (the discriminator's width: the generator projects them to its own)."""
    return {
        "architectures": [architecture],
        "model_type": "electra",
        "vocab_size": body.vocab_size,
        "embedding_size": embedding_size,
        "hidden_size": body.hidden_size,
        "num_hidden_layers": body.num_hidden_layers,
        "num_attention_heads": body.num_attention_heads,
        "intermediate_size": body.intermediate_size,
        "hidden_act": body.hidden_act,
        "hidden_dropout_prob": body.hidden_dropout_prob,
        "attention_probs_dropout_prob": body.attention_probs_dropout_prob,
        "max_position_embeddings": body.max_position_embeddings,
        "type_vocab_size": body.type_vocab_size,
        "initializer_range": body.initializer_range,
        "layer_norm_eps": body.layer_norm_eps,
        "pad_token_id": body.pad_token_id,
        "position_embedding_type": "absolute",
    }


def _prefixed(module: nn.Module, name: str):
    """(key, tensor) pairs of a submodule's state, keys prefixed with its name."""
    for key, value in getattr(module, name).state_dict().items():
        yield f"{name}.{key}", value


def sample_tokens(logits: torch.Tensor) -> torch.Tensor:
    """One token per position, drawn from softmax(logits): (B, P, V) -> (B, P) int64.

    Sampled, not the argmax (ELECTRA Sec. 3.1), so that the replacements are plausible but
    varied. By the inverse of the cumulative distribution: one uniform number per position from
    torch's global generator (seeded, and saved with every checkpoint), where `torch.multinomial`
    draws one per vocabulary entry and costs as much as the rest of a small model's step.
    """
    probabilities = torch.softmax(logits.detach().float(), dim=-1).flatten(0, 1)  # (B * P, V)
    cumulative = probabilities.cumsum(dim=-1)  # (B * P, V)
    uniform = torch.rand(cumulative.shape[0], 1) * cumulative[:, -1:]  # (B * P, 1)
    drawn = torch.searchsorted(cumulative, uniform.to(cumulative.device), right=True)
    drawn = drawn.clamp_(max=logits.shape[-1] - 1)  # (B * P, 1)
    return drawn.view(logits.shape[:2])  # (B, P)


def replace_tokens(
    input_ids: torch.Tensor,
    masked_positions: torch.Tensor,
    labels: torch.Tensor,
    sampled: torch.Tensor,
    attention_mask: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The discriminator's input and labels.

    The input is the original text (`labels` restore whatever masking put at the masked
    positions) with the generator's samples at the masked positions. A position is "replaced"
    (label 1) exactly when it is a masked position whose sample differs from the original;
    every other real position is "original" (0), padding is -100.

    Example: originals [CLS] the cat sat [SEP], "cat" and "sat" masked, samples "dog" and "sat"
    -> input [CLS] the dog sat [SEP], labels [0, 0, 1, 0, 0].

    Args:
        input_ids: (B, L) int64, as masked for the generator.
        masked_positions: (B, P) int64; padded slots point at position 0 with label -100.
        labels: (B, P) int64 original tokens, -100 at padded slots.
        sampled: (B, P) int64 generator samples.
        attention_mask: (B, L), 1 for tokens and 0 for padding; None means no padding.

    Returns:
        (B, L) int64 input for the discriminator, (B, L) int64 labels.
    """
    real = labels != IGNORE_INDEX  # (B, P)
    current = input_ids.gather(1, masked_positions)  # (B, P)
    filled = torch.where(real, sampled, current)  # padded slots keep what is there
    replaced_input = input_ids.scatter(1, masked_positions, filled)  # (B, L)
    is_replaced = (real & (sampled != labels)).long()  # (B, P)
    rtd_labels = torch.zeros_like(input_ids).scatter(1, masked_positions, is_replaced)  # (B, L)
    if attention_mask is not None:
        rtd_labels = rtd_labels.masked_fill(attention_mask == 0, IGNORE_INDEX)
    return replaced_input, rtd_labels
