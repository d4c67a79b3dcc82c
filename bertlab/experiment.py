"""`bertlab experiment transfer`: does pre-training on a budget pay off downstream?

Pre-train with the budget recipe (`bertlab pretrain --budget`), then fine-tune the model at several
points of that run (0 minutes = a randomly initialized model of the same shape) on a set of tasks,
with the same fine-tuning budget and several seeds each, and score every run on a test split
carved from the task's training file. Everything lands in one directory: the pre-training run,
each fine-tuning run with its `test.json`, `results.json`, `table.md` and `transfer.png`.

Each step is skipped when its output is already there, so an interrupted experiment continues
where it stopped when the same command is run again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import random
import shutil
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

from bertlab.budget import (
    FINETUNE_DROPOUT,
    budget_recipe,
    init_positions,
    restore_finetune_dropout,
)
from bertlab.config import FinetuneConfig, TaskDataConfig
from bertlab.data.tasks import TaggedSentence
from bertlab.training.finetune import (
    DATA_SPLIT_SEED,
    ModelSource,
    TaskData,
    finetune_task,
    holdout_split,
)
from bertlab.training.task_inference import write_atomically

logger = logging.getLogger(__name__)

RESULTS_FILE = "results.json"
TABLE_FILE = "table.md"
PLOT_FILE = "transfer.png"
TEST_FILE = "test.json"
SPLIT_FILE = "split.json"  # per task: the split its fine-tuning runs were made on
SETTINGS_FILE = "settings.json"  # the settings every finished step of OUT was made with
SCRATCH = 0  # the point "0 minutes of pre-training": a random model of the recipe's shape
TEST_FRACTION = 0.2  # of each task's training file, held out as its test split
DEV_FRACTION = 0.1  # of the rest, held out to pick the best epoch
MAX_DEV_EXAMPLES = 2000  # beyond this, a dev split only costs time
FINETUNE_LEARNING_RATE = 5e-4  # measured for this model size: docs/budget.md
FINETUNE_BATCH_SIZE = 32
CHECKPOINT_MINUTES = 5.0  # pre-training checkpoints, from which the points are picked
TASK_TEXT_FILE = "task_text.txt"  # with --task-text: the tasks' unlabeled training text
TASK_TEXT_GROUP = 16  # examples per document of the task text (1 with next-sentence prediction)
PRETRAIN_OBJECTIVES = ("mlm", "mlm+nsp")  # what --pretrain-objective may choose
EVAL_EVERY_STEPS = 250  # held-out MLM evaluations: a learning curve of a few dozen points
POINT_TOLERANCE = 0.2  # a point's checkpoint must lie within 20% of the minutes asked for


@dataclass(frozen=True)
class TransferTask:
    """One row of the table: a registered task, its training file and its fine-tuning budget."""

    name: str
    task: str  # a name in bertlab.data.tasks.TASKS
    path: str  # the training file, relative to the data directory
    epochs: int = 3
    max_seq_length: int = 128
    max_train_examples: int | None = None  # a subsample of the training part (few labels)
    # SST-2's training file holds every phrase of its sentences: split by sentence, and test and
    # pick epochs on whole held-out sentences only (as GLUE's dev set), see `sentence_split`.
    split_by_sentence: bool = False


TASKS = {
    "en": (
        TransferTask("sst2", "sst2", "glue/SST-2/train.tsv", 1, 64, split_by_sentence=True),
        TransferTask(
            "sst2-1k", "sst2", "glue/SST-2/train.tsv", 10, 64, 1000, split_by_sentence=True
        ),
        TransferTask("mrpc", "mrpc", "glue/MRPC/train.tsv"),
        TransferTask("stsb", "stsb", "glue/STS-B/train.tsv"),
        TransferTask("rte", "rte", "glue/RTE/train.tsv"),
        TransferTask("cola", "cola", "glue/CoLA/train.tsv", max_seq_length=64),
        TransferTask("conll2003", "conll2003", "conll2003/train.txt"),
    ),
    "zh": (
        TransferTask("chnsenticorp", "chnsenticorp", "chnsenticorp/train.tsv"),
        TransferTask("resume-ner", "tagging", "resume_ner/train.char.bmes"),
    ),
}
CORPORA = {
    "en": ("corpus_en/enwiki_sample_2014.txt.gz", "corpus_en/enwiki_sample_2021.txt.gz"),
    "zh": (
        "corpus_zh/zhwiki_bert_sampled.txt",
        "corpus_zh/CLUECorpusSmall_bert_sampled.txt",
    ),
}


@dataclass(frozen=True)
class TransferConfig:
    """What one experiment runs."""

    data_dir: Path
    out: Path
    lang: str = "en"
    budget_minutes: float = 60.0
    points: tuple[float, ...] = (10.0, 30.0)  # minutes, besides 0 and the whole budget
    seeds: tuple[int, ...] = (1, 2, 3)
    tasks: tuple[str, ...] | None = None  # names in TASKS[lang]; None: all
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
        from bertlab.config import PRESETS

        if self.lang not in TASKS:
            raise ValueError(f"unknown language {self.lang!r}; choose one of {', '.join(TASKS)}")
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
        known = {t.name for t in TASKS[self.lang]}
        unknown = sorted(set(self.tasks or ()) - known)
        if unknown:
            raise ValueError(f"unknown task(s) {unknown}; choose from {sorted(known)}")

    def selected_tasks(self) -> tuple[TransferTask, ...]:
        return tuple(t for t in TASKS[self.lang] if self.tasks is None or t.name in self.tasks)

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

    def objective(self) -> str:
        """The pre-training objective: --pretrain-objective, else the budget recipe's."""
        return self.pretrain_objective or budget_recipe(self.budget_minutes * 60).objective

    def mlm_probability(self) -> float:
        """The pre-training masking rate: --pretrain-mlm-probability, else the recipe's."""
        recipe = budget_recipe(self.budget_minutes * 60)
        return self.pretrain_mlm_probability or recipe.mlm_probability

    def all_points(self) -> tuple[float, ...]:
        return (SCRATCH, *sorted(self.points), self.budget_minutes)

    def shape(self) -> str:
        """The encoder's PRESETS name: --model-size, else the budget recipe's."""
        return self.model_size or budget_recipe(self.budget_minutes * 60).model_size


