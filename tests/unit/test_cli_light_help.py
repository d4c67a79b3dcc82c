"""`bertlab --help` and every `bertlab COMMAND --help` answer without importing torch or gensim.

Importing torch takes seconds on a busy machine; the parser takes the few library constants it
shows from `bertlab.cli.library_constants`, whose literals must equal the library's own.
"""

import argparse
import functools
import importlib
import subprocess
import sys

import pytest

from bertlab.cli import build_parser
from bertlab.cli import library_constants as constants

HEAVY = ("torch", "gensim")
# What a literal copies of a table: the optional fourth item of a DECLARED_IN entry.
VIEWS = {
    "keys": tuple,
    "names": lambda rows: tuple(row.name for row in rows),
    "names per key": lambda table: {key: VIEWS["names"](rows) for key, rows in table.items()},
    "max_train_examples by name": lambda rows: {row.name: row.max_train_examples for row in rows},
}


def command_paths(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> list[tuple]:
    """Every command and subcommand, as the words that name it (`("neighbours", "word2vec")`)."""
    found = [path]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, command in action.choices.items():
                found += command_paths(command, (*path, name))
    return found


def in_order(value):
    """A mapping as its items in order: the same keys in another order are another help text."""
    return list(value.items()) if isinstance(value, dict) else value


def test_each_literal_equals_the_library_value_it_copies():
    for literal, module, name, *view in constants.DECLARED_IN:
        # "TransferConfig.seeds": a dataclass's class attribute is that field's default
        declared = functools.reduce(getattr, name.split("."), importlib.import_module(module))
        if view:
            declared = VIEWS[view[0]](declared)
        copied = getattr(constants, literal)
        assert in_order(copied) == in_order(declared), f"{literal} != {module}.{name} {view}"


def test_top_level_help_imports_neither_torch_nor_gensim():
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "bertlab", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    imported = [line.rsplit("|", 1)[-1].strip() for line in result.stderr.splitlines()]
    assert not [module for module in imported if module.split(".")[0] in HEAVY]


def test_no_command_help_imports_torch_or_gensim():
    paths = command_paths(build_parser())
    assert len(paths) > 15 and ("experiment", "transfer") in paths
    script = (
        "import contextlib, io, sys\n"
        "from bertlab.cli import build_parser\n"
        f"for path in {paths!r}:\n"
        "    with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
        "        build_parser().parse_args([*path, '--help'])\n"
        f"    heavy = sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r})[:3]\n"
        "    if heavy:\n"
        "        sys.exit(f'bertlab {\" \".join(path)} --help imported {heavy}')\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("name", ["transfer", "ablation", "strategies"])
def test_an_experiments_flags_are_in_its_help(name, capsys):
    parser = build_parser()
    with pytest.raises(SystemExit):
        parser.parse_args(["experiment", name, "--help"])
    assert "--seeds" in capsys.readouterr().out
