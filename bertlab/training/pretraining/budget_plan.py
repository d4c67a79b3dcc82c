"""Planning `--budget` on the machine at hand: on the CPU the measured table of
`bertlab.training.pretraining.budget`, on a GPU a plan from what each shape trains per second here.

On a GPU the plan times a few real optimizer steps of every shape (bf16 where the loop would use
it, a real batch of the corpus) and the data worker's batches per second, takes the slower of the
two as each shape's speed, and lets `choose_shape` pick the largest shape that reads enough tokens
in the budget. An explicit model size keeps its shape and gets that shape's settings. The plan is
written to OUT/budget_plan.json, so that `--resume` continues with the same choices.

Under torchrun every process measures its own device and the slowest sets the pace (DDP steps
together); the tokens a budget reads are those of all processes, each on its own batch of the
recipe's size (the global batch is the processes times it). On the CPU the table is chosen by
the budget's minutes whatever the number of processes: it was measured in one process.

    plan = plan_budget(300, torch.device("cuda"), None, spec)
    plan.recipe.model_size, plan.lines()  # "mini", ["measured on NVIDIA H200: ...", ...]
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from bertlab.core.atomic import write_json
from bertlab.core.config import PRESETS, BertConfig
from bertlab.core.run_folder import PLAN_FILE
from bertlab.core.runtime import (
    SINGLE_PROCESS,
    DistributedContext,
    autocast,
    gathered,
    resolve_precision,
)
from bertlab.data.stream import PretrainingStream, StreamSpec
from bertlab.network.bert import BertForPreTraining
from bertlab.training.optim import build_optimizer
from bertlab.training.pretraining.budget import (
    ACCELERATOR_SHAPES,
    TOKENS_PER_PARAMETER,
    BudgetRecipe,
    accelerator_recipe,
    budget_recipe,
    choose_shape,
)

WARMUP_STEPS = 2  # untimed: kernel selection, allocator
TIMED_STEPS = 4
LOADER_SECONDS = 2.0  # the data worker's speed, measured over about this long


@dataclass(frozen=True)
class BudgetPlan:
    """The recipe a budget run uses, and what it was chosen from."""

    budget: float  # seconds
    model_size: str | None  # as the user gave it (None: the plan chose)
    device: str  # e.g. "cpu", "NVIDIA H200"
    recipe: BudgetRecipe
    tokens_per_second: dict[str, float] = field(default_factory=dict)  # measured, by shape
    parameters: dict[str, int] = field(default_factory=dict)
    loader_tokens_per_second: float | None = None
    processes: int = 1  # torchrun's world size: each process trains a batch of the recipe's size

    def expected_tokens(self) -> float | None:
        """Tokens that all processes read in the budget at the measured speed; None on a CPU."""
        rate = self.tokens_per_second.get(self.recipe.model_size)
        return None if rate is None else rate * self.processes * self.budget

    def lines(self) -> list[str]:
        """What the plan measured and why it chose its shape, for the run's report."""
        if not self.tokens_per_second:
            line = f"planned for the {self.device}: the measured CPU recipe (docs/budget.md)"
            if self.processes > 1:
                line += (
                    f", in each of {self.processes} processes (global batch "
                    f"{self.processes} x {self.recipe.batch_size})"
                )
            return [line]
        speeds = ", ".join(
            f"{shape} {rate / 1e3:,.0f}k" for shape, rate in self.tokens_per_second.items()
        )
        per = f" per process, the slowest of {self.processes}" if self.processes > 1 else ""
        lines = [f"measured on {self.device}, tokens/s{per}: {speeds}"]
        if self.loader_tokens_per_second is not None:
            lines[0] += f" (data worker {self.loader_tokens_per_second / 1e3:,.0f}k)"
        shape = self.recipe.model_size
        expected = self.expected_tokens() or 0.0
        ratio = expected / max(self.parameters.get(shape, 1), 1)
        why = (
            "as given"
            if self.model_size
            else (f"the largest shape that reads {TOKENS_PER_PARAMETER:g} tokens per parameter")
        )
        where = f" in all {self.processes} processes" if self.processes > 1 else ""
        lines.append(
            f"BERT-{shape} ({why}): about {expected / 1e6:,.0f}M tokens in "
            f"{self.budget / 60:g} min{where}, {ratio:,.0f} per parameter"
        )
        return lines

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, values: dict[str, Any]) -> BudgetPlan:
        recipe = BudgetRecipe(**values["recipe"])
        return cls(**(values | {"recipe": recipe}))


def plan_budget(
    seconds: float,
    device: torch.device,
    model_size: str | None,
    spec: StreamSpec | None = None,
    precision: str = "auto",
    context: DistributedContext = SINGLE_PROCESS,
) -> BudgetPlan:
    """The plan for `seconds` of training on `device`. Under torchrun every process calls it
    (each measures its own device) and all get the same plan.

    Args:
        seconds: the budget.
        device: where the run trains.
        model_size: the user's shape, or None to choose one.
        spec: the run's batch stream (corpus, masking, vocabulary); on a GPU its batches are
            timed. Its batch size and masking are replaced by each shape's.
        precision: the run's precision ("auto" as the loop resolves it).
        context: this process's place in a torchrun job.
    """
    if device.type == "cpu":
        recipe = budget_recipe(seconds, model_size)
        return BudgetPlan(seconds, model_size, "CPU", recipe, processes=context.world_size)
    if spec is None:
        raise ValueError("planning on an accelerator needs the run's batch stream")
    shapes = [model_size] if model_size is not None else list(ACCELERATOR_SHAPES)
    return measured_plan(seconds, device, model_size, spec, precision, shapes, context)