# --- the experiment -------------------------------------------------------------------------------


def run_transfer(
    config: TransferConfig, show_progress: bool = True, say: Callable[[str], None] = print
) -> dict[str, Any]:
    """Pre-train, fine-tune every point x task x seed, write the table and the plot."""
    tasks = config.selected_tasks()
    _check_inputs(config, tasks)
    out = config.out
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()

    say(f"== pre-training with the budget recipe, {config.budget_minutes:g} min")
    pretrain_dir = _pretrain(config, show_progress, say)
    models = _point_models(config, pretrain_dir, say)
    timings = {"pre-training": time.perf_counter() - started}

    splits = {}
    for spec in tasks:
        splits[spec.name] = _task_splits(config, spec)
        _, data, test = splits[spec.name]
        _check_split(out / "finetune" / spec.name, data, test)
        say(
            f"   {spec.name}: {len(data.train):,} training, {len(data.dev):,} dev, "
            f"{len(test):,} test examples"
        )
    # The two ends first, so that the main comparison is complete as early as possible.
    order = [SCRATCH, config.budget_minutes, *sorted(config.points)]
    say(
        f"== fine-tuning {len(tasks)} task(s) x {len(order)} point(s) x {len(config.seeds)} seed(s)"
    )
    scores: dict[str, dict[str, list[float]]] = {spec.name: {} for spec in tasks}
    metric_names = {name: task.primary_metric for name, (task, _, _) in splits.items()}
    base = _results_base(config, tasks, pretrain_dir, metric_names)
    for minutes in order:
        point = _point_name(minutes)
        for spec in tasks:
            task, data, test = splits[spec.name]
            values = []
            for seed in config.seeds:
                run_dir = out / "finetune" / spec.name / point / f"seed-{seed}"
                metrics = _finetune_and_test(
                    config, spec, task, data, test, models[minutes], seed, run_dir, show_progress
                )
                values.append(metrics[task.primary_metric])
            scores[spec.name][point] = values
            say(f"   {point:>8} {spec.name}: {task.primary_metric} {summary(values)}")
            timings["total"] = time.perf_counter() - started
            results = base | {"scores": scores, "timings_seconds": timings}
            _write_results(config.out, results)
    for line in results_table(results):
        say(line)
    say(f"wrote {out / TABLE_FILE}, {out / PLOT_FILE}, {out / RESULTS_FILE}")
    return results


