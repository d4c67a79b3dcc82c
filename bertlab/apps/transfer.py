"""`bertlab experiment transfer`: does pre-training on a budget pay off downstream?

Pre-train with the budget recipe (`run_pretraining` with a budget), then fine-tune the model at
several points of that run (0 minutes = a random twin of the same shape, `flows.random_twin`)
on a set of tasks, with the same fine-tuning budget and several seeds each, and score every run
on a test split carved from the task's training file. Everything lands in one directory: the
pre-training run, each fine-tuning run with its `test.json`, `results.json`, `table.md` and
`transfer.png`.

Each step is skipped when its output is already there, so an interrupted experiment continues
where it stopped when the same command is run again (`flows.check_settings` refuses to continue
one made with other settings).
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bertlab.apps.flows import (
    RESULTS_FILE,
    TEST_FILE,
    check_settings,
    finetune_and_test,
    random_twin,
    read_test,
    seed_dir,
    summary,
)
from bertlab.apps.transfer_data import (
    CORPORA,
    DEV_FRACTION,
    ROWS,
    TASK_TEXT_GROUP,
    TEST_FRACTION,
    TransferTask,
    task_splits,
    task_text,
    write_task_text,
)
from bertlab.apps.transfer_report import PLOT_FILE, TABLE_FILE, results_table, write_results
from bertlab.atomic import atomic_directory, write_json
from bertlab.config import PRESETS, BertConfig, FinetuneConfig
from bertlab.task_families import Task
from bertlab.tokenization import TOKENIZER_FILES, Tokenizer
from bertlab.training.budget import FINETUNE_DROPOUT, budget_recipe, restore_finetune_dropout
from bertlab.training.checkpointing import latest_checkpoint, list_checkpoints, load_state
from bertlab.training.finetune import TaskData
from bertlab.training.loop import FINAL_DIR
from bertlab.training.metrics_log import METRICS_FILE, read_metrics
from bertlab.training.pretrain_run import PretrainRun, run_pretraining

logger = logging.getLogger(__name__)

SPLIT_FILE = "split.json"  # per task: the split its fine-tuning runs were made on
SCRATCH = 0  # the point "0 minutes of pre-training": a random model of the recipe's shape
FINETUNE_LEARNING_RATE = 5e-4  # measured for this model size: docs/budget.md#why-each-choice
FINETUNE_BATCH_SIZE = 32
CHECKPOINT_MINUTES = 5.0  # pre-training checkpoints, from which the points are picked
TASK_TEXT_FILE = "task_text.txt"  # with --task-text: the tasks' unlabeled training text
PRETRAIN_OBJECTIVES = ("mlm", "mlm+nsp")  # what --pretrain-objective may choose
EVAL_EVERY_STEPS = 250  # held-out MLM evaluations: a learning curve of a few dozen points
POINT_TOLERANCE = 0.2  # a point's checkpoint must lie within 20% of the minutes asked for
PRETRAIN_DIR = "pretrain"
POINTS_DIR = "points"
FINETUNE_DIR = "finetune"


@dataclass(frozen=True)
class TransferConfig:
    """What one experiment runs."""

    data_dir: Path
    out: Path
    lang: str = "en"
    budget_minutes: float = 60.0
    points: tuple[float, ...] = (10.0, 30.0)  # minutes, besides 0 and the whole budget
    seeds: tuple[int, ...] = (1, 2, 3)
    tasks: tuple[str, ...] | None = None  # names in ROWS[lang]; None: all
    corpus: tuple[str, ...] | None = None  # files; None: CORPORA[lang] under data_dir
    learning_rate: float = FINETUNE_LEARNING_RATE  # fine-tuning
    model_size: str | None = None  # PRESETS name, pre-trained and from scratch; None: the recipe's
    pretrain_learning_rate: float | None = None  # the peak; None: the recipe's
    tokenizer: Path | None = None  # vocab.txt or tokenizer directory; None: trained on the corpus
    finetune_dropout: float = FINETUNE_DROPOUT  # every model's, pre-trained and from scratch
    # > 0: the text of the tasks' training parts joins the corpus this many times (`task_text`)
    task_text_repeats: int = 0
    pretrain_objective: str | None = None  # PRETRAIN_OBJECTIVES; None: the recipe's
    pretrain_mlm_probability: float | None = None  # share of tokens masked; None: the recipe's

    def __post_init__(self) -> None:
        if self.lang not in ROWS:
            raise ValueError(f"unknown language {self.lang!r}; choose one of {', '.join(ROWS)}")
        if self.model_size is not None and self.model_size not in PRESETS:
            raise ValueError(
                f"unknown model size {self.model_size!r}; choose one of {', '.join(PRESETS)}"
            )
        if self.pretrain_learning_rate is not None and not self.pretrain_learning_rate > 0:
            rate = self.pretrain_learning_rate
            raise ValueError(f"the pre-training learning rate must be positive, got {rate}")
        if not 0 <= self.finetune_dropout < 1:
            raise ValueError(
                f"the fine-tuning dropout must be in [0, 1), got {self.finetune_dropout}"
            )
        if self.task_text_repeats < 0:
            raise ValueError(f"--task-text must be 0 or more, got {self.task_text_repeats}")
        if self.pretrain_objective not in (None, *PRETRAIN_OBJECTIVES):
            raise ValueError(
                f"unknown pre-training objective {self.pretrain_objective!r}; "
                f"choose one of {', '.join(PRETRAIN_OBJECTIVES)}"
            )
        if self.pretrain_mlm_probability is not None and not 0 < self.pretrain_mlm_probability < 1:
            raise ValueError(
                f"the masking rate must be in (0, 1), got {self.pretrain_mlm_probability}"
            )
        if not self.budget_minutes > 0:
            raise ValueError(f"the budget must be positive, got {self.budget_minutes}")
        if any(not 0 < p < self.budget_minutes for p in self.points):
            raise ValueError(f"points must lie strictly between 0 and {self.budget_minutes:g} min")
        if not self.seeds or len(set(self.seeds)) != len(self.seeds):
            raise ValueError(f"seeds must be distinct and at least one, got {list(self.seeds)}")
        known = {t.name for t in ROWS[self.lang]}
        unknown = sorted(set(self.tasks or ()) - known)
        if unknown:
            raise ValueError(f"unknown task(s) {unknown}; choose from {sorted(known)}")

    def selected_tasks(self) -> tuple[TransferTask, ...]:
        return tuple(t for t in ROWS[self.lang] if self.tasks is None or t.name in self.tasks)

    def user_corpus_files(self) -> list[Path]:
        """--corpus, else the language's corpora under the data directory."""
        names = self.corpus or tuple(str(self.data_dir / f) for f in CORPORA[self.lang])
        return [Path(name) for name in names]

    def corpus_files(self) -> list[Path]:
        """What is pre-trained on: OUT/task_text.txt with --task-text, then the user's corpus.

        The task text comes first because pre-training holds out the corpus's last documents:
        they stay the user's text, never seen in training, rather than task text that other
        repeats hold.
        """
        first = [self.out / TASK_TEXT_FILE] if self.task_text_repeats else []
        return first + self.user_corpus_files()

    def pretrain_run(self, resume: bool = False) -> PretrainRun:
        """The pre-training phase: the budget recipe with this experiment's choices."""
        checkpoint_minutes = min((CHECKPOINT_MINUTES, *(p / 2 for p in self.points)))
        return PretrainRun(
            corpus=tuple(self.corpus_files()),
            out=self.out / PRETRAIN_DIR,
            budget=self.budget_minutes * 60,
            lang=self.lang,
            tokenizer=self.tokenizer,
            model_size=self.model_size,
            learning_rate=self.pretrain_learning_rate,
            objective=self.pretrain_objective,
            mlm_probability=self.pretrain_mlm_probability,
            checkpoint_every_minutes=checkpoint_minutes,
            keep_checkpoints=0,
            eval_every_steps=EVAL_EVERY_STEPS,
            resume=resume,
        )

    def objective(self) -> str:
        """The pre-training objective: --pretrain-objective, else the budget recipe's."""
        return self.pretrain_run().data_config().objective

    def mlm_probability(self) -> float:
        """The pre-training masking rate: --pretrain-mlm-probability, else the recipe's."""
        return self.pretrain_run().data_config().mlm_probability

    def all_points(self) -> tuple[float, ...]:
        return (SCRATCH, *sorted(self.points), self.budget_minutes)

    def shape(self) -> str:
        """The encoder's PRESETS name: --model-size, else the budget recipe's."""
        return self.pretrain_run().shape()


