"""Fine-tuning a task (BERT Sec. 4): read its data, build its head, train it, write the model.

`finetune_task` reads and checks all the data first (so bad input stops the run before anything
is written), seeds, builds the head, then trains it with `loop.train_task_model` (the
optimizer, the schedule, the strategies, evaluation after every epoch, early stopping).
`OUT/metrics.jsonl` and `OUT/curves.png` record the run; `OUT/best/` holds the best model, its
tokenizer, `bertlab_task.json` in the Hugging Face layout and its model card. `run_finetuning` runs
it as `bertlab finetune` does, in a run directory of its own; `finetune_seeds` runs several seeds.
"""

from __future__ import annotations

import logging
import math
import shutil
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from torch import nn

from bertlab.core.atomic import (
    atomic_directory,
    remove_temporaries,
    run_lock,
    write_json,
)
from bertlab.core.config import BertConfig, read_json_object
from bertlab.core.finetune_config import (
    SLANTED_TRIANGULAR_SCHEDULE,
    FinetuneConfig,
    width_defaults,
)
from bertlab.core.model_card import ModelCard, write_model_card
from bertlab.core.outputs import check_outputs
from bertlab.core.replacing import claim, outputs_in, replacing, restore_replaced
from bertlab.core.run_folder import (
    BEST_DIR,
    CURVES_FILE,
    FINETUNE_OUTPUTS,
    METRICS_FILE,
    PRETRAIN_OUTPUTS,
    RESULT_FILE,
    SEEDS_FILE,
)
from bertlab.core.runtime import default_device, resolve_precision, set_seed
from bertlab.core.wording import Worded
from bertlab.data.tasks.classification import Example
from bertlab.data.tasks.splits import holdout_split, subsample
from bertlab.network.architectures import folder_architecture
from bertlab.network.checkpoint import CONFIG_NAME
from bertlab.task_families import TASK_FILE, Task, run_task
from bertlab.tokenizer.wordpiece import Tokenizer, check_fits_vocabulary
from bertlab.training.finetuning.loop import (
    FinetuneResult,
    apply_freezing,
    train_task_model,
)
from bertlab.training.finetuning.one_class import (
    OneClassCollapse,
    one_class_collapse,
    one_class_training,
)

logger = logging.getLogger(__name__)

SEED_DIR_PATTERN = "seed-*"  # OUT/seed-S: one run per seed
FINETUNE_COMMAND = "finetune"  # whose run directory OUT is (`replacing.claim`)
# Everything a fine-tuning run writes in OUT: what `--overwrite` replaces.
FINETUNE_OUTPUT_NAMES = (*FINETUNE_OUTPUTS, METRICS_FILE, CURVES_FILE, SEED_DIR_PATTERN)


@dataclass(frozen=True)
class ModelSource:
    """Where the encoder comes from: a checkpoint directory, or nothing (`--from-scratch`).

    Attributes:
        directory: a bertlab or Hugging Face folder, or a Hub id (`bert-base-uncased`); None to
            start from random weights.
        model_size: the `BertConfig` preset of a from-scratch model (`mini`, `base`, ...).
        tokenizer: a vocab.txt or tokenizer directory; defaults to `directory`'s own files.
    """

    directory: Path | None = None
    model_size: str | None = None
    tokenizer: Path | None = None

    def __post_init__(self) -> None:
        if (self.directory is None) == (self.model_size is None):
            raise ValueError("give a model directory, or a model size to start from scratch")
        if self.directory is None and self.tokenizer is None:
            raise ValueError("a model trained from scratch needs a tokenizer")

    def load_tokenizer(self) -> Tokenizer:
        return Tokenizer.from_pretrained(self.tokenizer or self.directory)


# --- saving ---------------------------------------------------------------------------------------


def write_task_model(directory: Path, model: nn.Module, tokenizer: Tokenizer, task: Task) -> None:
    """The model (HF layout), its tokenizer and the task settings: all `--model DIR` needs."""
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    write_json(directory / TASK_FILE, task.to_json())


# --- the defaults of `PretrainedBert.fit` ---------------------------------------------------------


def default_finetune_config(model_config: BertConfig) -> FinetuneConfig:
    """`PretrainedBert.fit`'s settings when it is given none: the learning rate and the epochs
    chosen by the encoder's width (`core.finetune_config.FINETUNE_DEFAULTS_BY_WIDTH`, the table
    `bertlab finetune` reads too), the rest `FinetuneConfig`'s (batch 32, warmup 10%, ...)."""
    row = width_defaults(model_config.hidden_size)
    epochs = row.num_train_epochs or FinetuneConfig.num_train_epochs
    return FinetuneConfig(learning_rate=row.learning_rate, num_train_epochs=epochs)


