"""The command line answers --help for itself and every subcommand, in a real process."""

import argparse
import subprocess
import sys

import pytest

from bertlab.cli import build_parser


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "bertlab", *args], capture_output=True, text=True, timeout=120
    )


def subcommands() -> list[str]:
    parser = build_parser()
    actions = [a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction"]
    return sorted(actions[0].choices)


def test_top_level_help_lists_every_subcommand():
    result = run_cli("--help")
    assert result.returncode == 0, result.stderr
    assert subcommands(), "no subcommands registered"
    for name in subcommands():
        assert name in result.stdout


@pytest.mark.parametrize("name", subcommands())
def test_each_subcommand_has_its_own_help(name):
    result = run_cli(name, "--help")
    assert result.returncode == 0, result.stderr
    assert "usage: bertlab " + name in result.stdout


def test_every_option_of_every_command_says_what_it_does():
    def undocumented(parser: argparse.ArgumentParser, path: str) -> list[str]:
        found = []
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, command in action.choices.items():
                    found += undocumented(command, f"{path} {name}")
            elif action.option_strings and not action.help:
                found.append(f"{path} {action.option_strings[0]}")
        return found

    assert undocumented(build_parser(), "bertlab") == []


def test_unknown_subcommand_fails_with_one_line_and_exit_code_2():
    result = run_cli("no-such-command")
    assert result.returncode == 2
    assert result.stderr.startswith("bertlab: error: unknown command 'no-such-command'; choose")
    assert result.stderr.count("\n") == 1
