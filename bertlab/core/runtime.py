"""Where and how training runs: device, bf16 autocast, seeds, RNG states, torch.distributed.

Shared by pre-training and fine-tuning. Nothing here reads the environment: torchrun's `RANK`,
`WORLD_SIZE` and `LOCAL_RANK` are read by the CLI and passed in as a `DistributedContext`. What
it reads of the machine: the CPU's flags (/proc/cpuinfo) for the precision `auto` picks, and,
where they cannot be read, a measured probe kept in the user's cache folder.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import pickle
import platform
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
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


# x86 CPU flags (Linux's /proc/cpuinfo names) of units that compute in bf16: AVX512-BF16 (Intel
# Cooper Lake and Sapphire Rapids on, AMD Zen 4 on) and AMX (Intel Sapphire Rapids on). Without
# them oneDNN emulates bf16, even where it reports bf16 "supported" (any AVX-512 CPU): on an Intel
# Xeon with AVX-512 but no bf16 units BERT-mini's pre-training step ran at about a fifth of its
# fp32 speed (docs/performance.md#the-precision-auto-picks).
BF16_UNIT_FLAGS = ("avx512_bf16", "amx_bf16")
CPU_INFO = Path("/proc/cpuinfo")
# Where the flags cannot be read (macOS, Windows, ARM): a matmul at BERT-mini's width timed in both
# precisions, once per machine and torch version; bf16 only when it is clearly faster.
PROBE_WIDTH = 256  # BERT-mini's hidden size: the budget recipe's largest CPU shape
PROBE_ROWS = 256
PROBE_MIN_SPEEDUP = 1.2  # below this the probe's noise could pick the slower precision
PROBE_CACHE_NAME = "precision-probe.json"  # in ~/.cache/bertlab


@dataclass(frozen=True)
class PrecisionChoice:
    """The precision a run computes in, and why, as the run's output and model card say it."""

    precision: str  # "fp32" or "bf16"
    reason: str  # e.g. "this CPU has no bf16 units"

    def __str__(self) -> str:
        return f"{self.precision} ({self.reason})"


def cpu_flags(path: Path = CPU_INFO) -> frozenset[str] | None:
    """The x86 CPU's feature flags (the first processor's `flags` line of /proc/cpuinfo); None
    where there is no such line (not Linux, or not x86: ARM's line is `Features`)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if name.strip() == "flags":
            return frozenset(value.split())
    return None


def _time_matmul(left: torch.Tensor, right: torch.Tensor, precision: str, repeats: int) -> float:
    """The best of `repeats` timed products (after one untimed) of `left @ right`, in seconds."""
    best = float("inf")
    with autocast(left.device, precision):
        left @ right
        for _ in range(repeats):
            started = time.perf_counter()
            left @ right
            best = min(best, time.perf_counter() - started)
    return best


def measure_bf16_speedup() -> float:
    """fp32's time over bf16's for a (256 x 256) x (256 x 1024) product on the CPU: above 1
    where bf16 is faster. Where bf16 is emulated (tens of times slower) one product of each
    tells, so the probe stays well under a second."""
    generator = torch.Generator().manual_seed(0)
    left = torch.randn(PROBE_ROWS, PROBE_WIDTH, generator=generator)
    right = torch.randn(PROBE_WIDTH, 4 * PROBE_WIDTH, generator=generator)
    fp32 = _time_matmul(left, right, "fp32", repeats=5)
    bf16 = _time_matmul(left, right, "bf16", repeats=1)
    if bf16 < 2 * fp32:  # close: time it as carefully as fp32
        bf16 = min(bf16, _time_matmul(left, right, "bf16", repeats=4))
    return fp32 / bf16


def _probe_key() -> str:
    """This machine and torch version (a home folder may be shared between machines)."""
    machine = f"{platform.node()} {platform.machine()} {platform.processor()}"
    return f"{machine}, {os.cpu_count()} cores, torch {torch.__version__}"


def probed_bf16_speedup(cache: Path | None = None) -> float:
    """`measure_bf16_speedup`, measured once per machine and torch version: kept in `cache`
    (~/.cache/bertlab/precision-probe.json by default), measured again where it cannot be read."""
    cache = Path.home() / ".cache" / "bertlab" / PROBE_CACHE_NAME if cache is None else cache
    key = _probe_key()
    try:
        known = json.loads(cache.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        known = {}
    if not isinstance(known, dict):
        known = {}
    if isinstance(known.get(key), (int, float)):
        return float(known[key])
    speedup = measure_bf16_speedup()
    with contextlib.suppress(OSError):
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text(json.dumps({**known, key: speedup}, indent=1), encoding="utf-8")
    return speedup


def _cpu_precision() -> PrecisionChoice:
    flags = cpu_flags()
    if flags is not None:
        units = [flag for flag in BF16_UNIT_FLAGS if flag in flags]
        if units:
            return PrecisionChoice("bf16", f"this CPU has bf16 units ({', '.join(units)})")
        return PrecisionChoice("fp32", "this CPU has no bf16 units")
    speedup = probed_bf16_speedup()
    if speedup >= PROBE_MIN_SPEEDUP:
        return PrecisionChoice("bf16", f"bf16 measured {speedup:.1f}x as fast as fp32 on this CPU")
    return PrecisionChoice("fp32", f"bf16 measured {speedup:.2f}x fp32's speed on this CPU")


def choose_precision(precision: str, device: torch.device) -> PrecisionChoice:
    """The precision to compute in on `device`, and why.

    `auto` is bf16 only where bf16 is faster: on CUDA, a GPU that computes in bf16 (Ampere or
    newer); on an x86 CPU, one with bf16 units (BF16_UNIT_FLAGS); on a CPU whose flags cannot be
    read, where a short measured probe finds bf16 faster. fp32 everywhere else.

    Raises:
        ValueError: `precision` is not one of PRECISIONS.
    """
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}; choose one of {PRECISIONS}")
    if precision != "auto":
        return PrecisionChoice(precision, "as asked")
    if device.type == "cuda":
        if torch.cuda.is_bf16_supported():
            return PrecisionChoice("bf16", "this GPU computes in bf16")
        return PrecisionChoice("fp32", "this GPU has no bf16 support")
    if device.type == "cpu":
        return _cpu_precision()
    return PrecisionChoice("fp32", f"no bf16 autocast on {device.type}")


def resolve_precision(precision: str, device: torch.device) -> str:
    """`choose_precision`'s precision: "fp32" or "bf16"."""
    return choose_precision(precision, device).precision