def measured_plan(
    seconds: float,
    device: torch.device,
    model_size: str | None,
    spec: StreamSpec,
    precision: str,
    shapes: list[str],
    context: DistributedContext = SINGLE_PROCESS,
) -> BudgetPlan:
    """The accelerator's plan, measured on `device` over `shapes` (smallest first): see
    `plan_budget`. Measuring stops at the first shape that cannot read enough tokens."""
    precision = resolve_precision(precision, device)
    processes = context.world_size
    loader = _loader_speed(_spec_for(spec, accelerator_recipe("mini")))
    rates, parameters = {}, {}
    for shape in shapes:
        recipe = accelerator_recipe(shape)
        batch = next(iter(PretrainingStream(_spec_for(spec, recipe))))[0]
        config = BertConfig.from_preset(
            shape,
            vocab_size=spec.vocab_size,
            pad_token_id=spec.special.pad,
            hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0,
        )
        step, parameters[shape] = _step_speed(config, batch, device, precision, recipe)
        rates[shape] = min(step, loader)
        if rates[shape] * processes * seconds < TOKENS_PER_PARAMETER * parameters[shape]:
            break  # larger shapes are slower and larger still: none of them can qualify
    rates, loader = slowest_speeds(rates, loader, context)
    all_processes = {shape: rate * processes for shape, rate in rates.items()}
    chosen = model_size or choose_shape(seconds, all_processes, parameters)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else device.type
    return BudgetPlan(
        seconds, model_size, name, accelerator_recipe(chosen), rates, parameters, loader, processes
    )


def slowest_speeds(
    rates: dict[str, float], loader: float, context: DistributedContext
) -> tuple[dict[str, float], float]:
    """Each shape's speed and the data worker's in the slowest process (DDP's steps wait for
    it), over the shapes that every process measured."""
    every = gathered((rates, loader), context)
    shapes = [shape for shape in rates if all(shape in other for other, _ in every)]
    slowest = {shape: min(other[shape] for other, _ in every) for shape in shapes}
    return slowest, min(other_loader for _, other_loader in every)


def load_plan(
    out: Path, seconds: float, model_size: str | None, device: str, processes: int = 1
) -> BudgetPlan | None:
    """OUT's plan when it is for the same budget, model size, device and processes; else None."""
    plan = read_plan(out)
    if plan is None:
        return None
    if (plan.budget, plan.model_size, plan.device, plan.processes) != (
        seconds,
        model_size,
        device,
        processes,
    ):
        return None
    return plan


def read_plan(out: Path) -> BudgetPlan | None:
    """OUT's plan, whatever it was made for; None when OUT has no readable one."""
    path = Path(out) / PLAN_FILE
    if not path.is_file():
        return None
    try:
        return BudgetPlan.from_json(json.loads(path.read_text(encoding="utf-8")))
    except (ValueError, TypeError, KeyError):
        return None


def save_plan(out: Path, plan: BudgetPlan) -> None:
    write_json(Path(out) / PLAN_FILE, plan.to_json(), sort_keys=True)


def nearest_preset(config: BertConfig) -> str:
    """The preset of `config`'s shape, else the one nearest in width (then depth)."""
    shape = (config.num_hidden_layers, config.hidden_size)
    return min(
        PRESETS,
        key=lambda name: (
            abs(PRESETS[name][1] - shape[1]) if PRESETS[name][:2] != shape else -1,
            abs(PRESETS[name][0] - shape[0]),
        ),
    )


def _spec_for(spec: StreamSpec, recipe: BudgetRecipe) -> StreamSpec:
    """`spec` with the recipe's batch size and masking rate."""
    data = dataclasses.replace(spec.data_config, mlm_probability=recipe.mlm_probability)
    return dataclasses.replace(spec, data_config=data, batch_size=recipe.batch_size)


def _loader_speed(spec: StreamSpec) -> float:
    """Non-padding tokens per second that one data worker builds (in this process)."""
    tokens, started = 0, time.perf_counter()
    for batch, _ in PretrainingStream(spec):
        tokens += int(batch["attention_mask"].sum())
        if time.perf_counter() - started >= LOADER_SECONDS:
            break
    return tokens / (time.perf_counter() - started)


def _step_speed(
    config: BertConfig,
    batch: dict[str, torch.Tensor],
    device: torch.device,
    precision: str,
    recipe: BudgetRecipe,
) -> tuple[float, int]:
    """(tokens per second of full optimizer steps on `batch`, the model's parameters)."""
    model = BertForPreTraining(config).to(device).train()
    parameters = sum(p.numel() for p in model.parameters())
    optimizer = build_optimizer(model, recipe.learning_rate)
    batch = {key: value.to(device) for key, value in batch.items()}
    tokens = int(batch["attention_mask"].sum())
    elapsed = 0.0
    for step in range(WARMUP_STEPS + TIMED_STEPS):
        started = time.perf_counter()
        with autocast(device, precision):
            loss = model(**batch).mlm_loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        float(loss.detach())  # the loop reads the loss every step: time that synchronization too
        if step >= WARMUP_STEPS:
            elapsed += time.perf_counter() - started
    del model, optimizer, batch
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return TIMED_STEPS * tokens / elapsed, parameters
