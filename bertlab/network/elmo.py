"""ELMo's bidirectional language model (Peters et al. 2018, "Deep contextualized word
representations"), in the order of its Sec. 3.1 and 3.4: a context-independent token
representation x_k, L forward and L backward LSTM layers with projection (Jozefowicz et al.
2016's LSTMP) and a residual connection between the layers, and one softmax shared by both
directions, trained on the sum of the forward and backward log likelihoods (here their mean):

    pieces -> token representation x (WordPiece embedding, or char CNN -> highway -> projection)
           -> forward LSTMP_1 -> forward LSTMP_2 (+ residual) -> softmax: the next piece
           -> backward LSTMP_1 -> backward LSTMP_2 (+ residual) -> the same softmax: the previous

The token representation is a WordPiece embedding by default; ELMo's character CNN (Sec. 3.1,
after Kim et al. 2016) reads each piece's characters from a character vocabulary built from the
WordPiece vocabulary's characters ("##" stripped, a marker in its place; one id per character,
so a Chinese character is one character, never bytes), kept in config.json (`characters`) and,
piece by piece, in the weights (`token_embedder.piece_characters`).

Each LSTM layer is one `nn.LSTM(proj_size=...)`: PyTorch's own LSTM kernel, its loop over
time steps in C++, never in Python (oneDNN's fused LSTM has no projection, so on a CPU PyTorch
runs its native implementation and says so once in a warning). The backward direction runs over
each sequence reversed within its own length, so that padding stays at the end. ELMo's LSTMs
clip their cells and projections at +-3 (bilm-tf's cell_clip, proj_clip); `nn.LSTM` has no
clipping, so bertlab's biLM does not clip (the training loop clips the gradient norm).

The representations (Sec. 3.2, R_k) are returned per layer: the token layer duplicated to both
halves [x; x], then each LSTM layer's [forward; backward], 2 x projection_size each: what
`embed` and the scalar mix (eq. 1) read.

Initialization as bilm-tf's `training.py`: character embeddings uniform(-1, 1); the ReLU
convolutions uniform(-0.05, 0.05); highway and projection weights normal(0, sqrt(1 / filters)),
the highway gate's bias -2 (Srivastava et al. 2015 Sec. 2.2: start by carrying), the others 0;
the softmax normal(0, 1 / sqrt(projection_size)) with bias 0. The WordPiece embedding
normal(0, 1 / sqrt(projection_size)), the scale of the char CNN's projection; the LSTMs
`nn.LSTM`'s default uniform(+-1/sqrt(cells)) (bilm-tf: TensorFlow's default, Glorot uniform).
"""

# Shapes: B batch, L sequence length, V vocab, P projection_size, C max_characters_per_token,
#         D char_embedding_size, N the char CNN's filters, U distinct pieces in a batch.

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from bertlab.core.lstm_config import (
    CHARACTER_PADDING,
    ElmoConfig,
    piece_character_ids,
    pieces_from_character_ids,
)
from bertlab.network.lm_base import (
    LanguageModel,
    LanguageModelOutput,
    gather_time,
    language_model_loss,
    previous_piece_labels,
    reversal_index,
    sequence_lengths,
    validate_ids,
)

# PyTorch runs `nn.LSTM(proj_size=...)` in its own C++ loop over time steps, not oneDNN's, and
# warns at every call; that is known and measured (benchmarks/bench_lstm_era.py), not the user's.
warnings.filterwarnings("ignore", message="LSTM with projections is not supported with oneDNN")
CONV_INIT_RANGE = 0.05  # bilm-tf: uniform(-0.05, 0.05) for the ReLU convolutions
CHAR_EMBEDDING_INIT_RANGE = 1.0  # bilm-tf: character embeddings uniform(-1, 1)
HIGHWAY_GATE_BIAS = -2.0  # bilm-tf (Srivastava et al. 2015 Sec. 2.2): carry the input at first


@dataclass
class ElmoOutput(LanguageModelOutput):
    """`LanguageModelOutput` with both directions: `loss` is the mean of `forward_loss` (the
    next piece) and `backward_loss` (the previous piece); `logits` are the forward LM's and
    `backward_logits` (B, L, V) the backward LM's, whose position t predicts piece t - 1."""

    forward_loss: torch.Tensor | None = None
    backward_loss: torch.Tensor | None = None
    backward_logits: torch.Tensor | None = None