def _write_results(out: Path, results: dict[str, Any]) -> None:
    """results.json, table.md and transfer.png from the scores so far (missing points: -)."""
    (out / RESULTS_FILE).write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    (out / TABLE_FILE).write_text("\n".join(results_table(results)) + "\n", encoding="utf-8")
    plot_transfer(results, out / PLOT_FILE)


def _check_inputs(config: TransferConfig, tasks: Sequence[TransferTask]) -> None:
    missing = [str(p) for p in config.user_corpus_files() if not p.is_file()]
    missing += [
        str(config.data_dir / t.path) for t in tasks if not (config.data_dir / t.path).is_file()
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
        settings["task_text_tasks"] = [spec.name for spec in config.selected_tasks()]
    if config.pretrain_objective:  # likewise
        settings["pretrain_objective"] = config.pretrain_objective
    if config.pretrain_mlm_probability:  # likewise
        settings["pretrain_mlm_probability"] = config.pretrain_mlm_probability
    return json.loads(json.dumps(settings))  # tuples as lists, as read back from the file


def _check_settings(out: Path, settings: dict[str, Any]) -> None:
    """Record the settings in OUT; refuse to continue an experiment made with other ones.

    A run of the same command skips every step whose output is there, which is only right if
    that output was made with the same settings (an earlier fine-tuning rate, vocabulary or
    recipe would otherwise be mixed silently into the new table).
    """
    path = out / SETTINGS_FILE
    if not path.is_file():
        path.write_text(json.dumps(settings, indent=2) + "\n", encoding="utf-8")
        return
    recorded = json.loads(path.read_text(encoding="utf-8"))
    changed = [
        f"{key} {recorded.get(key)!r} there, {settings.get(key)!r} now"
        for key in sorted(set(recorded) | set(settings))
        if recorded.get(key) != settings.get(key)
    ]
    if changed:
        raise ValueError(
            f"{out} holds an experiment made with other settings ({'; '.join(changed)}); "
            "use another --out, or move that directory away to start again"
        )


def _point_name(minutes: float) -> str:
    return "scratch" if minutes == SCRATCH else f"{minutes:g}min"


# --- pre-training and its points ------------------------------------------------------------------


def _pretrain(config: TransferConfig, show_progress: bool, say: Callable[[str], None]) -> Path:
    """`bertlab pretrain --budget` into OUT/pretrain (continued if interrupted, skipped if done)."""
    from bertlab.cli import build_parser
    from bertlab.training.checkpointing import latest_checkpoint

    run_dir = config.out / "pretrain"
    if (run_dir / "final" / "config.json").is_file():
        _check_shape(config, run_dir / "final")
        _check_settings(config.out, experiment_settings(config))
        return run_dir
    argv = pretrain_argv(config, run_dir)
    checkpoint = latest_checkpoint(run_dir)
    if checkpoint is not None:
        _check_shape(config, checkpoint)
        argv.append("--resume")
    _check_settings(config.out, experiment_settings(config))
    if config.task_text_repeats:  # after the settings check: never overwrite another run's
        path, counts = write_task_text(config)
        say(
            f"   task text: {', '.join(f'{name} {n:,}' for name, n in counts.items())} training "
            f"examples, x {config.task_text_repeats}, in {path}"
        )
    if not show_progress:
        argv.append("--no-progress")
    args = build_parser().parse_args(argv)
    code = args.handler(args)
    if code:
        raise RuntimeError(f"pre-training failed (exit {code})")
    return run_dir


def pretrain_argv(config: TransferConfig, run_dir: Path) -> list[str]:
    """The `bertlab pretrain` command line of the experiment's pre-training phase."""
    argv = [
        "pretrain",
        "--corpus",
        *map(str, config.corpus_files()),
        "--out",
        str(run_dir),
        "--budget",
        f"{config.budget_minutes:g}m",
        "--lang",
        config.lang,
        "--checkpoint-minutes",
        f"{min((CHECKPOINT_MINUTES, *(p / 2 for p in config.points))):g}",
        "--keep-checkpoints",
        "0",
        "--eval-every",
        str(EVAL_EVERY_STEPS),
    ]
    if config.model_size is not None:
        argv += ["--model-size", config.model_size]
    if config.pretrain_learning_rate is not None:
        argv += ["--learning-rate", f"{config.pretrain_learning_rate:g}"]
    if config.tokenizer is not None:
        argv += ["--tokenizer", str(config.tokenizer)]
    if config.pretrain_objective is not None:
        argv += ["--objective", config.pretrain_objective]
    if config.pretrain_mlm_probability is not None:
        argv += ["--mlm-probability", f"{config.pretrain_mlm_probability:g}"]
    return argv


def _check_shape(config: TransferConfig, model_dir: Path) -> None:
    """Refuse to continue a pre-training run of another shape than the one asked for."""
    from bertlab.config import PRESETS, BertConfig

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
    from bertlab.training.checkpointing import list_checkpoints, load_state

    points_dir = config.out / "points"
    models: dict[float, Path] = {SCRATCH: _scratch_model(pretrain_dir / "final", points_dir)}
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
            checkpoint,
            pretrain_dir / "final",
            points_dir / _point_name(minutes),
            config.finetune_dropout,
        )
    models[config.budget_minutes] = pretrain_dir / "final"  # written with FINETUNE_DROPOUT
    if config.finetune_dropout != FINETUNE_DROPOUT:
        models[config.budget_minutes] = _fine_tunable_copy(
            pretrain_dir / "final",
            pretrain_dir / "final",
            points_dir / _point_name(config.budget_minutes),
            config.finetune_dropout,
        )
    return models


