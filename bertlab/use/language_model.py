"""A pre-trained model as a language model: how probable is a sentence, and what comes next.

- A left-to-right model (`config.is_causal`: a BERT pre-trained with `--objective clm`, BERT
  Table 5's "LTR", GPT's objective; an LSTM-era language model, NNLM, AWD-LSTM or ELMo's forward
  LM, `network.lm_views.LeftToRightLanguageModel`) gives a sentence's log-probability, the sum
  over its pieces of log P(piece | the pieces before it, `next_piece_logits`), ending with the
  end of the sentence ([SEP]), and samples continuations of a prompt (`generate`: temperature
  and top-k sampling). Each model is as `network.architectures` loads it.
- A masked model has no left-to-right factorization. Its pseudo-log-likelihood (Salazar et al.
  2020, "Masked Language Model Scoring", Sec. 2.1) masks each piece in turn and sums
  log P_MLM(piece | every other piece): not a probability, but it ranks sentences the same way a
  language model does, e.g. a real sentence above its shuffled words.
"""

# Shapes: B batch, L sequence length, V vocab, P masked positions per sequence.

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn

from bertlab.core.runtime import model_device
from bertlab.core.wording import quoted
from bertlab.tokenizer.wordpiece import NUM_SPECIAL_TOKENS_SINGLE, SEP_TOKEN, UNK_TOKEN, Tokenizer
from bertlab.use.features import pad_sequences
from bertlab.use.generation_options import DEFAULT_MAX_NEW_TOKENS, DEFAULT_TOP_K

LOG_PROBABILITY = "log-probability"  # a causal model's: a true log-probability
PSEUDO_LOG_LIKELIHOOD = "pseudo-log-likelihood"  # a masked model's (Salazar et al. 2020)


@dataclass(frozen=True)
class SentenceScore:
    """How probable one sentence is under a model, in nats.

    `pieces` are the scored pieces (a causal model's include the closing [SEP]: the end of the
    sentence) and `log_probs` their log-probabilities (or pseudo-log-likelihood terms).
    """

    text: str
    kind: str  # LOG_PROBABILITY or PSEUDO_LOG_LIKELIHOOD
    pieces: list[str]
    log_probs: list[float]

    @property
    def total(self) -> float:
        """The sentence's (pseudo-)log-likelihood: the sum over its pieces."""
        return float(sum(self.log_probs))

    @property
    def perplexity(self) -> float:
        """exp(-mean log-probability per piece): the (pseudo-)perplexity."""
        return math.exp(-self.total / max(1, len(self.log_probs)))

    @property
    def is_all_unknown(self) -> bool:
        """Every piece of the text is [UNK]: the model scored a run of one piece, not the text,
        so its score says nothing about the text and ranks it only by its length."""
        return all(piece == UNK_TOKEN for piece in self.pieces if piece != SEP_TOKEN)


def score_texts(
    model: nn.Module, tokenizer: Tokenizer, texts: Sequence[str], batch_size: int = 32
) -> list[SentenceScore]:
    """Score each text: its log-probability under a causal model, else its pseudo-log-likelihood.

    Args:
        model: a pre-trained model with its LM head, in eval mode.
        tokenizer: its tokenizer.
        texts: the sentences, each scored on its own as `[CLS] text [SEP]`.
        batch_size: sequences per forward pass (a masked model runs one per piece of a text).

    Returns:
        One `SentenceScore` per text, in order.

    Raises:
        ValueError: a text without pieces, or one longer than the model's positions (the score
            of a cut text would be ranked among whole ones).
    """
    input_ids = tokenizer(list(texts), truncation=False)["input_ids"]
    limit = model.config.max_position_embeddings  # None: any length (an LSTM-era model)
    for text, ids in zip(texts, input_ids, strict=True):
        if len(ids) <= NUM_SPECIAL_TOKENS_SINGLE:
            raise ValueError(f"nothing to score in {text!r}")
        if limit is not None and len(ids) > limit:
            raise ValueError(
                f"{quoted(text)} has {len(ids) - NUM_SPECIAL_TOKENS_SINGLE:,} pieces, more than "
                f"the {limit - NUM_SPECIAL_TOKENS_SINGLE:,} that the model reads with [CLS] and "
                "[SEP]: only a cut sentence could be scored, and its score is not comparable "
                "with whole ones; split or shorten it"
            )
    if model.config.is_causal:
        log_probs = _causal_log_probs(model, input_ids, batch_size)
        scored = [ids[1:] for ids in input_ids]  # every piece after [CLS], [SEP] included
        kind = LOG_PROBABILITY
    else:
        log_probs = _pseudo_log_likelihoods(model, tokenizer, input_ids, batch_size)
        scored = [ids[1:-1] for ids in input_ids]  # the text's pieces, not [CLS] and [SEP]
        kind = PSEUDO_LOG_LIKELIHOOD
    return [
        SentenceScore(text, kind, tokenizer.convert_ids_to_tokens(ids), values)
        for text, ids, values in zip(texts, scored, log_probs, strict=True)
    ]


