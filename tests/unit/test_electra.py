"""ELECTRA's replaced-token detection: the sampling, the replaced positions, the shared
embeddings, the loss and its weight, and what is saved for fine-tuning."""

from __future__ import annotations

import json

import pytest
import torch

from bertlab.core.config import BertConfig, ElectraConfig
from bertlab.network.bert import IGNORE_INDEX, BertModel
from bertlab.network.electra import (
    ElectraForPreTraining,
    generator_config,
    replace_tokens,
    sample_tokens,
)
from bertlab.training.pretraining.stats import NEAR_CHANCE_AUC, near_chance_warning
from bertlab.use.inspection import load_for_fill_mask

CLS, SEP, MASK = 2, 3, 4


@pytest.fixture
def config() -> BertConfig:
    return BertConfig(
        vocab_size=99,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )


def _batch(seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    original = torch.randint(5, 99, (3, 10), generator=generator)
    original[:, 0], original[:, -1] = CLS, SEP
    positions = torch.tensor([[1, 4, 0], [2, 3, 7], [5, 0, 0]])  # padded slots point at 0
    labels = original.gather(1, positions)
    labels[0, 2] = labels[2, 1] = labels[2, 2] = IGNORE_INDEX
    masked = original.scatter(1, positions, torch.full_like(positions, MASK))
    masked[:, 0] = CLS
    attention_mask = torch.ones_like(original)
    attention_mask[2, 8:] = 0
    return original, masked, positions, labels, attention_mask


def test_replaced_positions_are_the_masked_ones_whose_sample_differs() -> None:
    original, masked, positions, labels, attention_mask = _batch()
    sampled = labels.clamp(min=0).clone()
    sampled[0, 1] = (sampled[0, 1] + 1) % 99  # differs: replaced
    sampled[1, 0] = (sampled[1, 0] + 7) % 99  # differs: replaced
    # every other real slot samples the original: "original", not replaced
    replaced_input, rtd_labels = replace_tokens(masked, positions, labels, sampled, attention_mask)
    expected = torch.zeros_like(original)
    expected[0, 4] = expected[1, 2] = 1
    expected[2, 8:] = IGNORE_INDEX  # padding
    assert torch.equal(rtd_labels, expected)
    # The discriminator sees the original text with the samples at the masked positions.
    want = original.clone()
    want[0, 4], want[1, 2] = sampled[0, 1], sampled[1, 0]
    assert torch.equal(replaced_input[:, 1:], want[:, 1:])
    assert torch.equal(replaced_input[:, 0], original[:, 0])  # padded slots changed nothing


def test_sampling_follows_the_generator_distribution() -> None:
    torch.manual_seed(0)
    probabilities = torch.tensor([0.7, 0.2, 0.1, 0.0])
    logits = probabilities.clamp(min=1e-12).log().expand(400, 50, 4)  # (B, P, V)
    drawn = sample_tokens(logits)
    counts = torch.bincount(drawn.flatten(), minlength=4).double() / drawn.numel()
    torch.testing.assert_close(counts, probabilities.double(), rtol=0, atol=0.01)
    assert drawn.shape == (400, 50) and drawn.dtype == torch.int64


def test_generator_and_discriminator_share_one_embedding_matrix(config) -> None:
    model = ElectraForPreTraining(config)
    word = model.bert.embeddings.word_embeddings.weight
    vocab_sized = [name for name, p in model.named_parameters() if p.shape == word.shape]
    assert vocab_sized == ["bert.embeddings.word_embeddings.weight"]  # one tensor
    assert not any("embeddings." in name for name, _ in model.generator.named_parameters())
    # The generator's loss alone moves the shared embeddings (it reads and predicts with them).
    original, masked, positions, labels, attention_mask = _batch()
    output = model(masked, attention_mask, None, masked_positions=positions, labels=labels)
    output.mlm_loss.backward()
    assert word.grad is not None and float(word.grad.abs().sum()) > 0
    assert model.bert.embeddings.position_embeddings.weight.grad.abs().sum() > 0
    assert all(p.grad is None for p in model.discriminator_predictions.parameters())


def test_the_weight_and_the_generator_size_come_from_the_config(config) -> None:
    torch.manual_seed(0)
    model = ElectraForPreTraining(config, ElectraConfig(generator_size=0.5, rtd_weight=10.0))
    assert model.generator.config.hidden_size == 16
    assert model.generator.config.num_hidden_layers == config.num_hidden_layers
    assert generator_config(config, 0.25).hidden_size == 8
    original, masked, positions, labels, attention_mask = _batch()
    output = model(masked, attention_mask, None, masked_positions=positions, labels=labels)
    torch.testing.assert_close(output.loss, output.mlm_loss + 10.0 * output.rtd_loss)
    real = output.rtd_labels != IGNORE_INDEX
    expected = torch.nn.functional.binary_cross_entropy_with_logits(
        output.rtd_logits[real], output.rtd_labels[real].float()
    )
    torch.testing.assert_close(output.rtd_loss, expected)
    assert output.mlm_logits.shape == (3, 3, config.vocab_size)
    with pytest.raises(ValueError, match="generator_size must be in"):
        ElectraConfig(generator_size=0.0)


def test_the_saved_discriminator_is_a_bert_and_the_checkpoint_reloads(config, tmp_path) -> None:
    model = ElectraForPreTraining(config, ElectraConfig(rtd_weight=20.0)).eval()
    model.save_discriminator(tmp_path / "final")
    values = json.loads((tmp_path / "final" / "config.json").read_text())
    assert values["architectures"] == ["BertModel"]
    loaded = BertModel.from_pretrained(tmp_path / "final").eval()
    ids = torch.randint(5, 99, (2, 8))
    torch.testing.assert_close(loaded(ids).last_hidden_state, model.bert(ids).last_hidden_state)
    # A training checkpoint holds both models and the objective's settings.
    model.save_pretrained(tmp_path / "checkpoint")
    again = ElectraForPreTraining.from_pretrained(tmp_path / "checkpoint")
    assert again.electra == ElectraConfig(rtd_weight=20.0)
    for (name, mine), (_, theirs) in zip(
        model.state_dict().items(), again.state_dict().items(), strict=True
    ):
        assert torch.equal(mine, theirs), name


def test_fill_mask_names_what_an_electra_runs_models_are(config, tmp_path) -> None:
    model = ElectraForPreTraining(config)
    model.save_discriminator(tmp_path / "final")
    model.save_generator(tmp_path / "generator")
    with pytest.raises(ValueError, match="discriminator that `--objective electra` leaves"):
        load_for_fill_mask(tmp_path / "final")
    with pytest.raises(ValueError, match=r"is an ELECTRA generator \(ElectraForMaskedLM\)"):
        load_for_fill_mask(tmp_path / "generator")


def test_a_run_that_ends_near_chance_is_warned_about() -> None:
    warning = near_chance_warning({"mlm_loss": 6.3, "rtd_auc": 0.503})
    assert warning is not None and "rtd_auc 0.503 < 0.6" in warning
    assert near_chance_warning({"mlm_loss": 6.3, "rtd_auc": NEAR_CHANCE_AUC}) is None
    assert near_chance_warning({"mlm_loss": 6.3, "rtd_auc": 0.9}) is None
    assert near_chance_warning({"mlm_loss": 6.3, "mlm_accuracy": 0.1}) is None  # masked LM
    assert near_chance_warning(None) is None  # no held-out evaluation