def _fine_tunable_copy(checkpoint: Path, final: Path, directory: Path, dropout: float) -> Path:
    """The checkpoint's weights with the final model's tokenizer and the fine-tuning dropout."""
    if (directory / "config.json").is_file():
        return directory
    from bertlab.training.checkpointing import replace_directory

    def write(target: Path) -> None:
        for name in ("config.json", "model.safetensors"):
            shutil.copy2(checkpoint / name, target / name)
        for tokenizer_file in ("vocab.txt", "tokenizer.json", "tokenizer_config.json"):
            if (final / tokenizer_file).is_file():
                shutil.copy2(final / tokenizer_file, target / tokenizer_file)
        restore_finetune_dropout(target, dropout)

    replace_directory(directory, write)
    return directory


def _scratch_model(final: Path, points_dir: Path) -> Path:
    """A randomly initialized encoder of the final model's shape, with its tokenizer.

    Each seed builds its own random encoder from it (`_seeded_random_encoder`), so this
    directory only carries the shape and the tokenizer; see `_finetune_and_test`.
    """
    directory = points_dir / _point_name(SCRATCH)
    if (directory / "config.json").is_file():
        return directory
    from bertlab.tokenization import Tokenizer
    from bertlab.training.checkpointing import replace_directory

    def write(target: Path) -> None:
        shutil.copy2(final / "config.json", target / "config.json")
        Tokenizer.from_pretrained(final).save_pretrained(target)

    replace_directory(directory, write)
    return directory


# --- fine-tuning ----------------------------------------------------------------------------------


