"""A pre-trained model as a language model: causal log-probabilities, masked pseudo-log-
likelihoods (Salazar et al. 2020), sampling, and fill-mask refusing a left-to-right model."""

from __future__ import annotations

import pytest
import torch

from bertlab.inspection import check_reads_both_sides, fill_mask
from bertlab.language_model import (
    LOG_PROBABILITY,
    PSEUDO_LOG_LIKELIHOOD,
    generate,
    score_texts,
)
from bertlab.modeling import BertForPreTraining
from bertlab.tokenization import SPECIAL_TOKENS, Tokenizer

WORDS = "the cat sat on a mat dog ran far away".split()


@pytest.fixture
def tokenizer() -> Tokenizer:
    return Tokenizer({token: index for index, token in enumerate([*SPECIAL_TOKENS, *WORDS])})


def _model(tiny_config, tokenizer, is_causal: bool) -> BertForPreTraining:
    torch.manual_seed(0)
    config = tiny_config.replace(vocab_size=tokenizer.vocab_size, is_causal=is_causal)
    return BertForPreTraining(config).eval()


def test_a_causal_score_is_the_sum_of_next_piece_log_probabilities(tiny_config, tokenizer):
    model = _model(tiny_config, tokenizer, is_causal=True)
    texts = ["the cat sat on a mat", "dog ran"]
    scores = score_texts(model, tokenizer, texts, batch_size=1)
    assert [s.kind for s in scores] == [LOG_PROBABILITY] * 2
    ids = tokenizer(texts[0])["input_ids"]
    with torch.no_grad():
        log_probs = model(torch.tensor([ids])).mlm_logits[0].log_softmax(-1)  # (L, V)
    expected = sum(float(log_probs[t, ids[t + 1]]) for t in range(len(ids) - 1))
    assert scores[0].total == pytest.approx(expected, abs=1e-4)
    assert scores[0].pieces[-1] == "[SEP]" and len(scores[0].log_probs) == len(ids) - 1
    # Batching with padding changes nothing.
    together = score_texts(model, tokenizer, texts, batch_size=2)
    assert [s.total for s in together] == pytest.approx([s.total for s in scores], abs=1e-4)


def test_a_masked_score_is_the_pseudo_log_likelihood(tiny_config, tokenizer):
    model = _model(tiny_config, tokenizer, is_causal=False)
    (score,) = score_texts(model, tokenizer, ["the cat sat"], batch_size=2)
    assert score.kind == PSEUDO_LOG_LIKELIHOOD and score.pieces == ["the", "cat", "sat"]
    ids = tokenizer("the cat sat")["input_ids"]
    expected = 0.0
    for position in range(1, len(ids) - 1):
        masked = list(ids)
        masked[position] = tokenizer.mask_token_id
        with torch.no_grad():
            logits = model(torch.tensor([masked])).mlm_logits[0, position]
        expected += float(logits.log_softmax(-1)[ids[position]])
    assert score.total == pytest.approx(expected, abs=1e-4)
    assert score.perplexity == pytest.approx(torch.tensor(-expected / 3).exp().item(), rel=1e-4)


def test_generation_needs_a_causal_model_and_repeats_with_its_seed(tiny_config, tokenizer):
    causal = _model(tiny_config, tokenizer, is_causal=True)
    first = generate(causal, tokenizer, "the cat", max_new_tokens=6, seed=3)
    assert first.startswith("the cat")
    assert generate(causal, tokenizer, "the cat", max_new_tokens=6, seed=3) == first
    assert "[MASK]" not in first and "[CLS]" not in first
    with pytest.raises(ValueError, match="needs a left-to-right model"):
        generate(_model(tiny_config, tokenizer, is_causal=False), tokenizer, "the cat")
    with pytest.raises(ValueError, match="temperature > 0"):
        generate(causal, tokenizer, "the", temperature=0.0)


def test_fill_mask_refuses_a_left_to_right_model(tiny_config, tokenizer):
    causal = _model(tiny_config, tokenizer, is_causal=True)
    with pytest.raises(ValueError, match="left-to-right .* `bertlab generate`"):
        fill_mask(causal, tokenizer, "the [MASK] sat")
    check_reads_both_sides(tiny_config)  # a masked model passes
