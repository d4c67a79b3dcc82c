"""`bertlab experiment transfer`: does pre-training on a budget pay off downstream?

Pre-train with the budget recipe (`run_pretraining` with a budget), then fine-tune the model at
several points of that run (0 minutes = a random twin of the same shape, `flows.random_twin`)
on a set of tasks, with the same fine-tuning budget and several seeds each, and score every run
on a test split carved from the task's training file. Everything lands in one directory: the
pre-training run, each fine-tuning run with its `test.json`, `results.json`, `table.md` and
`transfer.png`.

With `arms` the columns are pre-training corpora side by side at the whole budget instead of
points of one run: `general` (the language's general corpus, Wikipedia), `in-domain` (text of the
tasks' own kind, for English the IMDB movie reviews), `mixed` (both), `continued` (the general
run's model, pre-trained further on the in-domain text: domain-adaptive pre-training) and
`word-vectors` (no pre-training of the encoder: a random twin whose embedding matrix starts from
word2vec vectors of the in-domain text, the pre-2018 recipe).

Each step is skipped when its output is already there, so an interrupted experiment continues
where it stopped when the same command is run again (`flows.check_settings` refuses to continue
one made with other settings).
"""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bertlab.apps.experiments.grid import Cell, Column, GridTask, Scores, check_inputs, run_grid
from bertlab.apps.experiments.transfer_config import (
    SCRATCH,
    TASK_TEXT_FILE,
    TransferConfig,
    arm_point_name,
    experiment_settings,
    point_name,
)
from bertlab.apps.experiments.transfer_data import (
    TASK_TEXT_GROUP,
    task_splits,
    task_text,
    write_task_text,
)
from bertlab.apps.experiments.transfer_options import (
    CONTINUED,
    GENERAL,
    POINTED_ARMS,
    PRETRAINED_ARMS,
    WORD_VECTORS,
)
from bertlab.apps.experiments.transfer_report import (
    PLOT_FILE,
    TABLE_FILE,
    results_table,
    write_results,
)
from bertlab.apps.experiments.transfer_rows import DEV_FRACTION, FINETUNE_BATCH_SIZE, TEST_FRACTION
from bertlab.apps.flows import (
    ONE_CLASS,
    RESULTS_FILE,
    TEST_FILE,
    check_settings,
    check_split,
    finetune_and_test,
    holding,
    one_class_runs,
    random_twin,
    read_test,
    seed_dir,
    summary,
    word_vector_model,
)
from bertlab.core.atomic import atomic_directory
from bertlab.core.config import OBJECTIVE_DATA, PRESETS, BertConfig, read_json_object
from bertlab.core.finetune_config import FinetuneConfig
from bertlab.core.run_folder import FINAL_DIR, METRICS_FILE
from bertlab.core.wording import Worded
from bertlab.corpus.build import build_corpus
from bertlab.network.electra import ElectraForPreTraining
from bertlab.task_families import Task
from bertlab.tokenizer.wordpiece import TOKENIZER_FILES, Tokenizer
from bertlab.training.finetuning.finetune import TaskData
from bertlab.training.metrics_log import read_metrics
from bertlab.training.pretraining.budget import (
    FINETUNE_DROPOUT,
    budget_recipe,
    restore_finetune_dropout,
)
from bertlab.training.pretraining.checkpointing import (
    latest_checkpoint,
    list_checkpoints,
    load_state,
)
from bertlab.training.pretraining.runner import run_pretraining
from bertlab.training.word2vec.vectors import (
    VECTORS_FILE,
    load_vectors,
)

logger = logging.getLogger(__name__)

POINT_TOLERANCE = 0.2  # a point's checkpoint must lie within 20% of the minutes asked for
# ... or within two of the run's mean steps: a timed checkpoint follows the step past its mark.
POINT_STEPS = 2
POINTS_DIR = "points"
FINETUNE_DIR = "finetune"
WORD_VECTORS_DIR = "word-vectors"

# --- the experiment -------------------------------------------------------------------------------


def run_transfer(
    config: TransferConfig, show_progress: bool = True, say: Callable[[str], None] = print
) -> dict[str, Any]:
    """Pre-train, fine-tune every column x task x seed, write the table and the plot.

    One process at a time writes OUT (`flows.holding`); another is refused, naming its pid.
    """
    with holding(config.out):
        return _transfer(config, show_progress, say)