def _task_splits(config: TransferConfig, spec: TransferTask):
    """(task, TaskData with train and dev, test examples), carved from the training file."""
    from bertlab.training.task_inference import make_task

    task = make_task(spec.task, data=TaskDataConfig(max_seq_length=spec.max_seq_length))
    examples = task.read_gold(config.data_dir / spec.path)
    label_names = task.label_names(examples)
    split = sentence_split if spec.split_by_sentence else partial(holdout_split, task)
    rest, test = split(examples, TEST_FRACTION)
    train, dev = split(rest, DEV_FRACTION)
    if len(dev) > MAX_DEV_EXAMPLES:
        dev = random.Random(DATA_SPLIT_SEED).sample(dev, MAX_DEV_EXAMPLES)
    if spec.max_train_examples is not None and spec.max_train_examples < len(train):
        train = random.Random(DATA_SPLIT_SEED).sample(train, spec.max_train_examples)
    return task, TaskData(train, dev, label_names), test


def task_text(config: TransferConfig) -> dict[str, list[list[str]]]:
    """The unlabeled text of the chosen tasks' training parts, as lines per example, by task.

    Only the part the models are fine-tuned on, never a dev or test example. A task that
    fine-tunes on a subsample (sst2-1k) gives its whole training part: the text of the examples
    whose labels it does not see, as in semi-supervised learning. Tasks that share a training file
    give it once. SST-2 gives its whole sentences only, not their phrases; a sentence pair gives
    two lines; a tagged sentence gives its tokens, joined with spaces (no separator in Chinese).
    """
    joiner = "" if config.lang == "zh" else " "
    texts: dict[str, list[list[str]]] = {}
    paths = set()
    for spec in config.selected_tasks():
        if spec.path in paths:
            continue
        paths.add(spec.path)
        _, data, _ = _task_splits(config, replace(spec, max_train_examples=None))
        examples = data.train
        if spec.split_by_sentence:
            roots = phrase_roots([example.text_a for example in examples])
            examples = [example for i, example in enumerate(examples) if roots[i] == i]
        lines = []
        for example in examples:
            if isinstance(example, TaggedSentence):
                lines.append([joiner.join(example.tokens)])
            else:
                lines.append([t for t in (example.text_a, example.text_b) if t and t.strip()])
        texts[spec.name] = lines
    return texts


def write_task_text(config: TransferConfig) -> tuple[Path, dict[str, int]]:
    """OUT/task_text.txt: `task_text`, repeated --task-text times, in corpus format.

    Each repeat shuffles every task's examples anew and groups them by TASK_TEXT_GROUP into
    documents (one line per sentence, a blank line between documents). With next-sentence
    prediction every example is a document of its own instead, so that a pair's two sentences
    are the A and B of one instance, and B is never the unrelated example shuffled next to it.
    The same config writes the same bytes, so a continued run finds its tokenized corpus again.
    """
    texts = task_text(config)
    per_document = 1 if config.objective() == "mlm+nsp" else TASK_TEXT_GROUP
    documents = []
    for repeat in range(config.task_text_repeats):
        for name, lines in texts.items():
            order = list(range(len(lines)))
            random.Random(f"task-text:{name}:{repeat}").shuffle(order)
            for start in range(0, len(order), per_document):
                group = order[start : start + per_document]
                documents.append("\n".join(line for i in group for line in lines[i]))
    path = config.out / TASK_TEXT_FILE
    write_atomically(path, "\n\n".join(documents) + "\n")
    return path, {name: len(lines) for name, lines in texts.items()}


def phrase_roots(texts: Sequence[str]) -> list[int]:
    """For each text, the index of a longest text that contains it word for word (its sentence).

    A text no longer text contains is its own root. Texts are compared as whitespace-separated
    words, so "good" lies inside "a good film" but not inside "goodness".
    """
    words = [text.split() for text in texts]
    by_length = sorted(range(len(texts)), key=lambda i: -len(words[i]))
    roots_with: dict[tuple[str, ...], list[int]] = {}  # n-gram (n <= 3) -> roots containing it
    roots = list(range(len(texts)))
    for i in by_length:
        candidates = roots_with.get(tuple(words[i][:3]), ())
        if len(words[i]) <= 3:  # the n-gram index itself proves containment
            root = candidates[0] if candidates else None
        else:
            padded = f" {' '.join(words[i])} "
            root = next((c for c in candidates if padded in f" {' '.join(words[c])} "), None)
        if root is None:
            for n in (1, 2, 3):
                for start in range(len(words[i]) - n + 1):
                    roots_with.setdefault(tuple(words[i][start : start + n]), []).append(i)
        else:
            roots[i] = root
    return roots


