"""An LSTM-era model as bertlab's uses read a model: an encoder (what `bertlab embed`,
`neighbours` and the feature-based heads read: hidden states per layer, static input vectors)
and a left-to-right language model (what `score-text` and `generate` read: the next piece's
scores). BERT's own classes read so already (`BertModel`, `BertForPreTraining.next_piece_logits`);
these views give NNLM, ELMo's biLM and AWD-LSTM (and their task heads' bodies) the same
interface, so that each use is one function for every architecture.

What each view holds is the architecture entry's to say (`network.architectures`): which
representations are the hidden states, whether position t has read only pieces 0..t (a
left-to-right model: its first piece's vector is the same for every text), the static vectors,
and ELMo's scalar mix.
"""

# Shapes: B batch, L sequence length, V vocab, H_l the width of hidden state l, P positions.

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import nn

from bertlab.network.bert import ModelOutput, gather_positions
from bertlab.network.feature_heads import ScalarMix


@dataclass(frozen=True)
class ViewConfig:
    """What the uses read of a model's config, under `BertConfig`'s names.

    Attributes:
        vocab_size, pad_token_id: the vocabulary's.
        num_hidden_layers: N: the hidden states are the input layer and N layers.
        hidden_size: the width of the last hidden state.
        is_causal: position t has read pieces 0..t only (NNLM, AWD-LSTM, ELMo's forward LM).
        max_position_embeddings: the longest input; None: any length (an LSTM or a window of
            pieces has no position table).
    """

    vocab_size: int
    pad_token_id: int
    num_hidden_layers: int
    hidden_size: int
    is_causal: bool
    max_position_embeddings: int | None = None


@dataclass
class EncoderViewOutput(ModelOutput):
    """`ModelOutput` with ELMo's scalar mix of the hidden states (B, L, H), where the model has
    one."""

    scalar_mix: torch.Tensor | None = None


class LanguageModelEncoder(nn.Module):
    """An LSTM-era model's representations as an encoder's hidden states.

    Attributes:
        model: the wrapped model (a language model or a task head), in eval mode with it.
        config: its `ViewConfig`.
        pooler: None (no LSTM-era model has BERT's pooler).
        scalar_mix: ELMo's mix of the hidden states (learned by a fine-tuned head, else fixed:
            uniform weights and gamma 1, the average of the layers), or None.
    """

    pooler = None

    def __init__(
        self,
        model: nn.Module,
        config: ViewConfig,
        read_layers: Callable[[torch.Tensor, torch.Tensor | None], Sequence[torch.Tensor]],
        input_vectors: Callable[[], torch.Tensor],
        scalar_mix: ScalarMix | None = None,
    ) -> None:
        """Args:
        model: the module whose weights are read.
        config: what the uses read of it.
        read_layers: (input_ids, attention_mask) -> its representations per layer, lowest first.
        input_vectors: -> the static vector of every piece, (V, H_0).
        scalar_mix: ELMo's mix, or None.
        """
        super().__init__()
        self.model = model
        self.config = config
        self._read_layers = read_layers
        self._input_vectors = input_vectors
        self.scalar_mix = scalar_mix

    def input_vectors(self) -> torch.Tensor:
        """The static vector of every piece, (V, H_0) float, detached: what one piece is
        wherever it stands (NNLM's C, AWD-LSTM's embedding, ELMo's token layer)."""
        with torch.no_grad():
            return self._input_vectors().detach()

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        output_hidden_states: bool = False,
    ) -> EncoderViewOutput:
        """Run the model over a batch.

        Args:
            input_ids: (B, L) int64, padding on the right.
            attention_mask: (B, L), 1 for pieces and 0 for padding; None: no padding.
            token_type_ids: (B, L), not read: an LSTM reads a pair as one sequence.
            output_hidden_states: also return every representation (always computed).

        Returns:
            EncoderViewOutput: last_hidden_state (B, L, H), hidden_states (the input layer, then
            each layer, (B, L, H_l) each) and the scalar mix (B, L, H) where there is one.
        """
        layers = tuple(self._read_layers(input_ids, attention_mask))
        mix = None if self.scalar_mix is None else self.scalar_mix(torch.stack(layers))
        return EncoderViewOutput(
            last_hidden_state=layers[-1],
            hidden_states=layers if output_hidden_states else None,
            scalar_mix=mix,
        )


class LeftToRightLanguageModel(nn.Module):
    """An LSTM-era language model's next-piece scores (for ELMo, its forward LM's): what
    `score-text` and `generate` read, as they read `BertForPreTraining.next_piece_logits`."""

    def __init__(self, model: nn.Module, config: ViewConfig) -> None:
        """Args:
        model: a language model whose output's `logits` (B, L, V) score at position t the piece
            t + 1 (`lm_base.LanguageModelOutput`).
        config: what the uses read of it (`is_causal` True).
        """
        super().__init__()
        if not config.is_causal:
            raise ValueError("a left-to-right language model's view needs is_causal")
        self.model = model
        self.config = config

    def next_piece_logits(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        positions: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """The scores of the piece after each position: (B, L) -> (B, L, V), or (B, P, V) at
        `positions` (B, P) int64 only."""
        logits = self.model(input_ids, attention_mask).logits  # (B, L, V)
        if positions is None:
            return logits
        return gather_positions(logits, positions)  # (B, P, V)