@torch.no_grad()
def _causal_log_probs(
    model: nn.Module, input_ids: list[list[int]], batch_size: int
) -> list[list[float]]:
    """log P(x_t | x_<t) for t = 1 .. L-1 of each sequence ([CLS] is given, never scored)."""
    device = model_device(model)
    results: list[list[float]] = []
    for start in range(0, len(input_ids), batch_size):
        rows = input_ids[start : start + batch_size]
        ids, mask = pad_sequences(rows, model.config.pad_token_id)  # (B, L)
        ids, mask = ids.to(device), mask.to(device)
        logits = model.next_piece_logits(ids, mask).float()  # (B, L, V): t predicts t + 1
        log_probs = logits[:, :-1].log_softmax(dim=-1)  # (B, L - 1, V)
        targets = ids[:, 1:].unsqueeze(-1)  # (B, L - 1, 1)
        picked = log_probs.gather(-1, targets).squeeze(-1)  # (B, L - 1)
        results += [picked[row, : len(seq) - 1].tolist() for row, seq in enumerate(rows)]
    return results


@torch.no_grad()
def _pseudo_log_likelihoods(
    model: nn.Module, tokenizer: Tokenizer, input_ids: list[list[int]], batch_size: int
) -> list[list[float]]:
    """Salazar et al. 2020 eq. 2: for each piece t of each text (not [CLS] or [SEP]), a copy of
    the text with t masked, and log P_MLM(x_t | the rest) at t."""
    copies = []  # (text index, masked position, the masked sequence)
    for index, ids in enumerate(input_ids):
        for position in range(1, len(ids) - 1):
            masked = list(ids)
            masked[position] = tokenizer.mask_token_id
            copies.append((index, position, masked))
    device = model_device(model)
    results: list[list[float]] = [[] for _ in input_ids]
    for start in range(0, len(copies), batch_size):
        chunk = copies[start : start + batch_size]
        ids, mask = pad_sequences([masked for _, _, masked in chunk], model.config.pad_token_id)
        positions = torch.tensor([[position] for _, position, _ in chunk], device=device)  # (B, 1)
        logits = model(ids.to(device), mask.to(device), masked_positions=positions).mlm_logits
        log_probs = logits[:, 0].float().log_softmax(dim=-1)  # (B, V)
        targets = torch.tensor(
            [input_ids[index][position] for index, position, _ in chunk], device=device
        )
        picked = log_probs.gather(-1, targets[:, None]).squeeze(-1)  # (B,)
        for (index, _, _), value in zip(chunk, picked.tolist(), strict=True):
            results[index].append(value)
    return results


@torch.no_grad()
def generate(
    model: nn.Module,
    tokenizer: Tokenizer,
    prompt: str,
    max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS,
    temperature: float = 1.0,
    top_k: int | None = DEFAULT_TOP_K,
    seed: int = 0,
) -> str:
    """Continue `prompt` with a left-to-right model: sample the next piece from
    softmax(logits / temperature) over the `top_k` most probable, until [SEP] (the end of the
    sentence, as pre-training saw it) or `max_new_tokens`.

    Args:
        model: a causal pre-trained model (`--objective clm`), in eval mode.
        tokenizer: its tokenizer.
        prompt: the beginning of the text (may be empty).
        max_new_tokens: pieces to add at most.
        temperature: finite and > 0; below 1 sharpens the distribution (near 0: the most
            probable piece), above 1 flattens it.
        top_k: sample among this many pieces; None: the whole vocabulary.
        seed: the sampling generator's seed (the same seed, the same text).

    Returns:
        The prompt and its continuation, as text.

    Raises:
        ValueError: a masked (bidirectional) model, a bad setting, or a prompt that fills the
            model's positions (nothing could follow it).
    """
    if not model.config.is_causal:
        raise ValueError(
            "generate needs a left-to-right model (pre-trained with --objective clm); a masked "
            "model fills in [MASK]s from both sides instead (`bertlab fill-mask`)"
        )
    if not 0 < temperature < math.inf:
        raise ValueError(f"need a finite temperature > 0, got {temperature}")
    if max_new_tokens < 1 or (top_k is not None and top_k < 1):
        raise ValueError(
            f"need max_new_tokens >= 1 and top_k >= 1 (or None), got {max_new_tokens} and {top_k}"
        )
    generator = torch.Generator().manual_seed(seed)
    device = model_device(model)
    ids = tokenizer(prompt, truncation=False)["input_ids"][:-1]  # [CLS] and the prompt, no [SEP]
    banned = [tokenizer.pad_token_id, tokenizer.cls_token_id, tokenizer.mask_token_id]
    limit = model.config.max_position_embeddings or math.inf  # None: an LSTM reads any length
    if len(ids) >= limit:
        raise ValueError(
            f"the prompt has {len(ids) - 1:,} pieces, but the model reads {limit:,} positions "
            f"([CLS] included): nothing could follow it; shorten it to fewer than {limit - 1:,}"
        )
    for _ in range(max_new_tokens):
        if len(ids) >= limit:
            break
        last = torch.tensor([[len(ids) - 1]], device=device)  # (1, 1): predict after the last piece
        logits = model.next_piece_logits(torch.tensor([ids], device=device), positions=last)
        logits = logits[0, 0].float().cpu()  # (V,): sampled on the CPU, by `generator`
        logits[banned] = -math.inf  # (V,)
        if top_k is not None and top_k < logits.numel():
            threshold = logits.topk(top_k).values[-1]
            logits = logits.masked_fill(logits < threshold, -math.inf)
        # Shifted so that the most probable piece is at 0, and divided in float64: a tiny or a
        # huge temperature neither overflows float32 (inf - inf) nor rounds to 0 or inf there;
        # a temperature near 0 picks the most probable piece.
        shifted = (logits - logits.max()).double()  # (V,)
        probabilities = (shifted / temperature).softmax(dim=-1)  # (V,)
        piece = int(torch.multinomial(probabilities, 1, generator=generator))
        if piece == tokenizer.sep_token_id:
            break
        ids.append(piece)
    return tokenizer.decode(ids)