# --- one task, end to end -------------------------------------------------------------------------


@dataclass(frozen=True)
class TaskData:
    """Training and dev examples, read and checked before anything is trained or written."""

    train: list
    dev: list | None
    label_names: tuple[str, ...] | None


def read_task_data(
    task: Task,
    train_path: Path,
    dev_path: Path | None,
    dev_fraction: float = 0.0,
    max_train_examples: int | None = None,
) -> TaskData:
    """Read the training file (and the dev file, or hold out `dev_fraction` of the training
    examples), learn the label names, and check the dev labels against them.

    Training data that cannot teach much (one class, blank texts) is warned about
    (`warn_about_training_data`).

    Raises:
        ValueError: bad files (from the readers), dev labels never seen in training, or both a
            dev file and a dev fraction.
    """
    if dev_path is not None and dev_fraction:
        raise ValueError("give a dev file or a dev fraction, not both")
    if not 0.0 <= dev_fraction < 1.0:
        raise ValueError(f"dev_fraction must be in [0, 1), got {dev_fraction}")
    train = task.read_gold(train_path)
    # Labels are learned from the whole training file, held-out part included: a rare tag that
    # lands only in the held-out part is still one of the file's labels.
    label_names = task.label_names(train)
    dev = None
    if dev_fraction:
        train, dev = holdout_split(train, dev_fraction, task.holdout_group)
    train = subsample(train, max_train_examples)
    if dev_path is not None:
        dev = task.read_gold(dev_path, label_names)
    warn_about_training_data(task, train)
    return TaskData(train, dev, label_names)


def warn_about_training_data(task: Task, train: Sequence) -> None:
    """Log a warning for training examples that teach a classifier nothing: labels all of one
    class (a label task), and texts that are empty or blank (classification)."""
    classes = task.classes([], train)  # the gold half only: no predictions yet
    warning = None if classes is None else one_class_training(classes[1])
    if warning is not None:
        logger.warning(warning)
    blank = sum(
        isinstance(example, Example)
        and not (example.text_a.strip() and (example.text_b is None or example.text_b.strip()))
        for example in train
    )
    if blank:
        logger.warning(
            "%d of %d training examples have no text (empty or whitespace only): they teach "
            "the model nothing; remove them or give their text",
            blank,
            len(train),
        )


def build_model(
    task: Task, source: ModelSource, tokenizer: Tokenizer, label_names: tuple[str, ...] | None
) -> nn.Module:
    """The task head: on a checkpoint's encoder, or from scratch at the preset size."""
    if source.directory is not None:
        model = task.load_head(source.directory, label_names)
        check_fits_vocabulary(tokenizer, model.config.vocab_size)
        return model
    config = BertConfig.from_preset(
        source.model_size, vocab_size=tokenizer.vocab_size, pad_token_id=tokenizer.pad_token_id
    )
    return task.new_head(config, label_names)


def _check_head_labels(model: nn.Module, label_names: tuple[str, ...] | None) -> None:
    """Raise a ValueError unless a label head's labels are `label_names`, in id order."""
    id2label = getattr(model, "id2label", None)
    if label_names is None or id2label is None:
        return
    names = tuple(id2label[label_id] for label_id in range(len(id2label)))
    if names != tuple(label_names):
        raise ValueError(f"the head's labels are {list(names)}, the data's {list(label_names)}")


