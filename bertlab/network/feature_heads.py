"""Feature-based heads (BERT Sec. 5.3, Table 7): what a task head reads from the encoder.

`FeatureHeadConfig` (declared torch-free in `feature_head_config`) puts a combination of the
encoder's layers (one layer, the sum or concatenation of the top four, or ELMo's learned scalar mix
of every layer, Peters et al. 2018 eq. 1) and optionally a randomly initialized two-layer BiLSTM
between the encoder and the task layer, with the encoder frozen (the feature-based approach) or
fine-tuned (Table 5's "+ BiLSTM"); `LayerFeatures` computes them for `heads.BertForTask`. Such a
head keeps the Hugging Face key names of its encoder and task layer, but `transformers` has no class
that runs it: its settings travel in config.json under `bertlab_features`.

Where a sentence head reads is here too (`sentence_positions`): [CLS] for BERT, the last real
token for a left-to-right model (`heads` explains why).
"""

# Shapes: B batch, L sequence length, H hidden_size, F features per token, J hidden states.

from __future__ import annotations

import torch
from torch import nn
from torch.func import functional_call

from bertlab.network.feature_head_config import (
    LAST_FOUR,
    NUM_LSTM_LAYERS,
    FeatureHeadConfig,
)

# --- reading the encoder: the sentence position and the layers -----------------------------------


def last_real_positions(attention_mask: torch.Tensor) -> torch.Tensor:
    """The index of each sequence's last real (non-padding) token: (B, L) mask -> (B,) int64.

    Padding is on the right, so it is the number of real tokens minus one.
    """
    return attention_mask.long().sum(dim=1).clamp(min=1) - 1  # (B,)


def sentence_positions(attention_mask: torch.Tensor, is_causal: bool) -> torch.Tensor:
    """Where a sentence head reads: [CLS] (position 0) for BERT; the last real token for a
    left-to-right model, the one position that has seen the whole input (GPT's classifier reads
    its last token, Radford et al. 2018 Sec. 3.3). (B, L) mask -> (B,) int64."""
    if is_causal:
        return last_real_positions(attention_mask)
    return torch.zeros(attention_mask.shape[0], dtype=torch.int64, device=attention_mask.device)


