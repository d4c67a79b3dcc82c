"""Pre-training's learning-rate schedules, over the run's budget: its optimizer steps
(`max_steps`) or its training time (`max_time`, which a `--budget` run sets).

- `BudgetSchedule` follows the fraction of a budget used, which the loop passes in: of the time
  budget (`--max-time`, linear or one-cycle), or of `--max-steps` for the one-cycle shape. Call
  `schedule.step(progress)` before each `optimizer.step()`.
- The schedules are named in one table (`core.config.PRETRAIN_SCHEDULES`) and built by
  `pretrain_schedule`, a `BudgetSchedule` or a `linear_warmup_decay` over the steps
  (`StepsSchedule`, `bertlab.training.optim`), both driven by `before_step` and `after_step`.

Resuming: build the schedule exactly as at the start of the run, after the optimizer, then load
the optimizer's state dict, then the schedule's.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from torch.optim.lr_scheduler import LambdaLR

from bertlab.core.config import LINEAR_WARMUP_DECAY, ONE_CYCLE, PretrainConfig
from bertlab.training.optim import linear_warmup_decay


def _linear_budget(progress: float, warmup_proportion: float) -> float:
    """Linear warmup, then linear decay to 0 at the end of the budget.

    The time-based schedule of Izsak et al. 2021, "How to Train BERT with an Academic Budget".
    """
    if progress < warmup_proportion:
        return progress / warmup_proportion
    return (1.0 - progress) / (1.0 - warmup_proportion)


def _one_cycle_budget(progress: float, warmup_proportion: float) -> float:
    """Cosine rise to the peak, then cosine fall to 0: the 1cycle policy (Smith & Topin 2018)
    with the cosine annealing of `torch.optim.lr_scheduler.OneCycleLR`, starting and ending at 0.
    """
    if progress < warmup_proportion:
        return (1.0 - math.cos(math.pi * progress / warmup_proportion)) / 2.0
    falling = (progress - warmup_proportion) / (1.0 - warmup_proportion)
    return (1.0 + math.cos(math.pi * falling)) / 2.0


BUDGET_DECAYS: dict[str, Callable[[float, float], float]] = {
    LINEAR_WARMUP_DECAY: _linear_budget,
    ONE_CYCLE: _one_cycle_budget,
}


class BudgetSchedule:
    """Learning rate as a function of the fraction of a budget used (`--max-time`, or
    `--max-steps` for the one-cycle shape).

    The multiplier rises from 0 to 1 over the first `warmup_proportion` of the budget and falls to 0
    at its end, along `decay` ("linear" or "one-cycle"). It depends on `progress` alone, never
    reads the step count or the clock itself, so a run is deterministic given the progress fed in.

    The loop passes `progress` before each `optimizer.step()`: `steps_done / max_steps` with a
    step budget, `elapsed_training_seconds / budget_seconds` with a time budget, where
    `elapsed_training_seconds` is accumulated across resumes: it is saved in the checkpoint and
    restored with it (wall-clock time since the current process started would restart the
    schedule on every resume). Progress past 1 counts as 1 (learning rate 0); the loop should
    stop there.

        schedule = BudgetSchedule(optimizer, warmup_proportion=0.06)
        for batch in batches:
            schedule.step(elapsed / budget)
            ...  # forward, backward, optimizer.step()
            elapsed += seconds_spent_on_this_step

    `state_dict()` holds the last progress and the peak learning rates (also kept in each param
    group's `"initial_lr"`, as torch's schedulers do, so they survive `optimizer.load_state_dict`).
    """

    def __init__(
        self, optimizer: torch.optim.Optimizer, warmup_proportion: float, decay: str = "linear"
    ) -> None:
        """Set every group's learning rate for progress 0.

        Args:
            optimizer: the optimizer; each group's `lr` (or `initial_lr` if set) is its peak.
            warmup_proportion: fraction of the budget spent warming up, in [0, 1).
            decay: "linear" or "one-cycle".

        Raises:
            ValueError: for an unknown `decay` or a `warmup_proportion` outside [0, 1).
        """
        if decay not in BUDGET_DECAYS:
            raise ValueError(f"unknown decay {decay!r}; choose one of {', '.join(BUDGET_DECAYS)}")
        if not 0.0 <= warmup_proportion < 1.0:
            raise ValueError(f"warmup_proportion must be in [0, 1), got {warmup_proportion}")
        self.optimizer = optimizer
        self.warmup_proportion = warmup_proportion
        self.decay = decay
        for group in optimizer.param_groups:
            group.setdefault("initial_lr", group["lr"])
        self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
        self.progress = 0.0
        self._apply()

    def multiplier(self, progress: float) -> float:
        """The learning-rate multiplier in [0, 1] at `progress` (clamped to at most 1)."""
        return BUDGET_DECAYS[self.decay](min(progress, 1.0), self.warmup_proportion)

    def step(self, progress: float) -> None:
        """Set the learning rates for `progress`, the fraction of the budget used.

        Raises:
            ValueError: if `progress` is negative or not finite.
        """
        if not math.isfinite(progress) or progress < 0:
            raise ValueError(f"progress must be a finite non-negative number, got {progress}")
        self.progress = min(progress, 1.0)
        self._apply()

    def _apply(self) -> None:
        factor = self.multiplier(self.progress)
        for group, base_lr in zip(self.optimizer.param_groups, self.base_lrs, strict=True):
            group["lr"] = base_lr * factor

    def before_step(self, budget_used: float) -> None:
        """Before each `optimizer.step()`: the rates for the fraction of the budget used."""
        self.step(budget_used)

    def after_step(self) -> None:
        """After each `optimizer.step()`: nothing, the rates follow the budget used."""

    def get_last_lr(self) -> list[float]:
        """The learning rate of each param group, as set by the last `step`."""
        return [group["lr"] for group in self.optimizer.param_groups]

    def state_dict(self) -> dict[str, Any]:
        """What a checkpoint needs to restore this schedule."""
        return {
            "progress": self.progress,
            "warmup_proportion": self.warmup_proportion,
            "decay": self.decay,
            "base_lrs": list(self.base_lrs),
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore a saved schedule and set the learning rates it had.

        Raises:
            ValueError: if the saved schedule has another shape (warmup proportion or decay) or
                another number of param groups; a resumed run must continue the same schedule.
        """
        saved = (state_dict["warmup_proportion"], state_dict["decay"])
        if saved != (self.warmup_proportion, self.decay):
            raise ValueError(
                f"checkpoint schedule (warmup_proportion, decay) = {saved} differs from "
                f"{(self.warmup_proportion, self.decay)}"
            )
        if len(state_dict["base_lrs"]) != len(self.optimizer.param_groups):
            raise ValueError(
                f"checkpoint has {len(state_dict['base_lrs'])} learning rates for "
                f"{len(self.optimizer.param_groups)} param groups"
            )
        self.base_lrs = list(state_dict["base_lrs"])
        for group, base_lr in zip(self.optimizer.param_groups, self.base_lrs, strict=True):
            group["initial_lr"] = base_lr
        self.progress = state_dict["progress"]
        self._apply()


