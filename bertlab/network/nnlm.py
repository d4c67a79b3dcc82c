"""Bengio et al. 2003, "A Neural Probabilistic Language Model" (JMLR 3), in the order of its
Sec. 2: a shared table C of feature vectors, the window of the n - 1 previous pieces'
vectors x, a tanh hidden layer, optional direct connections from x to the output, and a
softmax over the vocabulary:

    y = b + W x + U tanh(d + H x),    P(w_t | w_{t-n+1} .. w_{t-1}) = softmax(y)_{w_t}

Every position of a (B, L) batch is computed at once (the windows are one `unfold`, no loop over
positions). Position t's window is pieces t-n+2 .. t, oldest first, and it predicts piece t + 1
(the targets of `lm_base.next_piece_labels`, as for every left-to-right model in bertlab);
window slots before the sequence's first piece hold the [PAD] id (`pad_token_id`), which is
therefore the learned "before the start" context (it gets gradients: the table has no
padding_idx). Padding at the end is never in a real position's window.

C is the network's static word vectors (`word_vectors`), usable where word2vec's are.

Initialization (Bengio et al. do not state theirs): C uniform(-0.1, 0.1), the embedding init of
the AWD-LSTM/ULMFiT code (fastai's initrange = 0.1); H, U and W PyTorch's `nn.Linear` default
uniform(+-1/sqrt(fan_in)); biases d and b zero. An untrained network's softmax is then close to
uniform (its perplexity near the vocabulary's size; the unit tests check it).
"""

# Shapes: B batch, L sequence length, V vocab, m embedding_size, h hidden_size,
#         K = n - 1 pieces per window.

from __future__ import annotations

import torch
from torch import nn

from bertlab.core.lstm_config import NnlmConfig
from bertlab.network.lm_base import (
    LanguageModel,
    LanguageModelOutput,
    language_model_loss,
    validate_ids,
)

EMBEDDING_INIT_RANGE = 0.1  # fastai's AWD_LSTM.initrange, the uniform range of C


class NnlmWindow(nn.Module):
    """Bengio Sec. 2, the mapping C and the input x: the feature vectors of the n - 1 pieces
    before each prediction, concatenated (oldest first)."""

    def __init__(self, config: NnlmConfig) -> None:
        super().__init__()
        self.context_size = config.context_size
        self.pad_token_id = config.pad_token_id
        self.word_embeddings = nn.Embedding(config.vocab_size, config.embedding_size)  # C

    def forward(self, input_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, L) int64 -> each piece's vector C(w_t) (B, L, m) and each position's window x
        (B, L, K * m): position t holds C(w_{t-K+1}) .. C(w_t), [PAD]'s vector before the start."""
        batch, seq_len = input_ids.shape
        start = input_ids.new_full((batch, self.context_size - 1), self.pad_token_id)
        padded = torch.cat([start, input_ids], dim=1)  # (B, K - 1 + L)
        vectors = self.word_embeddings(padded)  # (B, K - 1 + L, m)
        windows = vectors.unfold(1, self.context_size, 1)  # (B, L, m, K)
        windows = windows.transpose(2, 3).reshape(batch, seq_len, -1)  # (B, L, K * m)
        return vectors[:, self.context_size - 1 :], windows


class NnlmForLanguageModeling(LanguageModel):
    """Bengio Sec. 2: y = b + W x + U tanh(d + H x) and the softmax over the vocabulary."""

    config_class = NnlmConfig

    def __init__(self, config: NnlmConfig) -> None:
        super().__init__(config)
        window_size = config.context_size * config.embedding_size
        self.window = NnlmWindow(config)
        self.hidden = nn.Linear(window_size, config.hidden_size)  # H and d
        self.output = nn.Linear(config.hidden_size, config.vocab_size)  # U and b
        # W: the direct connections from the window to the output (no bias: b is `output`'s).
        self.direct = (
            nn.Linear(window_size, config.vocab_size, bias=False)
            if config.use_direct_connections
            else None
        )
        self._init_weights()

    @torch.no_grad()
    def _init_weights(self) -> None:
        """C uniform(-0.1, 0.1); H, U, W nn.Linear's default; d and b zero (module docstring)."""
        nn.init.uniform_(
            self.window.word_embeddings.weight, -EMBEDDING_INIT_RANGE, EMBEDDING_INIT_RANGE
        )
        nn.init.zeros_(self.hidden.bias)
        nn.init.zeros_(self.output.bias)

    def word_vectors(self) -> torch.Tensor:
        """C, the static word vectors: (V, m) float, row i for piece i (a detached copy)."""
        return self.window.word_embeddings.weight.detach().clone()

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        output_logits: bool = True,
    ) -> LanguageModelOutput:
        """Score the next piece at every position.

        Args:
            input_ids: (B, L) int64 piece ids, padding on the right.
            attention_mask: (B, L), 1 for pieces and 0 for padding; None means no padding.
            labels: (B, L) int64, the piece each position predicts (`next_piece_labels`),
                -100 where none; padding positions are skipped whatever they hold.
            output_logits: return the logits; False (without labels) skips the softmax.

        Returns:
            LanguageModelOutput: loss (with labels), logits (B, L, V), and layers: C(w_t)
            (B, L, m) and the hidden layer tanh(d + H x) (B, L, h), which has read pieces
            t-n+2 .. t.
        """
        if not torch.compiler.is_compiling():
            validate_ids(input_ids, attention_mask, labels, self.config.vocab_size)
        vectors, window = self.window(input_ids)  # (B, L, m), (B, L, K * m)
        hidden = torch.tanh(self.hidden(window))  # (B, L, h)
        logits = loss = None
        if output_logits or labels is not None:
            logits = self.output(hidden)  # (B, L, V)
            if self.direct is not None:
                logits = logits + self.direct(window)
            if labels is not None:
                loss = language_model_loss(logits, labels, attention_mask)
        return LanguageModelOutput(
            loss=loss, logits=logits if output_logits else None, layers=(vectors, hidden)
        )
