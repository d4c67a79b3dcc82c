"""The pre-training loop: resumable exactly, one process or many, for any objective.

What an objective builds, adds to the loss, measures and saves is its entry in
`bertlab.training.pretraining.objectives.OBJECTIVES`; the loop calls that entry and never asks which
objective it runs.

One optimizer step = `gradient_accumulation_steps` micro-batches in every process. The masked-LM
loss is normalized by the masked tokens of the whole global step (all micro-batches, all
processes), and NSP by its examples, so the gradient of a step does not depend on how the global
batch is split over processes or micro-batches: 2 processes of batch 4 follow 1 process of batch 8.

Exact resume: a checkpoint holds the weights, the optimizer and schedule, every generator's state
and the data position; a resumed run continues as if never stopped (bit-identical on the CPU for
step-limited runs; a time budget depends on the clock by nature).

A step does not wait for the GPU: its statistics are summed on the device and read at the next
log, and to check that it is finite, from the first non-finite step on, the fused AdamW skips its
updates on the device, and the host reads that step's number at the next log, evaluation or
checkpoint, where it waits for the device anyway (`_guard_step`). Its token count comes from the
batch on the host, before the copy.
"""

# Shapes: B batch, L sequence length, P masked positions per sequence, V vocab.

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from tqdm.auto import tqdm

from bertlab.core.config import PretrainConfig, PretrainDataConfig
from bertlab.core.run_folder import CURVES_FILE, METRICS_FILE
from bertlab.core.runtime import (
    SINGLE_PROCESS,
    DistributedContext,
    PrecisionChoice,
    autocast,
    choose_precision,
    denormals_flushed,
    gathered,
    host_reads_are_free,
    rng_state,
    set_rng_state,
    set_seed,
)
from bertlab.corpus.format import TokenizedCorpus
from bertlab.corpus.prepare import held_out_split
from bertlab.data.pretraining import SpecialIds
from bertlab.data.stream import (
    EVAL_SEED_OFFSET,
    StreamPosition,
    held_out_batches,
    training_batches,
    training_stream,
)
from bertlab.network.bert import IGNORE_INDEX
from bertlab.network.checkpoint import read_weights
from bertlab.tokenizer.wordpiece import Tokenizer
from bertlab.training.metrics_log import MetricsLog, plot_curves
from bertlab.training.optim import DivergedError, build_optimizer
from bertlab.training.pretraining import checkpointing
from bertlab.training.pretraining.objectives import Objective, StepShare, objective_of
from bertlab.training.pretraining.schedules import pretrain_schedule
from bertlab.training.pretraining.stats import (
    CURVE_PANELS,
    STAT_TOKENS,
    STATS,
    evaluate,
    summarize,
    unigram_accuracy,
    unigram_plateau,
)

logger = logging.getLogger(__name__)

SECONDS_PER_MINUTE = 60.0


@dataclass
class Progress:
    """Counters saved with every checkpoint."""

    step: int = 0
    tokens: int = 0  # non-padding tokens trained on, all processes
    elapsed: float = 0.0  # seconds spent in training steps, across resumes
    position: StreamPosition = StreamPosition()

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self) | {"position": self.position.to_dict()}

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> Progress:
        return cls(**(values | {"position": StreamPosition(**values["position"])}))


@dataclass(frozen=True)
class PretrainResult:
    progress: Progress
    final_dir: Path | None
    last_eval: dict[str, float] | None
    recipe: str | None = None  # the run's settings in words, as trained (`run_pretraining`)
    precision: PrecisionChoice | None = None  # what the loop computed in, and why


def passed_a_mark(before: float, now: float, every: float) -> bool:
    """Whether training time went past a multiple of `every` seconds between `before` and `now`.

    Timed checkpoints fall on the training clock (`Progress.elapsed`, the clock of `max_time`)
    at `every`, 2 `every`, ...: each right after the step that passes its mark, whatever the
    evaluations and the checkpoints themselves took, so a run's checkpoint nearest k minutes of
    training lies within one step of them. The clock is rank 0's in every process.
    """
    return now // every > before // every


