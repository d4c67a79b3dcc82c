"""The experiment grid (`apps.experiments.grid`): the cells' order, the results written after
each cell, and resuming from a results file, the experiments' own included."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bertlab.apps.experiments.grid import (
    COLUMN_TASK_SEED,
    TASK_SEED_COLUMN,
    Cell,
    Column,
    GridTask,
    Scores,
    check_inputs,
    grid_cells,
    run_grid,
)
from bertlab.data.tasks.registry import DEFAULT_EPOCHS

COLUMNS = [Column("scratch"), Column("pretrained"), Column("features", tasks=("ner",))]
TASKS = ["sst2", "ner"]
SEEDS = [1, 2]


def _named(cells: list[Cell]) -> list[tuple[str, str, int]]:
    return [(cell.column.name, cell.task, cell.seed) for cell in cells]


def _score(cell: Cell) -> int:
    """A value that names its cell: its column's index, its task's, its seed (`111`: the second
    column, the second task, seed 1)."""
    names = [column.name for column in COLUMNS]
    return 100 * names.index(cell.column.name) + 10 * TASKS.index(cell.task) + cell.seed


def _run(path: Path, run_cell=_score, seeds=SEEDS, **options) -> tuple[dict, list[Cell]]:
    ran = []

    def recorded_run(cell: Cell) -> Any:
        ran.append(cell)
        return run_cell(cell)

    def results(scores: Scores) -> dict[str, Any]:
        return {"config": {"seeds": list(seeds)}, "scores": scores}

    written = run_grid(COLUMNS, TASKS, seeds, recorded_run, path, results, **options)
    return written, ran


def test_cells_run_column_by_column_or_seed_by_seed_and_a_column_only_on_its_tasks():
    assert _named(grid_cells(COLUMNS, TASKS, SEEDS, COLUMN_TASK_SEED)) == [
        ("scratch", "sst2", 1), ("scratch", "sst2", 2), ("scratch", "ner", 1),
        ("scratch", "ner", 2), ("pretrained", "sst2", 1), ("pretrained", "sst2", 2),
        ("pretrained", "ner", 1), ("pretrained", "ner", 2), ("features", "ner", 1),
        ("features", "ner", 2),
    ]  # fmt: skip
    assert _named(grid_cells(COLUMNS, TASKS, SEEDS, TASK_SEED_COLUMN)) == [
        ("scratch", "sst2", 1), ("pretrained", "sst2", 1), ("scratch", "sst2", 2),
        ("pretrained", "sst2", 2), ("scratch", "ner", 1), ("pretrained", "ner", 1),
        ("features", "ner", 1), ("scratch", "ner", 2), ("pretrained", "ner", 2),
        ("features", "ner", 2),
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("columns", "seeds", "order", "message"),
    [
        (COLUMNS, SEEDS, ("column", "seed"), "order must name each"),
        (COLUMNS, SEEDS, ("column", "column", "seed"), "order must name each"),
        ([Column("a"), Column("a")], SEEDS, COLUMN_TASK_SEED, "each column must be named once"),
        (COLUMNS, [1, 1], COLUMN_TASK_SEED, "each seed must be named once"),
    ],
)
def test_a_bad_grid_is_refused(columns, seeds, order, message):
    with pytest.raises(ValueError, match=message):
        grid_cells(columns, TASKS, seeds, order)


def test_every_cell_runs_once_in_order_and_the_scores_follow_the_seeds(tmp_path):
    path = tmp_path / "results.json"
    written, ran = _run(path)
    assert _named(ran) == _named(grid_cells(COLUMNS, TASKS, SEEDS))
    assert written["scores"] == {
        "sst2": {"scratch": [1, 2], "pretrained": [101, 102]},
        "ner": {"scratch": [11, 12], "pretrained": [111, 112], "features": [211, 212]},
    }
    assert json.loads(path.read_text()) == written


def test_the_results_are_written_after_each_cell(tmp_path):
    path = tmp_path / "results.json"
    on_disk = []

    def run_cell(cell: Cell) -> int:
        on_disk.append(json.loads(path.read_text()) if path.is_file() else None)
        return _score(cell)

    _run(path, run_cell)
    assert on_disk[0] is None
    # before each cell, the file holds every earlier cell: one value more each time
    counts = [
        sum(len(values) for by_column in scores.values() for values in by_column.values())
        for scores in (results["scores"] for results in on_disk[1:])
    ]
    assert counts == list(range(1, len(on_disk)))


def test_a_failing_cell_leaves_the_earlier_results_and_the_next_run_resumes_after_them(tmp_path):
    path = tmp_path / "results.json"

    def fails_at_the_third(cell: Cell) -> int:
        if (cell.column.name, cell.task, cell.seed) == ("scratch", "ner", 1):
            raise RuntimeError("out of memory")
        return _score(cell)

    with pytest.raises(RuntimeError, match="out of memory"):
        _run(path, fails_at_the_third)
    assert json.loads(path.read_text())["scores"] == {
        "sst2": {"scratch": [1, 2]},
        "ner": {},
    }
    written, ran = _run(path)
    assert _named(ran) == _named(grid_cells(COLUMNS, TASKS, SEEDS))[2:]
    assert written == _run(tmp_path / "fresh.json")[0]


def test_a_finished_grid_runs_nothing_and_writes_its_results_once(tmp_path):
    path = tmp_path / "results.json"
    first, _ = _run(path)
    writes = []
    again, ran = _run(path, write=writes.append)
    assert ran == [] and again == first and writes == [first]


def test_seeds_added_later_run_and_the_recorded_ones_do_not(tmp_path):
    path = tmp_path / "results.json"
    _run(path, seeds=[2])  # recorded for seed 2 at position 0
    written, ran = _run(path, seeds=[1, 2, 3])
    assert {cell.seed for cell in ran} == {1, 3}
    assert written["scores"]["sst2"]["scratch"] == [1, 2, 3]


def test_recorded_cells_after_the_last_that_ran_are_in_the_results(tmp_path):
    """A column run alone first (its cells recorded), then every column: the recorded column's
    cells come after the last cell that runs, and the written results hold them too."""
    path = tmp_path / "results.json"

    def results(scores: Scores) -> dict[str, Any]:
        return {"config": {"seeds": SEEDS}, "scores": scores}

    run_grid(COLUMNS[2:], TASKS, SEEDS, _score, path, results)
    written = run_grid(COLUMNS, TASKS, SEEDS, _score, path, results)
    assert written == _run(tmp_path / "fresh.json")[0]
    assert json.loads(path.read_text()) == written
    assert written["scores"]["ner"]["features"] == [211, 212]


def test_each_cell_is_reported_run_or_recorded(tmp_path):
    path = tmp_path / "results.json"
    _run(path)
    seen = []
    _run(path, after_cell=lambda cell, scores: seen.append(scores[cell.task][cell.column.name][:]))
    assert seen[:2] == [[1], [1, 2]] and len(seen) == 10


def test_results_without_the_seeds_are_refused(tmp_path):
    with pytest.raises(ValueError, match="'config'/'seeds'"):
        run_grid(COLUMNS, TASKS, SEEDS, _score, tmp_path / "r.json", lambda s: {"scores": s})


# results.json as `experiment transfer` wrote it before the grid (its own run loop): the points
# are its columns, the values the primary metric of seeds 1 and 2; scratch on stsb unfinished.
TRANSFER_RESULTS = {
    "config": {"lang": "en", "points": ["scratch", "0.25min", "0.5min"], "seeds": [1, 2]},
    "tasks": {"sst2": {"task": "sst2"}, "stsb": {"task": "stsb"}},
    "metrics": {"sst2": "accuracy", "stsb": "spearman"},
    "pretraining_last_eval": {},
    "scores": {
        "sst2": {"scratch": [0.5, 0.52], "0.5min": [0.61, 0.6]},
        "stsb": {"scratch": [None]},
    },
    "one_class": {"sst2": {"scratch": [], "0.5min": []}, "stsb": {"scratch": []}},
    "timings_seconds": {"pre-training": 31.0, "total": 60.5},
}
# ... and as `experiment ablation` wrote it: every seed's metrics.
ABLATION_RESULTS = {
    "config": {"seeds": [1], "rows": ["mlm+nsp"], "feature_rows": []},
    "tasks": {"mrpc": {"metric": "f1"}},
    "scores": {"mrpc": {"mlm+nsp": [{"accuracy": 0.7, "f1": 0.81}]}},
    "timings_seconds": {"total": 9.0},
}


def test_a_transfer_results_file_from_before_the_grid_resumes(tmp_path):
    path = tmp_path / "results.json"
    path.write_text(json.dumps(TRANSFER_RESULTS))
    columns = [Column("scratch"), Column("0.5min"), Column("0.25min")]
    ran = []

    def run_cell(cell: Cell) -> float:
        ran.append((cell.column.name, cell.task, cell.seed))
        return 0.9

    def results(scores: Scores) -> dict[str, Any]:
        return {key: value for key, value in TRANSFER_RESULTS.items() if key != "scores"} | {
            "scores": scores
        }

    written = run_grid(columns, ["sst2", "stsb"], [1, 2], run_cell, path, results)
    assert ran == [("scratch", "stsb", 2)] + [
        (column, task, seed)
        for column in ("0.5min", "0.25min")
        for task in ("sst2", "stsb")
        for seed in (1, 2)
        if (column, task) != ("0.5min", "sst2")
    ]
    assert written["scores"]["sst2"] == {
        "scratch": [0.5, 0.52],
        "0.5min": [0.61, 0.6],
        "0.25min": [0.9, 0.9],
    }
    assert written["scores"]["stsb"]["scratch"] == [None, 0.9]  # null: an undefined correlation


def test_an_ablation_results_file_from_before_the_grid_resumes_with_its_metrics(tmp_path):
    path = tmp_path / "results.json"
    path.write_text(json.dumps(ABLATION_RESULTS))
    columns = [Column("mlm+nsp"), Column("mlm")]
    ran = []

    def run_cell(cell: Cell) -> dict[str, float]:
        ran.append(cell.column.name)
        return {"accuracy": 0.6, "f1": 0.7}

    def results(scores: Scores) -> dict[str, Any]:
        return ABLATION_RESULTS | {"scores": scores}

    written = run_grid(columns, ["mrpc"], [1], run_cell, path, results)
    assert ran == ["mlm"]
    assert written["scores"] == {
        "mrpc": {"mlm+nsp": [{"accuracy": 0.7, "f1": 0.81}], "mlm": [{"accuracy": 0.6, "f1": 0.7}]}
    }


def test_a_grid_task_takes_its_registered_tasks_budget_unless_the_experiment_sets_one():
    own = GridTask("sst2", "sst2")
    assert own.spec.epochs is None  # SST-2 leaves its epochs to the defaults
    assert (own.num_epochs, own.input_length) == (DEFAULT_EPOCHS, own.spec.max_seq_length)
    assert (own.metric, own.max_dev_examples, own.max_test_examples) == (None, None, None)
    chosen = GridTask("sst2-1k", "sst2", epochs=10, max_seq_length=64, max_train_examples=1000)
    assert (chosen.num_epochs, chosen.input_length, chosen.path) == (10, 64, own.path)
    assert chosen.to_json() == {
        "task": "sst2",
        "path": own.path,
        "epochs": 10,
        "max_seq_length": 64,
        "max_train_examples": 1000,
        "split_by_sentence": own.spec.split_by_sentence,
    }


def test_every_missing_input_is_named_once_before_anything_runs(tmp_path):
    corpus, vocab = tmp_path / "corpus.txt", tmp_path / "vocab.txt"
    tasks = [GridTask("sst2", "sst2"), GridTask("sst2-1k", "sst2"), GridTask("mrpc", "mrpc")]
    with pytest.raises(FileNotFoundError) as caught:
        check_inputs(tmp_path, tasks, [corpus], [vocab])
    sst2, mrpc = tmp_path / tasks[0].path, tmp_path / tasks[2].path
    names = f"{corpus}, {sst2}, {mrpc}, {vocab}"  # sst2-1k reads sst2's file: named once
    assert str(caught.value) == f"missing input file(s): {names}"
    for path in (corpus, sst2, mrpc):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("", encoding="utf-8")
    vocab.mkdir()  # a tokenizer folder counts
    check_inputs(tmp_path, tasks, [corpus], [vocab])