def _transfer(
    config: TransferConfig, show_progress: bool = True, say: Callable[[str], None] = print
) -> dict[str, Any]:
    """`run_transfer` holding OUT."""
    rows = config.selected_tasks()
    _check_inputs(config, rows)
    out = config.out
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()

    for arm in _pretrained_arms(config):
        minutes = config.continue_minutes or config.budget_minutes
        minutes = minutes if arm == CONTINUED else config.budget_minutes
        say(f"== pre-training {arm} with the budget recipe, {minutes:g} min")
        _pretrain(config, arm, show_progress, say)
    models = _column_models(config, say)
    timings = {"pre-training": time.perf_counter() - started}

    splits = {}
    for row in rows:
        splits[row.name] = task_splits(config.data_dir, row)
        _, data, test = splits[row.name]
        check_split(out / FINETUNE_DIR / row.name, data.train, data.dev, test)
        say(
            f"   {row.name}: {len(data.train):,} training, {len(data.dev):,} dev, "
            f"{len(test):,} test examples"
        )
    columns = [_ModelColumn(name, models[name]) for name in config.fine_tuning_order()]
    seeds = len(config.seeds)
    say(f"== fine-tuning {len(rows)} task(s) x {len(columns)} model(s) x {seeds} seed(s)")
    metric_names = {name: task.primary_metric for name, (task, _, _) in splits.items()}
    base = _results_base(config, rows, metric_names)

    def results_of(scores: Scores) -> dict[str, Any]:
        timings["total"] = time.perf_counter() - started
        one_class = one_class_runs(out / FINETUNE_DIR, scores, config.seeds)
        return base | {"scores": scores, ONE_CLASS: one_class, "timings_seconds": timings}

    results = _fine_tune(config, rows, splits, columns, results_of, show_progress, say)
    for line in results_table(results):
        say(line)
    say(f"wrote {out / TABLE_FILE}, {out / PLOT_FILE}, {out / RESULTS_FILE}")
    return results


def _fine_tune(
    config: TransferConfig,
    rows: Sequence[GridTask],
    splits: dict[str, tuple[Task, TaskData, list]],
    columns: list[_ModelColumn],
    results: Callable[[Scores], dict[str, Any]],
    show_progress: bool,
    say: Callable[[str], None],
) -> dict[str, Any]:
    """Every column x task x seed (`grid.run_grid`: each column's tasks in turn, each with all
    its seeds), results.json, table.md and transfer.png written after each run."""
    by_name = {row.name: row for row in rows}

    def run_cell(cell: Cell) -> float:
        task, data, test = splits[cell.task]
        run_dir = seed_dir(config.out / FINETUNE_DIR / cell.task, cell.column.name, cell.seed)
        row, model_dir = by_name[cell.task], cell.column.model_dir
        metrics = finetune_cell(
            config, row, task, data, test, model_dir, cell.seed, run_dir, show_progress
        )
        return metrics[task.primary_metric]

    def after_cell(cell: Cell, scores: Scores) -> None:
        if cell.seed == config.seeds[-1]:  # a column's task done: its seeds' summary
            task, _, _ = splits[cell.task]
            values = scores[cell.task][cell.column.name]
            say(f"   {cell.column.name:>12} {cell.task}: {task.primary_metric} {summary(values)}")

    return run_grid(
        columns,
        list(by_name),
        config.seeds,
        run_cell,
        config.out / RESULTS_FILE,
        results,
        write=lambda written: write_results(config.out, written),
        after_cell=after_cell,
    )


@dataclass(frozen=True)
class _ModelColumn(Column):
    """A column of the table: a model fine-tuned from `model_dir` (for scratch and word-vectors,
    the shape each seed's twin is built from, `_twin`)."""

    model_dir: Path


def _pretrained_arms(config: TransferConfig) -> list[str]:
    """The arms that pre-train, in the order they must run (continued after general)."""
    return [arm for arm in PRETRAINED_ARMS if arm in config.arms]


def _check_inputs(config: TransferConfig, rows: Sequence[GridTask]) -> None:
    files = config.user_corpus_files()  # OUT/task_text.txt is made from the rows' files
    if config.needs_in_domain():
        files += config.in_domain_files()
    tokenizer = [] if config.tokenizer is None else [config.tokenizer]
    check_inputs(config.data_dir, rows, files, tokenizer)


