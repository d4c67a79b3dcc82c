"""SIGTERM as an orderly stop: a scheduler's or `docker stop`'s SIGTERM ends a command as Ctrl-C
does (what it writes is completed or removed, and the message says what is kept).

The handler turns SIGTERM into `KeyboardInterrupt` in the command's own process only. A process
forked from it (a corpus-encoding pool's or a data loader's worker) must die by SIGTERM as by
default, because a pool stops its workers with SIGTERM and then waits for them. Resetting the
handler in the child after the fork is not enough: a SIGTERM that reaches the child before
Python's after-fork bookkeeping is dropped (CPython clears pending signal flags in the child),
and `Pool.terminate` then waits forever for a worker blocked on the pool's queue lock. So SIGTERM
is blocked in the forking thread across each fork; the child sets it back to the default action
and only then unblocks it, so that a SIGTERM that came meanwhile is delivered and kills it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator

EXIT_TERMINATED = 143  # 128 + SIGTERM, what a shell reports for a process ended by SIGTERM
TERMINATED = "SIGTERM"  # the argument of the KeyboardInterrupt that SIGTERM raises


class _InterruptOnSigterm:
    """The SIGTERM handler of the process `pid`: raises KeyboardInterrupt(TERMINATED) there.

    A SIGTERM sent to the command's process group (a scheduler's, `kill -TERM -PGID`) also ends
    its workers, as it should; their ends are part of the stop, not failures to report. So the
    handler first makes SIGCHLD do nothing, for the rest of the process (which the stop ends):
    torch's data loader handles SIGCHLD by raising "DataLoader worker (pid N) is killed by
    signal: Terminated", in the middle of the stop or when the loader is collected at exit.
    (Nothing, not the default: a SIGCHLD that came before would then be reported as "ignored
    due to race condition"; and not SIG_IGN, under which the system reaps children before
    their waiters.)
    """

    def __init__(self, pid: int) -> None:
        self.pid = pid

    def __call__(self, signum: int, frame: object) -> None:
        if os.getpid() != self.pid:  # a forked process that still has the handler: die
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)
            return
        signal.signal(signal.SIGCHLD, _a_worker_ended)
        raise KeyboardInterrupt(TERMINATED)


def _a_worker_ended(signum: int, frame: object) -> None:
    """SIGCHLD while a command stops: a worker ended with it, as it should."""


def _is_installed() -> bool:
    return isinstance(signal.getsignal(signal.SIGTERM), _InterruptOnSigterm)


# Per forking thread: whether `_before_fork` blocked SIGTERM (threads may fork at once).
_fork_state = threading.local()


def _before_fork() -> None:
    _fork_state.did_block = False
    if _is_installed():
        previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
        _fork_state.did_block = signal.SIGTERM not in previous


def _after_fork_in_parent() -> None:
    if getattr(_fork_state, "did_block", False):
        _fork_state.did_block = False
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})


def _after_fork_in_child() -> None:
    if _is_installed():
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    _after_fork_in_parent()  # unblock: a SIGTERM pending since the fork kills the child now


os.register_at_fork(
    before=_before_fork,
    after_in_parent=_after_fork_in_parent,
    after_in_child=_after_fork_in_child,
)


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM raises `KeyboardInterrupt(TERMINATED)` in this process; the
    previous handler is given back on leaving. Outside the main thread (where Python cannot
    install handlers) this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _InterruptOnSigterm(os.getpid()))
    try:
        yield
    finally:
        if previous is not None:  # None: a handler not installed from Python, kept as it is
            signal.signal(signal.SIGTERM, previous)


def is_terminated(interrupt: KeyboardInterrupt) -> bool:
    """Whether `interrupt` was raised by SIGTERM (else by Ctrl-C)."""
    return interrupt.args == (TERMINATED,)