# --- the experiment -------------------------------------------------------------------------------


def run_transfer(
    config: TransferConfig, show_progress: bool = True, say: Callable[[str], None] = print
) -> dict[str, Any]:
    """Pre-train, fine-tune every point x task x seed, write the table and the plot."""
    rows = config.selected_tasks()
    _check_inputs(config, rows)
    out = config.out
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()

    say(f"== pre-training with the budget recipe, {config.budget_minutes:g} min")
    pretrain_dir = _pretrain(config, show_progress, say)
    models = _point_models(config, pretrain_dir, say)
    timings = {"pre-training": time.perf_counter() - started}

    splits = {}
    for row in rows:
        splits[row.name] = task_splits(config.data_dir, row)
        _, data, test = splits[row.name]
        _check_split(out / FINETUNE_DIR / row.name, data, test)
        say(
            f"   {row.name}: {len(data.train):,} training, {len(data.dev):,} dev, "
            f"{len(test):,} test examples"
        )
    # The two ends first, so that the main comparison is complete as early as possible.
    order = [SCRATCH, config.budget_minutes, *sorted(config.points)]
    say(f"== fine-tuning {len(rows)} task(s) x {len(order)} point(s) x {len(config.seeds)} seed(s)")
    scores: dict[str, dict[str, list[float]]] = {row.name: {} for row in rows}
    metric_names = {name: task.primary_metric for name, (task, _, _) in splits.items()}
    base = _results_base(config, rows, pretrain_dir, metric_names)
    for minutes in order:
        point = point_name(minutes)
        for row in rows:
            task, data, test = splits[row.name]
            values = []
            for seed in config.seeds:
                run_dir = seed_dir(out / FINETUNE_DIR / row.name, point, seed)
                metrics = _finetune_and_test(
                    config, row, task, data, test, models[minutes], seed, run_dir, show_progress
                )
                values.append(metrics[task.primary_metric])
            scores[row.name][point] = values
            say(f"   {point:>8} {row.name}: {task.primary_metric} {summary(values)}")
            timings["total"] = time.perf_counter() - started
            results = base | {"scores": scores, "timings_seconds": timings}
            write_results(out, results)
    for line in results_table(results):
        say(line)
    say(f"wrote {out / TABLE_FILE}, {out / PLOT_FILE}, {out / RESULTS_FILE}")
    return results


