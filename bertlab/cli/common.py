"""What every `bertlab` subcommand shares: the user-error exception, exit codes, `--threads`."""

from __future__ import annotations

import argparse

EXIT_USER_ERROR = 1
EXIT_INTERRUPTED = 130  # 128 + SIGINT (Ctrl-C)
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, what a shell reports for `yes | head -1`'s writer


class CommandError(Exception):
    """An error the user can fix; printed as one line, without a traceback."""


THREADS_HELP = (
    "CPU threads for torch's operations (default: torch's choice, one per core). Waiting "
    "threads sleep instead of spinning (OMP_WAIT_POLICY=PASSIVE unless you set it), so the "
    "default degrades gracefully on a busy machine; see docs/performance.md#a-machine-that-is-"
    "doing-something-else"
)


def add_threads_flag(parser: argparse._ActionsContainer, *, is_top_level: bool = False) -> None:
    """`--threads N`, applied by `bertlab.cli.main` to every command (one place).

    The top-level parser's flag (`bertlab --threads 1 COMMAND`) defaults to None; a command's own
    copy (`bertlab finetune --threads 1`) is only set when given, so it never resets the other.
    """
    default = None if is_top_level else argparse.SUPPRESS
    parser.add_argument("--threads", type=int, default=default, help=THREADS_HELP)
