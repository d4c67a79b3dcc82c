"""`bertlab experiment ablation`: its settings are checked before anything runs, and its report
(BERT's Tables 5, 6 and 7 in the paper's layout) is drawn from results.json alone."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from bertlab.apps.experiments.ablation_config import (
    FEATURE_LABELS,
    FEATURE_ROWS,
    ROW_LABELS,
    AblationConfig,
)
from bertlab.apps.experiments.ablation_options import ROWS, TASKS
from bertlab.apps.experiments.ablation_report import judge, results_tables, write_results


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"budget_minutes": 0}, "the budget must be positive"),
        ({"budget_minutes": float("inf")}, "the budget must be at most a year"),
        ({"seeds": (1, 1)}, "seeds must be distinct"),
        ({"tasks": ("sst2", "qnli")}, r"unknown task\(s\) \['qnli'\]"),
        ({"rows": ("mlm", "gpt")}, "rows must be distinct names"),
        ({"model_size": "huge"}, "unknown model size 'huge'"),
        ({"model_sizes": ("tiny",)}, "other than the main shape tiny"),
        ({"tasks": ("sst2",)}, "the feature-based block runs on conll2003"),
        ({"max_examples": 1}, "max_examples must be at least 2"),
    ],
)
def test_bad_settings_are_refused(tmp_path, settings, message):
    with pytest.raises(ValueError, match=message):
        AblationConfig(data_dir=tmp_path, out=tmp_path / "out", **settings)


def test_the_rows_decide_which_objectives_pre_train(tmp_path):
    config = AblationConfig(data_dir=tmp_path, out=tmp_path / "out")
    assert config.objectives() == ["mlm+nsp", "mlm", "clm"]
    assert config.shape() == "tiny"  # the budget recipe's below 30 minutes
    only_ltr = AblationConfig(
        data_dir=tmp_path, out=tmp_path, rows=("ltr+bilstm",), feature_based=False
    )
    assert only_ltr.objectives() == ["clm"]
    runs = {
        objective: config.pretrain_run(objective, None, False) for objective in config.objectives()
    }
    assert {run.resolved.data.objective for run in runs.values()} == {"mlm+nsp", "mlm", "clm"}
    assert len({(run.budget, run.tokenizer, run.corpus_cache) for run in runs.values()}) == 1
    sizes = {task.name: task.max_train_examples for task in config.selected_tasks()}
    assert sizes == {"sst2": 8000, "mrpc": None, "conll2003": 5000, "squad": 2000}
    uncapped = AblationConfig(data_dir=tmp_path, out=tmp_path, uncapped=True)
    sizes = {task.name: task.max_train_examples for task in uncapped.selected_tasks()}
    assert sizes == {"sst2": None, "mrpc": None, "conll2003": None, "squad": 3000}
    assert uncapped.settings()["tasks"]["conll2003"]["max_train_examples"] is None
    assert config.settings()["tasks"]["conll2003"]["max_train_examples"] == 5000
    capped = AblationConfig(data_dir=tmp_path, out=tmp_path, max_examples=50)
    assert all(task.max_train_examples == 50 for task in capped.selected_tasks())
    assert all(task.max_test_examples == 50 for task in capped.selected_tasks())


def _results(with_sizes: bool) -> dict:
    seeds = [1, 2, 3]

    def runs(task: str, base: float) -> list[dict]:
        metric = next(t.metric for t in TASKS if t.name == task)
        scale = 100.0 if task == "squad" else 1.0  # SQuAD's EM and F1 are percentages already
        return [{"f1": scale * base, metric: scale * (base + 0.01 * seed)} for seed in seeds]

    scores = {task.name: {} for task in TASKS}
    for index, row in enumerate(ROWS):
        for task in TASKS:
            scores[task.name][row] = runs(task.name, 0.8 - 0.05 * index)
    for layers in FEATURE_ROWS:
        scores["conll2003"][f"features-{layers}"] = runs("conll2003", 0.7)
    pretraining = {
        "mlm-nsp": {
            "objective": "mlm+nsp",
            "steps": 10,
            "tokens": 2e6,
            "perplexity": 400.0,
            "last_eval": {"mlm_loss": 6.0, "mlm_accuracy": 0.14},
        },
        "ltr": {
            "objective": "clm",
            "steps": 10,
            "tokens": 3e6,
            "perplexity": 90.0,
            "last_eval": {"lm_loss": 4.5, "lm_accuracy": 0.2},
        },
    }
    shapes = {
        name: {"size": "tiny", "layers": 2, "hidden": 128, "heads": 2} for name in pretraining
    }
    sizes = []
    if with_sizes:
        sizes = ["mini"]
        pretraining["mlm-nsp-mini"] = pretraining["mlm-nsp"]
        shapes["mlm-nsp-mini"] = {"size": "mini", "layers": 4, "hidden": 256, "heads": 4}
        for task in TASKS:
            scores[task.name]["mlm+nsp@mini"] = runs(task.name, 0.85)
    return {
        "config": {
            "budget_minutes": 10.0,
            "seeds": seeds,
            "rows": list(ROWS),
            "row_labels": ROW_LABELS,
            "feature_rows": list(FEATURE_ROWS),
            "feature_labels": FEATURE_LABELS,
            "feature_task": "conll2003",
            "model_sizes": sizes,
            "finetune_batch_size": 32,
            "finetune_learning_rate": 5e-4,
            "feature_learning_rate": 1e-3,
        },
        "tasks": {task.name: dataclasses.asdict(task) for task in TASKS},
        "pretraining": pretraining,
        "shapes": shapes,
        "scores": scores,
    }


def test_the_report_has_the_papers_tables_and_its_figures(tmp_path: Path):
    results = _results(with_sizes=True)
    write_results(tmp_path, results)
    table = (tmp_path / "table.md").read_text(encoding="utf-8")
    assert "| | SST-2 (Acc) | MRPC (Acc) | CoNLL-2003 (F1) | SQuAD (F1) |" in table
    assert "| BERT (MLM + NSP) | 82.0 (81.0–83.0) [92.7] |" in table
    bert_row = next(line for line in table.splitlines() if line.startswith("| BERT (MLM + NSP) |"))
    assert bert_row.endswith("| 82.0 (81.0–83.0) [88.5] |")  # SQuAD F1 in %, not 8200
    assert "| LTR & No NSP |" in table and "[77.8]" in table  # Table 5's SQuAD figure
    assert "| Feature-based: Concat Last Four Hidden | 72.0 (71.0–73.0) |" in table
    assert "**Table 6: model size**" in table and "| 4 | 256 | 4 |" in table
    assert "| BERT (MLM + NSP) vs No NSP (MLM only) | sst2 | ahead (+5.0 vs spread 2.0" in table
    assert "SST-2 1 epoch on 8,000 training examples; MRPC 3 epochs on the whole training" in table
    assert "learning rate 0.0005 (0.001 for the feature-based rows)" in table
    assert (tmp_path / "ablation.png").read_bytes()[:4] == b"\x89PNG"
    assert (tmp_path / "results.json").is_file()
    partial = _results(with_sizes=False)
    del partial["scores"]["squad"]
    lines = results_tables(partial)
    assert any(line.startswith("| BERT (MLM + NSP) |") and "| – [88.5] |" in line for line in lines)
    assert not any("Table 6" in line for line in lines)


def test_the_verdict_needs_more_than_the_seed_spread():
    assert judge([80.0, 81.0, 82.0], [70.0, 71.0, 72.0]).startswith("ahead (+10.0 vs spread 2.0")
    assert judge([70.0, 71.0, 72.0], [80.0, 81.0, 82.0]).startswith("behind (-10.0")
    assert judge([80.0, 81.0, 90.0], [79.0, 80.0, 81.0]).startswith("level (+1.0 vs spread 10.0")
    assert judge(None, [1.0]) == "–"


def test_a_row_still_running_its_seeds_is_judged_without_pairing_them():
    # results.json is written after each seed: one row may have fewer seeds than the other
    assert judge([80.0], [70.0, 71.0, 72.0]) == "ahead (+9.0 vs spread 2.0)"


@pytest.mark.parametrize(("flags", "uncapped"), [([], False), (["--uncapped"], True)])
def test_the_command_passes_uncapped_to_the_experiment(tmp_path, monkeypatch, flags, uncapped):
    import bertlab.apps.experiments.ablation as ablation
    from bertlab.cli import main

    seen = []
    monkeypatch.setattr(ablation, "run_ablation", lambda config, **_: seen.append(config))
    argv = ["experiment", "ablation", "--data", str(tmp_path), "--out", str(tmp_path / "out")]
    assert main([*argv, *flags]) == 0
    assert seen[0].uncapped is uncapped
