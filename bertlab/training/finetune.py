"""Fine-tuning (BERT Sec. 4): a task head on the encoder, trained end to end (or partly frozen).

`finetune_task` reads and checks all the data first (so bad input stops the run before anything
is written), seeds, builds the head, then `FinetuneLoop.run` trains: AdamW with BERT's weight-
decay exclusions, linear warmup then linear decay, gradient accumulation, gradient clipping at
1.0, length-grouped batches padded only to their own longest sequence, evaluation after every
epoch, the best checkpoint kept (written to a temporary directory, then renamed) and early
stopping. `OUT/metrics.jsonl` and `OUT/curves.png` record the run; `OUT/best/` holds the best
model, its tokenizer and `bertlab_task.json` in the Hugging Face layout.

The fine-tuning strategies of `FinetuneConfig` (docs/finetuning.md#fine-tuning-strategies):
layer-wise learning rates and the schedule are the optimizer's (`bertlab.training.optim`);
what trains in which epoch is `frozen_in_epoch`'s: ULMFiT's gradual unfreezing (one layer group
per epoch from the top, `unfreezing_order`) and Keras' staged recipe (the task layer alone for
`head_warmup_epochs`, then a new phase with a fresh optimizer and schedule, `training_phases`).
"""

# Shapes: B batch, L sequence length, C labels, K choices.

from __future__ import annotations

import logging
import math
import random
import shutil
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from bertlab.atomic import (
    atomic_directory,
    remove_directory,
    remove_temporaries,
    run_lock,
    write_json,
)
from bertlab.config import SLANTED_TRIANGULAR_SCHEDULE, BertConfig, FinetuneConfig
from bertlab.data.collate import collate_task_batch, feature_lengths, length_grouped_batches
from bertlab.data.tasks.splits import holdout_split, subsample
from bertlab.heads import BertForTask
from bertlab.model_card import ModelCard, write_model_card
from bertlab.runtime import autocast, default_device, resolve_precision, set_seed
from bertlab.task_families import TASK_FILE, Task, run_task
from bertlab.tokenization import Tokenizer, check_fits_vocabulary
from bertlab.training.checkpointing import CHECKPOINTS_DIR
from bertlab.training.loop import FINAL_DIR, DivergedError
from bertlab.training.metrics_log import CURVES_FILE, METRICS_FILE, MetricsLog, plot_curves
from bertlab.training.optim import build_optimizer, finetune_schedule, layer_learning_rates

logger = logging.getLogger(__name__)

BEST_DIR = "best"
RESULT_FILE = "result.json"
SEEDS_FILE = "seeds.json"
# What shows that OUT holds a run: a fine-tuning run's model, results or seed runs (OUT/seed-S),
# or a pre-training run.
FINETUNE_OUTPUTS = (BEST_DIR, RESULT_FILE, SEEDS_FILE)
SEED_DIR_PATTERN = "seed-*"
PRETRAIN_OUTPUTS = (FINAL_DIR, CHECKPOINTS_DIR)


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


@dataclass(frozen=True)
class FinetuneResult:
    """The outcome of one run: the best epoch's dev metrics (the last epoch's when no dev data)."""

    seed: int
    best_epoch: int
    best_metrics: dict[str, float]
    epochs_run: int
    stopped_early: bool
    best_dir: Path
    frozen: str = "nothing"  # `describe_frozen` of the model as trained
    trainable_parameters: int | None = None
    strategy: dict[str, Any] = field(default_factory=dict)  # `describe_strategy`

    def to_json(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "best_epoch": self.best_epoch,
            "dev": self.best_metrics,
            "epochs_run": self.epochs_run,
            "stopped_early": self.stopped_early,
            "best_dir": str(self.best_dir),
            "strategy": self.strategy,
        }


# --- freezing -------------------------------------------------------------------------------------


