"""The experiments' settings come from their config dataclasses (`flows.config_settings`): an OUT
written before that still continues with the same settings, a new field is a setting without
more code, and a changed or missing one is refused in one line that names it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from bertlab.apps.experiments.ablation_config import AblationConfig
from bertlab.apps.experiments.strategies import strategies_settings
from bertlab.apps.experiments.strategies_config import StrategiesConfig
from bertlab.apps.experiments.transfer_config import TransferConfig, experiment_settings
from bertlab.apps.flows import SETTINGS_FILE, check_settings, config_settings
from bertlab.training.pretraining import run as run_module
from bertlab.training.pretraining.budget import budget_recipe

ENWIKI = ("corpus_en/enwiki_sample_2014.txt.gz", "corpus_en/enwiki_sample_2021.txt.gz")


def _recipe(minutes: float) -> dict:
    return {
        f"recipe.{name}": value for name, value in budget_recipe(minutes * 60).to_json().items()
    }


def _continues(out: Path, written: dict, settings: dict) -> None:
    """OUT/settings.json as an earlier version wrote it; the same settings now continue it."""
    out.mkdir(parents=True, exist_ok=True)
    (out / SETTINGS_FILE).write_text(json.dumps(written), encoding="utf-8")
    check_settings(out, settings)


def test_a_transfer_experiment_written_before_continues(tmp_path) -> None:
    data, out = tmp_path / "data", tmp_path / "out"
    recipe = budget_recipe(3600)
    plain = {  # what the hand-written settings of the first version recorded
        "lang": "en",
        "budget_minutes": 60.0,
        "corpus": [str(data / name) for name in ENWIKI],
        "model_size": recipe.model_size,
        "pretrain_learning_rate": recipe.learning_rate,
        "tokenizer": None,
        **_recipe(60),
        "finetune_learning_rate": 5e-4,
        "finetune_batch_size": 32,
        "finetune_dropout": 0.1,
    }
    assert experiment_settings(TransferConfig(data, out)) == plain
    # The grid's axes are no settings: a later run may add tasks, points, seeds and arms.
    _continues(out, plain, experiment_settings(TransferConfig(data, out, seeds=(1, 2, 3, 4))))
    config = TransferConfig(
        data,
        out,
        tasks=("sst2", "stsb"),
        tokenizer=Path("vocab.txt"),
        task_text_repeats=2,
        pretrain_objective="mlm+nsp",
        pretrain_mlm_probability=0.3,
        arms=("general", "in-domain", "continued"),
        continue_minutes=20.0,
    )
    full = plain | {
        "corpus": [str(out / "task_text.txt"), *plain["corpus"]],
        "tokenizer": str(Path("vocab.txt").resolve()),
        "task_text_repeats": 2,
        "task_text_tasks": ["sst2", "stsb"],
        "pretrain_objective": "mlm+nsp",
        "pretrain_mlm_probability": 0.3,
        "in_domain_corpus": [str(data / "corpus_reviews_en/imdb_reviews.txt.gz")],
        "continue_minutes": 20.0,
    }
    assert experiment_settings(config) == full
    _continues(tmp_path / "full", full, experiment_settings(config))


def test_an_ablation_written_before_continues(tmp_path) -> None:
    data, out = tmp_path / "data", tmp_path / "out"
    sizes = {"sst2": 8000, "mrpc": None, "conll2003": 5000, "squad": 2000}
    metrics = {"sst2": "accuracy", "mrpc": "accuracy", "conll2003": "f1", "squad": "f1"}
    epochs = {"sst2": 1, "mrpc": 3, "conll2003": 3, "squad": 2}
    lengths = {"sst2": 64, "mrpc": 128, "conll2003": 128, "squad": 256}
    tasks = {
        name: {
            "name": name,
            "task": name,
            "metric": metrics[name],
            "epochs": epochs[name],
            "max_seq_length": lengths[name],
            "max_train_examples": sizes[name],
            "max_dev_examples": 300 if name == "squad" else None,
            "max_test_examples": 1000 if name == "squad" else None,
        }
        for name in sizes
    }
    written = {  # what AblationConfig.settings wrote by hand before
        "budget_minutes": 10.0,
        "corpus": [str(data / name) for name in ENWIKI],
        "model_size": budget_recipe(600).model_size,
        "tokenizer": None,
        **_recipe(10),
        "finetune_learning_rate": 5e-4,
        "feature_learning_rate": 1e-3,
        "finetune_batch_size": 32,
        "word_vector_tokens": 10_000_000,
        "tasks": tasks,
        "max_examples": None,
    }
    assert AblationConfig(data, out).settings() == written
    # Tasks, rows, seeds and sizes may be added to a run.
    fewer = AblationConfig(data, out, tasks=("mrpc",), rows=("mlm",), feature_based=False)
    _continues(out, written, fewer.settings())
    # `uncapped` is recorded as the sizes it gives: a capped run is refused, naming them.
    with pytest.raises(ValueError, match="tasks .*there, .* now") as caught:
        check_settings(out, AblationConfig(data, out, uncapped=True).settings())
    assert len(str(caught.value).splitlines()) == 1


def test_a_strategies_comparison_written_before_continues(tmp_path) -> None:
    data, out, model = tmp_path / "data", tmp_path / "out", tmp_path / "model"
    rows = ("sst2-500", "sst2-1k", "mrpc-1k", "rte-1k", "conll2003-1k")
    written = {  # what StrategiesConfig.settings wrote by hand before
        "finetune_learning_rate": 5e-4,
        "finetune_batch_size": 32,
        "strategies": {
            "bert": {},
            "layerwise": {"layerwise_lr_decay": 0.8},
            "ulmfit": {
                "layerwise_lr_decay": 1 / 2.6,
                "schedule": "slanted-triangular",
                "do_gradual_unfreezing": True,
            },
            "keras": {"head_warmup_epochs": 2},
            "frozen": {"do_freeze_encoder": True},
        },
        "models": {row: str(model) for row in rows},
    }
    config = StrategiesConfig(data, out, model, tasks=("rte-1k",), strategies=("bert",))
    assert strategies_settings(config) == written
    _continues(out, written, strategies_settings(config))


@dataclass(frozen=True)
class _Config:
    out: Path
    rate: float = 0.1
    added: int = 3  # a field a later version added
    path: Path | None = None


def test_a_new_field_is_a_setting_and_an_older_run_without_it_is_refused_in_one_line(
    tmp_path,
) -> None:
    config = _Config(tmp_path, path=Path("relative"))
    settings = config_settings(config, ("out",), {"constant": 32})
    assert settings == {
        "rate": 0.1,
        "added": 3,
        "path": str(Path("relative").resolve()),
        "constant": 32,
    }
    older = {key: value for key, value in settings.items() if key != "added"}
    tmp_path.joinpath(SETTINGS_FILE).write_text(json.dumps(older), encoding="utf-8")
    with pytest.raises(ValueError, match="added absent there, 3 now") as caught:
        check_settings(tmp_path, settings)
    assert len(str(caught.value).splitlines()) == 1
    # ... unless the new field is recorded only when set, as older runs had it.
    assert "added" not in config_settings(
        _Config(tmp_path, added=None), ("out",), {}, recorded_when_set=("added",)
    )


def test_a_transfer_config_resolves_its_pretraining_once(tmp_path, monkeypatch) -> None:
    """The objective, masking rate and shape a transfer experiment reads (its task text, scratch
    column, settings and results) come from one resolved run, not one run resolved per question."""
    config = TransferConfig(tmp_path / "data", tmp_path / "out")
    resolved = []
    resolve = run_module.resolve
    monkeypatch.setattr(
        run_module, "resolve", lambda run, plan=None: resolved.append(run) or resolve(run, plan)
    )
    settings = experiment_settings(config)
    recipe = budget_recipe(3600)
    assert settings["model_size"] == config.resolved.shape == recipe.model_size
    assert config.resolved.data.objective == recipe.objective
    assert config.resolved.data.mlm_probability == recipe.mlm_probability
    assert len(resolved) == 1