class Highway(nn.Module):
    """Srivastava et al. 2015, as in ELMo's char CNN: y = t * relu(W_H x) + (1 - t) * x with the
    gate t = sigmoid(W_T x + b_T)."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self.transform = nn.Linear(size, size)
        self.gate = nn.Linear(size, size)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        """(..., N) -> (..., N)."""
        gate = torch.sigmoid(self.gate(hidden))
        return gate * F.relu(self.transform(hidden)) + (1 - gate) * hidden


class CharacterCnn(nn.Module):
    """ELMo Sec. 3.1 (Kim et al. 2016): each piece's characters embedded, one convolution per
    filter width max-pooled over the characters, ReLU, highway layers, a projection to P."""

    def __init__(self, config: ElmoConfig, pieces: Sequence[str]) -> None:
        super().__init__()
        table = piece_character_ids(pieces, config.characters, config.max_characters_per_token)
        # The characters of every piece, by piece id: (V, C). Saved with the weights.
        self.register_buffer("piece_characters", torch.tensor(table, dtype=torch.int32))
        self.char_embeddings = nn.Embedding(
            config.num_characters, config.char_embedding_size, padding_idx=CHARACTER_PADDING
        )
        self.convolutions = nn.ModuleList(
            nn.Conv1d(config.char_embedding_size, count, width)
            for width, count in config.char_filters
        )
        self.highways = nn.ModuleList(
            Highway(config.num_char_filters) for _ in range(config.num_highway_layers)
        )
        self.projection = nn.Linear(config.num_char_filters, config.projection_size)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        """(B, L) int64 -> (B, L, P). Each distinct piece of the batch is computed once."""
        distinct, inverse = torch.unique(input_ids, return_inverse=True)  # (U,), (B, L)
        characters = self.piece_characters[distinct]  # (U, C)
        embedded = self.char_embeddings(characters).transpose(1, 2)  # (U, D, C)
        pooled = [conv(embedded).amax(dim=-1) for conv in self.convolutions]  # (U, count) each
        hidden = F.relu(torch.cat(pooled, dim=-1))  # (U, N)
        for highway in self.highways:
            hidden = highway(hidden)
        return self.projection(hidden)[inverse]  # (B, L, P)


class TokenEmbedder(nn.Module):
    """ELMo Sec. 3.1's context-independent token representation x_k: a WordPiece embedding,
    or the character CNN."""

    def __init__(self, config: ElmoConfig, pieces: Sequence[str] | None) -> None:
        super().__init__()
        self.word_embeddings = None
        self.char_cnn = None
        if config.use_char_cnn:
            if pieces is None:
                raise ValueError(
                    "the char CNN needs the WordPiece vocabulary: pass pieces (in id order)"
                )
            if len(pieces) != config.vocab_size:
                raise ValueError(f"{len(pieces)} pieces for vocab_size {config.vocab_size}")
            self.char_cnn = CharacterCnn(config, pieces)
        else:
            self.word_embeddings = nn.Embedding(
                config.vocab_size, config.projection_size, padding_idx=config.pad_token_id
            )

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        """(B, L) int64 -> (B, L, P)."""
        if self.char_cnn is not None:
            return self.char_cnn(input_ids)
        return self.word_embeddings(input_ids)


class ElmoLstm(nn.Module):
    """One direction of ELMo's biLM (Sec. 3.1, 3.4): L LSTM layers with projection to P
    (Jozefowicz et al. 2016), dropout on each layer's input, and from the second layer on a
    residual connection: h_j = LSTMP_j(dropout(h_j-1)) + h_j-1."""

    def __init__(self, config: ElmoConfig) -> None:
        super().__init__()
        self.use_residual = config.use_residual
        self.dropout = nn.Dropout(config.dropout_prob)
        self.layers = nn.ModuleList(
            nn.LSTM(
                config.projection_size,
                config.lstm_hidden_size,
                batch_first=True,
                proj_size=config.projection_size,
            )
            for _ in range(config.num_hidden_layers)
        )

    def forward(self, tokens: torch.Tensor) -> list[torch.Tensor]:
        """(B, L, P) -> each layer's output (B, L, P), read left to right from a zero state."""
        outputs = []
        hidden = tokens
        for index, lstm in enumerate(self.layers):
            output, _ = lstm(self.dropout(hidden))  # (B, L, P)
            if index > 0 and self.use_residual:
                output = output + hidden
            outputs.append(output)
            hidden = output
        return outputs


