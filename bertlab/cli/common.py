"""What every `bertlab` subcommand shares: the user-error exception and exit codes."""

from __future__ import annotations

EXIT_USER_ERROR = 1
EXIT_INTERRUPTED = 130


class CommandError(Exception):
    """An error the user can fix; printed as one line, without a traceback."""