def pretrain(
    model: nn.Module,
    tokenizer: Tokenizer,
    corpus: TokenizedCorpus,
    data_config: PretrainDataConfig,
    config: PretrainConfig,
    out_dir: str | os.PathLike,
    context: DistributedContext = SINGLE_PROCESS,
    resume: bool = False,
    show_progress: bool = True,
    objective: Objective | None = None,
) -> PretrainResult:
    """Pre-train `model` on `corpus`; write checkpoints, metrics and `OUT/final/` (rank 0).

    Args:
        model: a fresh or loaded model of the objective (`Objective.build_model`) on the CPU,
            built after `set_seed`.
        tokenizer: the corpus's tokenizer; saved beside every model written.
        corpus: the tokenized corpus (`build_corpus`).
        data_config: how examples are built and masked.
        config: the loop's settings.
        out_dir: the run directory.
        context: this process's place in a torchrun job.
        resume: continue from the latest checkpoint in `out_dir`.
        show_progress: a progress bar (rank 0 only).
        objective: what trains the model (an entry of `objectives.OBJECTIVES` or an LSTM-era
            network's own); None: `data_config.objective`'s entry.

    Raises:
        ValueError: nothing to resume from, a checkpoint from a different setup, a batch that
            does not fit in memory.
    """
    objective = objective or objective_of(data_config)
    run = _Run(model, tokenizer, corpus, data_config, config, Path(out_dir), context, objective)
    with (
        frozen_untrained_modules(run.model, run.objective.untrained_modules),
        denormals_flushed(run.device),
    ):
        if resume:
            run.resume()
        return run.train(show_progress)


@contextlib.contextmanager
def frozen_untrained_modules(model: nn.Module, modules: tuple[str, ...]) -> Iterator[None]:
    """`modules` of `model` (names such as "bert.pooler") take no gradient in the block, as
    their objective never trains them: DistributedDataParallel then expects a gradient for
    every other parameter at each step, without searching the graph for unused ones. Their
    weights and the optimizer are as they would be without the block (a parameter without a
    gradient is skipped by AdamW and by clipping)."""
    prefixes = tuple(f"{module}." for module in modules)
    frozen = [
        parameter
        for name, parameter in model.named_parameters()
        if name.startswith(prefixes) and parameter.requires_grad
    ]
    for parameter in frozen:
        parameter.requires_grad_(False)
    try:
        yield
    finally:
        for parameter in frozen:
            parameter.requires_grad_(True)


def _defers_finite_check(device: torch.device, optimizer: torch.optim.Optimizer) -> bool:
    """Whether a step's finite check waits for `_check_steps`: not on the CPU, and only with
    the fused AdamW, which can skip an update on the device (`found_inf`)."""
    fused = all(group.get("fused") for group in optimizer.param_groups)
    return fused and not host_reads_are_free(device)


