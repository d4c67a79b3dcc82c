import json
import logging

import pytest
import torch
from safetensors.torch import load_file

from bertlab.network.bert import BertForPreTraining, BertModel
from bertlab.network.checkpoint import load_into, normalize_keys
from bertlab.training.pretraining.checkpointing import STATE_FILE, load_state


@pytest.fixture
def pretrained(tiny_config):
    torch.manual_seed(0)
    model = BertForPreTraining(tiny_config).eval()
    with torch.no_grad():
        model.cls.predictions.bias.normal_()
    return model


def outputs(model, batch):
    with torch.no_grad():
        result = model(**batch)
    return result.mlm_logits, result.nsp_logits


def test_save_and_load_give_identical_outputs(tmp_path, pretrained, batch):
    pretrained.save_pretrained(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.json", "model.safetensors"]
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["model_type"] == "bert" and config["architectures"] == ["BertForPreTraining"]
    stored = load_file(tmp_path / "model.safetensors")
    assert "cls.predictions.decoder.weight" not in stored  # tied weights are stored once
    loaded = BertForPreTraining.from_pretrained(tmp_path).eval()
    for mine, theirs in zip(outputs(loaded, batch), outputs(pretrained, batch), strict=True):
        assert torch.equal(mine, theirs)
    assert loaded.cls.predictions.decoder.weight is loaded.bert.embeddings.word_embeddings.weight


def test_pytorch_bin_with_legacy_names_and_no_prefix_loads(tmp_path, pretrained, batch):
    """Old checkpoints: pytorch_model.bin, LayerNorm.gamma/beta, decoder weight stored twice."""
    legacy = {}
    for key, value in pretrained.state_dict().items():
        key = key.replace("LayerNorm.weight", "LayerNorm.gamma").replace(
            "LayerNorm.bias", "LayerNorm.beta"
        )
        legacy[key] = value.clone()
    legacy["bert.embeddings.position_ids"] = torch.arange(64)[None]
    torch.save(legacy, tmp_path / "pytorch_model.bin")
    pretrained.config.to_json_file(tmp_path / "config.json")
    loaded = BertForPreTraining.from_pretrained(tmp_path).eval()
    for mine, theirs in zip(outputs(loaded, batch), outputs(pretrained, batch), strict=True):
        assert torch.equal(mine, theirs)


def test_body_only_checkpoint_loads_into_pretraining_model_and_says_so(
    tmp_path, pretrained, batch, caplog
):
    pretrained.bert.save_pretrained(tmp_path)  # keys without the bert. prefix, no heads
    with caplog.at_level(logging.WARNING, logger="bertlab.network.checkpoint"):
        loaded = BertForPreTraining.from_pretrained(tmp_path).eval()
    assert "newly initialized" in caplog.text and "cls.seq_relationship.weight" in caplog.text
    with torch.no_grad():
        mine = loaded.bert(**batch).last_hidden_state
        theirs = pretrained.bert(**batch).last_hidden_state
    assert torch.equal(mine, theirs)


def test_pretraining_checkpoint_loads_into_bare_model(tmp_path, pretrained, batch):
    pretrained.save_pretrained(tmp_path)
    loaded = BertModel.from_pretrained(tmp_path).eval()
    with torch.no_grad():
        assert torch.equal(loaded(**batch).pooler_output, pretrained.bert(**batch).pooler_output)


def test_normalize_keys_adds_or_strips_the_prefix():
    body = {"embeddings.LayerNorm.gamma": 1, "encoder.layer.0.x": 2, "cls.y": 3}
    assert normalize_keys(body, "bert.") == {
        "bert.embeddings.LayerNorm.weight": 1,
        "bert.encoder.layer.0.x": 2,
        "cls.y": 3,
    }
    full = {"bert.pooler.dense.weight": 1, "cls.predictions.decoder.weight": 2}
    assert normalize_keys(full, "") == {"pooler.dense.weight": 1}


def test_vocabulary_mismatch_is_refused_with_a_clear_message(tmp_path, pretrained):
    pretrained.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    config["vocab_size"] = 120
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="vocabulary size mismatch.*99 tokens.*120"):
        BertForPreTraining.from_pretrained(tmp_path)


