"""The fine-tuning loop: a task head trained on encoded features, the best epoch kept.

`train_task_model` trains any head, whatever its task, on its encoded training examples
(`FinetuneLoop`): AdamW with BERT's weight-decay exclusions, linear warmup then linear decay,
gradient accumulation, gradient clipping at 1.0, length-grouped batches padded only to their own
longest sequence, evaluation after every epoch, the best checkpoint kept (written to a temporary
directory, then renamed) and early stopping. `OUT/metrics.jsonl` and `OUT/curves.png` record the
run; `OUT/best/` holds the best model as the caller's `save` writes it.

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
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn
from tqdm import tqdm

from bertlab.core.atomic import atomic_directory
from bertlab.core.finetune_config import SLANTED_TRIANGULAR_SCHEDULE, FinetuneConfig
from bertlab.core.run_folder import BEST_DIR, CURVES_FILE, METRICS_FILE
from bertlab.core.runtime import PrecisionChoice, autocast, choose_precision, denormals_flushed
from bertlab.data.collate import collate_task_batch, feature_lengths, length_grouped_batches
from bertlab.network.layer_groups import INPUT, LAYER, LayerGroup
from bertlab.training.finetuning.one_class import OneClassCollapse
from bertlab.training.metrics_log import MetricsLog, plot_curves
from bertlab.training.optim import (
    DivergedError,
    build_optimizer,
    finetune_schedule,
    layer_learning_rates,
    model_layer_groups,
)

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class FinetuneResult:
    """The outcome of one run: the best epoch's dev metrics (the last epoch's when no dev data)."""

    seed: int
    best_epoch: int
    best_metrics: dict[str, float]
    epochs_run: int
    stopped_early: bool
    best_dir: Path | None  # None: nothing kept on disk (`PretrainedBert.fit` without `out`)
    frozen: str = "nothing"  # `describe_frozen` of the model as trained
    trainable_parameters: int | None = None
    strategy: dict[str, Any] = field(default_factory=dict)  # `describe_strategy`
    one_class: OneClassCollapse | None = None  # the best epoch's dev predictions were one class
    precision: PrecisionChoice | None = None  # what training computed in, and why

    def to_json(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "best_epoch": self.best_epoch,
            "dev": self.best_metrics,
            "epochs_run": self.epochs_run,
            "stopped_early": self.stopped_early,
            "best_dir": None if self.best_dir is None else str(self.best_dir),
            "strategy": self.strategy,
            "one_class": None if self.one_class is None else self.one_class.to_json(),
            "precision": None if self.precision is None else str(self.precision),
        }


# --- freezing -------------------------------------------------------------------------------------


def apply_freezing(model: nn.Module, config: FinetuneConfig) -> int:
    """Freeze parameters as `config` asks; return the number of parameters left to train.

    The groups are the model's own (`network.layer_groups`). `do_freeze_encoder`: every group
    but the head is frozen and only the task layer trains: the feature-based approach of BERT
    Sec. 5.3. `freeze_layers` K: the input layer (the embeddings) and layers 1..K are frozen, as
    Keras' `layer.trainable = False`.

    Raises:
        ValueError: K is more than the number of the model's layers.
    """
    groups = model_layer_groups(model)
    if config.do_freeze_encoder:
        frozen = [group for group in groups if not group.is_head]
    else:
        num_layers = sum(group.role == LAYER for group in groups)
        if config.freeze_layers > num_layers:
            raise ValueError(
                f"freeze_layers {config.freeze_layers} exceeds the model's {num_layers} layers"
            )
        frozen = [
            group
            for group in groups
            if config.freeze_layers
            and (
                group.role == INPUT or (group.role == LAYER and group.depth <= config.freeze_layers)
            )
        ]
    for group in frozen:
        for module in group.modules:
            module.requires_grad_(False)
    return sum(param.numel() for param in model.parameters() if param.requires_grad)


def describe_frozen(model: nn.Module) -> str:
    """What of the model does not train, in words: "nothing", "the whole encoder", or e.g.
    "the embeddings, layers 1-4"; a group frozen only in part is named with its frozen
    parameters (a task model over frozen word vectors: "part of the embeddings
    (embeddings.word_embeddings.weight)")."""
    groups = model_layer_groups(model)
    names = {id(param): name for name, param in model.named_parameters()}

    def frozen(group: LayerGroup) -> list[nn.Parameter]:
        return [param for param in group.parameters() if not param.requires_grad]

    body = [group for group in groups if not group.is_head]
    if body and all(len(frozen(group)) == len(group.parameters()) for group in body):
        return "the whole encoder (only the task layer trained)"
    parts = []
    layers = []
    for group in body:
        stopped = frozen(group)
        if not stopped:
            continue
        if len(stopped) == len(group.parameters()) and group.role == LAYER:
            layers.append(group.depth)
        elif len(stopped) == len(group.parameters()):
            parts.append(f"the {group.name}")
        else:
            tensors = ", ".join(names[id(param)] for param in stopped)
            parts.append(f"part of the {group.name} ({tensors})")
    if layers == list(range(1, len(layers) + 1)) and len(layers) > 1:
        parts.append(f"layers 1-{len(layers)}")
    elif layers:
        parts.append("layer" + ("s " if len(layers) > 1 else " ") + ", ".join(map(str, layers)))
    return ", ".join(parts) or "nothing"


# --- fine-tuning strategies over epochs -----------------------------------------------------------


def unfreezing_order(model: nn.Module) -> list[list[nn.Module]]:
    """ULMFiT's layer groups for gradual unfreezing, top first (Howard & Ruder 2018, Sec. 3.2),
    from the groups the model declares (`network.layer_groups`): the task layer, then the
    groups by depth from the top, those of one depth together (BERT: the top layer with the
    pooler, each layer below it, the embeddings; ULMFiT's classifier: LSTM 3, 2, 1, the
    embedding).

    Groups with nothing trainable (frozen by `freeze_layers` or by the caller) are left out, so
    epoch e trains the top e groups that can train.
    """
    groups = model_layer_groups(model)
    order = [list(group.modules) for group in groups if group.is_head]
    body = [group for group in groups if not group.is_head]
    for depth in sorted({group.depth for group in body}, reverse=True):
        order.append([module for group in body if group.depth == depth for module in group.modules])
    return [
        modules
        for modules in order
        if any(param.requires_grad for module in modules for param in module.parameters())
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
    model: nn.Module,
    config: FinetuneConfig,
    epoch: int,
    order: Sequence[Sequence[torch.nn.Module]],
) -> list[torch.nn.Module]:
    """The modules the strategy keeps frozen in `epoch` (1-based), besides those frozen for the
    whole run: the encoder during the staged recipe's head epochs; under gradual unfreezing,
    every group of `order` (`unfreezing_order`) below the top `epoch` ones."""
    if epoch <= config.head_warmup_epochs:
        return [
            m for group in model_layer_groups(model) if not group.is_head for m in group.modules
        ]
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


# --- the training loop ----------------------------------------------------------------------------


class FinetuneLoop:
    """Epochs of optimizer steps, each over `gradient_accumulation_steps` micro-batches.

    The optimizer holds every parameter trainable when the loop is built; `begin_epoch` freezes
    what the strategy keeps out of an epoch (a parameter without a gradient is not touched by
    AdamW, weight decay included) and starts each phase's optimizer and schedule.
    """

    def __init__(
        self,
        model: nn.Module,
        features: Sequence[Any],
        config: FinetuneConfig,
        log: MetricsLog,
        show_progress: bool = True,
    ) -> None:
        if not features:
            raise ValueError("no training examples")
        self.model, self.features, self.config, self.log = model, features, config, log
        self.device = next(model.parameters()).device
        self.precision_choice = choose_precision(config.precision, self.device)
        self.precision = self.precision_choice.precision
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
        with denormals_flushed(self.device):
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
    model: nn.Module,
    features: Sequence[Any],
    config: FinetuneConfig,
    out: Path,
    evaluate: Callable[[nn.Module], dict[str, float]] | None,
    primary_metric: str,
    save: Callable[[Path, nn.Module], None],
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
    logger.info("computing in %s", loop.precision_choice)
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
        precision=loop.precision_choice,
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
