"""A pre-trained model as a language model: causal log-probabilities, masked pseudo-log-
likelihoods (Salazar et al. 2020), sampling, and fill-mask refusing a left-to-right model."""

from __future__ import annotations

import math

import pytest
import torch

from bertlab.network.bert import BertForPreTraining
from bertlab.tokenizer.wordpiece import SPECIAL_TOKENS, Tokenizer
from bertlab.use.inspection import check_reads_both_sides, fill_mask
from bertlab.use.language_model import (
    LOG_PROBABILITY,
    PSEUDO_LOG_LIKELIHOOD,
    generate,
    score_texts,
)

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


def test_a_temperature_near_zero_picks_the_most_probable_piece_and_inf_is_refused(
    tiny_config, tokenizer
):
    """1e-40 overflowed float32 (logits / 1e-40 is inf, softmax NaN: torch.multinomial's
    traceback); near 0 a temperature means the most probable piece, as top_k=1 picks it."""
    causal = _model(tiny_config, tokenizer, is_causal=True)
    greedy = generate(causal, tokenizer, "the cat", max_new_tokens=6, top_k=1)
    for temperature in (1e-40, 5e-324):
        assert generate(causal, tokenizer, "the cat", 6, temperature, seed=5) == greedy
    assert generate(causal, tokenizer, "the cat", 6, temperature=1e300).startswith("the cat")
    for temperature in (math.inf, math.nan, -1.0):
        with pytest.raises(ValueError, match=f"^need a finite temperature > 0, got {temperature}$"):
            generate(causal, tokenizer, "the", temperature=temperature)


def test_fill_mask_refuses_a_left_to_right_model(tiny_config, tokenizer):
    causal = _model(tiny_config, tokenizer, is_causal=True)
    with pytest.raises(ValueError, match="left-to-right .* `bertlab generate`"):
        fill_mask(causal, tokenizer, "the [MASK] sat")
    check_reads_both_sides(tiny_config)  # a masked model passes


def test_a_sentence_longer_than_the_positions_is_refused_not_cut(tiny_config, tokenizer):
    """A cut sentence's score would be ranked among whole ones: refused, saying why."""
    model = _model(tiny_config, tokenizer, is_causal=False)
    limit = model.config.max_position_embeddings
    long_text = " ".join(["the cat"] * limit)
    with pytest.raises(ValueError, match=f"has {2 * limit} pieces, more than the {limit - 2}"):
        score_texts(model, tokenizer, ["the cat sat", long_text])
    fits = " ".join(["cat"] * (limit - 2))
    assert len(score_texts(model, tokenizer, [fits])[0].log_probs) == limit - 2


def test_a_prompt_that_fills_the_positions_is_refused(tiny_config, tokenizer):
    model = _model(tiny_config, tokenizer, is_causal=True)
    limit = model.config.max_position_embeddings
    with pytest.raises(ValueError, match="nothing could follow it"):
        generate(model, tokenizer, " ".join(["cat"] * (limit - 1)), max_new_tokens=3)
    text = generate(model, tokenizer, " ".join(["cat"] * (limit - 2)), max_new_tokens=3)
    assert text.startswith("cat cat")


def test_a_sentence_of_unknown_pieces_only_is_marked(tiny_config, tokenizer):
    for is_causal in (False, True):
        model = _model(tiny_config, tokenizer, is_causal=is_causal)
        known, unknown, mixed = score_texts(model, tokenizer, ["the cat", "xyz 好", "the xyz"])
        assert unknown.is_all_unknown and unknown.pieces[0] == "[UNK]"
        assert not known.is_all_unknown and not mixed.is_all_unknown
