"""What every `bertlab` subcommand shares: the user-error exception, exit codes, the parser,
`--threads`."""

from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Iterator, Sequence
from typing import Any, NoReturn

EXIT_USER_ERROR = 1
EXIT_USAGE_ERROR = 2  # a command line that cannot be parsed: the Unix convention (and argparse's)
EXIT_INTERRUPTED = 130  # 128 + SIGINT (Ctrl-C)
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, what a shell reports for `yes | head -1`'s writer


class CommandError(Exception):
    """An error the user can fix; printed as one line, without a traceback."""


EXPECTED_FORMS = {int: "a whole number (e.g. 8)", float: "a number (e.g. 0.5 or 1e-4)"}


class ArgumentParser(argparse.ArgumentParser):
    """argparse's parser with usage errors as one line: what is wrong and, where a flag, a command
    or a choice is misspelt, the close one ("did you mean"); exit code 2, no usage dump.

    `bertlab`'s parser is one, and so is every subcommand's (argparse's `add_subparsers` makes its
    parsers of the parent's class).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._arg_strings: list[str] = []

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        self._arg_strings = list(sys.argv[1:] if args is None else args)
        namespace, extras = super().parse_known_args(args, namespace)
        if extras:  # a subcommand's parser takes every later argument: none can be the parent's
            self.error(self._unrecognized(extras))
        return namespace, extras

    def error(self, message: str) -> NoReturn:
        unknown = list(self._unknown_flags(self._arg_strings))
        if unknown:  # "required: --corpus" is no help when the user typed --corpu
            message = self._unrecognized(unknown)
        if "did you mean" not in message:
            message += f"; run `{self.prog} --help` for the options"
        self.exit(EXIT_USAGE_ERROR, f"{self.prog}: error: {message}\n")

    def _get_value(self, action: argparse.Action, arg_string: str) -> Any:
        try:
            return super()._get_value(action, arg_string)
        except argparse.ArgumentError:
            expected = EXPECTED_FORMS.get(action.type)
            if expected is None:  # the type's own message (a duration, ...) says it already
                raise
            message = f"expected {expected}, got {arg_string!r}"
            raise argparse.ArgumentError(action, message) from None

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        if action.choices is None or value in action.choices:
            return
        choices = [str(choice) for choice in action.choices]
        if isinstance(action, argparse._SubParsersAction):
            what = f"unknown {(action.metavar or 'command').lower()} {value!r}"
            argument = None  # argparse would say "argument COMMAND: ..."
        else:
            what, argument = f"invalid choice: {value!r}", action
        close = difflib.get_close_matches(str(value), choices, n=1)
        hint = f"did you mean {close[0]}?" if close else f"choose from {', '.join(choices)}"
        raise argparse.ArgumentError(argument, f"{what}; {hint}")

    def _unknown_flags(self, arg_strings: Sequence[str]) -> Iterator[str]:
        """The arguments that look like flags of this parser but are none of them."""
        commands = [
            name
            for action in self._actions
            if isinstance(action, argparse._SubParsersAction)
            for name in action.choices
        ]
        for arg in arg_strings:
            if arg == "--" or arg in commands:  # the rest is a value or a subcommand's
                return
            if not arg.startswith("-") or arg == "-" or self._negative_number_matcher.match(arg):
                continue
            name = arg.split("=", 1)[0]
            known = self._option_string_actions
            is_abbreviation = name.startswith("--") and any(o.startswith(name) for o in known)
            is_short_with_value = not name.startswith("--") and name[:2] in known
            if name not in known and not is_abbreviation and not is_short_with_value:
                yield name

    def _unrecognized(self, extras: Sequence[str]) -> str:
        flags = [arg.split("=", 1)[0] for arg in extras if arg.startswith("-") and arg != "-"]
        if not flags:
            return f"unexpected argument{'s' if len(extras) > 1 else ''} {' '.join(extras)}"
        message = f"unrecognized argument{'s' if len(flags) > 1 else ''} {' '.join(flags)}"
        # Compared without the dashes, which every long option shares.
        options = [o[2:] for o in self._option_string_actions if o.startswith("--")]
        close = difflib.get_close_matches(flags[0].lstrip("-"), options, n=1)
        return f"{message}; did you mean --{close[0]}?" if close else message


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


CORPUS_HELP = (
    "files, folders or patterns: plain text in Google's layout (.txt, one sentence or paragraph "
    "a line, a blank line between documents), JSON Lines (.jsonl/.json), CSV (.csv), TSV "
    "(.tsv), Parquet (.parquet), a folder saved by datasets' save_to_disk; .gz too"
)


def add_corpus_reading_flags(parser: argparse._ActionsContainer) -> None:
    """`--corpus-format` and `--text-column` (alias `--text-field`): the fields of
    `bertlab.corpus.sources.CorpusReading`, the same in every command that reads a corpus."""
    from bertlab.corpus.sources import CORPUS_FORMATS, DEFAULT_TEXT_COLUMN

    parser.add_argument(
        "--corpus-format",
        choices=CORPUS_FORMATS,
        metavar="FORMAT",
        default="auto",
        help=f"{', '.join(CORPUS_FORMATS)}: how to read the corpus files; auto chooses by "
        "suffix (a folder: its files, or the dataset save_to_disk wrote); name one to read every "
        "file so (text: as plain text even when it looks like JSON or CSV) (default: auto)",
    )
    parser.add_argument(
        "--text-column",
        "--text-field",
        dest="text_column",
        metavar="NAME",
        default=DEFAULT_TEXT_COLUMN,
        help="the column (CSV, TSV, Parquet, dataset) or JSON field that holds each document's "
        "text; a record is one document (default: %(default)s)",
    )


def corpus_reading(args: argparse.Namespace):
    """The `CorpusReading` of `add_corpus_reading_flags`' flags."""
    from bertlab.corpus.sources import CorpusReading

    return CorpusReading(args.corpus_format, args.text_column)


def warn(message: str | None) -> None:
    """Print `message` (where there is one) as one `bertlab: warning:` line on stderr: what the
    user should know about a result that the command still gives."""
    if message:
        print(f"bertlab: warning: {message}", file=sys.stderr)
