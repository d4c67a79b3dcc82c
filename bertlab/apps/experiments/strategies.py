"""`bertlab experiment strategies`: which fine-tuning strategy pays off with few labels?

The lectures this tool follows teach three ways to adapt a pre-trained network: BERT's (every
layer at one small rate, warmup and linear decay), ULMFiT's (lower rates for lower layers,
slanted triangular rates, gradual unfreezing) and Keras' (train the new head on the frozen base,
then unfreeze and continue). This experiment fine-tunes one pre-trained encoder per row with each
of `STRATEGIES`, the same seeds, learning rate, batch and epochs, on `ROWS`: the transfer
experiment's tasks with few labels, carved into the transfer experiment's own train, dev and test
splits (`apps.transfer_data.task_splits`), so the scores compare with its tables. Every run is
scored once on the held-out test split; each strategy is judged against BERT's default by
`flows.compare` (the median ahead by more than the larger seed spread) and `flows.sign_test`
(the paired seeds).

    OUT/finetune/<row>/<strategy>/seed-<S>/   each run (metrics.jsonl, curves.png, test.json)
    OUT/settings.json  OUT/results.json  OUT/table.md

Each finished run is skipped when the same command runs again, so an interrupted experiment
continues where it stopped; one with other settings is refused (`flows.check_settings`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from bertlab.apps.experiments.grid import (
    TASK_SEED_COLUMN,
    Cell,
    Column,
    GridTask,
    Scores,
    check_inputs,
    run_grid,
)
from bertlab.apps.experiments.strategies_config import (
    BERT_DEFAULT,
    FINETUNE_DIR,
    NOT_SETTINGS,
    STRATEGIES,
    STRATEGY_ROWS,
    StrategiesConfig,
)
from bertlab.apps.experiments.strategies_report import TABLE_FILE, results_table, write_results
from bertlab.apps.experiments.transfer_data import task_splits
from bertlab.apps.experiments.transfer_rows import (
    DEV_FRACTION,
    FINETUNE_BATCH_SIZE,
    TEST_FRACTION,
)
from bertlab.apps.flows import (
    ONE_CLASS,
    RESULTS_FILE,
    check_settings,
    check_split,
    config_settings,
    finetune_and_test,
    holding,
    one_class_runs,
    seed_dir,
    summary,
)
from bertlab.task_families import Task
from bertlab.training.finetuning.finetune import TaskData


def strategies_settings(config: StrategiesConfig) -> dict[str, Any]:
    """What every finished run depends on, as JSON values: the fields (`flows.
    config_settings`), but NOT_SETTINGS, as they resolve."""
    resolved = {
        "finetune_learning_rate": config.learning_rate,
        "finetune_batch_size": FINETUNE_BATCH_SIZE,
        # Every strategy and every row's model, chosen or not.
        "strategies": {name: dict(STRATEGIES[name].fields) for name in STRATEGIES},
        "models": {row.name: config.model_for(row) for row in STRATEGY_ROWS},
    }
    return config_settings(config, NOT_SETTINGS, resolved)


def run_strategies(
    config: StrategiesConfig, show_progress: bool = True, say: Callable[[str], None] = print
) -> dict[str, Any]:
    """Fine-tune every row x seed x strategy, score on the test splits, write the table.

    Raises:
        FileNotFoundError: a model or task file is missing (before anything runs).
        ValueError: OUT holds runs made with other settings or on another split, or another
            process writes it (`flows.holding`).
    """
    with holding(config.out):
        return _strategies(config, show_progress, say)


def _strategies(
    config: StrategiesConfig, show_progress: bool = True, say: Callable[[str], None] = print
) -> dict[str, Any]:
    """`run_strategies` holding OUT."""
    rows = config.selected_rows()
    _check_inputs(config, rows)
    config.out.mkdir(parents=True, exist_ok=True)
    check_settings(config.out, strategies_settings(config))
    started = time.perf_counter()
    splits = {row.name: task_splits(config.data_dir, row) for row in rows}
    for row in rows:  # all checked before the first run
        _, data, test = splits[row.name]
        check_split(config.out / FINETUNE_DIR / row.name, data.train, data.dev, test)
        say(
            f"== {row.name}: {len(data.train):,} training, {len(data.dev):,} dev, {len(test):,} "
            f"test examples; {config.model_for(row)}"
        )
    metrics_names = {name: task.primary_metric for name, (task, _, _) in splits.items()}
    base = _results_base(config, rows, metrics_names)

    def results_of(scores: Scores) -> dict[str, Any]:
        one_class = one_class_runs(config.out / FINETUNE_DIR, scores, config.seeds)
        timings = {"total": time.perf_counter() - started}
        return base | {"scores": scores, ONE_CLASS: one_class, "timings_seconds": timings}

    results = _fine_tune(config, rows, splits, results_of, show_progress, say)
    for line in results_table(results):
        say(line)
    say(f"wrote {config.out / TABLE_FILE} and the runs under {config.out / FINETUNE_DIR}")
    return results


def _fine_tune(
    config: StrategiesConfig,
    rows: tuple[GridTask, ...],
    splits: dict[str, tuple[Task, TaskData, list]],
    results: Callable[[Scores], dict[str, Any]],
    show_progress: bool,
    say: Callable[[str], None],
) -> dict[str, Any]:
    """Every row x seed x strategy (`grid.run_grid`: per row and seed every strategy, so that
    the paired runs finish together), results.json and table.md written after each run."""
    by_name = {row.name: row for row in rows}
    columns = [Column(name) for name in config.strategies]

    def run_cell(cell: Cell) -> float:
        task, data, test = splits[cell.task]
        row, strategy = by_name[cell.task], cell.column.name
        metrics = finetune_and_test(
            task,
            data,
            test,
            config.model_for(row),
            config.finetune_config(strategy, row, cell.seed),
            seed_dir(config.out / FINETUNE_DIR / row.name, strategy, cell.seed),
            show_progress,
        )
        return metrics[task.primary_metric]

    def after_cell(cell: Cell, scores: Scores) -> None:
        if (cell.seed, cell.column) == (config.seeds[-1], columns[-1]):  # a row done
            task, _, _ = splits[cell.task]
            for strategy, values in scores[cell.task].items():
                say(f"   {cell.task} {strategy:>10} {task.primary_metric} {summary(values)}")

    return run_grid(
        columns,
        list(by_name),
        config.seeds,
        run_cell,
        config.out / RESULTS_FILE,
        results,
        order=TASK_SEED_COLUMN,
        write=lambda written: write_results(config.out, written),
        after_cell=after_cell,
    )


def _check_inputs(config: StrategiesConfig, rows: tuple[GridTask, ...]) -> None:
    # Each row's model is a folder: its config.json must be there (the weights, by its name).
    models = sorted({config.model_for(row) / "config.json" for row in rows})
    check_inputs(config.data_dir, rows, models)


def _results_base(
    config: StrategiesConfig, rows: tuple[GridTask, ...], metric_names: dict[str, str]
) -> dict[str, Any]:
    """What results.json says besides the scores: the settings, the rows and their models."""
    return {
        "config": {
            "seeds": list(config.seeds),
            "strategies": list(config.strategies),
            "baseline": BERT_DEFAULT,
            "finetune_learning_rate": config.learning_rate,
            "finetune_batch_size": FINETUNE_BATCH_SIZE,
            "test_fraction": TEST_FRACTION,
            "dev_fraction": DEV_FRACTION,
        },
        "strategies": {name: STRATEGIES[name].to_json() for name in config.strategies},
        "tasks": {row.name: row.to_json() | {"model": str(config.model_for(row))} for row in rows},
        "metrics": metric_names,
        "scores": {},  # its place in the file: `_fine_tune` puts the grid's scores there
    }