def test_shape_mismatch_is_refused(tiny_config, pretrained):
    other = BertForPreTraining(tiny_config.replace(intermediate_size=40))
    with pytest.raises(ValueError, match="shape mismatch.*intermediate.dense.weight"):
        load_into(other, pretrained.state_dict(), "bert.", source="test")


def test_foreign_checkpoint_is_refused(tiny_config):
    with pytest.raises(ValueError, match="no weights of this model"):
        load_into(BertModel(tiny_config), {"transformer.h.0.w": torch.zeros(1)}, "", source="gpt")


def test_missing_directory_config_and_weights(tmp_path, pretrained):
    with pytest.raises(FileNotFoundError, match="model directory not found"):
        BertForPreTraining.from_pretrained(tmp_path / "nope")
    with pytest.raises(FileNotFoundError, match="no config.json"):
        BertForPreTraining.from_pretrained(tmp_path)
    pretrained.config.to_json_file(tmp_path / "config.json")
    with pytest.raises(FileNotFoundError, match="no model.safetensors"):
        BertForPreTraining.from_pretrained(tmp_path)


@pytest.mark.parametrize("weights_name", ["model.safetensors", "pytorch_model.bin"])
def test_corrupt_weights_file_is_refused(tmp_path, pretrained, weights_name):
    pretrained.save_pretrained(tmp_path)
    if weights_name == "pytorch_model.bin":
        (tmp_path / "model.safetensors").unlink()
        torch.save(pretrained.state_dict(), tmp_path / weights_name)
    data = (tmp_path / weights_name).read_bytes()
    (tmp_path / weights_name).write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match="corrupt"):
        BertForPreTraining.from_pretrained(tmp_path)


def test_corrupt_config_is_refused(tmp_path, pretrained):
    pretrained.save_pretrained(tmp_path)
    (tmp_path / "config.json").write_text("{oops")
    with pytest.raises(ValueError, match="not valid JSON"):
        BertForPreTraining.from_pretrained(tmp_path)


def test_failed_save_keeps_the_previous_checkpoint(tmp_path, pretrained, monkeypatch):
    pretrained.save_pretrained(tmp_path)
    before = (tmp_path / "model.safetensors").read_bytes()

    def broken_save(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr("bertlab.network.checkpoint.save_file", broken_save)
    with pytest.raises(OSError, match="disk full"):
        pretrained.save_pretrained(tmp_path)
    assert (tmp_path / "model.safetensors").read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.json", "model.safetensors"]


class _RunsCode:
    """Unpickling this would call `print` (any callable could be there)."""

    def __reduce__(self):
        return (print, ("unpickled: this could have been any code",))


@pytest.mark.parametrize("where", ["model", "checkpoint state"])
def test_a_pickle_with_code_is_refused_without_torchs_advice_to_allow_it(
    tmp_path, pretrained, where, capsys
):
    """torch's weights-only refusal advises `weights_only=False`; bertlab's says why it refuses."""
    if where == "model":
        pretrained.save_pretrained(tmp_path)
        (tmp_path / "model.safetensors").unlink()
        torch.save({"weight": _RunsCode()}, tmp_path / "pytorch_model.bin")
        with pytest.raises(ValueError) as caught:
            BertForPreTraining.from_pretrained(tmp_path)
    else:
        torch.save({"rng": _RunsCode()}, tmp_path / STATE_FILE)
        with pytest.raises(ValueError) as caught:
            load_state(tmp_path)
    message = str(caught.value)
    assert "holds Python objects besides tensors" in message and "could run code" in message
    assert "weights_only" not in message and "\n" not in message
    assert "unpickled" not in capsys.readouterr().out
