"""The experiment grid: every column (a model, a pre-training point, a fine-tuning strategy) on
every task it runs on, with every seed; results written after each cell, so that an interrupted
experiment resumes where it stopped.

An experiment declares its columns (`Column`, or a subclass holding what its cells need), its
tasks (`GridTask`: a registered task with the experiment's fine-tuning budget for it) and seeds,
and one function that runs a cell and returns its value (a score, or a dict of metrics).
`check_inputs` refuses to start it with an input missing; `run_grid` does the rest:

    results.json  {"config": {"seeds": [1, 2, ...], ...},
                   "scores": {<task>: {<column>: [<value of seed 1>, <value of seed 2>, ...]}},
                   ...}   (the rest is the experiment's: `results` builds the whole dict)

Each list holds the values of the first seeds, in order; `config.seeds` says which seeds those
are, so a cell recorded there is found again even when seeds were added since.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bertlab.core.atomic import write_json
from bertlab.data.tasks.registry import DEFAULT_EPOCHS, TaskSpec, get_task

Scores = dict[str, dict[str, list[Any]]]  # task -> column -> one value per seed, in seed order

# The order the cells run in, outermost first. A column's tasks one after another, each with all
# its seeds (transfer, ablation); or per task and seed every column, so that paired runs of one
# seed finish together (strategies).
COLUMN_TASK_SEED = ("column", "task", "seed")
TASK_SEED_COLUMN = ("task", "seed", "column")
AXES = frozenset(COLUMN_TASK_SEED)


@dataclass(frozen=True)
class GridTask:
    """A task of the grid: a registered task and the experiment's fine-tuning budget for it (a
    row of the transfer and strategies tables, a column of the ablation's).

    `epochs` and `max_seq_length` default to the task's own; `max_train_examples` fine-tunes on
    a subsample of the training part (few labels), `max_dev_examples` and `max_test_examples`
    subsample the dev and test parts (SQuAD's are large); `metric` is the key of the task's
    metrics the experiment reports (None: the task family's primary metric).
    """

    name: str
    task: str  # a name in the task registry
    metric: str | None = None
    epochs: int | None = None
    max_seq_length: int | None = None
    max_train_examples: int | None = None
    max_dev_examples: int | None = None
    max_test_examples: int | None = None

    @property
    def spec(self) -> TaskSpec:
        return get_task(self.task)

    @property
    def path(self) -> str:
        """The training file, relative to the data directory."""
        if self.spec.train_file is None:
            raise ValueError(f"task {self.task} declares no training file")
        return self.spec.train_file

    @property
    def num_epochs(self) -> int:
        return self.epochs or self.spec.epochs or DEFAULT_EPOCHS

    @property
    def input_length(self) -> int:
        return self.max_seq_length or self.spec.max_seq_length

    def to_json(self) -> dict[str, Any]:
        """The task as the transfer and strategies results.json describe it: the budget resolved,
        the file it reads (the ablation's record every field, `dataclasses.asdict`)."""
        return {
            "task": self.task,
            "path": self.path,
            "epochs": self.num_epochs,
            "max_seq_length": self.input_length,
            "max_train_examples": self.max_train_examples,
            "split_by_sentence": self.spec.split_by_sentence,
        }


def check_inputs(
    data_dir: Path,
    tasks: Iterable[GridTask],
    files: Iterable[Path] = (),
    paths: Iterable[Path] = (),
) -> None:
    """Refuse to start a grid with an input missing, before any minute is spent on it.

    Args:
        data_dir: where each task's training file (`GridTask.path`) lies.
        tasks: the tasks the grid runs.
        files: the experiment's other input files (corpora; a model folder's config.json).
        paths: inputs that may be a file or a folder (a vocab.txt or a tokenizer folder).

    Raises:
        FileNotFoundError: naming every missing input once: `files`, the tasks' files, `paths`.
    """
    task_files = [data_dir / task.path for task in tasks]
    missing = [path for path in (*files, *task_files) if not path.is_file()]
    missing += [path for path in paths if not path.exists()]
    if missing:
        names = dict.fromkeys(str(path) for path in missing)
        raise FileNotFoundError(f"missing input file(s): {', '.join(names)}")


@dataclass(frozen=True)
class Column:
    """One column of the grid: the name results.json keys it by, and the tasks it runs on (None:
    every task). An experiment subclasses it with what its cells need (a model, a rate)."""

    name: str
    tasks: tuple[str, ...] | None = field(default=None, kw_only=True)

    def runs_on(self, task: str) -> bool:
        return self.tasks is None or task in self.tasks


@dataclass(frozen=True)
class Cell:
    """One run of the grid: a column on a task with a seed."""

    column: Column
    task: str
    seed: int


def grid_cells(
    columns: Sequence[Column],
    tasks: Sequence[str],
    seeds: Sequence[int],
    order: tuple[str, str, str] = COLUMN_TASK_SEED,
) -> list[Cell]:
    """Every cell, in `order` (outermost axis first); a column only on the tasks it runs on.

    Example: columns a, b; tasks x, y; seeds 1, 2; COLUMN_TASK_SEED ->
    (a, x, 1), (a, x, 2), (a, y, 1), (a, y, 2), (b, x, 1), ...

    Raises:
        ValueError: `order` is not an order of "column", "task" and "seed", or a name repeats.
    """
    if len(order) != len(AXES) or set(order) != AXES:
        raise ValueError(f"order must name each of {sorted(AXES)} once, got {list(order)}")
    for what, names in (("column", [c.name for c in columns]), ("task", tasks), ("seed", seeds)):
        if len(set(names)) != len(names):
            raise ValueError(f"each {what} must be named once, got {list(names)}")
    axes = {"column": columns, "task": tasks, "seed": seeds}
    cells = []
    for values in itertools.product(*(axes[axis] for axis in order)):
        named = dict(zip(order, values, strict=True))
        cell = Cell(named["column"], named["task"], named["seed"])
        if cell.column.runs_on(cell.task):
            cells.append(cell)
    return cells


def recorded_cells(results_path: Path) -> dict[tuple[str, str, int], Any]:
    """(task, column, seed) -> value of every cell a results file holds (none without the file,
    or without its `config.seeds`)."""
    if not results_path.is_file():
        return {}
    results = json.loads(results_path.read_text(encoding="utf-8"))
    seeds = results.get("config", {}).get("seeds")
    if not seeds:
        return {}
    return {
        (task, column, seed): value
        for task, by_column in results.get("scores", {}).items()
        for column, values in by_column.items()
        for seed, value in zip(seeds, values, strict=False)
    }


def run_grid(
    columns: Sequence[Column],
    tasks: Sequence[str],
    seeds: Sequence[int],
    run_cell: Callable[[Cell], Any],
    results_path: Path,
    results: Callable[[Scores], dict[str, Any]],
    *,
    order: tuple[str, str, str] = COLUMN_TASK_SEED,
    write: Callable[[dict[str, Any]], Any] | None = None,
    after_cell: Callable[[Cell, Scores], None] | None = None,
) -> dict[str, Any]:
    """Run every cell (`grid_cells`) not yet in `results_path`, writing the results after each.

    A cell the results file records is not run again: its recorded value is taken. After each
    cell that runs, `results(scores)` builds the whole results dict and `write` writes it
    (atomically: a failing cell leaves the results of the earlier ones); when no cell runs, it
    is built and written once at the end, and again at the end when recorded cells follow the
    last cell that ran (a column run alone first, then the others: its cells come last).

    Args:
        columns, tasks, seeds: the grid's axes, each name once.
        run_cell: runs one cell, returns its value (JSON: a number or a dict of metrics).
        results_path: the results file, read to resume.
        results: scores -> the results dict, holding them as "scores" and the seeds as
            "config"/"seeds" (what a resumed run reads back).
        order: the order of the loops, outermost first (`COLUMN_TASK_SEED`, `TASK_SEED_COLUMN`).
        write: writes the results dict to `results_path` (and, say, a table beside it);
            `bertlab.core.atomic.write_json` when None.
        after_cell: called after each cell, run or recorded, with the scores so far (to report a
            column's seeds once the last is in, say).

    Returns:
        The results dict last written.

    Raises:
        ValueError: a bad order or a repeated name (`grid_cells`), or `results` does not hold
            the scores and the seeds.
    """
    cells = grid_cells(columns, tasks, seeds, order)
    recorded = recorded_cells(results_path)
    write = write or (lambda value: write_json(results_path, value))
    scores: Scores = {task: {} for task in tasks if any(c.runs_on(task) for c in columns)}
    written = None
    stale = True  # a value is in `scores` but not in what was written (or nothing was written)
    for cell in cells:
        key = (cell.task, cell.column.name, cell.seed)
        has_run = key not in recorded
        value = run_cell(cell) if has_run else recorded[key]
        scores[cell.task].setdefault(cell.column.name, []).append(value)
        if has_run:
            written = _write(results, scores, seeds, write)
        stale = not has_run
        if after_cell is not None:
            after_cell(cell, scores)
    if stale:  # no cell ran, or recorded cells came after the last that ran
        written = _write(results, scores, seeds, write)
    return written


def _write(
    results: Callable[[Scores], dict[str, Any]],
    scores: Scores,
    seeds: Sequence[int],
    write: Callable[[dict[str, Any]], Any],
) -> dict[str, Any]:
    built = results(scores)
    if built.get("scores") != scores or built.get("config", {}).get("seeds") != list(seeds):
        raise ValueError(
            "the results of a grid must hold its scores as 'scores' and its seeds as "
            "'config'/'seeds', or an interrupted run could not resume"
        )
    write(built)
    return built