@contextlib.contextmanager
def denormals_flushed(device: torch.device) -> Iterator[None]:
    """Treat denormal floats as zero on the CPU for the block (the training loops).

    Values below ~1.2e-38 (weights decayed towards zero, gradients of saturated units) take a
    slow microcode path on x86; a step full of them ran tens of times slower. Flushing them to
    zero changes results only below that size. Set back to IEEE behaviour after the block.
    """
    if device.type != "cpu" or not torch.set_flush_denormal(True):
        yield
        return
    try:
        yield
    finally:
        torch.set_flush_denormal(False)


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


@dataclass(frozen=True)
class JobFailure:
    """What a failure raised by `failing_together` says of itself in a torchrun job.

    Attributes:
        rank: the process it happened in (the first by rank, where several failed).
        is_said_here: whether this process says it: one process per machine does (the one of
            local rank 0), so that a job says a refusal once on each machine, not once a process.
    """

    rank: int
    is_said_here: bool


@contextlib.contextmanager
def failing_together(context: DistributedContext) -> Iterator[None]:
    """Leave the block in every process of a torchrun job alike: when it failed in any process,
    every process raises that failure (the first by rank), so that none is left waiting in a
    collective for a process that has stopped (gloo's "Connection closed by peer" and a
    traceback, before the one line of the refusal). The failure gets a `job_failure`
    (`JobFailure`): where it happened and whether this process says it.

    The block may do what one process alone does (the main process taking OUT, training the
    vocabulary, building the corpus) while the others pass through; it must not wait for the
    other processes itself (no collective inside).
    """
    failure: Exception | None = None
    try:
        yield
    except Exception as error:  # any failure: every process must learn of it; raised below
        if not context.is_distributed:
            raise
        failure = error
    if not context.is_distributed:
        return
    failures: list[tuple[bytes, str] | None] = [None] * context.world_size
    dist.all_gather_object(failures, None if failure is None else _portable(failure))
    rank = next((rank for rank, sent in enumerate(failures) if sent is not None), None)
    if rank is None:
        return
    raised = failure if rank == context.rank else _received(*failures[rank])
    raised.job_failure = JobFailure(rank, context.local_rank == 0)
    if raised is failure:
        raise raised
    raise raised from None


def _portable(error: Exception) -> tuple[bytes, str]:
    """`error` pickled to send to the other processes, and its words should it not load there."""
    try:
        return pickle.dumps(error), str(error)
    except Exception:  # an exception that cannot be pickled: its words travel alone
        return b"", str(error)


def _received(data: bytes, words: str) -> Exception:
    """The exception `_portable` sent; its words in a RuntimeError where it does not load."""
    try:
        return pickle.loads(data)
    except Exception:  # a class whose instances do not load again: keep what it said
        return RuntimeError(words)
