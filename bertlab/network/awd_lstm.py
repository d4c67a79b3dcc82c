"""AWD-LSTM (Merity, Keskar & Socher 2017, "Regularizing and Optimizing LSTM Language Models"),
the language model ULMFiT fine-tunes (Howard & Ruder 2018), in the paper's order: the
weight-dropped LSTM (Sec. 2), locked (variational) dropout (Sec. 4.2), embedding dropout
(Sec. 4.3), tied input and output embeddings with the last layer sized to them (Sec. 4.4-4.5),
and activation regularization (Sec. 4.6).

    pieces -> embedding (rows dropped) -> locked dropout -> LSTM_1 -> locked dropout -> ...
           -> LSTM_n (output size = embedding size) -> locked dropout -> tied decoder -> softmax

Each LSTM layer is its own `nn.LSTM` (as in fastai's `AWD_LSTM`) and runs in PyTorch's fused
kernel (oneDNN on a CPU), never a Python loop over time steps. The weight drop keeps the raw
hidden-to-hidden weight as the layer's Parameter, which the optimizer updates and the state dict
holds; each forward computes the dropped weight from it and runs the LSTM with it through
`torch.func.functional_call`. Nothing is assigned behind torch's back, the way that broke with
PyTorch upgrades (salesforce/awd-lstm-lm #86 and #114, pytorch #32346).

Module names follow fastai's (`encoder`, `rnns`, `decoder`), and each layer's weights keep
`nn.LSTM`'s names (`weight_ih_l0`, `weight_hh_l0` the raw weight, `bias_ih_l0`, `bias_hh_l0`).
Unlike fastai's, the network keeps no hidden state between batches: every sequence starts from
zeros (bertlab's batches are independent sequences).

Initialization as fastai's: the embedding (and so the tied decoder) uniform(-0.1, 0.1), the
LSTMs `nn.LSTM`'s default uniform(+-1/sqrt(hidden)), the decoder's bias zero.
"""

# Shapes: B batch, L sequence length, V vocab, E embedding_size, H hidden_size,
#         H_l the output size of LSTM layer l (H, and E for the last).

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call

from bertlab.core.lstm_config import AwdLstmConfig
from bertlab.network.lm_base import (
    LanguageModel,
    LanguageModelOutput,
    language_model_loss,
    validate_ids,
)

EMBEDDING_INIT_RANGE = 0.1  # fastai's AWD_LSTM.initrange (and Merity's code's initrange)


@dataclass
class AwdLstmOutput(LanguageModelOutput):
    """`LanguageModelOutput` with Merity Sec. 4.6's regularizers, in training only (None in
    eval), already weighted: the loss to minimize is `loss + activation_regularization +
    temporal_activation_regularization`.

    activation_regularization: alpha x the mean square of the last layer's dropped output.
    temporal_activation_regularization: beta x the mean square of the change of the last
        layer's (undropped) output between consecutive real positions.
    """

    activation_regularization: torch.Tensor | None = None
    temporal_activation_regularization: torch.Tensor | None = None


class WeightDropLstm(nn.LSTM):
    """Merity Sec. 2: a one-layer LSTM with DropConnect (Wan et al. 2013) on its
    hidden-to-hidden weight U, one mask per forward pass shared by every time step.

    `weight_hh_l0` is the raw weight (a Parameter, in the state dict); the dropped one is
    computed from it in `dropped_weight_hh` each forward, and is the raw weight itself in eval.
    """

    WEIGHTS = ("weight_ih_l0", "bias_ih_l0", "bias_hh_l0")

    def __init__(self, input_size: int, hidden_size: int, weight_dropout_prob: float) -> None:
        super().__init__(input_size, hidden_size, batch_first=True)
        self.weight_dropout_prob = weight_dropout_prob
        # Shapes only (on the meta device: no memory, no random numbers), never registered:
        # the LSTM that runs on this module's weights with the dropped U put in.
        self._runner = (nn.LSTM(input_size, hidden_size, batch_first=True, device="meta"),)

    def dropped_weight_hh(self) -> torch.Tensor:
        """U with whole entries dropped (scaled by 1/(1-p)) in training; U itself in eval."""
        return F.dropout(self.weight_hh_l0, self.weight_dropout_prob, self.training)

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        """(B, L, input_size) -> (B, L, hidden_size), from a zero state."""
        weights = {name: getattr(self, name) for name in self.WEIGHTS}
        weights["weight_hh_l0"] = self.dropped_weight_hh()
        output, _ = functional_call(self._runner[0], weights, (inputs,))
        return output


class LockedDropout(nn.Module):
    """Merity Sec. 4.2 (Gal & Ghahramani 2016): variational dropout, one mask per sequence
    and feature, the same at every time step."""

    def __init__(self, dropout_prob: float) -> None:
        super().__init__()
        self.dropout_prob = dropout_prob

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        """(B, L, F) -> (B, L, F)."""
        if not self.training or self.dropout_prob == 0:
            return hidden
        keep = 1 - self.dropout_prob
        mask = hidden.new_empty(hidden.shape[0], 1, hidden.shape[2]).bernoulli_(keep)  # (B, 1, F)
        return hidden * mask / keep


