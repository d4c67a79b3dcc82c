import json

import pytest

from bertlab.core.config import PRESETS, PRETRAIN_SCHEDULES, BertConfig, PretrainConfig


@pytest.mark.parametrize(
    "name, layers, hidden, heads",
    [
        ("tiny", 2, 128, 2),
        ("mini", 4, 256, 4),
        ("small", 4, 512, 8),
        ("medium", 8, 512, 8),
        ("base", 12, 768, 12),
        ("large", 24, 1024, 16),
    ],
)
def test_presets_match_google_release_sizes(name, layers, hidden, heads):
    config = BertConfig.from_preset(name)
    assert (config.num_hidden_layers, config.hidden_size, config.num_attention_heads) == (
        layers,
        hidden,
        heads,
    )
    assert config.intermediate_size == 4 * hidden
    assert getattr(BertConfig, name)() == config


def test_preset_fields_can_be_overridden():
    config = BertConfig.mini(vocab_size=8000, hidden_dropout_prob=0.0)
    assert config.vocab_size == 8000 and config.hidden_dropout_prob == 0.0
    assert config.hidden_size == 256


def test_unknown_preset_is_refused():
    with pytest.raises(ValueError, match="unknown model size"):
        BertConfig.from_preset("huge")
    assert set(PRESETS) == {"tiny", "mini", "small", "medium", "base", "large"}


def test_config_json_round_trip(tmp_path, tiny_config):
    path = tmp_path / "config.json"
    tiny_config.to_json_file(path, architectures=["BertForPreTraining"])
    values = json.loads(path.read_text())
    assert values["model_type"] == "bert"
    assert values["architectures"] == ["BertForPreTraining"]
    assert BertConfig.from_json_file(path) == tiny_config


def test_unknown_keys_are_kept_for_round_trips():
    config = BertConfig.from_dict({"hidden_size": 64, "num_attention_heads": 4, "my_key": 3})
    assert config.extra == {"my_key": 3}
    assert config.to_dict()["my_key"] == 3


def test_hf_bookkeeping_keys_are_accepted_and_is_decoder_means_causal():
    values = {"transformers_version": "5.0", "use_cache": True, "is_decoder": True}
    config = BertConfig.from_dict(values)
    assert config.is_causal and config.extra == {}


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"hidden_size": 30, "num_attention_heads": 4}, "not divisible"),
        ({"vocab_size": 0}, "vocab_size must be a positive integer"),
        ({"hidden_dropout_prob": 1.5}, "hidden_dropout_prob"),
        ({"hidden_act": "swish"}, "hidden_act"),
        ({"pad_token_id": 200, "vocab_size": 100}, "pad_token_id"),
    ],
)
def test_invalid_configs_are_refused(changes, message):
    with pytest.raises(ValueError, match=message):
        BertConfig(**changes)


def test_other_model_types_and_position_embeddings_are_refused():
    with pytest.raises(ValueError, match="model_type"):
        BertConfig.from_dict({"model_type": "roberta"})
    with pytest.raises(ValueError, match="absolute"):
        BertConfig.from_dict({"position_embedding_type": "relative_key"})


def test_configs_are_immutable(tiny_config):
    with pytest.raises(AttributeError):
        tiny_config.hidden_size = 64
    assert tiny_config.replace(hidden_size=64, num_attention_heads=4).hidden_size == 64


def test_bad_config_files(tmp_path):
    with pytest.raises(FileNotFoundError):
        BertConfig.from_json_file(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        BertConfig.from_json_file(tmp_path / "bad.json")


def test_causal_option_is_written_as_hf_is_decoder_and_read_back(tiny_config):
    assert tiny_config.to_dict()["is_decoder"] is False
    causal = tiny_config.replace(is_causal=True)
    assert causal.to_dict()["is_decoder"] is True
    assert BertConfig.from_dict(causal.to_dict()) == causal


def test_the_pretraining_schedule_is_one_of_the_table() -> None:
    """An unknown `PretrainConfig.schedule` is refused when the config is built, naming the
    table's schedules, not at the first step."""
    for name in PRETRAIN_SCHEDULES:
        assert PretrainConfig(max_steps=10, schedule=name).schedule == name
    with pytest.raises(ValueError, match="unknown schedule 'cosine'; choose one of linear, one-"):
        PretrainConfig(max_steps=10, schedule="cosine")


def test_the_budget_used_is_of_the_time_or_of_the_steps() -> None:
    assert PretrainConfig(max_steps=10).budget_used(step=4, elapsed=99.0) == 0.4
    assert PretrainConfig(max_time=200.0).budget_used(step=4, elapsed=50.0) == 0.25