def apply_freezing(model: BertForTask, config: FinetuneConfig) -> int:
    """Freeze parameters as `config` asks; return the number of parameters left to train.

    `do_freeze_encoder`: the whole encoder `bert.*` (embeddings, every layer, pooler) is frozen
    and only the task layer trains: the feature-based approach of BERT Sec. 5.3. `freeze_layers` K:
    the embeddings and encoder layers 0..K-1 are frozen, as Keras' `layer.trainable = False`.

    Raises:
        ValueError: K is more than the number of encoder layers.
    """
    if config.do_freeze_encoder:
        frozen: list[torch.nn.Module] = [model.bert]
    else:
        layers = model.bert.encoder.layer
        if config.freeze_layers > len(layers):
            raise ValueError(
                f"freeze_layers {config.freeze_layers} exceeds the model's {len(layers)} layers"
            )
        frozen = (
            [model.bert.embeddings, *layers[: config.freeze_layers]] if config.freeze_layers else []
        )
    for module in frozen:
        module.requires_grad_(False)
    return sum(param.numel() for param in model.parameters() if param.requires_grad)


def describe_frozen(model: BertForTask) -> str:
    """What of the encoder does not train, in words: "nothing", "the whole encoder", or e.g.
    "the embeddings, layers 1-4"."""

    def is_frozen(module: torch.nn.Module) -> bool:
        return not any(parameter.requires_grad for parameter in module.parameters())

    if is_frozen(model.bert):
        return "the whole encoder (only the task layer trained)"
    parts = ["the embeddings"] if is_frozen(model.bert.embeddings) else []
    layers = [
        number for number, layer in enumerate(model.bert.encoder.layer, 1) if is_frozen(layer)
    ]
    if layers == list(range(1, len(layers) + 1)) and len(layers) > 1:
        parts.append(f"layers 1-{len(layers)}")
    elif layers:
        parts.append("layer" + ("s " if len(layers) > 1 else " ") + ", ".join(map(str, layers)))
    return ", ".join(parts) or "nothing"


# --- fine-tuning strategies over epochs -----------------------------------------------------------


def unfreezing_order(model: BertForTask) -> list[list[torch.nn.Module]]:
    """ULMFiT's layer groups for gradual unfreezing, top first (Howard & Ruder 2018, Sec. 3.2).

    The task layer (every child module but `bert`), the top encoder layer with the pooler, each
    layer below it, the embeddings. Groups with nothing trainable (frozen by `freeze_layers` or
    by the caller) are left out, so epoch e trains the top e groups that can train.
    """
    encoder = model.bert
    head = [module for name, module in model.named_children() if name != "bert"]
    layers = list(encoder.encoder.layer)
    top = [layers[-1]] + ([encoder.pooler] if encoder.pooler is not None else [])
    groups = [head, top, *([layer] for layer in reversed(layers[:-1])), [encoder.embeddings]]
    return [
        group
        for group in groups
        if any(param.requires_grad for module in group for param in module.parameters())
    ]


def training_phases(config: FinetuneConfig) -> list[range]:
    """The epochs (1-based) of each phase; each phase starts a fresh optimizer and schedule.

    One phase, except for Keras' staged recipe: the task layer alone for `head_warmup_epochs`,
    then the rest of the run (Keras compiles the model anew after changing what trains).
    Example: 5 epochs with head_warmup_epochs 2 -> [range(1, 3), range(3, 6)].
    """
    epochs, head = config.num_train_epochs, config.head_warmup_epochs
    if head:
        return [range(1, head + 1), range(head + 1, epochs + 1)]
    return [range(1, epochs + 1)]


def frozen_in_epoch(
    model: BertForTask,
    config: FinetuneConfig,
    epoch: int,
    order: Sequence[Sequence[torch.nn.Module]],
) -> list[torch.nn.Module]:
    """The modules the strategy keeps frozen in `epoch` (1-based), besides those frozen for the
    whole run: the encoder during the staged recipe's head epochs; under gradual unfreezing,
    every group of `order` (`unfreezing_order`) below the top `epoch` ones."""
    if epoch <= config.head_warmup_epochs:
        return [model.bert]
    if config.do_gradual_unfreezing:
        return [module for group in order[epoch:] for module in group]
    return []