def _check_inputs(config: TransferConfig, rows: Sequence[TransferTask]) -> None:
    missing = [str(p) for p in config.user_corpus_files() if not p.is_file()]
    missing += [
        str(config.data_dir / row.path)
        for row in rows
        if not (config.data_dir / row.path).is_file()
    ]
    if config.tokenizer is not None and not config.tokenizer.exists():
        missing.append(str(config.tokenizer))
    if missing:
        raise FileNotFoundError(f"missing input file(s): {', '.join(missing)}")


def experiment_settings(config: TransferConfig) -> dict[str, Any]:
    """What every finished step of an experiment depends on, as JSON values.

    Left out: the tasks, points and seeds, which a later run may add to, and the task data, which
    `_check_split` checks per task.
    """
    recipe = budget_recipe(config.budget_minutes * 60)
    settings = {
        "lang": config.lang,
        "budget_minutes": config.budget_minutes,
        "corpus": [str(path.resolve()) for path in config.corpus_files()],
        "model_size": config.shape(),
        "pretrain_learning_rate": config.pretrain_learning_rate or recipe.learning_rate,
        "tokenizer": str(config.tokenizer.resolve()) if config.tokenizer else None,
        **{f"recipe.{name}": value for name, value in recipe.to_json().items()},
        "finetune_learning_rate": config.learning_rate,
        "finetune_batch_size": FINETUNE_BATCH_SIZE,
        "finetune_dropout": config.finetune_dropout,
    }
    if config.task_text_repeats:  # absent otherwise, so that earlier experiments still continue
        settings["task_text_repeats"] = config.task_text_repeats
        # The corpus holds these tasks' text: adding a task later would change it.
        settings["task_text_tasks"] = [row.name for row in config.selected_tasks()]
    if config.pretrain_objective:  # likewise
        settings["pretrain_objective"] = config.pretrain_objective
    if config.pretrain_mlm_probability:  # likewise
        settings["pretrain_mlm_probability"] = config.pretrain_mlm_probability
    return json.loads(json.dumps(settings))  # tuples as lists, as read back from the file


def point_name(minutes: float) -> str:
    return "scratch" if minutes == SCRATCH else f"{minutes:g}min"


# --- pre-training and its points ------------------------------------------------------------------