def finetune_task(
    task: Task,
    data: TaskData,
    source: ModelSource,
    config: FinetuneConfig,
    out: Path,
    show_progress: bool = True,
    model: nn.Module | None = None,
    tokenizer: Tokenizer | None = None,
) -> FinetuneResult:
    """Fine-tune on `data.train`, keep the best model by dev score in `out/best`.

    The seed is set before the head is built, so it decides the task layer's initialization (and
    a from-scratch encoder's), the batch order and dropout. When the best epoch's dev predictions
    are all one class (`one_class_collapse`), a warning says so and the result records it.

    `model` (with its `tokenizer`) is a head already built, as `PretrainedBert.fit` holds it: it
    is trained as it is, and `source` only names its base model on the card; its labels must be
    `data.label_names`. Everything else (freezing, encoding, the one-class check, the card,
    result.json) is as for a head built here. `tokenizer` None: `source`'s.
    """
    tokenizer = source.load_tokenizer() if tokenizer is None else tokenizer
    set_seed(config.seed)
    if model is None:
        model = build_model(task, source, tokenizer, data.label_names)
    else:
        _check_head_labels(model, data.label_names)
    task.check_fits(model.config)
    num_trainable = apply_freezing(model, config)
    label2id = None if data.label_names is None else {n: i for i, n in enumerate(data.label_names)}
    features = task.encode(data.train, tokenizer, label2id, with_labels=True)
    model.to(default_device())
    logger.info(
        "%s: %d training examples (%d features), %d dev examples, %d of %d parameters trained",
        task.name,
        len(data.train),
        len(features),
        len(data.dev or ()),
        num_trainable,
        sum(param.numel() for param in model.parameters()),
    )
    evaluate = None
    collapses: list[OneClassCollapse | None] = []  # one per epoch, as evaluated
    if data.dev is not None:
        precision = resolve_precision(config.precision, default_device())
        dev_features = task.encode(data.dev, tokenizer, None, with_labels=False)  # once

        def evaluate(model: nn.Module) -> dict[str, float]:
            predictions = run_task(
                task, model, tokenizer, data.dev, config.eval_batch_size, precision, dev_features
            )
            classes = task.classes(predictions, data.dev)
            collapses.append(None if classes is None else one_class_collapse(*classes))
            return task.score(predictions, data.dev)

    def save(directory: Path, model: nn.Module) -> None:
        write_task_model(directory, model, tokenizer, task)

    result = train_task_model(
        model, features, config, out, evaluate, task.primary_metric, save, show_progress
    )
    if collapses:  # evaluated once per epoch: the best epoch's check
        result = replace(result, one_class=collapses[result.best_epoch - 1])
    if result.one_class is not None:
        logger.warning(result.one_class.warning(result.seed))
    write_model_card(result.best_dir, finetuning_card(task, data, source, config, result))
    write_json(out / RESULT_FILE, result.to_json())
    return result


# --- the run directory ----------------------------------------------------------------------------


def run_finetuning(
    task: Task,
    data: TaskData,
    source: ModelSource,
    config: FinetuneConfig,
    out: Path,
    seeds: Sequence[int] | None = None,
    overwrite: bool = False,
    show_progress: bool = True,
) -> dict[str, Any]:
    """`finetune_task` (or `finetune_seeds` with `seeds`) as `bertlab finetune` runs it: one
    process writes `out` at a time (`run_lock`), and never over an earlier run (`claim_out`).

    Returns:
        The result (`FinetuneResult.to_json()`), or the seeds' summary.

    Raises:
        ValueError: another process writes `out`, or `out` holds an earlier run.
    """
    with run_lock(out):
        claim_out(out, overwrite)
        reads = {"model": source.directory, "tokenizer": source.tokenizer}
        check_outputs(reads, {}, {"out": finetune_outputs(out)})  # what overwrite replaces
        # An earlier run (with `overwrite`) goes only once this one has replaced it: a run that
        # is refused, diverges or is interrupted puts it back.
        with replacing(out, FINETUNE_OUTPUT_NAMES):
            if seeds is None:
                return finetune_task(task, data, source, config, out, show_progress).to_json()
            return finetune_seeds(task, data, source, config, seeds, out, show_progress)


def finetune_outputs(out: Path) -> list[Path]:
    """A fine-tuning run's results, models and training records in `out`."""
    return outputs_in(out, FINETUNE_OUTPUT_NAMES)


def claim_out(out: Path, overwrite: bool) -> None:
    """Clear what killed writers left in `out` (an earlier run that a killed `--overwrite` had
    moved aside is put back) and refuse an earlier run there: a fine-tuning run's model or
    results (replaced by `run_finetuning` with `overwrite`) or a pre-training run. Call it
    holding `run_lock(out)`.

    Raises:
        ValueError: `out` holds a pre-training run, another command's, outputs that bertlab did
            not write, or a fine-tuning run and not `overwrite`.
    """
    remove_temporaries(out)
    if restore_replaced(out):
        logger.warning("%s: put back the earlier run that an interrupted --overwrite replaced", out)
    pretraining = [name for name in PRETRAIN_OUTPUTS if (out / name).exists()]
    if pretraining:
        raise ValueError(
            Worded(
                "{out} {path} holds a pre-training run ({name}/); choose another {out}",
                path=out,
                name=pretraining[0],
            )
        )
    claim(out, FINETUNE_COMMAND, FINETUNE_OUTPUT_NAMES, _is_finetuning_run)  # only its own
    earlier = finetune_outputs(out)
    if earlier and not overwrite:
        raise ValueError(
            Worded(
                "{out} {path} already holds a fine-tuning run ({name}); add {overwrite} to "
                "replace it or choose another {out}",
                path=out,
                name=earlier[0].name,
            )
        )