class _Run:
    """The state of one pre-training run and the steps of its loop."""

    def __init__(
        self,
        model: nn.Module,
        tokenizer: Tokenizer,
        corpus: TokenizedCorpus,
        data_config: PretrainDataConfig,
        config: PretrainConfig,
        out_dir: Path,
        context: DistributedContext,
        objective: Objective,
    ) -> None:
        self.tokenizer, self.data_config, self.config = tokenizer, data_config, config
        self.objective = objective
        self.out_dir, self.context = out_dir, context
        self.device = context.device()
        self.precision_choice = choose_precision(config.precision, self.device)
        self.precision = self.precision_choice.precision
        self.model = model.to(self.device)
        self.optimizer = build_optimizer(self.model, config.learning_rate, config.weight_decay)
        self.defers_finite_check = _defers_finite_check(self.device, self.optimizer)
        # The first step whose gradient norm was not finite, 0 for none (read at `_check_steps`).
        self.first_bad_step = torch.zeros((), dtype=torch.int64, device=self.device)
        self.schedule = pretrain_schedule(self.optimizer, config)
        self.progress = Progress()
        self.metrics: MetricsLog | None = None
        self.restored_rng: dict[str, Any] | None = None
        self.checkpoint_step: int | None = None  # the step of the latest checkpoint, if any
        self.plotted: list[dict[str, Any]] | None = None  # the records curves.png shows
        self.unigram: float | None = None  # the held-out batches' unigram level, set by `train`
        num_train, num_held_out = held_out_split(corpus.num_documents, config.eval_examples)
        special = SpecialIds.from_vocab(tokenizer.get_vocab())
        self.spec = training_stream(
            corpus, special, model.config.vocab_size, data_config, config, context
        )
        self.eval_spec = None
        if num_held_out:
            self.eval_spec = dataclasses.replace(
                self.spec,
                documents=(num_train, num_train + num_held_out),
                seed=config.seed + EVAL_SEED_OFFSET,
                rank=0,
                world_size=1,
            )
        model_key = self.objective.model_key(model.config)
        self.setup_key = checkpointing.setup_key(data_config, config, context, model_key)

    # --- resume ---------------------------------------------------------------------------

    def resume(self) -> None:
        checkpoint_dir, state = checkpointing.resumable_checkpoint(self.out_dir, self.setup_key)
        weights = read_weights(checkpoint_dir)
        self.objective.load_weights(self.model, weights, str(checkpoint_dir))
        self.optimizer.load_state_dict(state["optimizer"])
        self.schedule.load_state_dict(state["schedule"])
        self.progress = Progress.from_dict(state["progress"])
        self.restored_rng = state["rng"][self.context.rank]
        self.checkpoint_step = self.progress.step
        logger.info("resuming from %s (step %d)", checkpoint_dir, self.progress.step)

    # --- the loop -------------------------------------------------------------------------

    def train(self, show_progress: bool) -> PretrainResult:
        context, config = self.context, self.config
        if context.is_main:
            resume_step = self.progress.step if self.restored_rng is not None else None
            self.metrics = MetricsLog(self.out_dir / METRICS_FILE, resume_step)
        eval_batches = self._eval_batches() if context.is_main else []
        self.unigram = unigram_accuracy(eval_batches, self.spec.special.mask)
        train_model = self._wrap_model()
        batches = self._batches()
        if self.restored_rng is not None:
            set_rng_state(checkpointing.restore_rng_state(self.restored_rng))
        else:
            set_seed(config.seed + context.rank)  # dropout differs between processes
        bar = self._progress_bar(show_progress)
        # On the device: read at the logs only (the statistics of a step stay there).
        window = torch.zeros(len(STATS) + 1, dtype=torch.float64, device=self.device)
        # Throughput over training time only: evaluation and checkpoints do not count.
        window_start = last_checkpoint = self.progress.elapsed
        last_eval = None
        while not self._done():
            started = time.perf_counter()
            micro_batches = [next(batches) for _ in range(config.gradient_accumulation_steps)]
            self.schedule.before_step(config.budget_used(self.progress.step, self.progress.elapsed))
            stats, tokens = self._step(train_model, [batch for batch, _ in micro_batches])
            self.progress.elapsed += self._agreed(time.perf_counter() - started)
            self.progress.step += 1
            self.progress.tokens += tokens
            self.progress.position = micro_batches[-1][1]
            window += stats
            log_due = self.progress.step % config.log_every_steps == 0 or self._done()
            eval_due = bool(eval_batches) and (self._eval_due() or self._done())
            checkpoint_due = self._checkpoint_due(last_checkpoint)
            if log_due or checkpoint_due:  # the same steps in every process
                self.progress.elapsed += self._wait_for_device()
            reads = log_due or eval_due or checkpoint_due or host_reads_are_free(self.device)
            self._update_bar(bar, stats, tokens, started, reads)
            if log_due or eval_due or checkpoint_due:
                self._check_steps()  # before anything of these steps is written
            if log_due:
                self._log_train(window, self.progress.elapsed - window_start)
                window.zero_()
                window_start = self.progress.elapsed
            if eval_due:
                last_eval = self._evaluate(eval_batches)
            if checkpoint_due:
                self._save_checkpoint()
                last_checkpoint = self.progress.elapsed
        if bar is not None:
            bar.close()
        # Known in every process alike: the other processes never read rank 0's files to decide
        # (another machine does not see them; on this one rank 0 may still be writing them).
        if self._checkpointing() and self.checkpoint_step != self.progress.step:
            self._save_checkpoint()
        final_dir = self._save_final() if context.is_main else None
        return PretrainResult(self.progress, final_dir, last_eval, precision=self.precision_choice)

    def _done(self) -> bool:
        if self.config.max_steps is not None:
            return self.progress.step >= self.config.max_steps
        return self.progress.elapsed >= self.config.max_time

    def _eval_due(self) -> bool:
        every = self.config.eval_every_steps
        return bool(every) and self.progress.step % every == 0

    def _checkpointing(self) -> bool:
        return bool(self.config.checkpoint_every_steps or self.config.checkpoint_every_minutes)

    def _checkpoint_due(self, last_checkpoint: float) -> bool:
        config, step = self.config, self.progress.step
        due = bool(config.checkpoint_every_steps) and step % config.checkpoint_every_steps == 0
        if config.checkpoint_every_minutes:
            every = config.checkpoint_every_minutes * SECONDS_PER_MINUTE
            due = due or passed_a_mark(last_checkpoint, self.progress.elapsed, every)
        return due

    def _agreed(self, value: float) -> float:
        """Rank 0's `value` in every process (clock readings must not make processes diverge)."""
        if not self.context.is_distributed:
            return value
        tensor = torch.tensor([value], dtype=torch.float64)
        dist.broadcast(tensor, src=0)
        return float(tensor)

    def _step(
        self, train_model: nn.Module, batches: list[dict[str, torch.Tensor]]
    ) -> tuple[torch.Tensor, int]:
        """One optimizer step over the micro-batches; returns the summed statistics, on the
        device and unread, and the step's non-padding tokens in all processes, counted on the
        host batches (the statistics' STAT_TOKENS)."""
        context = self.context
        counts = [int((batch["labels"] != IGNORE_INDEX).sum()) for batch in batches]
        tokens = [int(batch["attention_mask"].sum()) for batch in batches]
        totals = torch.tensor([float(sum(counts)), float(sum(tokens))], dtype=torch.float64)
        totals = _all_reduce_sum(totals, context)
        total_predictions, total_tokens = max(float(totals[0]), 1.0), max(float(totals[1]), 1.0)
        stats = torch.zeros(len(STATS) + 1, dtype=torch.float64, device=self.device)
        for index, (batch, count) in enumerate(zip(batches, counts, strict=True)):
            no_padding = bool(batch["attention_mask"].all())  # read on the host, not the device
            # From pinned memory (on CUDA) the copies overlap with the work already queued.
            batch = {key: value.to(self.device, non_blocking=True) for key, value in batch.items()}
            inputs = batch | {"attention_mask": None} if no_padding else batch  # attention skips it
            is_last = index == len(batches) - 1
            sync = contextlib.nullcontext()
            if context.is_distributed and not is_last:
                sync = train_model.no_sync()
            share = StepShare(
                predictions=count * context.world_size / total_predictions,
                micro_batches=len(batches),
                tokens=tokens[index] * context.world_size / total_tokens,
            )
            with sync, _out_of_memory_as_error(batch):
                with autocast(self.device, self.precision):
                    output = self.objective.forward(train_model, inputs)
                self.objective.loss(output, share).backward()
            stats += self.objective.batch_stats(output, batch, count)
        norm = nn.utils.clip_grad_norm_(self.model.parameters(), self.config.max_grad_norm)
        stats = _all_reduce_sum(stats, context)  # the same in every process, as the norm is
        found_inf = self._guard_step(norm, stats)
        if found_inf is not None:
            self.optimizer.found_inf = found_inf  # read by the fused AdamW, as a GradScaler's
        self.optimizer.step()
        if found_inf is not None:
            del self.optimizer.found_inf
        self.optimizer.zero_grad(set_to_none=True)
        self.schedule.after_step()
        return stats, int(totals[1])

    def _guard_step(self, norm: torch.Tensor, stats: torch.Tensor) -> torch.Tensor | None:
        """Nothing non-finite may be stepped into the weights: check this step, or have the
        optimizer skip it on the device. Returns the fused AdamW's `found_inf` (1.0: skip the
        update) when the check waits for `_check_steps`, else None (the step is finite).

        `stats` (the losses) and the norm are on the device. On the CPU, or with an optimizer
        that cannot skip, both are read now. Otherwise the device keeps the first step whose
        statistics or norm are not finite and skips every update from it on, so the weights
        stay those of the last finite step, as if the run had stopped there.
        """
        step = self.progress.step + 1
        if not self.defers_finite_check:
            if not bool(torch.isfinite(stats).all()) or not bool(torch.isfinite(norm)):
                self._diverged("the loss or the gradient norm", step)
            return None
        finite = torch.isfinite(norm) & torch.isfinite(stats).all()
        first_bad = (self.first_bad_step == 0) & ~finite
        self.first_bad_step = torch.where(first_bad, step, self.first_bad_step)
        return (self.first_bad_step != 0).to(torch.float32)

    def _wait_for_device(self) -> float:
        """Seconds spent waiting here for the steps that the device still runs: training time,
        which a step's own clock misses when the host runs ahead of the GPU. 0 on the CPU."""
        if self.device.type == "cpu":  # never runs ahead of the host
            return 0.0
        started = time.perf_counter()
        torch.accelerator.synchronize(self.device)
        return self._agreed(time.perf_counter() - started)

    def _check_steps(self) -> None:
        """Raise if a step was not finite (`_guard_step`): reads the device, so called only
        where the host waits for it anyway (a log, an evaluation, a checkpoint, the end)."""
        if self.defers_finite_check:
            step = int(self.first_bad_step)
            if step:
                self._diverged("the loss or the gradient norm", step)

    def _diverged(self, what: str, step: int) -> NoReturn:
        """Stop before anything non-finite is stepped into the weights or saved."""
        latest = checkpointing.latest_checkpoint(self.out_dir)
        kept = f"the last checkpoint, {latest}, is kept" if latest else "no checkpoint was written"
        raise DivergedError(
            f"training diverged at step {step}: {what} is not finite; "
            f"{kept}; start again with a lower --learning-rate"
        )

    def _check_finite_weights(self) -> None:
        self._check_steps()
        if not all(bool(torch.isfinite(param).all()) for param in self.model.parameters()):
            self._diverged("a weight of the model", self.progress.step + 1)

    # --- data -----------------------------------------------------------------------------

    def _batches(self) -> Iterator[tuple[dict[str, torch.Tensor], StreamPosition]]:
        pin_memory = self.device.type == "cuda"
        return training_batches(
            self.spec, self.progress.position, self.config.num_workers, pin_memory
        )

    def _eval_batches(self) -> list[dict[str, torch.Tensor]]:
        """A fixed held-out set (fixed masks), built once."""
        if self.eval_spec is None:
            return []
        return held_out_batches(self.eval_spec, self.config.eval_examples)

    # --- model ----------------------------------------------------------------------------

    def _wrap_model(self) -> nn.Module:
        train_model: nn.Module = self.model.train()
        if self.context.is_distributed:  # every parameter that requires one gets a gradient
            train_model = DistributedDataParallel(train_model)
        if self.config.do_compile:
            train_model = torch.compile(train_model)
        return train_model

    def _evaluate(self, batches: list[dict[str, torch.Tensor]]) -> dict[str, float]:
        self.model.eval()
        objective = self.objective
        values = evaluate(
            self.model,
            batches,
            self.device,
            self.precision,
            objective.batch_stats,
            objective.detection_scores,
            objective.forward,
        )
        if self.unigram is not None:  # measured once on these batches (`train`)
            values["mlm_unigram_accuracy"] = self.unigram
        values = self.objective.named(values)
        self.model.train()
        tokens = self.progress.tokens
        on_plateau = unigram_plateau(values, tokens, self.config.plateau_min_tokens) is not None
        extra = {"on_plateau": on_plateau} if self.unigram is not None else {}
        self.metrics.log("eval", self.progress.step, tokens=tokens, **values, **extra)
        return values

    # --- output ---------------------------------------------------------------------------

    def _progress_bar(self, show_progress: bool) -> tqdm | None:
        if not (show_progress and self.context.is_main):
            return None
        if self.config.max_steps is not None:
            return tqdm(total=self.config.max_steps, initial=self.progress.step, unit="step")
        return tqdm(
            total=round(self.config.max_time),
            initial=round(self.progress.elapsed),
            unit="s",
            bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} s [{elapsed}<{remaining}{postfix}]",
        )

    def _update_bar(
        self, bar: tqdm | None, stats: torch.Tensor, tokens: int, started: float, reads: bool
    ) -> None:
        """Advance the bar; with `reads`, show the step's loss and throughput (which reads the
        statistics: every step on the CPU, only where the host waits anyway on a GPU)."""
        if bar is None:
            return
        if reads:
            values = summarize(stats)
            tokens_per_second = tokens / max(time.perf_counter() - started, 1e-9)
            bar.set_postfix(loss=f"{values['loss']:.3f}", tok_s=f"{tokens_per_second:,.0f}")
        if self.config.max_steps is not None:
            bar.update(1)
        else:
            bar.update(min(round(self.progress.elapsed), bar.total) - bar.n)

    def _log_train(self, window: torch.Tensor, seconds: float) -> None:
        if self.metrics is None:
            return
        window = window.cpu()  # one read of the device's sums
        self.metrics.log(
            "train",
            self.progress.step,
            tokens=self.progress.tokens,
            elapsed_seconds=round(self.progress.elapsed, 3),
            learning_rate=self.optimizer.param_groups[0]["lr"],
            tokens_per_second=float(window[STAT_TOKENS]) / max(seconds, 1e-9),
            **self.objective.named(summarize(window)),
        )

    def _plot(self) -> None:
        """Draw curves.png, unless it already shows every record (a run that ends on a
        checkpoint drew them there)."""
        records = self.metrics.records()
        if records == self.plotted:
            return
        plot_curves(records, CURVE_PANELS, self.out_dir / CURVES_FILE, "pre-training")
        self.plotted = records

    def _save_checkpoint(self) -> None:
        self._check_finite_weights()  # rotation must never replace a good checkpoint by this
        states = gathered(checkpointing.portable_rng_state(rng_state()), self.context)
        self.checkpoint_step = self.progress.step
        if not self.context.is_main:
            return
        state = {
            "setup": self.setup_key,
            "progress": self.progress.to_dict(),
            "optimizer": self.optimizer.state_dict(),
            "schedule": self.schedule.state_dict(),
            "rng": states,
        }
        checkpointing.save_checkpoint(
            self.out_dir,
            self.progress.step,
            self.model,
            self.tokenizer,
            state,
            self.config.keep_checkpoints,
        )
        self._plot()  # curves.png follows the run checkpoint by checkpoint

    def _save_final(self) -> Path:
        self._check_finite_weights()
        if self.metrics is not None:
            self._plot()
        return self.objective.save_final(self.model, self.tokenizer, self.out_dir)


def _all_reduce_sum(values: torch.Tensor, context: DistributedContext) -> torch.Tensor:
    if context.is_distributed:
        dist.all_reduce(values, op=dist.ReduceOp.SUM)
    return values


@contextlib.contextmanager
def _out_of_memory_as_error(batch: dict[str, torch.Tensor]) -> Iterator[None]:
    """A batch too large for memory becomes a one-line `ValueError` saying what to change."""
    try:
        yield
    except (torch.OutOfMemoryError, MemoryError, RuntimeError) as error:
        text = str(error)
        if not isinstance(error, torch.OutOfMemoryError | MemoryError) and (
            "out of memory" not in text and "allocate" not in text
        ):
            raise
        rows, length = batch["input_ids"].shape
        raise ValueError(
            f"a micro-batch of {rows} sequences of {length} tokens does not fit in memory; "
            "lower --batch-size or raise --gradient-accumulation-steps"
        ) from error