def _pretrain(config: TransferConfig, show_progress: bool, say: Callable[[str], None]) -> Path:
    """The budget recipe's run into OUT/pretrain (continued if interrupted, skipped if done)."""
    run_dir = config.out / PRETRAIN_DIR
    if (run_dir / FINAL_DIR / "config.json").is_file():
        _check_shape(config, run_dir / FINAL_DIR)
        check_settings(config.out, experiment_settings(config))
        return run_dir
    checkpoint = latest_checkpoint(run_dir)
    if checkpoint is not None:
        _check_shape(config, checkpoint)
    check_settings(config.out, experiment_settings(config))
    if config.task_text_repeats:  # after the settings check: never overwrite another run's
        path, counts = prepare_task_text(config)
        say(
            f"   task text: {', '.join(f'{name} {n:,}' for name, n in counts.items())} training "
            f"examples, x {config.task_text_repeats}, in {path}"
        )
    run_pretraining(
        config.pretrain_run(resume=checkpoint is not None), show_progress=show_progress, say=say
    )
    return run_dir


def prepare_task_text(config: TransferConfig) -> tuple[Path, dict[str, int]]:
    """OUT/task_text.txt for --task-text: the chosen rows' training text, `task_text_repeats`
    times; with next-sentence prediction each example is a document of its own. Returns the
    path and the number of examples per row."""
    per_document = 1 if config.objective() == "mlm+nsp" else TASK_TEXT_GROUP
    texts = task_text(config.data_dir, config.selected_tasks(), config.lang)
    path = config.out / TASK_TEXT_FILE
    return path, write_task_text(path, texts, config.task_text_repeats, per_document)


def _check_shape(config: TransferConfig, model_dir: Path) -> None:
    """Refuse to continue a pre-training run of another shape than the one asked for."""
    found = BertConfig.from_json_file(model_dir / "config.json")
    layers, hidden, _ = PRESETS[config.shape()]
    if (found.num_hidden_layers, found.hidden_size) != (layers, hidden):
        raise ValueError(
            f"{model_dir} holds a model of {found.num_hidden_layers} layers of "
            f"{found.hidden_size}, not {config.shape()} ({layers} of {hidden}); "
            "use another --out for another model size"
        )


def _point_models(config: TransferConfig, pretrain_dir: Path, say) -> dict[float, Path]:
    """Model directory per point: a random model for 0, the checkpoints nearest each point's
    training minutes, and the final model for the whole budget."""
    points_dir = config.out / POINTS_DIR
    final = pretrain_dir / FINAL_DIR
    models: dict[float, Path] = {SCRATCH: _scratch_model(final, points_dir)}
    elapsed = {}
    for checkpoint in list_checkpoints(pretrain_dir):
        elapsed[checkpoint] = load_state(checkpoint)["progress"]["elapsed"] / 60
    for minutes in sorted(config.points):
        if not elapsed:
            raise ValueError(f"{pretrain_dir} has no checkpoints to take the {minutes:g}-min point")
        checkpoint = min(elapsed, key=lambda c: abs(elapsed[c] - minutes))
        if abs(elapsed[checkpoint] - minutes) > POINT_TOLERANCE * minutes:
            raise ValueError(
                f"no checkpoint near {minutes:g} min of training (nearest: "
                f"{elapsed[checkpoint]:.1f} min, {checkpoint.name})"
            )
        say(f"   {minutes:g}-min point: {checkpoint.name} ({elapsed[checkpoint]:.1f} min trained)")
        models[minutes] = _fine_tunable_copy(
            checkpoint, final, points_dir / point_name(minutes), config.finetune_dropout
        )
    models[config.budget_minutes] = final  # written with FINETUNE_DROPOUT
    if config.finetune_dropout != FINETUNE_DROPOUT:
        models[config.budget_minutes] = _fine_tunable_copy(
            final, final, points_dir / point_name(config.budget_minutes), config.finetune_dropout
        )
    return models


def _fine_tunable_copy(checkpoint: Path, final: Path, directory: Path, dropout: float) -> Path:
    """The checkpoint's weights with the final model's tokenizer and the fine-tuning dropout."""
    if (directory / "config.json").is_file():
        return directory
    with atomic_directory(directory) as target:
        for name in ("config.json", "model.safetensors"):
            shutil.copy2(checkpoint / name, target / name)
        for name in TOKENIZER_FILES:
            if (final / name).is_file():
                shutil.copy2(final / name, target / name)
        restore_finetune_dropout(target, dropout)
    return directory


