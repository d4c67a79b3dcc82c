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
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

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
from bertlab.apps.grid import (
    TASK_SEED_COLUMN,
    Cell,
    Column,
    GridTask,
    Scores,
    check_inputs,
    run_grid,
)
from bertlab.apps.strategies_report import TABLE_FILE, results_table, write_results
from bertlab.apps.transfer_config import FINETUNE_BATCH_SIZE, FINETUNE_LEARNING_RATE
from bertlab.apps.transfer_data import DEV_FRACTION, ROWS, TEST_FRACTION, task_splits
from bertlab.core.config import SLANTED_TRIANGULAR_SCHEDULE, FinetuneConfig
from bertlab.task_families import Task
from bertlab.training.finetune import TaskData

FINETUNE_DIR = "finetune"
BERT_DEFAULT = "bert"  # the strategy every other one is judged against
ULMFIT_LAYER_DECAY = 1 / 2.6  # ULMFiT Sec. 3.2: "η^{l-1} = η^l / 2.6 works well"
ELECTRA_LAYER_DECAY = 0.8  # ELECTRA (Clark et al. 2020), Appendix, fine-tuning: Small and Base
# Keras' recipe trains the head on the frozen base before fine-tuning; the guide ("Transfer
# learning & fine-tuning", Chollet) leaves how long to the user. Two of ten epochs leave the
# encoder most of the run.
KERAS_HEAD_EPOCHS = 2


@dataclass(frozen=True)
class Strategy:
    """One way to fine-tune: the `FinetuneConfig` fields it sets over BERT's defaults."""

    label: str  # the table's column
    description: str
    fields: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"label": self.label, "description": self.description, "fields": dict(self.fields)}


STRATEGIES: dict[str, Strategy] = {
    BERT_DEFAULT: Strategy(
        "BERT default", "every layer at one rate, linear warmup over 10% and linear decay"
    ),
    "layerwise": Strategy(
        f"layer-wise {ELECTRA_LAYER_DECAY:g}",
        f"layer-wise learning-rate decay {ELECTRA_LAYER_DECAY:g} (ELECTRA's), otherwise BERT's",
        {"layerwise_lr_decay": ELECTRA_LAYER_DECAY},
    ),
    "ulmfit": Strategy(
        "ULMFiT",
        "ULMFiT's three: decay 1/2.6 per layer, slanted triangular rates, gradual unfreezing",
        {
            "layerwise_lr_decay": ULMFIT_LAYER_DECAY,
            "schedule": SLANTED_TRIANGULAR_SCHEDULE,
            "do_gradual_unfreezing": True,
        },
    ),
    "keras": Strategy(
        "Keras staged",
        f"Keras' staged recipe: the head alone for {KERAS_HEAD_EPOCHS} epochs, then every layer "
        "with a fresh optimizer and schedule",
        {"head_warmup_epochs": KERAS_HEAD_EPOCHS},
    ),
    "frozen": Strategy(
        "frozen encoder",
        "feature-based (--freeze-encoder): the encoder frozen, only the task layer trains",
        {"do_freeze_encoder": True},
    ),
}

# The rows: the transfer experiment's tasks with 1,000 labels (SST-2 also with 500), each read
# ten times as its sst2-1k row is.
LOW_LABEL_EXAMPLES = 1000
LOW_LABEL_EPOCHS = 10
_TRANSFER_ROWS = {row.name: row for row in ROWS["en"]}


def _low_label(name: str, transfer_row: str, examples: int = LOW_LABEL_EXAMPLES) -> GridTask:
    return replace(
        _TRANSFER_ROWS[transfer_row],
        name=name,
        epochs=LOW_LABEL_EPOCHS,
        max_train_examples=examples,
    )


STRATEGY_ROWS = (
    _low_label("sst2-500", "sst2-1k", examples=500),
    _low_label("sst2-1k", "sst2-1k"),
    _low_label("mrpc-1k", "mrpc"),
    _low_label("rte-1k", "rte"),
    _low_label("conll2003-1k", "conll2003"),
)


