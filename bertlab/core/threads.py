"""CPU threads on a machine that is doing something else: how torch's threads wait, and how many.

PyTorch's CPU kernels split each operation between its intra-op threads (OpenMP, one per core by
default) and wait at the end of the operation until every thread has finished its share. GNU
OpenMP's default wait is to spin for a while (hundreds of thousands of iterations) before
sleeping. On an idle machine that saves a few microseconds per operation. When other processes
keep the cores busy, one of torch's threads can be descheduled while the other spins, burning
time the late thread needs, once per operation, hundreds of times per step. Beside training jobs
of higher priority (a load of 4 to 8 on 2 cores), fine-tuning BERT-tiny was seen to go from
~16 ms to 1.1-1.8 s per step.

The passive wait policy (`OMP_WAIT_POLICY=PASSIVE`) makes a waiting thread sleep at once: its
core goes to the late thread, or to the other process. Measured at BERT-mini beside one other
CPU-bound process (docs/performance.md, "A machine that is doing something else"), OpenMP's own
policy made fine-tuning 3.7x and pre-training 4x slower, the passive one 1.0x and 1.6x. It has a
price on an idle machine: fine-tuning's small operations wake a sleeping thread each time, and
an epoch takes 1.5x as long (pre-training: within the noise). `OMP_WAIT_POLICY=ACTIVE` in the
environment is the faster choice on a dedicated machine.

OpenMP reads the variable once, when the OpenMP runtime is loaded, that is when torch is first
imported; so `bertlab/__init__.py` calls `use_passive_waiting` before it imports anything that
imports torch. It is a default: a policy the user set in the environment wins, and nothing
changes when torch was imported before bertlab (then the runtime has already read its settings).

This module imports no torch, so that it can run before torch is loaded.
"""

from __future__ import annotations

import os
import sys

WAIT_POLICY_VARIABLE = "OMP_WAIT_POLICY"  # an environment variable of the OpenMP specification
PASSIVE = "PASSIVE"


def use_passive_waiting() -> bool:
    """Make OpenMP threads sleep when they wait, unless the user chose a policy or it is too late.

    Returns:
        True when this call set the policy; False when the environment already names one or
        torch (and so the OpenMP runtime) is already loaded.
    """
    if WAIT_POLICY_VARIABLE in os.environ or "torch" in sys.modules:
        return False
    os.environ[WAIT_POLICY_VARIABLE] = PASSIVE
    return True


def set_threads(num_threads: int | None) -> None:
    """Use `num_threads` intra-op threads in this process (None: torch's default, one per core).

    Raises:
        ValueError: `num_threads` is not positive.
    """
    if num_threads is None:
        return
    if num_threads < 1:
        raise ValueError(f"--threads must be positive, got {num_threads}")
    import torch  # only here: importing this module must not load torch (see the docstring)

    torch.set_num_threads(num_threads)
