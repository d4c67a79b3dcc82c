"""`bertlab serve` as a person runs it: the help shows the command for the demo's models, the
server starts, answers and stops on Ctrl-C, and what it cannot serve is a one-line error."""

from __future__ import annotations

import json
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from bertlab.cli import main
from bertlab.cli.serve import DEMO_COMMAND, model_arguments
from bertlab.network.checkpoint import LEGACY_WEIGHTS_NAME, WEIGHTS_NAME

REPO_ROOT = Path(__file__).resolve().parents[2]
STARTUP_SECONDS = 60


def test_help_and_readme_show_the_command_for_the_demos_models(capsys):
    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    help_text = capsys.readouterr().out
    assert DEMO_COMMAND in help_text
    assert "127.0.0.1" in help_text
    assert DEMO_COMMAND in (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    # the demo writes its models where the command looks for them
    assert "runs/demo/pretrain/final" in DEMO_COMMAND


def test_model_arguments_take_names_or_the_directorys_name():
    assert model_arguments(["a=runs/x", "runs/demo/pretrain/final"]) == (
        ("a", Path("runs/x")),
        ("final", Path("runs/demo/pretrain/final")),
    )


@pytest.mark.parametrize(
    ("kind", "capabilities"),
    [
        ("mlm", ["fill-mask", "score", "attention", "embed"]),
        ("clm", ["generate", "score", "attention", "embed"]),  # a causal model (issue 53)
    ],
)
def test_serve_starts_answers_and_stops_on_ctrl_c(serve_models, tmp_path, kind, capabilities):
    log = tmp_path / "server.log"
    command = [sys.executable, "-m", "bertlab", "serve", "--model", f"tiny={serve_models[kind]}"]
    with log.open("w") as stderr:
        process = subprocess.Popen([*command, "--port", "0"], stderr=stderr)
    try:
        deadline = time.monotonic() + STARTUP_SECONDS
        found = None
        while found is None and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.1)
            found = re.search(r"at http://127\.0\.0\.1:(\d+)/", log.read_text(encoding="utf-8"))
        assert found, log.read_text(encoding="utf-8")
        url = f"http://127.0.0.1:{found.group(1)}/api/models"
        for _ in range(50):  # the line comes just before uvicorn accepts
            try:
                with urllib.request.urlopen(url, timeout=10) as response:
                    models = json.loads(response.read())["models"]
                break
            except OSError:
                time.sleep(0.1)
        assert [model["name"] for model in models] == ["tiny"]
        assert models[0]["capabilities"] == capabilities
    finally:
        process.send_signal(signal.SIGINT)
        code = process.wait(timeout=30)
    assert code == 0
    assert "stopped" in log.read_text(encoding="utf-8")


def one_line_error(capsys, *argv: str) -> str:
    assert main(["serve", *argv]) == 1
    error = capsys.readouterr().err.strip()
    assert error.startswith("bertlab: error:") and "\n" not in error and "Traceback" not in error
    return error


def test_what_cannot_be_served_is_a_one_line_error(serve_models, tmp_path, capsys):
    assert "no config.json" in one_line_error(capsys, "--model", str(tmp_path / "nowhere"))
    pickled = tmp_path / "pickled"
    shutil.copytree(serve_models["mlm"], pickled)
    torch.save(load_file(pickled / WEIGHTS_NAME), pickled / LEGACY_WEIGHTS_NAME)
    (pickled / WEIGHTS_NAME).unlink()
    assert "only from safetensors" in one_line_error(capsys, "--model", str(pickled))
    mlm = str(serve_models["mlm"])
    error = one_line_error(capsys, "--model", f"a={mlm}", "--model", f"a={mlm}")
    assert "two models are named 'a'" in error
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        error = one_line_error(capsys, "--model", mlm, "--port", port)
    assert f"cannot listen on 127.0.0.1:{port}" in error
    assert "--port" in error
    assert "must be a positive integer" in one_line_error(
        capsys, "--model", mlm, "--max-batch-texts", "0"
    )


def test_a_taken_port_is_refused_before_any_model_is_loaded(tmp_path, capsys):
    """`serve` on a busy port loaded every model first, then failed (issue 51, item 9): here
    the model does not exist, and the port is what the one line names."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        error = one_line_error(capsys, "--model", str(tmp_path / "nowhere"), "--port", port)
    assert f"cannot listen on 127.0.0.1:{port}: the port is in use" in error
    assert "choose another with --port" in error and "config.json" not in error
