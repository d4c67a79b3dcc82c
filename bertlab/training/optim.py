"""Parameter groups, AdamW with BERT's settings, and learning-rate schedules.

Shared by pre-training and fine-tuning. The reference is Google's BERT `optimization.py`
(`create_optimizer`, `AdamWeightDecayOptimizer`) and the BERT paper, Appendix A.2: "Adam with
learning rate of 1e-4, β1 = 0.9, β2 = 0.999, L2 weight decay of 0.01, learning rate warmup over the
first 10,000 steps, and linear decay of the learning rate".

Schedules:

- `linear_warmup_decay` counts optimizer steps. It is a `LambdaLR`, so its position is checkpointed
  with `state_dict()`. Call `scheduler.step()` after each `optimizer.step()`, as torch expects.
  Fine-tuning may choose it, ULMFiT's `slanted_triangular` or `constant_after_warmup`
  (`finetune_schedule`), all three `LambdaLR`s over optimizer steps.
- Pre-training's schedules (`bertlab.training.pretraining.schedules`: `BudgetSchedule` over the
  fraction of a budget used, `StepsSchedule` over `linear_warmup_decay`'s steps) are named in
  one table (`core.config.PRETRAIN_SCHEDULES`) and built by `pretrain_schedule`.

Resuming: build the optimizer and the schedule exactly as at the start of the run, then load the
optimizer's state dict, then the schedule's.

Layer-wise learning rates (`layerwise_parameter_groups`, `layer_learning_rates`): a model's
parameters in the layer groups it declares (`network.layer_groups`), bottom-up; a group at depth d
trains at the top rate times D^(top depth - d). BERT's: the embeddings, encoder layers 1 to L,
the pooler, and the head (everything outside the encoder: a task layer, the pre-training heads),
the last three at the top rate; ULMFiT's classifier: the embedding, the LSTMs and the classifier,
each group 2.6 times slower than the one above it. ULMFiT's discriminative fine-tuning (Howard &
Ruder 2018, Sec. 3.2), the layer-wise decay of ELECTRA's fine-tuning (Clark et al. 2020) and of
Sun et al. 2019, "How to Fine-Tune BERT".

Both loops stop a run whose loss, gradient norm or weights stop being finite with
`DivergedError`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.optim.lr_scheduler import LambdaLR

from bertlab.core.finetune_config import (
    CONSTANT_SCHEDULE,
    LINEAR_SCHEDULE,
    SLANTED_TRIANGULAR_SCHEDULE,
    STLR_CUT_FRAC,
    STLR_RATIO,
    FinetuneConfig,
)
from bertlab.network.layer_groups import LayerGroup


# Google's BERT optimization.py (AdamWeightDecayOptimizer as built by create_optimizer) and the
# BERT paper, Appendix A.2. The paper gives no ε; 1e-6 is the code's (torch's default is 1e-8).
class DivergedError(ValueError):
    """The loss, the gradient norm or a weight became NaN or infinite: the run stops there."""


ADAM_BETAS = (0.9, 0.999)
ADAM_EPSILON = 1e-6
WEIGHT_DECAY = 0.01

# Google's optimization.py: exclude_from_weight_decay=["LayerNorm", "layer_norm", "bias"], matched
# as substrings of the variable name. We match "bias" only as the last name component (so that a
# name like `attention_bias.weight` would still decay) and also go by module type (below).
NO_DECAY_NAME_MARKERS = ("LayerNorm", "layer_norm")
BIAS_NAME = "bias"
NO_DECAY_MODULE_TYPES: tuple[type[nn.Module], ...] = (nn.LayerNorm,)

# Device types on which `torch.optim.AdamW(fused=True)` has kernels (CPU since torch 2.4).
FUSED_DEVICE_TYPES = ("cpu", "cuda")


def _excluded_by_name(name: str) -> bool:
    """Google's exclusion rule on one parameter name, e.g. `cls.predictions.bias` -> True."""
    if name.rsplit(".", 1)[-1] == BIAS_NAME:
        return True
    return any(marker in name for marker in NO_DECAY_NAME_MARKERS)