def gather_rows(hidden: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """One position per sequence: (B, L, F), (B,) int64 -> (B, F)."""
    return hidden[torch.arange(hidden.shape[0], device=hidden.device), positions]  # (B, F)


class ScalarMix(nn.Module):
    """ELMo (Peters et al. 2018) eq. 1: gamma * sum_j s_j h_j, s = softmax(w), learned with the
    task. Starts from uniform weights (w = 0) and gamma = 1."""

    def __init__(self, num_layers: int) -> None:
        super().__init__()
        self.weights = nn.Parameter(torch.zeros(num_layers))
        self.gamma = nn.Parameter(torch.ones(()))

    def mixing_weights(self) -> torch.Tensor:
        """s: (num_layers,) softmax-normalized, summing to 1."""
        return self.weights.softmax(dim=0)

    def forward(self, layers: torch.Tensor) -> torch.Tensor:
        """(J, B, L, H) stacked hidden states -> (B, L, H)."""
        weights = self.mixing_weights().to(layers.dtype)  # (J,)
        return self.gamma * torch.einsum("j,jblh->blh", weights, layers)  # (B, L, H)


class BiLSTM(nn.LSTM):
    """`nn.LSTM(bidirectional=True, batch_first=True)` read to each sequence's own length, over
    the right-padded batch: (B, L, F), lengths (B,) -> (B, L, 2 * hidden), zeros at the padding.

    The same function, parameters, key names and random start as that LSTM over a packed batch,
    without the packed kernel, which takes ~3.5x as long on a CPU.
    Each direction of each layer runs as a single-layer LSTM on this module's weights
    (`torch.func.functional_call`): the forward one over the padded batch as it is (padding comes
    after every real token), the backward one over each sequence reversed within its own length,
    so that its padding comes last too.
    """

    WEIGHTS = ("weight_ih", "weight_hh", "bias_ih", "bias_hh")

    def __init__(self, input_size: int, hidden_size: int, num_layers: int) -> None:
        super().__init__(
            input_size, hidden_size, num_layers=num_layers, batch_first=True, bidirectional=True
        )
        # One direction of one layer, per layer: shapes only (on the meta device: no memory, no
        # random numbers drawn), never registered, so the state dict is nn.LSTM's.
        self._one_direction = tuple(
            nn.LSTM(size, hidden_size, batch_first=True, device="meta")
            for size in [input_size] + [2 * hidden_size] * (num_layers - 1)
        )

    def _run(self, layer: int, suffix: str, inputs: torch.Tensor) -> torch.Tensor:
        """One direction (suffix "" or "_reverse") of one layer: (B, L, F_in) -> (B, L, hidden)."""
        weights = {f"{name}_l0": getattr(self, f"{name}_l{layer}{suffix}") for name in self.WEIGHTS}
        output, _ = functional_call(self._one_direction[layer], weights, (inputs,))
        return output

    def forward(self, inputs: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """inputs (B, L, F), lengths (B,) of the real tokens -> (B, L, 2 * hidden)."""
        positions = torch.arange(inputs.shape[1], device=inputs.device)  # (L,)
        lengths = lengths.to(inputs.device)
        real = positions[None, :] < lengths[:, None]  # (B, L)
        # Position t of a sequence of n real tokens reads position n - 1 - t (t < n); padding
        # stays where it is. The reversal is its own inverse.
        reverse = torch.where(real, lengths[:, None] - 1 - positions[None, :], positions[None, :])
        hidden = inputs
        for layer in range(self.num_layers):
            forward = self._run(layer, "", hidden)  # (B, L, hidden)
            index = reverse[:, :, None].expand(-1, -1, hidden.shape[-1])
            backward = self._run(layer, "_reverse", hidden.gather(1, index))
            backward = backward.gather(1, reverse[:, :, None].expand_as(backward))
            hidden = torch.cat([forward, backward], dim=-1)  # (B, L, 2 * hidden)
        return hidden * real[:, :, None].to(hidden.dtype)


class LayerFeatures(nn.Module):
    """BERT Sec. 5.3: features from the encoder's hidden states (a `FeatureHeadConfig`'s layer
    combination), then optionally a two-layer BiLSTM. (B, L, H) per layer -> (B, L, F).

    Any encoder whose hidden states are the input layer and N layers of one width H reads so:
    BERT's, and ELMo's biLM ([x; x] and each layer's [forward; backward]).
    """

    def __init__(self, num_layers: int, hidden_size: int, features: FeatureHeadConfig) -> None:
        """Args:
        num_layers: N, the encoder's layers (N + 1 hidden states with the input layer).
        hidden_size: H, the width of every hidden state.
        features: what to read.
        """
        super().__init__()
        self.combination = features.layers
        num_states = num_layers + 1  # the embeddings and every layer
        if features.layers == "second-to-last" and num_layers < 2:
            raise ValueError("second-to-last needs a model of at least two layers")
        self.top = min(LAST_FOUR, num_layers)
        self.scalar_mix = ScalarMix(num_states) if features.layers == "scalar-mix" else None
        size = hidden_size * (self.top if features.layers == "concat-last-four" else 1)
        self.lstm = None
        if features.use_bilstm:
            hidden = features.lstm_hidden_size or hidden_size
            self.lstm = BiLSTM(size, hidden, num_layers=NUM_LSTM_LAYERS)
            size = 2 * hidden
        self.output_size = size

    def combine(self, hidden_states: tuple[torch.Tensor, ...]) -> torch.Tensor:
        """The embeddings and each layer's output, (B, L, H) each -> (B, L, H or top * H)."""
        top = hidden_states[-self.top :]
        combined = {
            "embeddings": lambda: hidden_states[0],
            "second-to-last": lambda: hidden_states[-2],
            "last": lambda: hidden_states[-1],
            "sum-last-four": lambda: torch.stack(top).sum(0),  # (B, L, H)
            "concat-last-four": lambda: torch.cat(top, dim=-1),  # (B, L, top * H)
            "sum-all": lambda: torch.stack(hidden_states).sum(0),  # (B, L, H)
            "scalar-mix": lambda: self.scalar_mix(torch.stack(hidden_states)),  # (B, L, H)
        }
        return combined[self.combination]()

    def forward(
        self, hidden_states: tuple[torch.Tensor, ...], attention_mask: torch.Tensor
    ) -> torch.Tensor:
        """hidden_states: N + 1 tensors (B, L, H); attention_mask (B, L) -> (B, L, F)."""
        features = self.combine(hidden_states)
        if self.lstm is None:
            return features
        lengths = attention_mask.long().sum(dim=1).clamp(min=1)  # (B,)
        return self.lstm(features, lengths)  # (B, L, 2 * hidden), zeros at padding

    def sentence(
        self, features: torch.Tensor, attention_mask: torch.Tensor, is_causal: bool
    ) -> torch.Tensor:
        """One vector per sequence: (B, L, F) -> (B, F). Without a BiLSTM, the features at
        `sentence_positions`; with one, its forward state at the last real token and its
        backward state at the first, each of which has read the whole sequence."""
        if self.lstm is None:
            return gather_rows(features, sentence_positions(attention_mask, is_causal))
        half = features.shape[-1] // 2
        forward = gather_rows(features[..., :half], last_real_positions(attention_mask))
        return torch.cat([forward, features[:, 0, half:]], dim=-1)  # (B, F)