def sentence_split(examples: list, fraction: float) -> tuple[list, list]:
    """(train, held-out) for a file of phrases and their sentences, such as SST-2's training file.

    About `fraction` of the sentences (`phrase_roots`) are held out, as whole sentences only; the
    training side keeps every phrase of the other sentences. A random split of SST-2's phrases
    would test 86% of its items on phrases that occur inside a training item.
    """
    roots = phrase_roots([example.text_a for example in examples])
    sentences = sorted(set(roots))
    random.Random(DATA_SPLIT_SEED).shuffle(sentences)
    held_out = set(sentences[: max(1, round(fraction * len(sentences)))])
    if len(held_out) >= len(sentences):
        raise ValueError(f"too few sentences to hold out {fraction:.0%} of them")
    train = [example for example, root in zip(examples, roots, strict=True) if root not in held_out]
    return train, [examples[index] for index in sorted(held_out)]


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
    task_dir.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(split, indent=2) + "\n", encoding="utf-8")


def _finetune_and_test(
    config: TransferConfig,
    spec: TransferTask,
    task,
    data: TaskData,
    test: list,
    model_dir: Path,
    seed: int,
    run_dir: Path,
    show_progress: bool,
) -> dict[str, float]:
    """Fine-tune one model with one seed (skipped when its test.json exists); test metrics."""
    if (run_dir / TEST_FILE).is_file():
        return json.loads((run_dir / TEST_FILE).read_text(encoding="utf-8"))
    from bertlab.tokenization import Tokenizer
    from bertlab.training.runtime import default_device, resolve_precision
    from bertlab.training.task_inference import run_task

    if model_dir.name == _point_name(SCRATCH):
        position_init = budget_recipe(config.budget_minutes * 60).position_init
        model_dir = _seeded_random_encoder(model_dir, seed, position_init, config.finetune_dropout)
    finetune_config = FinetuneConfig(
        learning_rate=config.learning_rate,
        batch_size=FINETUNE_BATCH_SIZE,
        num_train_epochs=spec.epochs,
        seed=seed,
    )
    if run_dir.exists():
        shutil.rmtree(run_dir)  # an interrupted run: start it again
    result = finetune_task(
        task, data, ModelSource(model_dir), finetune_config, run_dir, show_progress
    )
    model = task.load_head(result.best_dir, None).to(default_device())
    tokenizer = Tokenizer.from_pretrained(result.best_dir)
    precision = resolve_precision("auto", default_device())
    predictions = run_task(task, model, tokenizer, test, 128, precision)
    metrics = task.score(predictions, test)
    (run_dir / TEST_FILE).write_text(json.dumps(metrics, indent=2) + "\n", encoding="utf-8")
    shutil.rmtree(result.best_dir)  # the score is kept; a few hundred small models are not
    return metrics


def _seeded_random_encoder(shape_dir: Path, seed: int, position_init: str, dropout: float) -> Path:
    """A random encoder with `seed`'s initialization and `dropout`, beside the shape directory.

    It starts where pre-training started (the recipe's `position_init` included), so the
    pre-trained model and scratch differ by the pre-training alone.
    """
    from bertlab.config import BertConfig
    from bertlab.modeling import BertModel
    from bertlab.tokenization import Tokenizer
    from bertlab.training.runtime import set_seed

    directory = shape_dir.with_name(f"{shape_dir.name}-seed-{seed}")
    if not (directory / "model.safetensors").is_file():
        config = BertConfig.from_json_file(shape_dir / "config.json")
        config = config.replace(hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout)
        set_seed(seed)
        model = BertModel(config)
        init_positions(model.embeddings, position_init, config.initializer_range)
        model.save_pretrained(directory)
        Tokenizer.from_pretrained(shape_dir).save_pretrained(directory)
    return directory


# --- the results ----------------------------------------------------------------------------------