def parameter_groups(model: nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    """Split trainable parameters into a weight-decay group and a no-decay group.

    No weight decay on biases and LayerNorm weights (Google's BERT). A parameter is excluded when
    it belongs to an `nn.LayerNorm`, or when any name it is reachable by is a bias or contains
    "LayerNorm"/"layer_norm". Every other parameter decays: weight matrices and embeddings.

    Tied parameters (the MLM decoder weight is the word-embedding matrix; the decoder bias is
    `cls.predictions.bias`) appear once, in the order of `model.parameters()`, so the optimizer's
    state dict is the same for every run of the same model. Frozen parameters
    (`requires_grad=False`) are left out. Empty groups are left out.

    Args:
        model: the module to optimize (the unwrapped model; DDP and `torch.compile` share its
            parameters, so the groups also serve the wrapped model).
        weight_decay: the decoupled weight-decay rate of the decay group.

    Returns:
        Param-group dicts for `torch.optim`: `{"params": [...], "weight_decay": weight_decay}`,
        then `{"params": [...], "weight_decay": 0.0}`.

    Raises:
        ValueError: if `weight_decay` is negative or the model has no trainable parameter.
    """
    if weight_decay < 0:
        raise ValueError(f"weight_decay must be non-negative, got {weight_decay}")
    excluded = _no_decay_ids(model)
    decay: list[nn.Parameter] = []
    no_decay: list[nn.Parameter] = []
    for param in model.parameters():  # deduplicated: each tied parameter once
        if param.requires_grad:
            (no_decay if id(param) in excluded else decay).append(param)
    if not decay and not no_decay:
        raise ValueError("the model has no trainable parameters")
    groups = [
        {"params": decay, "weight_decay": weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    return [group for group in groups if group["params"]]


def _no_decay_ids(model: nn.Module) -> set[int]:
    """The ids of the parameters Google's rule exempts from weight decay (`parameter_groups`)."""
    excluded: set[int] = set()
    for module in model.modules():
        if isinstance(module, NO_DECAY_MODULE_TYPES):
            excluded.update(id(param) for param in module.parameters(recurse=False))
    # Every alias of a tied parameter is checked, so the decision cannot depend on which name
    # `named_parameters()` happens to report first.
    for name, param in model.named_parameters(remove_duplicate=False):
        if _excluded_by_name(name):
            excluded.add(id(param))
    return excluded


# --- layer-wise learning rates --------------------------------------------------------------------


def model_layer_groups(model: nn.Module) -> list[LayerGroup]:
    """The layer groups `model` declares (`network.layer_groups`), bottom-up.

    Raises:
        ValueError: the model declares none (it is no model that bertlab fine-tunes by layer).
    """
    declare = getattr(model, "layer_groups", None)
    if declare is None:
        raise ValueError(f"{type(model).__name__} declares no layer groups to train by layer")
    return declare()


def layer_groups(model: nn.Module) -> list[tuple[str, list[nn.Parameter]]]:
    """Every parameter of `model` in its layer group, bottom-up, as the model declares them
    (`network.layer_groups`).

    Example for a 2-layer BertForSequenceClassification: [("embeddings", [...]), ("layer 1",
    [...]), ("layer 2", [...]), ("pooler", [...]), ("head", [classifier.weight, classifier.bias])].
    A model without a pooler has no pooler group. Tied parameters appear once, in the lowest
    group that holds them (the MLM decoder's weight is the word embeddings).

    Raises:
        ValueError: the model declares no groups, or leaves a parameter out of them.
    """
    seen: set[int] = set()
    groups = []
    for group in model_layer_groups(model):
        params = []
        for param in group.parameters():
            if id(param) not in seen:
                seen.add(id(param))
                params.append(param)
        groups.append((group.name, params))
    left_out = [name for name, param in model.named_parameters() if id(param) not in seen]
    if left_out:
        raise ValueError(f"{type(model).__name__}'s layer groups leave out {left_out[:3]}")
    return groups


def layer_learning_rates(
    model: nn.Module, learning_rate: float, layerwise_lr_decay: float = 1.0
) -> list[tuple[str, float]]:
    """The peak learning rate of each layer group that has a trainable parameter, bottom-up: the
    top rate times D^(top depth - the group's depth), as the model declares its groups' depths.

    Example: BERT-mini (4 layers) at 1e-3 with decay 0.5 -> [("embeddings", 6.25e-05),
    ("layer 1", 1.25e-04), ("layer 2", 2.5e-04), ("layer 3", 5e-04), ("layer 4", 1e-03),
    ("pooler", 1e-03), ("head", 1e-03)]. ULMFiT's classifier (3 LSTMs) at 1e-2 with 1/2.6:
    embeddings 1e-2 / 2.6^4, LSTM 1 1e-2 / 2.6^3, ..., LSTM 3 1e-2 / 2.6, head 1e-2.

    Args:
        model: a model that declares its layer groups (`layer_groups()`).
        learning_rate: the top rate: the head's.
        layerwise_lr_decay: D in (0, 1]; 1 trains every layer at the top rate.

    Returns:
        (group name, rate) per group, embeddings first; frozen groups are left out.

    Raises:
        ValueError: a rate or decay out of range, or a model without layer groups.
    """
    if not learning_rate > 0:
        raise ValueError(f"learning_rate must be positive, got {learning_rate}")
    if not 0.0 < layerwise_lr_decay <= 1.0:
        raise ValueError(f"layerwise_lr_decay must be in (0, 1], got {layerwise_lr_decay}")
    depths = {group.name: group.depth for group in model_layer_groups(model)}
    top = max(depths.values())
    return [
        (name, learning_rate * layerwise_lr_decay ** (top - depths[name]))
        for name, params in layer_groups(model)
        if any(param.requires_grad for param in params)
    ]


def layerwise_parameter_groups(
    model: nn.Module, weight_decay: float, learning_rate: float, layerwise_lr_decay: float
) -> list[dict[str, Any]]:
    """`parameter_groups` split by layer group, each at its own rate (`layer_learning_rates`).

    Returns:
        Param-group dicts, bottom-up and per layer group the decay group first:
        `{"name": "layer 3", "lr": rate, "weight_decay": ..., "params": [...]}`. Frozen
        parameters and empty groups are left out.

    Raises:
        ValueError: a bad rate, decay or weight decay, or nothing to train.
    """
    if weight_decay < 0:
        raise ValueError(f"weight_decay must be non-negative, got {weight_decay}")
    rates = dict(layer_learning_rates(model, learning_rate, layerwise_lr_decay))
    excluded = _no_decay_ids(model)
    groups = []
    for name, params in layer_groups(model):
        trainable = [param for param in params if param.requires_grad]
        for decay_rate, members in (
            (weight_decay, [param for param in trainable if id(param) not in excluded]),
            (0.0, [param for param in trainable if id(param) in excluded]),
        ):
            if members:
                groups.append(
                    {"name": name, "lr": rates[name], "weight_decay": decay_rate, "params": members}
                )
    if not groups:
        raise ValueError("the model has no trainable parameters")
    return groups


def _supports_fused(params: list[torch.Tensor]) -> bool:
    """Whether the fused AdamW kernel handles all of these parameters."""
    return all(
        param.device.type in FUSED_DEVICE_TYPES and param.dtype.is_floating_point
        for param in params
    )


def build_optimizer(
    model: nn.Module,
    learning_rate: float,
    weight_decay: float = WEIGHT_DECAY,
    betas: tuple[float, float] = ADAM_BETAS,
    eps: float = ADAM_EPSILON,
    fused: bool | None = None,
    layerwise_lr_decay: float | None = None,
) -> torch.optim.AdamW:
    """AdamW over `parameter_groups(model, weight_decay)`, with Google's BERT defaults.

    With `layerwise_lr_decay`, over `layerwise_parameter_groups` instead: one pair of groups per
    layer group, each at its own rate (fine-tuning builds it so, at 1.0 when the decay is off).

    `torch.optim.AdamW` applies weight decay as Google's optimizer does, decoupled and scaled by the
    learning rate (`param -= lr * (adam_update + weight_decay * param)`). One difference: Google's
    `AdamWeightDecayOptimizer` skips Adam's bias correction, torch's applies it; after warmup the
    two updates are practically the same.

    Args:
        model: the unwrapped model.
        learning_rate: the peak learning rate; schedules scale it.
        weight_decay: decoupled weight decay of weight matrices and embeddings.
        betas: Adam's (β1, β2).
        eps: Adam's ε.
        fused: use the fused kernel. None: when every parameter is a floating-point tensor on
            CPU or CUDA; otherwise the multi-tensor (`foreach`) implementation.
        layerwise_lr_decay: None: two groups (decay, no decay) at `learning_rate`; D in (0, 1]:
            groups per layer, layer l of L at `learning_rate * D ** (L - l)`.

    Returns:
        The optimizer.

    Raises:
        ValueError: for a non-positive learning rate or from `parameter_groups`.
    """
    if learning_rate <= 0:
        raise ValueError(f"learning_rate must be positive, got {learning_rate}")
    if layerwise_lr_decay is None:
        groups = parameter_groups(model, weight_decay)
    else:
        groups = layerwise_parameter_groups(model, weight_decay, learning_rate, layerwise_lr_decay)
    if fused is None:
        fused = _supports_fused([param for group in groups for param in group["params"]])
    return torch.optim.AdamW(
        groups,
        lr=learning_rate,
        betas=betas,
        eps=eps,
        weight_decay=weight_decay,
        fused=fused,
        foreach=not fused,  # torch allows at most one of the two
    )


def linear_warmup_decay(
    optimizer: torch.optim.Optimizer, warmup_steps: int, total_steps: int
) -> LambdaLR:
    """BERT's schedule: linear warmup from 0 to the peak, then linear decay to 0.

    The multiplier of optimizer step `s` (0-based) is `s / warmup_steps` while `s < warmup_steps`,
    then `(total_steps - s) / (total_steps - warmup_steps)`, and 0 from `total_steps` on. Step 0
    therefore has learning rate 0, as in Google's code and `transformers`'
    `get_linear_schedule_with_warmup` (whose formula this is). Google's code decays over all
    `total_steps` (`1 - s / total_steps`), so its rate drops slightly at the end of warmup; this
    one is continuous and reaches the peak exactly there.

    Call `scheduler.step()` after each `optimizer.step()`.

    Args:
        optimizer: the optimizer; each group's current `lr` is its peak.
        warmup_steps: optimizer steps of warmup (BERT: 10,000 of 1,000,000).
        total_steps: optimizer steps of the whole run.

    Returns:
        A `LambdaLR`; its `state_dict()` holds the step count.

    Raises:
        ValueError: unless `0 <= warmup_steps <= total_steps` and `total_steps > 0`.
    """
    if total_steps <= 0 or not 0 <= warmup_steps <= total_steps:
        raise ValueError(
            f"need 0 <= warmup_steps <= total_steps and total_steps > 0, "
            f"got warmup_steps={warmup_steps}, total_steps={total_steps}"
        )
    decay_steps = max(1, total_steps - warmup_steps)

    def multiplier(step: int) -> float:
        if step < warmup_steps:
            return step / warmup_steps
        return max(0.0, (total_steps - step) / decay_steps)

    return LambdaLR(optimizer, multiplier)


def slanted_triangular(
    optimizer: torch.optim.Optimizer,
    total_steps: int,
    cut_frac: float = STLR_CUT_FRAC,
    ratio: float = STLR_RATIO,
) -> LambdaLR:
    """ULMFiT's slanted triangular learning rates (Howard & Ruder 2018, Sec. 3.2, eq. 3).

    A short linear rise, then a long linear fall, from and to the peak / `ratio`. With T =
    `total_steps` and t the optimizer step (0-based):

        cut = floor(T * cut_frac)
        p   = t / cut                                     if t < cut
              1 - (t - cut) / (cut * (1 / cut_frac - 1))  otherwise
        lr  = peak * (1 + p * (ratio - 1)) / ratio

    so lr is peak / ratio at t = 0, the peak at t = cut and peak / ratio again at t = T (when
    T * cut_frac is whole; otherwise p is kept from going below 0, where the rate would fall
    under peak / ratio). With fewer than 1 / cut_frac steps there is no rise (cut = 0): the rate
    falls from the peak, p = 1 - t / T. Each param group's rate follows the formula from its own
    peak, so layer-wise rates keep their ratios.

    Args:
        optimizer: the optimizer; each group's current `lr` is its peak.
        total_steps: T, optimizer steps of the whole run.
        cut_frac: the fraction of the steps over which the rate rises (ULMFiT: 0.1).
        ratio: the peak over the lowest rate (ULMFiT: 32).

    Returns:
        A `LambdaLR`; call `scheduler.step()` after each `optimizer.step()`.

    Raises:
        ValueError: unless `total_steps > 0`, `0 < cut_frac < 1` and `ratio >= 1`.
    """
    if total_steps <= 0 or not 0.0 < cut_frac < 1.0 or not ratio >= 1.0:
        raise ValueError(
            f"need total_steps > 0, 0 < cut_frac < 1 and ratio >= 1, got total_steps="
            f"{total_steps}, cut_frac={cut_frac}, ratio={ratio}"
        )
    cut = math.floor(total_steps * cut_frac)

    def multiplier(step: int) -> float:
        if cut == 0:
            fraction = 1.0 - step / total_steps
        elif step < cut:
            fraction = step / cut
        else:
            fraction = 1.0 - (step - cut) / (cut * (1.0 / cut_frac - 1.0))
        return (1.0 + max(0.0, fraction) * (ratio - 1.0)) / ratio

    return LambdaLR(optimizer, multiplier)


def constant_after_warmup(optimizer: torch.optim.Optimizer, warmup_steps: int) -> LambdaLR:
    """Linear warmup from 0 to the peak over `warmup_steps`, then the peak to the end (as
    `transformers`' `get_constant_schedule_with_warmup`; no warmup: constant from step 0).

    Raises:
        ValueError: for negative `warmup_steps`.
    """
    if warmup_steps < 0:
        raise ValueError(f"warmup_steps must be non-negative, got {warmup_steps}")

    def multiplier(step: int) -> float:
        return step / warmup_steps if step < warmup_steps else 1.0

    return LambdaLR(optimizer, multiplier)


def finetune_schedule(
    optimizer: torch.optim.Optimizer, config: FinetuneConfig, total_steps: int
) -> LambdaLR:
    """The schedule `config.schedule` names, over `total_steps` optimizer steps: linear warmup
    and decay (BERT's), slanted triangular (ULMFiT's, `cut_frac` and `stlr_ratio`) or constant
    after the warmup; the linear and constant ones warm up over `warmup_proportion` of the steps.

    Raises:
        ValueError: an unknown schedule, or from the schedule's own checks.
    """
    warmup_steps = round(config.warmup_proportion * total_steps)
    builders: dict[str, Callable[[], LambdaLR]] = {
        LINEAR_SCHEDULE: lambda: linear_warmup_decay(optimizer, warmup_steps, total_steps),
        SLANTED_TRIANGULAR_SCHEDULE: lambda: slanted_triangular(
            optimizer, total_steps, config.cut_frac, config.stlr_ratio
        ),
        CONSTANT_SCHEDULE: lambda: constant_after_warmup(optimizer, warmup_steps),
    }
    if config.schedule not in builders:
        raise ValueError(f"unknown schedule {config.schedule!r}; choose one of {list(builders)}")
    return builders[config.schedule]()
