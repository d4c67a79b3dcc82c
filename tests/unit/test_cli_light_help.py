"""`bertlab --help` and every `bertlab COMMAND --help` answer without importing torch or gensim.

Importing torch takes seconds on a busy machine; the parser takes the few library values it
shows from where they are declared without torch (`bertlab.apps.experiments.transfer_options`,
`bertlab.apps.experiments.ablation_options`, ...), the same declarations the experiments'
configs read.
"""

import argparse
import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

from bertlab.apps.experiments.ablation_config import AblationConfig
from bertlab.apps.experiments.lineage_config import LineageConfig
from bertlab.apps.experiments.transfer_config import TransferConfig
from bertlab.cli import build_parser
from bertlab.cli.experiment import (
    run_ablation_command,
    run_lineage_command,
    run_transfer_command,
)

HEAVY = ("torch", "gensim")


def command_paths(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> list[tuple]:
    """Every command and subcommand, as the words that name it (`("neighbours", "word2vec")`)."""
    found = [path]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, command in action.choices.items():
                found += command_paths(command, (*path, name))
    return found


@pytest.mark.parametrize(
    ("name", "config_class", "handler"),
    [
        ("transfer", TransferConfig, "run_transfer"),
        ("ablation", AblationConfig, "run_ablation"),
        ("lineage", LineageConfig, "run_lineage"),
    ],
)
def test_an_experiments_flag_defaults_are_its_configs_defaults(
    name, config_class, handler, monkeypatch, tmp_path
):
    """The command with no optional flag builds the config the dataclass's defaults make."""
    made = []
    monkeypatch.setattr(
        f"bertlab.apps.experiments.{name}.{handler}", lambda config, **_: made.append(config)
    )
    args = build_parser().parse_args(
        ["experiment", name, "--data", str(tmp_path), "--out", str(tmp_path / "out")]
    )
    command = {
        "transfer": run_transfer_command,
        "ablation": run_ablation_command,
        "lineage": run_lineage_command,
    }[name]
    assert command(args) == 0
    defaults = config_class(data_dir=Path(args.data), out=Path(args.out))
    assert dataclasses.asdict(made[0]) == dataclasses.asdict(defaults)


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


@pytest.mark.parametrize("name", ["transfer", "ablation", "strategies", "lineage"])
def test_an_experiments_flags_are_in_its_help(name, capsys):
    parser = build_parser()
    with pytest.raises(SystemExit):
        parser.parse_args(["experiment", name, "--help"])
    assert "--seeds" in capsys.readouterr().out