# --- pre-training and its points ------------------------------------------------------------------


def _pretrain(
    config: TransferConfig, arm: str, show_progress: bool, say: Callable[[str], None]
) -> Path:
    """An arm's budget-recipe run into its directory (continued if interrupted, skipped if done)."""
    run_dir = config.pretrain_dir(arm)
    if (run_dir / FINAL_DIR / "config.json").is_file():
        _check_shape(config, run_dir / FINAL_DIR)
        check_settings(config.out, experiment_settings(config))
        return run_dir
    checkpoint = latest_checkpoint(run_dir)
    if checkpoint is not None:
        _check_shape(config, checkpoint)
    check_settings(config.out, experiment_settings(config))
    task_text_file = config.out / TASK_TEXT_FILE
    if config.task_text_repeats and not task_text_file.is_file():
        # after the settings check: never overwrite another run's
        path, counts = prepare_task_text(config)
        say(
            f"   task text: {', '.join(f'{name} {n:,}' for name, n in counts.items())} training "
            f"examples, x {config.task_text_repeats}, in {path}"
        )
    run = config.pretrain_run(resume=checkpoint is not None, arm=arm)
    run_pretraining(run, show_progress=show_progress, say=say)
    return run_dir


def prepare_task_text(config: TransferConfig) -> tuple[Path, dict[str, int]]:
    """OUT/task_text.txt for --task-text: the chosen rows' training text, `task_text_repeats`
    times; with next-sentence prediction each example is a document of its own. Returns the
    path and the number of examples per row."""
    per_document = 1 if OBJECTIVE_DATA[config.resolved.data.objective].is_pair else TASK_TEXT_GROUP
    texts = task_text(config.data_dir, config.selected_tasks(), config.lang)
    path = config.out / TASK_TEXT_FILE
    return path, write_task_text(path, texts, config.task_text_repeats, per_document)


def _check_shape(config: TransferConfig, model_dir: Path) -> None:
    """Refuse to continue a pre-training run of another shape than the one asked for."""
    found = BertConfig.from_json_file(model_dir / "config.json")
    layers, hidden, _ = PRESETS[config.resolved.shape]
    if (found.num_hidden_layers, found.hidden_size) != (layers, hidden):
        raise ValueError(
            Worded(
                "{path} holds a model of {found_layers} layers of {found_hidden}, not {shape} "
                "({layers} of {hidden}); use another {out} for another model size",
                path=model_dir,
                found_layers=found.num_hidden_layers,
                found_hidden=found.hidden_size,
                shape=config.resolved.shape,
                layers=layers,
                hidden=hidden,
            )
        )


def _column_models(config: TransferConfig, say: Callable[[str], None]) -> dict[str, Path]:
    """Model directory per column. The general run's points, or per arm its final model; for
    scratch and word-vectors, a directory with the shape and tokenizer (and the vectors) that
    each seed's twin is built from (`_twin`)."""
    if config.arms == (GENERAL,):
        by_minutes = _point_models(config, config.pretrain_dir(GENERAL), say)
        return {point_name(minutes): path for minutes, path in by_minutes.items()}
    points_dir = config.out / POINTS_DIR
    shape_final = config.pretrain_dir(_pretrained_arms(config)[0]) / FINAL_DIR
    models = {point_name(SCRATCH): scratch_model(shape_final, points_dir)}
    for arm in config.arms:
        if arm == WORD_VECTORS:
            models[arm] = _word_vector_model(config, models[point_name(SCRATCH)], say)
            continue
        run_dir = config.pretrain_dir(arm)
        final = run_dir / FINAL_DIR
        for minutes in sorted(config.points) if arm in POINTED_ARMS else ():
            name = arm_point_name(arm, minutes)
            checkpoint = _checkpoint_near(run_dir, minutes, say)
            directory = points_dir / name.replace(" ", "-")
            models[name] = fine_tunable_copy(checkpoint, final, directory, config.finetune_dropout)
        models[arm] = final
        if config.finetune_dropout != FINETUNE_DROPOUT:
            models[arm] = fine_tunable_copy(final, final, points_dir / arm, config.finetune_dropout)
    return models