def embedding_dropout(
    embedding: nn.Embedding, input_ids: torch.Tensor, dropout_prob: float, training: bool
) -> torch.Tensor:
    """Merity Sec. 4.3 (Gal & Ghahramani 2016): drop whole rows of the embedding matrix (a word
    dropped is dropped everywhere in the batch), the rest scaled by 1/(1-p).
    (B, L) int64 -> (B, L, E)."""
    weight = embedding.weight  # (V, E)
    if training and dropout_prob > 0:
        keep = 1 - dropout_prob
        rows = weight.new_empty(weight.shape[0], 1).bernoulli_(keep)  # (V, 1)
        weight = weight * rows / keep
    return F.embedding(input_ids, weight, embedding.padding_idx)


class AwdLstmModel(nn.Module):
    """The AWD-LSTM body (Merity Sec. 5): embedding, then the weight-dropped LSTM layers
    emb -> hidden -> ... -> emb with locked dropout on each layer's input."""

    def __init__(self, config: AwdLstmConfig) -> None:
        super().__init__()
        self.config = config
        self.encoder = nn.Embedding(
            config.vocab_size, config.embedding_size, padding_idx=config.pad_token_id
        )
        self.rnns = nn.ModuleList(
            WeightDropLstm(size_in, size_out, config.weight_dropout_prob)
            for size_in, size_out in config.layer_sizes()
        )
        self.input_dropout = LockedDropout(config.input_dropout_prob)
        self.hidden_dropout = LockedDropout(config.hidden_dropout_prob)
        # fastai draws the whole table, the padding row included.
        nn.init.uniform_(self.encoder.weight, -EMBEDDING_INIT_RANGE, EMBEDDING_INIT_RANGE)

    def forward(self, input_ids: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """(B, L) int64 -> the embedded input (B, L, E), after the embedding dropout, then each
        LSTM layer's output (B, L, H_l) before the dropout that follows it."""
        embedded = embedding_dropout(
            self.encoder, input_ids, self.config.embedding_dropout_prob, self.training
        )  # (B, L, E)
        layers = [embedded]
        hidden = self.input_dropout(embedded)
        for index, rnn in enumerate(self.rnns):
            if index > 0:
                hidden = self.hidden_dropout(hidden)
            hidden = rnn(hidden)  # (B, L, H_l)
            layers.append(hidden)
        return tuple(layers)


class AwdLstmForLanguageModeling(LanguageModel):
    """Merity Sec. 4.4-4.6: the body, locked dropout on its output, the decoder tied to the
    embedding, and the AR and TAR terms."""

    config_class = AwdLstmConfig
    tied_keys = ("decoder.weight",)

    def __init__(self, config: AwdLstmConfig) -> None:
        super().__init__(config)
        self.awd_lstm = AwdLstmModel(config)
        self.output_dropout = LockedDropout(config.output_dropout_prob)
        self.decoder = nn.Linear(config.embedding_size, config.vocab_size)
        nn.init.zeros_(self.decoder.bias)
        self.tie_weights()

    def tie_weights(self) -> None:
        """Merity Sec. 4.4 (Inan et al. 2017; Press & Wolf 2017): the decoder is the embedding."""
        self.decoder.weight = self.awd_lstm.encoder.weight

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        output_logits: bool = True,
    ) -> AwdLstmOutput:
        """Score the next piece at every position.

        Args:
            input_ids: (B, L) int64 piece ids, padding on the right.
            attention_mask: (B, L), 1 for pieces and 0 for padding; None means no padding.
            labels: (B, L) int64, the piece each position predicts (`next_piece_labels`),
                -100 where none; padding positions are skipped whatever they hold.
            output_logits: return the logits; False (without labels) skips the softmax.

        Returns:
            AwdLstmOutput: loss (with labels), logits (B, L, V), layers (the embedded input
            (B, L, E) and each LSTM layer's output (B, L, H_l)) and, in training, AR and TAR.
        """
        if not torch.compiler.is_compiling():
            validate_ids(input_ids, attention_mask, labels, self.config.vocab_size)
        layers = self.awd_lstm(input_ids)
        last = layers[-1]  # (B, L, E)
        dropped = self.output_dropout(last)
        logits = loss = None
        if output_logits or labels is not None:
            logits = self.decoder(dropped)  # (B, L, V)
            if labels is not None:
                loss = language_model_loss(logits, labels, attention_mask)
        ar = tar = None
        if self.training:
            ar, tar = self._regularizers(last, dropped, attention_mask)
        return AwdLstmOutput(
            loss=loss,
            logits=logits if output_logits else None,
            layers=layers,
            activation_regularization=ar,
            temporal_activation_regularization=tar,
        )

    def _regularizers(
        self, last: torch.Tensor, dropped: torch.Tensor, attention_mask: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Merity Sec. 4.6, as fastai's RNNRegularizer: AR = alpha mean(dropped^2) (L2 of the
        dropped output), TAR = beta mean((h_t+1 - h_t)^2) on the undropped output; the means
        over the real positions' features."""
        real = (
            torch.ones_like(last[..., 0])
            if attention_mask is None
            else attention_mask.to(last.dtype)
        )
        features = last.shape[-1]
        squares = dropped.float().pow(2).sum(-1)  # (B, L)
        ar = self.config.ar_alpha * (squares * real).sum() / (real.sum() * features)
        steps = (last[:, 1:] - last[:, :-1]).float().pow(2).sum(-1)  # (B, L - 1)
        pairs = real[:, 1:] * real[:, :-1]  # (B, L - 1): both positions real
        tar = self.config.tar_beta * (steps * pairs).sum() / (pairs.sum().clamp(min=1) * features)
        return ar, tar