# StrategiesConfig fields that are no settings: where the inputs and OUT are (the rows' data is
# checked per row, `flows.check_split`), what a later run may add to (seeds, the rows and
# strategies chosen), and fields recorded under other names: `learning_rate` as
# `finetune_learning_rate`, `model` and `row_models` as each row's model in `models`.
NOT_SETTINGS = (
    "data_dir",
    "out",
    "seeds",
    "tasks",
    "strategies",
    "learning_rate",
    "model",
    "row_models",
)


@dataclass(frozen=True)
class StrategiesConfig:
    """What one comparison runs.

    Attributes:
        data_dir: the shared data layout (`glue/SST-2/train.tsv`, ...).
        out: the experiment directory.
        model: the pre-trained encoder every row fine-tunes, unless `row_models` names another.
        row_models: row name -> its own encoder (for SST-2, one pre-trained on reviews).
        seeds: one run per strategy and seed.
        tasks: names in STRATEGY_ROWS; None: all.
        strategies: names in STRATEGIES; BERT's default is always among them.
        learning_rate: every strategy's top rate (the transfer experiment's for BERT-mini).
    """

    data_dir: Path
    out: Path
    model: Path
    row_models: Mapping[str, Path] = field(default_factory=dict)
    seeds: tuple[int, ...] = (1, 2, 3, 4, 5)
    tasks: tuple[str, ...] | None = None
    strategies: tuple[str, ...] = tuple(STRATEGIES)
    learning_rate: float = FINETUNE_LEARNING_RATE

    def __post_init__(self) -> None:
        rows = {row.name for row in STRATEGY_ROWS}
        unknown = sorted((set(self.tasks or ()) | set(self.row_models)) - rows)
        if unknown:
            raise ValueError(f"unknown row(s) {unknown}; choose from {sorted(rows)}")
        if self.tasks is not None and not self.tasks:
            raise ValueError("tasks is empty; None runs every row")
        strategies = set(self.strategies)
        if len(strategies) != len(self.strategies) or strategies - set(STRATEGIES):
            raise ValueError(
                f"strategies must be distinct names of {', '.join(STRATEGIES)}, "
                f"got {list(self.strategies)}"
            )
        if BERT_DEFAULT not in strategies:
            raise ValueError(f"strategies need {BERT_DEFAULT!r}: the others are judged against it")
        if not self.seeds or len(set(self.seeds)) != len(self.seeds):
            raise ValueError(f"seeds must be distinct and at least one, got {list(self.seeds)}")
        if not self.learning_rate > 0:
            raise ValueError(f"the learning rate must be positive, got {self.learning_rate}")

    def selected_rows(self) -> tuple[GridTask, ...]:
        return tuple(row for row in STRATEGY_ROWS if self.tasks is None or row.name in self.tasks)

    def model_for(self, row: GridTask) -> Path:
        return Path(self.row_models.get(row.name, self.model))

    def finetune_config(self, strategy: str, row: GridTask, seed: int) -> FinetuneConfig:
        """The run's settings: the strategy's fields over the shared budget."""
        return FinetuneConfig(
            learning_rate=self.learning_rate,
            batch_size=FINETUNE_BATCH_SIZE,
            num_train_epochs=row.num_epochs,
            seed=seed,
            **STRATEGIES[strategy].fields,
        )

    def settings(self) -> dict[str, Any]:
        """What every finished run depends on, as JSON values: the fields (`flows.
        config_settings`), but NOT_SETTINGS, as they resolve."""
        resolved = {
            "finetune_learning_rate": self.learning_rate,
            "finetune_batch_size": FINETUNE_BATCH_SIZE,
            # Every strategy and every row's model, chosen or not.
            "strategies": {name: dict(STRATEGIES[name].fields) for name in STRATEGIES},
            "models": {row.name: self.model_for(row) for row in STRATEGY_ROWS},
        }
        return config_settings(self, NOT_SETTINGS, resolved)


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
    check_settings(config.out, config.settings())
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
