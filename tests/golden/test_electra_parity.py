"""ELECTRA's saved models load in transformers strictly and compute the same outputs."""

from __future__ import annotations

import pytest
import torch

from bertlab.core.config import BertConfig
from bertlab.network.electra import ElectraForPreTraining

pytestmark = pytest.mark.golden


def _model() -> ElectraForPreTraining:
    config = BertConfig(
        vocab_size=99,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    torch.manual_seed(0)
    return ElectraForPreTraining(config).eval()


def _padded_batch() -> tuple[torch.Tensor, torch.Tensor]:
    """Two sequences of 9 ids, the second padded after 6: (2, 9) int64 ids and mask."""
    ids = torch.randint(5, 99, (2, 9))
    mask = torch.ones_like(ids)
    mask[1, 6:] = 0
    return ids, mask


def test_the_discriminator_loads_in_transformers_bert_model(tmp_path) -> None:
    hf = pytest.importorskip("transformers")
    model = _model()
    model.save_discriminator(tmp_path)
    reference, info = hf.BertModel.from_pretrained(tmp_path, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"]
    ids, mask = _padded_batch()
    with torch.no_grad():
        ours = model.bert(ids, mask).last_hidden_state
        theirs = reference.eval()(input_ids=ids, attention_mask=mask).last_hidden_state
    real = mask.bool()
    torch.testing.assert_close(ours[real], theirs[real], rtol=0, atol=1e-5)


def test_the_generator_loads_in_transformers_electra_for_masked_lm(tmp_path) -> None:
    hf = pytest.importorskip("transformers")
    model = _model()
    model.save_generator(tmp_path)
    reference, info = hf.ElectraForMaskedLM.from_pretrained(tmp_path, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    ids = torch.randint(5, 99, (2, 9))
    positions = torch.tensor([[1, 3], [2, 5]])
    with torch.no_grad():
        embedded = model.bert.embeddings(ids, torch.zeros_like(ids))
        weight = model.bert.embeddings.word_embeddings.weight
        ours = model.generator(embedded, None, positions, weight)  # (B, P, V)
        theirs = reference.eval()(input_ids=ids).logits  # (B, L, V)
    expected = theirs.gather(1, positions.unsqueeze(-1).expand(-1, -1, theirs.shape[-1]))
    torch.testing.assert_close(ours, expected, rtol=0, atol=1e-5)


def test_the_discriminator_with_its_head_loads_in_transformers_electra_for_pretraining(
    tmp_path,
) -> None:
    hf = pytest.importorskip("transformers")
    model = _model()
    model.save_electra_discriminator(tmp_path)
    reference, info = hf.ElectraForPreTraining.from_pretrained(tmp_path, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    ids, mask = _padded_batch()
    with torch.no_grad():
        hidden = model.bert(ids, mask).last_hidden_state
        ours = model.discriminator_predictions(hidden)  # (B, L)
        theirs = reference.eval()(input_ids=ids, attention_mask=mask).logits  # (B, L)
    real = mask.bool()
    torch.testing.assert_close(ours[real], theirs[real], rtol=0, atol=1e-5)