def _is_finetuning_run(out: Path) -> bool:
    """Whether `out` holds a fine-tuning run by its layout: a best/ with the task settings."""
    return any(
        (best / TASK_FILE).is_file()
        for best in [out / BEST_DIR, *out.glob(f"{SEED_DIR_PATTERN}/{BEST_DIR}")]
    )


# --- the model card -------------------------------------------------------------------------------

# The Hub's pipeline tag of each task family.
PIPELINE_TAGS = {
    "classification": "text-classification",
    "tagging": "token-classification",
    "qa": "question-answering",
    "multiple-choice": "multiple-choice",
}


def finetuning_card(
    task: Task,
    data: TaskData,
    source: ModelSource,
    config: FinetuneConfig,
    result: FinetuneResult,
    seeds_summary: dict[str, Any] | None = None,
) -> ModelCard:
    """The model card of OUT/best: the task's data, the recipe and the dev scores of this run
    (with `seeds_summary`, also every seed's, as `summarize_seeds` returns them)."""
    start = (
        f"`{source.directory}` ({folder_architecture(source.directory).title})"
        if source.directory is not None
        else f"random weights (BERT-{source.model_size}, the no-pre-training baseline)"
    )
    head = read_json_object(result.best_dir / CONFIG_NAME).get("architectures") or ["head"]
    architecture = folder_architecture(result.best_dir)
    network = architecture.title
    where = "# DIR: this folder, or its Hub id once uploaded"
    if architecture.transformers_loads:
        where += "; transformers loads it as well"
    metrics: dict[str, Any] = {"best epoch": result.best_epoch, "epochs run": result.epochs_run}
    metrics |= {f"dev {name}": value for name, value in result.best_metrics.items()}
    labels = f"labels: {', '.join(data.label_names)}" if data.label_names else "no label set"
    return ModelCard(
        title=f"{task.name}: a {network} fine-tuned with bertlab",
        summary=f"A {head[0]} fine-tuned on {task.name} "
        f"({task.spec.description}) by bertlab, starting from {start}.",
        pipeline_tag=PIPELINE_TAGS[task.spec.family],
        intended_use=f"Predicting {task.name} ({task.spec.family}) on text like its training "
        "data (`bertlab predict --task ... --model DIR`). Its scores hold for data like the dev "
        "set below; test it on your own data before relying on it.",
        data=[
            f"task: {task.name} ({task.spec.family}), {labels}",
            f"{len(data.train):,} training examples",
            f"{len(data.dev):,} dev examples" if data.dev is not None else "no dev examples",
        ],
        recipe=_finetuning_recipe(task, config, result),
        metrics=metrics,
        metrics_note=_results_note(task, data, result, seeds_summary),
        how_to_use=[
            where,
            f"bertlab predict --task {task.name} --model DIR --data inputs --output predictions",
            f"bertlab evaluate --task {task.name} --model DIR --data labelled-data",
        ],
        base_model=None if source.directory is None else str(source.directory),
    )


def _finetuning_recipe(task: Task, config: FinetuneConfig, result: FinetuneResult) -> dict:
    return {
        "epochs (at most)": config.num_train_epochs,
        "early stopping patience": config.early_stopping_patience or "off",
        "peak learning rate": config.learning_rate,
        "batch size": config.batch_size * config.gradient_accumulation_steps,
        **_strategy_recipe(config),
        "weight decay": config.weight_decay,
        "max gradient norm": config.max_grad_norm,
        "frozen": result.frozen,
        "trainable parameters": result.trainable_parameters,
        "max sequence length": task.max_seq_length,
        "precision": config.precision if result.precision is None else str(result.precision),
        "seed": result.seed,
    }