class StepsSchedule:
    """A `LambdaLR` over optimizer steps behind `BudgetSchedule`'s `before_step` and `after_step`,
    so that the pre-training loop drives either the same way. Its state dict is the `LambdaLR`'s.
    """

    def __init__(self, scheduler: LambdaLR) -> None:
        self.scheduler = scheduler

    def before_step(self, budget_used: float) -> None:
        """Before each `optimizer.step()`: nothing, the step count sets the rates."""

    def after_step(self) -> None:
        """After each `optimizer.step()`: the rates of the next step."""
        self.scheduler.step()

    def get_last_lr(self) -> list[float]:
        return self.scheduler.get_last_lr()

    def state_dict(self) -> dict[str, Any]:
        return self.scheduler.state_dict()

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.scheduler.load_state_dict(state_dict)


def pretrain_schedule(
    optimizer: torch.optim.Optimizer, config: PretrainConfig
) -> StepsSchedule | BudgetSchedule:
    """The schedule `config.schedule` names (`PRETRAIN_SCHEDULES`), over the run's budget, with
    warmup over `warmup_proportion` of it. linear warmup and decay: over the optimizer steps of
    `max_steps` (`linear_warmup_decay`, the warmup rounded to whole steps), or over the fraction
    of `max_time` used (`BudgetSchedule`); one-cycle: over the fraction of the steps or of the
    time used (`BudgetSchedule`). Drive it with `before_step(config.budget_used(...))` and
    `after_step()` around each `optimizer.step()`.

    Raises:
        ValueError: an unknown schedule, or from the schedule's own checks.
    """
    proportion = config.warmup_proportion

    def linear() -> StepsSchedule | BudgetSchedule:
        if config.max_steps is None:
            return BudgetSchedule(optimizer, proportion, LINEAR_WARMUP_DECAY)
        warmup_steps = round(proportion * config.max_steps)
        return StepsSchedule(linear_warmup_decay(optimizer, warmup_steps, config.max_steps))

    builders: dict[str, Callable[[], StepsSchedule | BudgetSchedule]] = {
        LINEAR_WARMUP_DECAY: linear,
        ONE_CYCLE: lambda: BudgetSchedule(optimizer, proportion, ONE_CYCLE),
    }
    if config.schedule not in builders:
        raise ValueError(f"unknown schedule {config.schedule!r}; choose one of {list(builders)}")
    return builders[config.schedule]()
