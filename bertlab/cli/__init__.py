"""The `bertlab` command line. The `bertlab.cli` package is the only code that reads argv or
environment variables; each command family has its own module (`tokenizer`, ...).

Each subcommand is a thin function that builds configs from flags and calls the library. Errors the
user can fix (bad paths, bad files, bad flags, an optional package that the command needs but is
not installed) end as one line on stderr and a non-zero exit code.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence

from bertlab.cli.common import (
    EXIT_BROKEN_PIPE,
    EXIT_INTERRUPTED,
    EXIT_USER_ERROR,
    ArgumentParser,
    CommandError,
    add_threads_flag,
)
from bertlab.cli.convert import add_convert_command
from bertlab.cli.demo import add_demo_command
from bertlab.cli.embed import add_embed_command
from bertlab.cli.experiment import add_experiment_commands
from bertlab.cli.inspection import add_inspection_commands
from bertlab.cli.language_model import add_language_model_commands
from bertlab.cli.logs import configure_logging
from bertlab.cli.neighbours import add_neighbours_commands
from bertlab.cli.pretrain import add_pretrain_command
from bertlab.cli.serve import add_serve_command
from bertlab.cli.tasks import add_task_commands
from bertlab.cli.tokenizer import add_tokenizer_commands
from bertlab.core.optional import MissingPackageError
from bertlab.core.threads import set_threads

COMMANDS: tuple[Callable[[argparse._SubParsersAction], None], ...] = (
    add_demo_command,
    add_tokenizer_commands,
    add_pretrain_command,
    add_task_commands,
    add_inspection_commands,
    add_embed_command,
    add_neighbours_commands,
    add_language_model_commands,
    add_experiment_commands,
    add_convert_command,
    add_serve_command,
)


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(
        prog="bertlab",
        description="Pre-train, fine-tune and inspect BERT-style models. "
        "Run `bertlab COMMAND --help` for the options of each command.",
    )
    parser.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=0,
        help="log more: -v the libraries' progress and which weights each load left new, -vv "
        "debug messages (default: bertlab's progress and every warning)",
    )
    add_threads_flag(parser, is_top_level=True)
    subparsers = parser.add_subparsers(title="commands", metavar="COMMAND")
    for add_commands in COMMANDS:
        add_commands(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    configure_logging(args.verbose)
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return 0
    from bertlab.cli.stopping import EXIT_TERMINATED, is_terminated, sigterm_as_interrupt
    from bertlab.cli.wording import in_flag_words, say_error

    try:
        with sigterm_as_interrupt():  # a scheduler's SIGTERM stops as Ctrl-C does
            set_threads(args.threads)  # every command, before it builds a model
            return int(handler(args) or 0)
    except KeyboardInterrupt as interrupt:
        hint = getattr(interrupt, "hint", "")  # what was kept and how to go on, where known
        hint = in_flag_words(hint)
        how = "interrupted by SIGTERM" if is_terminated(interrupt) else "interrupted"
        print(f"bertlab: {how}{'; ' + hint if hint else ''}", file=sys.stderr)
        return EXIT_TERMINATED if is_terminated(interrupt) else EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader of stdout went away (`bertlab predict ... | head`): stop quietly, as Unix
        # tools do. stdout now points at nothing, so the interpreter's last flush cannot fail.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except (CommandError, MissingPackageError, ValueError, OSError) as error:
        say_error(error, args.verbose)
        return EXIT_USER_ERROR


def run() -> None:
    """The `bertlab` command: `main`, then exit with its code. A run stopped by SIGTERM ends
    with 143 here, after the exit handlers, without the interpreter's teardown: CPython ends a
    process by SIGINT at exit when a KeyboardInterrupt (the SIGTERM, see `cli.stopping`) landed
    while Python code run from C was executing (torch's lazy imports while an optimizer is
    built), whatever the code `main` returned."""
    from bertlab.cli.stopping import EXIT_TERMINATED

    code = main()
    if code == EXIT_TERMINATED:
        import atexit

        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


if __name__ == "__main__":
    run()