def _strategy_recipe(config: FinetuneConfig) -> dict[str, Any]:
    """The model card's rows for the schedule and the strategy (`describe_strategy` in words)."""
    rows: dict[str, Any] = {"schedule": config.schedule}
    if config.schedule == SLANTED_TRIANGULAR_SCHEDULE:
        rows |= {"cut_frac": config.cut_frac, "stlr_ratio": config.stlr_ratio}
    else:
        rows["warmup proportion"] = config.warmup_proportion
    decay = config.layerwise_lr_decay
    rows["layer-wise learning-rate decay"] = "off" if decay == 1.0 else decay
    rows["gradual unfreezing"] = (
        "one layer group per epoch from the top" if config.do_gradual_unfreezing else "off"
    )
    head = config.head_warmup_epochs
    rows["head warmup epochs"] = f"{head} (encoder frozen), then all" if head else "off"
    return rows


def _results_note(
    task: Task, data: TaskData, result: FinetuneResult, seeds_summary: dict[str, Any] | None
) -> str:
    """What the card's numbers are: dev scores of the best epoch (and of the seeds)."""
    if data.dev is None:
        return "No dev data was given: the last epoch's model is kept and nothing was scored."
    note = (
        f"Dev scores of the best epoch (chosen by dev {task.primary_metric}), measured by this "
        "run with the task's official metrics."
    )
    stats = (seeds_summary or {}).get("dev", {}).get(task.primary_metric)
    if stats is not None:
        seeds = ", ".join(map(str, seeds_summary["seeds"]))
        note += (
            f" This is the best of seeds {seeds}: dev {task.primary_metric} mean "
            f"{stats['mean']:.4f}, standard deviation {stats['std']:.4f}."
        )
    if result.one_class is not None:
        note += f" Warning: {result.one_class.describe()}; the model learned only one class."
    return note


# --- several seeds -------------------------------------------------------------------------------


def finetune_seeds(
    task: Task,
    data: TaskData,
    source: ModelSource,
    config: FinetuneConfig,
    seeds: Sequence[int],
    out: Path,
    show_progress: bool = True,
) -> dict[str, Any]:
    """One run per seed in `out/seed-S`; the best run's model is copied to `out/best`.

    Small GLUE tasks swing by several points between seeds (BERT Sec. 4.1 reruns BERT-Large with
    random restarts), so the summary gives each dev metric's mean, median and standard deviation
    (sample, n - 1) over the seeds, and writes it to `out/seeds.json`.
    """
    if len(set(seeds)) != len(seeds) or not seeds:
        raise ValueError(f"seeds must be distinct, got {list(seeds)}")
    results = []
    for seed in seeds:
        run_config = replace(config, seed=seed)
        results.append(
            finetune_task(task, data, source, run_config, out / f"seed-{seed}", show_progress)
        )
    summary = summarize_seeds(results, task.primary_metric)
    if summary["one_class"]:
        collapsed = ", ".join(str(run["seed"]) for run in summary["one_class"])
        logger.warning(
            "%d of %d seeds predicted one class on dev (seeds %s); see the warnings above",
            len(summary["one_class"]),
            len(results),
            collapsed,
        )
    best = max(results, key=lambda r: r.best_metrics.get(task.primary_metric, -math.inf))
    with atomic_directory(out / BEST_DIR) as directory:
        shutil.copytree(best.best_dir, directory, dirs_exist_ok=True)
    summary["best_seed"] = best.seed
    card = finetuning_card(task, data, source, replace(config, seed=best.seed), best, summary)
    write_model_card(out / BEST_DIR, card)
    write_json(out / SEEDS_FILE, summary)
    return summary


def summarize_seeds(results: Sequence[FinetuneResult], primary_metric: str) -> dict[str, Any]:
    """Mean, median and sample standard deviation of every dev metric over the runs, and the
    runs whose dev predictions were one class ("one_class": seed, label and share).

    Example: accuracies 0.80, 0.90, 0.85 -> mean 0.85, median 0.85, std 0.05.
    """
    keys = sorted({key for result in results for key in result.best_metrics})
    stats = {}
    for key in keys:
        values = [result.best_metrics[key] for result in results if key in result.best_metrics]
        stats[key] = {
            "mean": statistics.fmean(values),
            "median": statistics.median(values),
            "std": statistics.stdev(values) if len(values) > 1 else 0.0,
            "values": values,
        }
    return {
        "seeds": [result.seed for result in results],
        "primary_metric": primary_metric,
        "dev": stats,
        "one_class": [
            {"seed": result.seed} | result.one_class.to_json()
            for result in results
            if result.one_class is not None
        ],
        "runs": [result.to_json() for result in results],
    }