def _scratch_model(final: Path, points_dir: Path) -> Path:
    """The final model's shape (config.json) and tokenizer, without weights.

    Each seed builds its own random twin from it (`_scratch_twin`).
    """
    directory = points_dir / point_name(SCRATCH)
    if (directory / "config.json").is_file():
        return directory
    with atomic_directory(directory) as target:
        shutil.copy2(final / "config.json", target / "config.json")
        Tokenizer.from_pretrained(final).save_pretrained(target)
    return directory


def _scratch_twin(config: TransferConfig, shape_dir: Path, seed: int) -> Path:
    """`seed`'s random twin of the shape directory, beside it, with the fine-tuning dropout."""
    dropout = config.finetune_dropout
    model_config = BertConfig.from_json_file(shape_dir / "config.json").replace(
        hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout
    )
    position_init = config.pretrain_run().position_initialization()
    directory = shape_dir.with_name(f"{shape_dir.name}-seed-{seed}")
    tokenizer = Tokenizer.from_pretrained(shape_dir)
    return random_twin(model_config, tokenizer, seed, position_init, directory)


# --- fine-tuning ----------------------------------------------------------------------------------


def _check_split(task_dir: Path, data: TaskData, test: list) -> None:
    """Record the task's split beside its runs; refuse to continue runs made on another split.

    Finished runs are skipped when the command is run again, which is only right if the data and
    the split rules are still the same.
    """
    digest = hashlib.sha256()
    for part in (data.train, data.dev, test):
        digest.update(f"{len(part)}\n".encode())
        for example in part:
            digest.update(f"{example!r}\n".encode())
    split = {"train": len(data.train), "dev": len(data.dev), "test": len(test)}
    split["sha256"] = digest.hexdigest()
    path = task_dir / SPLIT_FILE
    if path.is_file():
        if json.loads(path.read_text(encoding="utf-8")) != split:
            raise ValueError(
                f"the data or split of {task_dir.name} changed since its runs in {task_dir} "
                "were made; move that directory away to fine-tune it again"
            )
        return
    write_json(path, split)


def _finetune_and_test(
    config: TransferConfig,
    row: TransferTask,
    task: Task,
    data: TaskData,
    test: list,
    model_dir: Path,
    seed: int,
    run_dir: Path,
    show_progress: bool,
) -> dict[str, float]:
    """Fine-tune one point's model with one seed (skipped when its test.json exists)."""
    if (run_dir / TEST_FILE).is_file():
        return read_test(run_dir)
    if model_dir.name == point_name(SCRATCH):
        model_dir = _scratch_twin(config, model_dir, seed)
    finetune_config = FinetuneConfig(
        learning_rate=config.learning_rate,
        batch_size=FINETUNE_BATCH_SIZE,
        num_train_epochs=row.num_epochs,
        seed=seed,
    )
    return finetune_and_test(task, data, test, model_dir, finetune_config, run_dir, show_progress)


# --- the results ----------------------------------------------------------------------------------


def _results_base(config, rows, pretrain_dir: Path, metric_names) -> dict[str, Any]:
    """What results.json says besides the scores and timings: settings, tasks, pre-training."""
    evals = [r for r in read_metrics(pretrain_dir / METRICS_FILE) if r["kind"] == "eval"]
    recipe = budget_recipe(config.budget_minutes * 60)
    return {
        "config": {
            "lang": config.lang,
            "budget_minutes": config.budget_minutes,
            "points": [point_name(p) for p in config.all_points()],
            "point_minutes": list(config.all_points()),
            "seeds": list(config.seeds),
            "corpus": [str(p) for p in config.corpus_files()],
            "finetune_learning_rate": config.learning_rate,
            "finetune_dropout": config.finetune_dropout,
            "model_size": config.shape(),
            "pretrain_learning_rate": config.pretrain_learning_rate or recipe.learning_rate,
            "tokenizer": str(config.tokenizer) if config.tokenizer else "trained on the corpus",
            "pretrain_objective": config.objective(),
            "pretrain_mlm_probability": config.mlm_probability(),
            "test_fraction": TEST_FRACTION,
            "dev_fraction": DEV_FRACTION,
            "recipe": recipe.to_json(),
        },
        "tasks": {row.name: row.to_json() for row in rows},
        "metrics": metric_names,
        "pretraining_last_eval": evals[-1] if evals else {},
    }
