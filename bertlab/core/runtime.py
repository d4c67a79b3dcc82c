"""Where and how training runs: device, bf16 autocast, seeds, RNG states, torch.distributed.

Shared by pre-training and fine-tuning. Nothing here reads the environment: torchrun's `RANK`,
`WORLD_SIZE` and `LOCAL_RANK` are read by the CLI and passed in as a `DistributedContext`.
"""

from __future__ import annotations

import contextlib
import io
import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from bertlab.core.precision import PRECISIONS


def default_device() -> torch.device:
    """The first CUDA device when there is one, else the CPU."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def host_reads_are_free(device: torch.device) -> bool:
    """Whether the host reads a value on `device` without waiting: on the CPU. On a GPU a read
    (`float(tensor)`, `bool(tensor)`, a boolean mask's indexing) waits for every queued step."""
    return device.type == "cpu"


def model_device(model: torch.nn.Module) -> torch.device:
    """The device a model's weights are on: where its inputs must go."""
    return next(model.parameters()).device


def bf16_is_fast(device: torch.device) -> bool:
    """Whether bf16 matmuls run natively on `device` (and so bf16 autocast can pay off).

    On CUDA: Ampere or newer. On the CPU: oneDNN's bf16 kernels need AVX512-BF16 or AMX; without
    them (e.g. AMD Zen 3) a bf16 matmul is emulated and runs ~100x slower than fp32.
    """
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    if device.type == "cpu":
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    return False


def resolve_precision(precision: str, device: torch.device) -> str:
    """`auto` becomes `bf16` where bf16 is fast on `device`, else `fp32`."""
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}; choose one of {PRECISIONS}")
    if precision == "auto":
        return "bf16" if bf16_is_fast(device) else "fp32"
    return precision


def autocast(device: torch.device, precision: str) -> contextlib.AbstractContextManager:
    """bf16 autocast for `precision == "bf16"`, otherwise nothing (fp32)."""
    if precision == "bf16":
        return torch.autocast(device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def set_seed(seed: int) -> None:
    """Seed Python's, numpy's and torch's global generators (model init, dropout)."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def rng_state() -> dict[str, Any]:
    """The global generators' states, for a checkpoint (dropout must continue, not restart)."""
    state = {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore what `rng_state` returned."""
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


@dataclass(frozen=True)
class DistributedContext:
    """This process's place in a torchrun job; the default is a single process."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def is_distributed(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        """Only the main process writes files and shows progress."""
        return self.rank == 0

    def device(self) -> torch.device:
        """CUDA device `local_rank` when CUDA is available, else the CPU."""
        if torch.cuda.is_available():
            return torch.device("cuda", self.local_rank)
        return torch.device("cpu")


@contextlib.contextmanager
def distributed(context: DistributedContext) -> Iterator[DistributedContext]:
    """Join the torchrun process group for the block (NCCL on GPU, gloo on CPU); leave it after.

    torchrun exports `MASTER_ADDR`/`MASTER_PORT`, which `init_process_group` reads itself.
    """
    if not context.is_distributed:
        yield context
        return
    device = context.device()
    if device.type == "cuda":
        torch.cuda.set_device(device)
    backend = "nccl" if device.type == "cuda" else "gloo"
    dist.init_process_group(backend, rank=context.rank, world_size=context.world_size)
    try:
        yield context
    finally:
        dist.destroy_process_group()


def barrier(context: DistributedContext) -> None:
    if context.is_distributed:
        dist.barrier()


SINGLE_PROCESS = DistributedContext()


def gathered(value: Any, context: DistributedContext) -> list[Any]:
    """`value` of every process, by rank (a list of one outside a torchrun job).

    Each travels as the bytes of `torch.save` and loads with `weights_only` (tensors, numbers,
    strings, lists, dicts, tuples), as a checkpoint's state does: `all_gather_object`'s own
    pickling of tensors cannot load every dtype (numpy's uint32 generator keys).
    """
    if not context.is_distributed:
        return [value]
    buffer = io.BytesIO()
    torch.save(value, buffer)
    values: list[bytes | None] = [None] * context.world_size
    dist.all_gather_object(values, buffer.getvalue())
    return [torch.load(io.BytesIO(data), weights_only=True) for data in values]


def from_main(value: Any, context: DistributedContext) -> Any:
    """The main process's `value` (plain Python: numbers, strings, lists, dicts) in every
    process, so that they decide alike without reading each other's files."""
    if not context.is_distributed:
        return value
    values = [value if context.is_main else None]
    dist.broadcast_object_list(values, src=0)
    return values[0]