def _results_base(config, tasks, pretrain_dir: Path, metric_names) -> dict[str, Any]:
    """What results.json says besides the scores and timings: settings, tasks, pre-training."""
    from bertlab.training.metrics_log import read_metrics

    evals = [r for r in read_metrics(pretrain_dir / "metrics.jsonl") if r["kind"] == "eval"]
    recipe = budget_recipe(config.budget_minutes * 60)
    return {
        "config": {
            "lang": config.lang,
            "budget_minutes": config.budget_minutes,
            "points": [_point_name(p) for p in config.all_points()],
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
        "tasks": {t.name: asdict(t) for t in tasks},
        "metrics": metric_names,
        "pretraining_last_eval": evals[-1] if evals else {},
    }


def results_table(results: dict[str, Any]) -> list[str]:
    """Median (min-max) per task and point; a verdict of the full budget against scratch."""
    points = results["config"]["points"]
    budget = points[-1]
    lines = [
        "| task (metric) | "
        + " | ".join(points)
        + f" | {budget} beats scratch by more than the spread? |",
        "|---|" + "---:|" * len(points) + "---|",
    ]
    for name, by_point in results["scores"].items():
        cells = []
        for point in points:
            values = by_point.get(point)
            cells.append(summary(values) if values else "–")
        done = "scratch" in by_point and budget in by_point
        answer = verdict(by_point["scratch"], by_point[budget]) if done else "–"
        lines.append(
            f"| {name} ({results['metrics'][name]}) | " + " | ".join(cells) + f" | {answer} |"
        )
    return lines


def verdict(scratch: Sequence[float], pretrained: Sequence[float]) -> str:
    """ "yes" when the pre-trained median beats scratch's by more than either model's seed spread
    (max - min over the seeds), "no" otherwise, with the margin."""
    scratch, pretrained = scored(scratch), scored(pretrained)
    margin = statistics.median(pretrained) - statistics.median(scratch)
    spread = max(max(scratch) - min(scratch), max(pretrained) - min(pretrained))
    answer = "yes" if margin > spread else "no"
    return f"{answer} ({margin:+.4f} vs spread {spread:.4f})"


def scored(values: Sequence[float]) -> list[float]:
    """The seeds' scores with an undefined one (NaN: the Spearman correlation of a constant
    prediction) counted as 0, the correlation a constant prediction carries."""
    return [0.0 if math.isnan(value) else value for value in values]


def summary(values: Sequence[float]) -> str:
    """ "median (min–max)" of the seeds (`scored`), and how many predicted a constant."""
    kept = scored(values)
    text = f"{statistics.median(kept):.3f} ({min(kept):.3f}–{max(kept):.3f})"
    constant = sum(math.isnan(value) for value in values)
    return text + (f", {constant} constant" if constant else "")


def plot_transfer(results: dict[str, Any], path: Path) -> Path:
    """Downstream score against pre-training minutes, one panel per task (median, min-max)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(results["scores"])
    columns = min(4, len(names))
    rows = math.ceil(len(names) / columns)
    figure, axes = plt.subplots(rows, columns, figsize=(3.2 * columns, 2.8 * rows), squeeze=False)
    minutes = results["config"]["point_minutes"]
    points = results["config"]["points"]
    for axis, name in zip(axes.flat, names, strict=False):
        by_point = results["scores"][name]
        done = [
            (m, scored(by_point[p])) for m, p in zip(minutes, points, strict=True) if p in by_point
        ]
        medians = [statistics.median(v) for _, v in done]
        low = [m - min(v) for m, (_, v) in zip(medians, done, strict=True)]
        high = [max(v) - m for m, (_, v) in zip(medians, done, strict=True)]
        axis.errorbar([m for m, _ in done], medians, yerr=[low, high], marker="o", capsize=3)
        axis.set_title(name, fontsize=10)
        axis.set_xlabel("pre-training minutes")
        axis.set_ylabel(results["metrics"][name], fontsize=8)
        axis.grid(alpha=0.3)
    for axis in list(axes.flat)[len(names) :]:
        axis.axis("off")
    seeds = len(results["config"]["seeds"])
    figure.suptitle(
        f"fine-tuned test score vs pre-training time (median, min-max of {seeds} seeds)"
    )
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path