def describe_strategy(config: FinetuneConfig, rates: Sequence[tuple[str, float]]) -> dict:
    """The run's fine-tuning strategy as JSON values, for result.json and the model card.

    `rates` is `layer_learning_rates` of the model: each layer group's peak rate.
    """
    strategy: dict[str, Any] = {
        "schedule": config.schedule,
        "layerwise_lr_decay": config.layerwise_lr_decay,
        "gradual_unfreezing": config.do_gradual_unfreezing,
        "head_warmup_epochs": config.head_warmup_epochs,
        "freeze_encoder": config.do_freeze_encoder,
        "freeze_layers": config.freeze_layers,
    }
    if config.schedule == SLANTED_TRIANGULAR_SCHEDULE:
        strategy |= {"cut_frac": config.cut_frac, "stlr_ratio": config.stlr_ratio}
    else:
        strategy["warmup_proportion"] = config.warmup_proportion
    strategy["learning_rates"] = dict(rates)
    return strategy


# --- saving ---------------------------------------------------------------------------------------


def write_task_model(directory: Path, model: BertForTask, tokenizer: Tokenizer, task: Task) -> None:
    """The model (HF layout), its tokenizer and the task settings: all `--model DIR` needs."""
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    write_json(directory / TASK_FILE, task.to_json())


# --- the training loop ----------------------------------------------------------------------------