def _checkpoint_near(run_dir: Path, minutes: float, say: Callable[[str], None]) -> Path:
    """The checkpoint of a run nearest `minutes` of training: within POINT_TOLERANCE of them, or
    within POINT_STEPS of the run's mean step time, since a timed checkpoint falls right after the
    step that passes its mark (a slow machine or a tiny budget can leave it a step past)."""
    progress = {
        checkpoint: load_state(checkpoint)["progress"] for checkpoint in list_checkpoints(run_dir)
    }
    if not progress:
        raise ValueError(f"{run_dir} has no checkpoints to take the {minutes:g}-min point")
    elapsed = {checkpoint: values["elapsed"] / 60 for checkpoint, values in progress.items()}
    checkpoint = min(elapsed, key=lambda c: abs(elapsed[c] - minutes))
    step_minutes = elapsed[checkpoint] / max(progress[checkpoint]["step"], 1)
    if abs(elapsed[checkpoint] - minutes) > max(
        POINT_TOLERANCE * minutes, POINT_STEPS * step_minutes
    ):
        raise ValueError(
            f"no checkpoint near {minutes:g} min of training in {run_dir} (nearest: "
            f"{elapsed[checkpoint]:.2f} min, {checkpoint.name})"
        )
    say(
        f"   {minutes:g}-min point of {run_dir.name}: {checkpoint.name} "
        f"({elapsed[checkpoint]:.1f} min trained)"
    )
    return checkpoint


def _word_vector_model(config: TransferConfig, shape_dir: Path, say) -> Path:
    """The shape and tokenizer of `shape_dir` with word2vec vectors of the in-domain corpus,
    read through that tokenizer (OUT/word-vectors/: the tokenized corpus, then the vectors)."""
    directory = config.out / POINTS_DIR / WORD_VECTORS
    if (directory / VECTORS_FILE).is_file():
        return directory
    tokenizer = Tokenizer.from_pretrained(shape_dir)
    work = config.out / WORD_VECTORS_DIR
    corpus = build_corpus(config.in_domain_files(), tokenizer, work / "corpus", config.lang, False)
    return word_vector_model(corpus, shape_dir, directory, say)


def _point_models(config: TransferConfig, pretrain_dir: Path, say) -> dict[float, Path]:
    """Model directory per point: a random model for 0, the checkpoints nearest each point's
    training minutes, and the final model for the whole budget."""
    points_dir = config.out / POINTS_DIR
    final = pretrain_dir / FINAL_DIR
    models: dict[float, Path] = {SCRATCH: scratch_model(final, points_dir)}
    for minutes in sorted(config.points):
        checkpoint = _checkpoint_near(pretrain_dir, minutes, say)
        models[minutes] = fine_tunable_copy(
            checkpoint, final, points_dir / point_name(minutes), config.finetune_dropout
        )
    models[config.budget_minutes] = final  # written with FINETUNE_DROPOUT
    if config.finetune_dropout != FINETUNE_DROPOUT:
        models[config.budget_minutes] = fine_tunable_copy(
            final, final, points_dir / point_name(config.budget_minutes), config.finetune_dropout
        )
    return models


def fine_tunable_copy(checkpoint: Path, final: Path, directory: Path, dropout: float) -> Path:
    """A model folder to fine-tune from a pre-training checkpoint: its weights (an ELECTRA
    checkpoint's discriminator), the final model's tokenizer and `dropout` in its config.json.
    Written once into `directory`, which is returned; a folder already there is reused."""
    if (directory / "config.json").is_file():
        return directory
    with atomic_directory(directory) as target:
        if _is_electra(checkpoint):  # what fine-tuning uses: the discriminator
            ElectraForPreTraining.from_pretrained(checkpoint).save_discriminator(target)
        else:
            for name in ("config.json", "model.safetensors"):
                shutil.copy2(checkpoint / name, target / name)
        for name in TOKENIZER_FILES:
            if (final / name).is_file():
                shutil.copy2(final / name, target / name)
        restore_finetune_dropout(target, dropout)
    return directory


def _is_electra(model_dir: Path) -> bool:
    """A checkpoint of the electra objective (generator and discriminator together)."""
    architectures = read_json_object(model_dir / "config.json").get("architectures") or []
    return ElectraForPreTraining.architecture in architectures


