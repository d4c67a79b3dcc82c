"""`bertlab experiment compare`: two transfer experiments in one report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bertlab.apps.experiments.transfer_compare import compare_runs, load_run
from bertlab.cli import main


def _experiment(
    directory: Path, objective: str, scores: dict, train: list[dict], last_eval: dict
) -> Path:
    """A transfer experiment's directory as `run_transfer` leaves it: results.json with the
    general and in-domain arms, and each arm's pre-training log."""
    columns = ["scratch", "general 30min", "general", "in-domain 30min", "in-domain"]
    results = {
        "config": {
            "arms": ["general", "in-domain"],
            "points": columns,
            "point_minutes": None,
            "seeds": [1, 2, 3],
            "pretrain_objective": objective,
        },
        "tasks": {"sst2": {}, "conll2003": {}},
        "metrics": {"sst2": "accuracy", "conll2003": "f1"},
        "scores": scores,
    }
    directory.mkdir(parents=True)
    (directory / "results.json").write_text(json.dumps(results), encoding="utf-8")
    for folder in ("pretrain", "pretrain-in-domain"):
        (directory / folder).mkdir()
        records = [{"kind": "train", **record} for record in train]
        records.append({"kind": "eval", "step": train[-1]["step"], **last_eval})
        lines = "".join(json.dumps(record) + "\n" for record in records)
        (directory / folder / "metrics.jsonl").write_text(lines, encoding="utf-8")
    return directory


def _pair(tmp_path: Path) -> tuple[Path, Path]:
    mlm = _experiment(
        tmp_path / "mlm",
        "mlm",
        {
            "sst2": {"scratch": [0.70, 0.71, 0.72], "general": [0.70, 0.71, 0.72]},
            "conll2003": {"scratch": [0.60, 0.61, 0.62], "general": [0.80, 0.81, 0.82]},
        },
        [
            {"step": 10, "tokens": 4000, "elapsed_seconds": 1.0},
            {"step": 20, "tokens": 8000, "elapsed_seconds": 2.0},
        ],
        {"mlm_accuracy": 0.25},
    )
    electra = _experiment(
        tmp_path / "electra",
        "electra",
        {
            "sst2": {"scratch": [0.70, 0.71, 0.72], "general": [0.75, 0.76, 0.77]},
            "conll2003": {"scratch": [0.60, 0.61, 0.62], "general": [0.70, 0.71, 0.72]},
        },
        [{"step": 30, "tokens": 6000, "elapsed_seconds": 4.0}],
        {"mlm_accuracy": 0.125, "rtd_auc": 0.75},
    )
    return mlm, electra


def test_each_cell_is_judged_against_the_first_runs_same_cell(tmp_path) -> None:
    lines = compare_runs(_pair(tmp_path))
    assert lines[2] == "| task (metric) | model | mlm | electra |"
    table = lines[4 : lines.index("", 4)]
    rows = {tuple(cell.strip() for cell in line.split("|")[1:3]): line for line in table}
    assert rows["sst2 (accuracy)", "general"] == (
        "| sst2 (accuracy) | general | 0.710 (0.700–0.720) | 0.760 (0.750–0.770), win 3–0 |"
    )
    assert rows["conll2003 (f1)", "general"].endswith("| 0.710 (0.700–0.720), loss 0–3 |")
    assert rows["sst2 (accuracy)", "scratch"].endswith("| 0.710 (0.700–0.720), level 0–0 |")
    # A column neither run has scored yet reads "–" in both cells.
    assert rows["sst2 (accuracy)", "in-domain 30min"].endswith("| – | – |")
    assert len(rows) == 2 * 5  # every task x column of the first run


def test_the_tally_counts_each_models_verdicts_over_the_tasks(tmp_path) -> None:
    lines = compare_runs(_pair(tmp_path), labels=["masked LM", "ELECTRA"])
    start = lines.index("| model | ELECTRA against masked LM: won, level, lost |")
    assert lines[start - 2] == (
        "Tasks won, level and lost per model, judged as above against masked LM:"
    )
    rows = lines[start + 2 : lines.index("", start)]
    assert rows == [
        "| scratch | 0, 2, 0 of 2 tasks |",  # both tasks level
        "| general 30min | – |",  # neither run has scored these yet
        "| general | 1, 0, 1 of 2 tasks |",  # SST-2 won, CoNLL-2003 lost
        "| in-domain 30min | – |",
        "| in-domain | – |",
    ]


def test_a_cell_scored_with_other_seeds_is_shown_but_not_judged(tmp_path) -> None:
    mlm, electra = _pair(tmp_path)
    results = json.loads((electra / "results.json").read_text())
    results["scores"]["sst2"]["general"] = [0.75, 0.76]  # an interrupted run: 2 seeds of 3
    (electra / "results.json").write_text(json.dumps(results))
    lines = compare_runs([mlm, electra])
    assert "| sst2 (accuracy) | general | 0.710 (0.700–0.720) | 0.755 (0.750–0.760) |" in lines
    assert "| general | 0, 0, 1 of 1 tasks |" in lines  # CoNLL-2003 alone


def test_the_pretraining_table_gives_tokens_per_second_and_the_last_eval(tmp_path) -> None:
    lines = compare_runs(_pair(tmp_path), labels=["masked LM", "ELECTRA"])
    start = lines.index("| run | arm | objective | steps | tokens | minutes | tokens/s | "
                        "MLM accuracy | replaced-token AUC |")  # fmt: skip
    rows = lines[start + 2 :]
    assert rows == [
        "| masked LM | general | mlm | 20 | 8,000 | 0.0 | 4,000 | 0.250 | – |",
        "| masked LM | in-domain | mlm | 20 | 8,000 | 0.0 | 4,000 | 0.250 | – |",
        "| ELECTRA | general | electra | 30 | 6,000 | 0.1 | 1,500 | 0.125 | 0.750 |",
        "| ELECTRA | in-domain | electra | 30 | 6,000 | 0.1 | 1,500 | 0.125 | 0.750 |",
    ]
    assert load_run(tmp_path / "mlm")["pretraining"]["general"]["tokens_per_second"] == 4000


def test_the_command_prints_and_writes_the_report(tmp_path, capsys) -> None:
    mlm, electra = _pair(tmp_path)
    report = tmp_path / "report" / "compare.md"
    report.parent.mkdir()
    assert main(["experiment", "compare", str(mlm), str(electra), "--out", str(report)]) == 0
    printed = capsys.readouterr().out
    assert printed == report.read_text(encoding="utf-8")
    assert printed.splitlines() == compare_runs([mlm, electra])


@pytest.mark.parametrize(
    ("runs", "extra", "message"),
    [
        (["mlm"], [], "at least two experiment directories"),
        (["mlm", "missing"], [], "results.json not found"),
        (["mlm", "mlm"], [], "the runs' labels repeat (mlm, mlm)"),
        (["mlm", "electra"], ["--labels", "a"], "1 labels for 2 experiments"),
        (["mlm", "other-tasks"], [], "the experiments scored different tasks"),
    ],
)
def test_bad_input_ends_in_one_line(tmp_path, capsys, runs, extra, message) -> None:
    _pair(tmp_path)
    other = json.loads((tmp_path / "mlm" / "results.json").read_text())
    other["metrics"] = {"sst2": "accuracy"}
    (tmp_path / "other-tasks").mkdir()
    (tmp_path / "other-tasks" / "results.json").write_text(json.dumps(other))
    argv = ["experiment", "compare", *(str(tmp_path / run) for run in runs), *extra]
    assert main(argv) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and message in err[0]