class FinetuneLoop:
    """Epochs of optimizer steps, each over `gradient_accumulation_steps` micro-batches.

    The optimizer holds every parameter trainable when the loop is built; `begin_epoch` freezes
    what the strategy keeps out of an epoch (a parameter without a gradient is not touched by
    AdamW, weight decay included) and starts each phase's optimizer and schedule.
    """

    def __init__(
        self,
        model: BertForTask,
        features: Sequence[Any],
        config: FinetuneConfig,
        log: MetricsLog,
        show_progress: bool = True,
    ) -> None:
        if not features:
            raise ValueError("no training examples")
        self.model, self.features, self.config, self.log = model, features, config, log
        self.device = next(model.parameters()).device
        self.precision = resolve_precision(config.precision, self.device)
        self.lengths = feature_lengths(features)
        self.rng = random.Random(config.seed)  # batch order; dropout uses torch's seeded RNG
        micro_batches = math.ceil(len(features) / config.micro_batch_size)
        self.steps_per_epoch = math.ceil(micro_batches / config.gradient_accumulation_steps)
        total_steps = self.steps_per_epoch * config.num_train_epochs
        self.trainable = [param for param in model.parameters() if param.requires_grad]
        self.learning_rates = layer_learning_rates(
            model, config.learning_rate, config.layerwise_lr_decay
        )
        self.unfreezing_order = unfreezing_order(model)
        if config.do_gradual_unfreezing and config.num_train_epochs < len(self.unfreezing_order):
            logger.warning(
                "gradual unfreezing: %d epochs reach only the top %d of %d layer groups; the "
                "others stay frozen",
                config.num_train_epochs,
                config.num_train_epochs,
                len(self.unfreezing_order),
            )
        self.phases = training_phases(config)
        self.start_phase(0)
        self.step = 0
        self.progress = tqdm(
            total=total_steps, disable=not show_progress, desc="fine-tuning", unit="step"
        )

    def start_phase(self, phase: int) -> None:
        """A fresh optimizer over every trainable parameter and the schedule over the phase."""
        for param in self.trainable:
            param.requires_grad_(True)
        self.phase = phase
        self.optimizer = build_optimizer(
            self.model,
            self.config.learning_rate,
            self.config.weight_decay,
            layerwise_lr_decay=self.config.layerwise_lr_decay,
        )
        steps = self.steps_per_epoch * len(self.phases[phase])
        self.scheduler = finetune_schedule(self.optimizer, self.config, steps)

    def begin_epoch(self, epoch: int) -> None:
        """Start the epoch's phase if it is a new one, and freeze what the strategy keeps out."""
        phase = next(
            (i for i, epochs in enumerate(self.phases) if epoch in epochs), len(self.phases) - 1
        )
        if phase != self.phase:
            self.start_phase(phase)
        for param in self.trainable:
            param.requires_grad_(True)
        for module in frozen_in_epoch(self.model, self.config, epoch, self.unfreezing_order):
            module.requires_grad_(False)

    def close(self) -> None:
        """Leave trainable what was trainable before the run, and close the progress bar."""
        for param in self.trainable:
            param.requires_grad_(True)
        self.progress.close()

    def run_epoch(self, epoch: int) -> float:
        """Train one epoch over freshly drawn length-grouped batches; return its mean loss."""
        self.begin_epoch(epoch)
        self.model.train()
        batches = length_grouped_batches(self.lengths, self.config.micro_batch_size, self.rng)
        accumulation = self.config.gradient_accumulation_steps
        window: list[float] = []
        epoch_losses: list[float] = []
        for start in range(0, len(batches), accumulation):
            loss = self.optimizer_step(batches[start : start + accumulation])
            window.append(loss)
            epoch_losses.append(loss)
            if self.step % self.config.log_every_steps == 0:
                self.log_train(epoch, window)
                window = []
        if window:
            self.log_train(epoch, window)
        return sum(epoch_losses) / len(epoch_losses)

    def optimizer_step(self, micro_batches: Sequence[Sequence[int]]) -> float:
        """Accumulate the mean loss of the micro-batches, clip, step; return that mean loss."""
        total = 0.0
        for indices in micro_batches:
            batch = collate_task_batch([self.features[i] for i in indices], self.pad_token_id)
            batch = {key: value.to(self.device) for key, value in batch.items()}
            with autocast(self.device, self.precision):
                loss = self.model(**batch).loss / len(micro_batches)
            loss.backward()
            total += float(loss.detach())
        norm = torch.nn.utils.clip_grad_norm_(self.trainable, self.config.max_grad_norm)
        if not (math.isfinite(total) and bool(torch.isfinite(norm))):
            raise DivergedError(
                f"fine-tuning diverged at step {self.step + 1}: the loss or the gradient norm "
                "is not finite; start again with a lower --learning-rate"
            )
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.step += 1
        self.progress.update()
        self.progress.set_postfix(loss=f"{total:.4f}", refresh=False)
        return total

    @property
    def pad_token_id(self) -> int:
        return self.model.config.pad_token_id

    def log_train(self, epoch: int, losses: Sequence[float]) -> None:
        learning_rate = max(self.scheduler.get_last_lr())  # the top rate: the task layer's
        self.log.log(
            "train",
            self.step,
            epoch=epoch,
            loss=sum(losses) / len(losses),
            learning_rate=learning_rate,
        )