class ElmoForLanguageModeling(LanguageModel):
    """ELMo Sec. 3.1: the token representation, the forward and backward LSTMs, and the
    softmax shared by both directions (Theta_x and Theta_s tied across directions)."""

    config_class = ElmoConfig

    def __init__(self, config: ElmoConfig, pieces: Sequence[str] | None = None) -> None:
        """Args:
        config: the architecture.
        pieces: the WordPiece vocabulary in id order; needed with the char CNN only (the
            characters of each piece are taken from it).
        """
        super().__init__(config)
        self.token_embedder = TokenEmbedder(config, pieces)
        self.forward_lstm = ElmoLstm(config)
        self.backward_lstm = ElmoLstm(config)
        self.dropout = nn.Dropout(config.dropout_prob)
        self.softmax = nn.Linear(config.projection_size, config.vocab_size)
        self._init_weights()

    @torch.no_grad()
    def _init_weights(self) -> None:
        """bilm-tf's initialization (module docstring)."""
        scale = 1 / math.sqrt(self.config.projection_size)
        nn.init.normal_(self.softmax.weight, 0.0, scale)
        nn.init.zeros_(self.softmax.bias)
        embedder = self.token_embedder
        if embedder.word_embeddings is not None:
            nn.init.normal_(embedder.word_embeddings.weight, 0.0, scale)
            return
        cnn = embedder.char_cnn
        nn.init.uniform_(
            cnn.char_embeddings.weight, -CHAR_EMBEDDING_INIT_RANGE, CHAR_EMBEDDING_INIT_RANGE
        )
        cnn.char_embeddings.weight[CHARACTER_PADDING].zero_()
        for conv in cnn.convolutions:
            nn.init.uniform_(conv.weight, -CONV_INIT_RANGE, CONV_INIT_RANGE)
            nn.init.zeros_(conv.bias)
        filters_scale = math.sqrt(1 / self.config.num_char_filters)
        for highway in cnn.highways:
            for linear in (highway.transform, highway.gate):
                nn.init.normal_(linear.weight, 0.0, filters_scale)
            nn.init.zeros_(highway.transform.bias)
            nn.init.constant_(highway.gate.bias, HIGHWAY_GATE_BIAS)
        nn.init.normal_(cnn.projection.weight, 0.0, filters_scale)
        nn.init.zeros_(cnn.projection.bias)

    @classmethod
    def build_for_checkpoint(
        cls, config: Any, state_dict: dict[str, torch.Tensor], kwargs: dict[str, Any]
    ) -> ElmoForLanguageModeling:
        """With the char CNN, the pieces come from the checkpoint's own character table."""
        key = "token_embedder.char_cnn.piece_characters"
        if config.use_char_cnn and "pieces" not in kwargs and key in state_dict:
            pieces = pieces_from_character_ids(state_dict[key].tolist(), config.characters)
            kwargs = kwargs | {"pieces": pieces}
        return cls(config, **kwargs)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        output_logits: bool = True,
    ) -> ElmoOutput:
        """Run both LMs over a batch.

        Args:
            input_ids: (B, L) int64 piece ids, padding on the right.
            attention_mask: (B, L), 1 for pieces and 0 for padding; None means no padding.
            labels: (B, L) int64, the forward LM's targets (`next_piece_labels`), -100 where
                none. With them, the backward LM predicts each real piece's previous piece
                (`previous_piece_labels`) and `loss` is the mean of both directions' losses.
            output_logits: return both directions' logits; False (without labels) skips the
                softmax.

        Returns:
            ElmoOutput: losses (with labels), logits and backward_logits (B, L, V), and layers:
            [x; x], then [forward_j; backward_j] per LSTM layer, each (B, L, 2P).
        """
        if not torch.compiler.is_compiling():
            validate_ids(input_ids, attention_mask, labels, self.config.vocab_size)
        tokens = self.token_embedder(input_ids)  # (B, L, P)
        reverse = reversal_index(sequence_lengths(attention_mask, input_ids), input_ids.shape[1])
        forward_layers = self.forward_lstm(tokens)
        backward_layers = [  # back in the input's order: position t has read t .. n-1
            gather_time(output, reverse)
            for output in self.backward_lstm(gather_time(tokens, reverse))
        ]
        layers = (torch.cat([tokens, tokens], dim=-1),) + tuple(
            torch.cat([forward, backward], dim=-1)  # (B, L, 2P)
            for forward, backward in zip(forward_layers, backward_layers, strict=True)
        )
        output = ElmoOutput(layers=layers)
        if not output_logits and labels is None:
            return output
        logits = self.softmax(self.dropout(forward_layers[-1]))  # (B, L, V)
        backward_logits = self.softmax(self.dropout(backward_layers[-1]))  # (B, L, V)
        if labels is not None:
            output.forward_loss = language_model_loss(logits, labels, attention_mask)
            backward_labels = previous_piece_labels(input_ids, attention_mask)
            output.backward_loss = language_model_loss(
                backward_logits, backward_labels, attention_mask
            )
            output.loss = (output.forward_loss + output.backward_loss) / 2
        if output_logits:
            output.logits, output.backward_logits = logits, backward_logits
        return output
