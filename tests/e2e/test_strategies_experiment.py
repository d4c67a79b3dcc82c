"""`bertlab experiment strategies`: its settings, its report, and a tiny run end to end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bertlab.apps.experiments.strategies_config import STRATEGIES, STRATEGY_ROWS, StrategiesConfig
from bertlab.apps.experiments.strategies_report import model_name, results_table
from bertlab.apps.experiments.transfer_data import task_splits
from bertlab.apps.experiments.transfer_rows import ROWS
from bertlab.apps.flows import TEST_FILE, random_twin, win_loss_level
from bertlab.cli import main
from bertlab.core.config import BertConfig
from bertlab.tokenizer.wordpiece import Tokenizer

DEMO_DATA = Path(__file__).resolve().parents[2] / "bertlab" / "demo_data"


pytestmark = pytest.mark.usefixtures("one_thread")


def _data_dir(directory: Path, lines: int) -> Path:
    """The shared data layout with the demo's first SST-2 lines as glue/SST-2/train.tsv."""
    (directory / "glue" / "SST-2").mkdir(parents=True)
    sst2 = (DEMO_DATA / "sst2_train.tsv").read_text(encoding="utf-8").splitlines(keepends=True)
    (directory / "glue" / "SST-2" / "train.tsv").write_text("".join(sst2[: lines + 1]))
    return directory


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"tasks": ("sst2-2k",)}, r"unknown row\(s\) \['sst2-2k'\]"),
        ({"row_models": {"qqp": Path("m")}}, r"unknown row\(s\) \['qqp'\]"),
        ({"strategies": ("ulmfit", "keras")}, "strategies need 'bert'"),
        ({"strategies": ("bert", "bert")}, "strategies must be distinct names"),
        ({"strategies": ("bert", "adapters")}, "strategies must be distinct names"),
        ({"seeds": (1, 1)}, "seeds must be distinct"),
        ({"learning_rate": 0.0}, "the learning rate must be positive"),
    ],
)
def test_bad_settings_are_refused(tmp_path, settings, message):
    with pytest.raises(ValueError, match=message):
        StrategiesConfig(tmp_path, tmp_path / "out", tmp_path / "model", **settings)


def test_rows_carve_the_transfer_splits_and_keep_their_test_part(tmp_path):
    data = _data_dir(tmp_path / "data", 1200)
    transfer_row = next(row for row in ROWS["en"] if row.name == "sst2-1k")
    _, transfer_data, transfer_test = task_splits(data, transfer_row)
    for row in STRATEGY_ROWS[:2]:
        _, split, test = task_splits(data, row)
        assert test == transfer_test and split.dev == transfer_data.dev
        assert len(split.train) == min(row.max_train_examples, len(transfer_data.train))
    assert [row.name for row in STRATEGY_ROWS] == [
        "sst2-500", "sst2-1k", "mrpc-1k", "rte-1k", "conll2003-1k",
    ]  # fmt: skip
    assert {row.num_epochs for row in STRATEGY_ROWS} == {10}


def test_the_report_judges_each_strategy_against_bert_default():
    results = {
        "config": {"seeds": [1, 2, 3], "strategies": ["bert", "ulmfit", "frozen"]},
        "strategies": {name: STRATEGIES[name].to_json() for name in ("bert", "ulmfit", "frozen")},
        "tasks": {"sst2-1k": {"model": "runs/domain-en/pretrain-in-domain/final"}},
        "metrics": {"sst2-1k": "accuracy"},
        "scores": {
            "sst2-1k": {
                "bert": [0.70, 0.71, 0.72],
                "ulmfit": [0.74, 0.75, 0.76],
                "frozen": [0.60, 0.61, 0.73],
            }
        },
    }
    results["config"]["baseline"] = "bert"
    table = results_table(results)
    assert table[2] == "| task (metric) | model | BERT default | ULMFiT | frozen encoder |"
    row = table[4]
    assert row.startswith("| sst2-1k (accuracy) | pretrain-in-domain | 0.710 (0.700–0.720) |")
    assert "0.750 (0.740–0.760), win 3–0" in row and "0.610 (0.600–0.730), level 1–2" in row
    assert table[-1] == (
        "| sst2-1k (accuracy) | +0.0400 vs 0.0200, 3–0, p 0.25 | -0.1000 vs 0.1300, 1–2, p 1.00 |"
    )
    assert win_loss_level([0.70, 0.71, 0.72], [0.60, 0.61, 0.62]) == "loss 0–3"
    assert model_name("runs/a/final") == "a" and model_name("bert-base-uncased") == (
        "bert-base-uncased"
    )


@pytest.mark.slow
def test_strategies_fine_tune_each_row_and_continue(tmp_path, capsys, task_vocab):
    data = _data_dir(tmp_path / "data", 150)
    config = BertConfig.from_preset(
        "tiny", vocab_size=Tokenizer.from_pretrained(task_vocab).vocab_size
    )
    model = random_twin(config, Tokenizer.from_pretrained(task_vocab), 0, "normal", tmp_path / "m")
    out = tmp_path / "experiment"
    argv = [
        "experiment", "strategies", "--data", data, "--out", out, "--model", model,
        "--tasks", "sst2-500", "--seeds", "1,2", "--no-progress",
    ]  # fmt: skip
    assert main([str(arg) for arg in argv]) == 0
    results = json.loads((out / "results.json").read_text())
    assert results["tasks"]["sst2-500"]["model"] == str(model)
    scores = results["scores"]["sst2-500"]
    assert set(scores) == set(STRATEGIES) and all(len(v) == 2 for v in scores.values())
    for name, strategy in STRATEGIES.items():
        run = out / "finetune" / "sst2-500" / name / "seed-2"
        assert json.loads((run / TEST_FILE).read_text())["accuracy"] == scores[name][1]
        recorded = json.loads((run / "result.json").read_text())["strategy"]
        for field_name, value in strategy.fields.items():
            key = field_name.removeprefix("do_")
            assert recorded[key] == value, (name, field_name)
    assert (out / "table.md").read_text().splitlines() == results_table(results)
    # Again: every run is found done; another rate is refused in one line.
    stamps = {path: path.stat().st_mtime_ns for path in out.rglob(TEST_FILE)}
    assert main([str(arg) for arg in argv]) == 0
    assert {path: path.stat().st_mtime_ns for path in out.rglob(TEST_FILE)} == stamps
    capsys.readouterr()
    assert main([str(arg) for arg in [*argv, "--learning-rate", "1e-3"]]) == 1
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and "finetune_learning_rate 0.0005 there, 0.001 now" in error[0]