def train_task_model(
    model: BertForTask,
    features: Sequence[Any],
    config: FinetuneConfig,
    out: Path,
    evaluate: Callable[[BertForTask], dict[str, float]] | None,
    primary_metric: str,
    save: Callable[[Path, BertForTask], None],
    show_progress: bool = True,
) -> FinetuneResult:
    """Train for `config.num_train_epochs`, evaluating after each epoch and keeping the best.

    Args:
        model: the head, on its device, with frozen parts already frozen.
        features: encoded training examples with their labels.
        config: optimization settings.
        out: the run directory (metrics.jsonl, curves.png, best/).
        evaluate: model -> dev metrics; None when there is no dev data (then the last epoch's
            model is kept).
        primary_metric: the key of the metrics that decides "best" (higher is better).
        save: (directory, model) -> writes the model there; called on an empty temporary
            directory that then replaces `out/best`.

    Returns:
        The best epoch and its dev metrics.
    """
    log = MetricsLog(out / METRICS_FILE)
    loop = FinetuneLoop(model, features, config, log, show_progress)
    frozen = describe_frozen(model)
    trainable_parameters = sum(p.numel() for p in model.parameters() if p.requires_grad)
    strategy = describe_strategy(config, loop.learning_rates)
    best_metrics: dict[str, float] = {}
    best_epoch, epochs_without_gain, epoch = 0, 0, 0
    for epoch in range(1, config.num_train_epochs + 1):
        started = time.perf_counter()
        try:
            train_loss = loop.run_epoch(epoch)
        except DivergedError as error:
            loop.close()
            kept = "no model was saved"
            if best_epoch:
                kept = f"the best model so far (epoch {best_epoch}) is kept in {out / BEST_DIR}"
            raise DivergedError(f"{error}; {kept}") from None
        metrics = evaluate(model) if evaluate is not None else {}
        seconds = time.perf_counter() - started
        log.log("eval", loop.step, epoch=epoch, train_loss=train_loss, seconds=seconds, **metrics)
        logger.info(
            "epoch %d: train loss %.4f, dev %s (%.0f s)", epoch, train_loss, metrics, seconds
        )
        is_better = (
            evaluate is None
            or not best_metrics
            or _score(metrics[primary_metric]) > _score(best_metrics[primary_metric])
        )
        if is_better:
            best_metrics, best_epoch, epochs_without_gain = metrics, epoch, 0
            with atomic_directory(out / BEST_DIR) as directory:
                save(directory, model)
        else:
            epochs_without_gain += 1
            if (
                config.early_stopping_patience
                and epochs_without_gain >= config.early_stopping_patience
            ):
                logger.info(
                    "early stop: no better dev %s for %d epochs",
                    primary_metric,
                    epochs_without_gain,
                )
                break
    loop.close()
    _plot(log, out, primary_metric)
    return FinetuneResult(
        seed=config.seed,
        best_epoch=best_epoch,
        best_metrics=best_metrics,
        epochs_run=epoch,
        stopped_early=epoch < config.num_train_epochs,
        best_dir=out / BEST_DIR,
        frozen=frozen,
        trainable_parameters=trainable_parameters,
        strategy=strategy,
    )


def _score(value: float) -> float:
    """A dev score to compare; an undefined one (NaN: a correlation of constant predictions) is
    worse than any other."""
    return value if math.isfinite(value) else -math.inf


def _plot(log: MetricsLog, out: Path, primary_metric: str) -> None:
    panels = [
        ("loss", "loss (nats)", "training loss"),
        ("learning_rate", "learning rate", "schedule"),
        (primary_metric, primary_metric, f"dev {primary_metric}"),
    ]
    plot_curves(log.records(), panels, out / CURVES_FILE, title="fine-tuning")


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
    return TaskData(train, dev, label_names)


def build_model(
    task: Task, source: ModelSource, tokenizer: Tokenizer, label_names: tuple[str, ...] | None
) -> BertForTask:
    """The task head: on a checkpoint's encoder, or from scratch at the preset size."""
    if source.directory is not None:
        model = task.load_head(source.directory, label_names)
        check_fits_vocabulary(tokenizer, model.config.vocab_size)
        return model
    config = BertConfig.from_preset(
        source.model_size, vocab_size=tokenizer.vocab_size, pad_token_id=tokenizer.pad_token_id
    )
    return task.new_head(config, label_names)