def scratch_model(final: Path, points_dir: Path) -> Path:
    """The scratch column's folder in `points_dir`: the final model's shape (config.json) and
    tokenizer, without weights; a folder already there is reused.

    `finetune_cell` builds each seed's own random twin from it.
    """
    directory = points_dir / point_name(SCRATCH)
    if (directory / "config.json").is_file():
        return directory
    with atomic_directory(directory) as target:
        shutil.copy2(final / "config.json", target / "config.json")
        Tokenizer.from_pretrained(final).save_pretrained(target)
    return directory


def _twin(config: TransferConfig, shape_dir: Path, seed: int) -> Path:
    """`seed`'s random twin of a shape directory, beside it, with the fine-tuning dropout and,
    for the word-vectors column, the vectors in its embedding matrix."""
    dropout = config.finetune_dropout
    model_config = BertConfig.from_json_file(shape_dir / "config.json").replace(
        hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout
    )
    position_init = config.pretrain_run().resolved.position_init
    directory = shape_dir.with_name(f"{shape_dir.name}-seed-{seed}")
    tokenizer = Tokenizer.from_pretrained(shape_dir)
    vectors = (
        load_vectors(shape_dir / VECTORS_FILE) if (shape_dir / VECTORS_FILE).is_file() else None
    )
    return random_twin(model_config, tokenizer, seed, position_init, directory, vectors)


# --- fine-tuning ----------------------------------------------------------------------------------


def finetune_cell(
    config: TransferConfig,
    row: GridTask,
    task: Task,
    data: TaskData,
    test: list,
    model_dir: Path,
    seed: int,
    run_dir: Path,
    show_progress: bool,
) -> dict[str, float]:
    """Fine-tune and test one cell of the table: `model_dir`, a column's model (for scratch and
    word-vectors, a shape: each seed fine-tunes its own random twin of it), on one row's task with
    one seed, at the experiment's learning rate and batch size and the row's epochs, into
    `run_dir`. Returns the test scores, read back when `run_dir` holds them already."""
    if (run_dir / TEST_FILE).is_file():
        return read_test(run_dir)
    if model_dir.name in (point_name(SCRATCH), WORD_VECTORS):
        model_dir = _twin(config, model_dir, seed)
    finetune_config = FinetuneConfig(
        learning_rate=config.learning_rate,
        batch_size=FINETUNE_BATCH_SIZE,
        num_train_epochs=row.num_epochs,
        seed=seed,
    )
    return finetune_and_test(task, data, test, model_dir, finetune_config, run_dir, show_progress)


# --- the results ----------------------------------------------------------------------------------


def _results_base(config, rows, metric_names) -> dict[str, Any]:
    """What results.json says besides the scores and timings: settings, tasks, pre-training."""
    recipe = budget_recipe(config.budget_minutes * 60)
    last_evals = {}
    for arm in _pretrained_arms(config):
        records = read_metrics(config.pretrain_dir(arm) / METRICS_FILE)
        evals = [r for r in records if r["kind"] == "eval"]
        last_evals[arm] = evals[-1] if evals else {}
    single = config.arms == (GENERAL,)
    return {
        "config": {
            "lang": config.lang,
            "budget_minutes": config.budget_minutes,
            "arms": list(config.arms),
            "points": config.columns(),
            "point_minutes": list(config.all_points()) if single else None,
            "seeds": list(config.seeds),
            "corpus": [str(p) for p in config.corpus_files()],
            "in_domain_corpus": (
                [str(p) for p in config.in_domain_files()] if config.needs_in_domain() else None
            ),
            "continue_minutes": (
                config.continue_minutes or config.budget_minutes
                if CONTINUED in config.arms
                else None
            ),
            "finetune_learning_rate": config.learning_rate,
            "finetune_dropout": config.finetune_dropout,
            "model_size": config.resolved.shape,
            "pretrain_learning_rate": config.pretrain_learning_rate or recipe.learning_rate,
            "tokenizer": str(config.tokenizer) if config.tokenizer else "trained on the corpus",
            "pretrain_objective": config.resolved.data.objective,
            "pretrain_mlm_probability": config.resolved.data.mlm_probability,
            "test_fraction": TEST_FRACTION,
            "dev_fraction": DEV_FRACTION,
            "recipe": recipe.to_json(),
        },
        "tasks": {row.name: row.to_json() for row in rows},
        "metrics": metric_names,
        "pretraining_last_eval": last_evals[GENERAL] if single else last_evals,
    }