def finetune_task(
    task: Task,
    data: TaskData,
    source: ModelSource,
    config: FinetuneConfig,
    out: Path,
    show_progress: bool = True,
) -> FinetuneResult:
    """Fine-tune on `data.train`, keep the best model by dev score in `out/best`.

    The seed is set before the head is built, so it decides the task layer's initialization (and
    a from-scratch encoder's), the batch order and dropout.
    """
    tokenizer = source.load_tokenizer()
    set_seed(config.seed)
    model = build_model(task, source, tokenizer, data.label_names)
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
    if data.dev is not None:
        precision = resolve_precision(config.precision, default_device())
        dev_features = task.encode(data.dev, tokenizer, None, with_labels=False)  # once

        def evaluate(model: BertForTask) -> dict[str, float]:
            predictions = run_task(
                task, model, tokenizer, data.dev, config.eval_batch_size, precision, dev_features
            )
            return task.score(predictions, data.dev)

    def save(directory: Path, model: BertForTask) -> None:
        write_task_model(directory, model, tokenizer, task)

    result = train_task_model(
        model, features, config, out, evaluate, task.primary_metric, save, show_progress
    )
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
        if seeds is None:
            return finetune_task(task, data, source, config, out, show_progress).to_json()
        return finetune_seeds(task, data, source, config, seeds, out, show_progress)


def claim_out(out: Path, overwrite: bool) -> None:
    """Clear what killed writers left in `out` and refuse an earlier run there: a fine-tuning
    run's model or results (removed first with `overwrite`) or a pre-training run. Call it
    holding `run_lock(out)`.

    Raises:
        ValueError: `out` holds a pre-training run, or a fine-tuning run and not `overwrite`.
    """
    remove_temporaries(out)
    pretraining = [name for name in PRETRAIN_OUTPUTS if (out / name).exists()]
    if pretraining:
        raise ValueError(
            f"--out {out} holds a pre-training run ({pretraining[0]}/); choose another --out"
        )
    earlier = [out / name for name in FINETUNE_OUTPUTS if (out / name).exists()]
    earlier += sorted(out.glob(SEED_DIR_PATTERN))
    if not earlier:
        return
    if not overwrite:
        raise ValueError(
            f"--out {out} already holds a fine-tuning run ({earlier[0].name}); add --overwrite "
            "to replace it or choose another --out"
        )
    for path in earlier:
        if path.is_dir():
            remove_directory(path)
        else:
            path.unlink()


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
        f"`{source.directory}`"
        if source.directory is not None
        else f"random weights (BERT-{source.model_size}, the no-pre-training baseline)"
    )
    metrics: dict[str, Any] = {"best epoch": result.best_epoch, "epochs run": result.epochs_run}
    metrics |= {f"dev {name}": value for name, value in result.best_metrics.items()}
    labels = f"labels: {', '.join(data.label_names)}" if data.label_names else "no label set"
    return ModelCard(
        title=f"{task.name}: a BERT fine-tuned with bertlab",
        summary=f"A {task.head_class.architecture} fine-tuned on {task.name} "
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
        metrics_note=_results_note(task, data, seeds_summary),
        how_to_use=[
            "# DIR: this folder, or its Hub id once uploaded; transformers loads it as well",
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
        "precision": config.precision,
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


def _results_note(task: Task, data: TaskData, seeds_summary: dict[str, Any] | None) -> str:
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
    best = max(results, key=lambda r: r.best_metrics.get(task.primary_metric, -math.inf))
    with atomic_directory(out / BEST_DIR) as directory:
        shutil.copytree(best.best_dir, directory, dirs_exist_ok=True)
    summary["best_seed"] = best.seed
    card = finetuning_card(task, data, source, replace(config, seed=best.seed), best, summary)
    write_model_card(out / BEST_DIR, card)
    write_json(out / SEEDS_FILE, summary)
    return summary


def summarize_seeds(results: Sequence[FinetuneResult], primary_metric: str) -> dict[str, Any]:
    """Mean, median and sample standard deviation of every dev metric over the runs.

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
        "runs": [result.to_json() for result in results],
    }
