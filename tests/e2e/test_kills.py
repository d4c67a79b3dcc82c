"""A kill at a random moment: SIGKILL or SIGTERM, to the command's process or to its whole process
group (as a scheduler or `docker stop` sends it), during `pretrain` and `finetune --overwrite`.
Each leaves the earlier result or the new one, readable by `fill-mask` or `evaluate`, and never a
traceback. The default suite kills each command twice; `-m slow` sweeps every kind of kill."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bertlab.cli import main
from bertlab.training.pretraining import checkpointing

pytestmark = pytest.mark.usefixtures("one_thread")

TASK_DATA = Path(__file__).resolve().parents[1] / "data" / "tasks"
SIGNALS = (signal.SIGKILL, signal.SIGTERM)
# (signal, whether to the process group): every kind of kill a user or a scheduler sends.
KILLS = [(sig, group) for sig in SIGNALS for group in (False, True)]
# How a killed command may end: by the signal itself (SIGTERM before the handler is installed or
# after the command returned), by its orderly stop (128 + SIGTERM), or done before the kill.
ENDINGS = {-signal.SIGKILL, -signal.SIGTERM, 128 + signal.SIGTERM, 0}


def kills(tries: int) -> list[tuple[signal.Signals, bool, float]]:
    """`tries` kills, each at a random fraction of the window: SIGKILL and SIGTERM in turn, to
    the process or the group at random, each kind once before any twice."""
    rng = random.Random()
    kinds = []
    while len(kinds) < tries:
        by_signal = [rng.sample([kind for kind in KILLS if kind[0] == sig], 2) for sig in SIGNALS]
        kinds += [pair[turn] for turn in range(2) for pair in by_signal]
    return [(sig, group, rng.random()) for sig, group in kinds[:tries]]


def killed(
    command: list[str], started: Path, window: float, kill, env, python=("-m", "bertlab")
) -> tuple[int, str]:
    """Run `bertlab COMMAND` (`python PYTHON COMMAND`) in a process group of its own, and send
    `kill` (signal, to the group or not, the moment as a fraction of `window` seconds after
    `started` exists). Returns its exit code and stderr."""
    sig, group, moment = kill
    process = subprocess.Popen(
        [sys.executable, *python, *command],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )
    deadline = time.monotonic() + 120
    while not started.exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(moment * window)
    try:
        os.killpg(process.pid, sig) if group else os.kill(process.pid, sig)
    except ProcessLookupError:  # done already
        pass
    try:
        _, stderr = process.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        raise AssertionError(f"{command[0]} hung after {sig.name}") from None
    return process.returncode, stderr


def assert_no_traceback(code: int, stderr: str, where: str) -> None:
    """A kill ends quietly, or with the one line of an orderly stop (never an error)."""
    assert code in ENDINGS, (where, code, stderr)
    assert "Traceback" not in stderr and "Exception ignored" not in stderr, (where, stderr)
    said = [line for line in stderr.splitlines() if line.startswith("bertlab:")]
    assert all(line.startswith("bertlab: interrupted by SIGTERM") for line in said), (where, said)


def where(kill) -> str:
    sig, group, moment = kill
    return f"{sig.name} to the {'group' if group else 'process'} at {moment:.2f} of the window"


# --- pretrain -----------------------------------------------------------------------------------


def _kill_pretrain(tiny_pretrain_args, tmp_path, cli_env, capsys, tries: int) -> None:
    for index, kill in enumerate(kills(tries)):
        out = tmp_path / f"run-{index}"
        args = tiny_pretrain_args(out, "--max-steps", "200", "--checkpoint-every", "1",
                                  "--num-workers", "1")  # fmt: skip
        code, stderr = killed(args, out, 4.0, kill, cli_env)
        assert_no_traceback(code, stderr, where(kill))
        for model in [*checkpointing.list_checkpoints(out), out / "final"]:
            if model.exists():
                assert main(["fill-mask", "--model", str(model), "w1 w2 [MASK] ."]) == 0, where(
                    kill
                )
        if code == 128 + signal.SIGTERM:  # an orderly stop leaves no temporary (a SIGKILL may:
            # the next run removes it)
            assert not [path for path in out.rglob(".*") if ".tmp" in path.name], where(kill)
    capsys.readouterr()


def test_a_killed_pretrain_leaves_readable_checkpoints_and_no_traceback(
    tiny_pretrain_args, tmp_path, cli_env, capsys
):
    """SIGTERM to pretrain's process group ended in a traceback in 3 of 8 tries (the data
    loader's worker reported as killed; the corpus pool hung); every checkpoint kept loads."""
    _kill_pretrain(tiny_pretrain_args, tmp_path, cli_env, capsys, 2)


@pytest.mark.slow
def test_pretrain_killed_every_way_at_random_moments(tiny_pretrain_args, tmp_path, cli_env, capsys):
    _kill_pretrain(tiny_pretrain_args, tmp_path, cli_env, capsys, 8)


# --- finetune --overwrite ----------------------------------------------------------------------


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _kill_finetune_overwrite(tmp_path, task_vocab, cli_env, capsys, tries: int) -> None:
    data = TASK_DATA / "rte_style.tsv"
    finetune = ["finetune", "--task", "rte", "--train", str(data), "--from-scratch",
                "--model-size", "tiny", "--tokenizer", str(task_vocab), "--epochs", "3",
                "--batch-size", "2", "--no-progress"]  # fmt: skip
    earlier = tmp_path / "earlier"
    assert main([*finetune, "--out", str(earlier)]) == 0  # seed 42
    for index, kill in enumerate(kills(tries)):
        out = tmp_path / f"run-{index}"
        shutil.copytree(earlier, out)
        command = [*finetune, "--out", str(out), "--overwrite", "--seed", "7"]
        code, stderr = killed(command, out / ".replaced", 6.0, kill, cli_env)
        assert_no_traceback(code, stderr, where(kill))
        evaluate = ["evaluate", "--task", "rte", "--model", str(out / "best"), "--data", str(data)]
        assert main(evaluate) == 0, where(kill)  # the earlier run put back first, if needed
        assert not (out / ".replaced").exists(), where(kill)
        seed_run = json.loads((out / "result.json").read_text(encoding="utf-8"))["seed"]
        is_earlier = _digest(out / "best" / "model.safetensors") == _digest(
            earlier / "best" / "model.safetensors"
        )
        assert (seed_run, is_earlier) in ((42, True), (7, False)), where(kill)
    capsys.readouterr()


def test_a_killed_overwrite_leaves_the_earlier_run_or_the_new_one(
    tmp_path, task_vocab, cli_env, capsys
):
    """`finetune --overwrite` killed while training left OUT/.replaced, and `evaluate --model
    OUT/best` failed until the next finetune."""
    _kill_finetune_overwrite(tmp_path, task_vocab, cli_env, capsys, 2)


@pytest.mark.slow
def test_finetune_overwrite_killed_every_way_at_random_moments(
    tmp_path, task_vocab, cli_env, capsys
):
    _kill_finetune_overwrite(tmp_path, task_vocab, cli_env, capsys, 8)


# --- demo --------------------------------------------------------------------------------------

# Runs `bertlab ARGS` with the English demo's recipe changed as the JSON object in argv[1] says.
DEMO_WITH_RECIPE = """
import dataclasses, json, sys
from bertlab.apps.demo import config as demo_config
from bertlab.cli import main
changes = json.loads(sys.argv[1])
demo_config.RECIPES["en"] = dataclasses.replace(demo_config.RECIPES["en"], **changes)
sys.exit(main(sys.argv[2:]))
"""


@pytest.mark.slow
def test_a_killed_demo_leaves_the_earlier_demo_or_the_new_one(
    tmp_path, tiny_demo_recipe, hub_model_folder, cli_env, capsys
):
    """A second demo into the same folder deleted the first one's pre-trained and fine-tuned
    models as it went: killed midway, it left neither."""
    from bertlab.apps.demo.runner import RECIPES, run_demo

    recipe = tiny_demo_recipe("en")
    changes = {
        field.name: getattr(recipe, field.name)
        for field in dataclasses.fields(recipe)
        if getattr(recipe, field.name) != getattr(RECIPES["en"], field.name)
    }
    earlier = tmp_path / "earlier"
    run_demo(earlier, 0.05, "en", (1,), False, lambda line: None, recipe, str(hub_model_folder))
    final = Path("pretrain") / "final" / "model.safetensors"
    best = Path("finetune") / "pre-trained" / "seed-1" / "best"
    for index, kill in enumerate(kills(4)):
        out = tmp_path / f"demo-{index}"
        shutil.copytree(earlier, out)
        command = [json.dumps(changes), "demo", "--out", str(out), "--minutes", "0.05",
                   "--seeds", "1", "--model", str(hub_model_folder), "--no-progress"]  # fmt: skip
        python = ("-c", DEMO_WITH_RECIPE)
        code, stderr = killed(command, out / ".replaced", 25.0, kill, cli_env, python)
        assert_no_traceback(code, stderr, where(kill))
        fill_mask = ["fill-mask", "--model", str(out / final.parent), "a [MASK] film ."]
        assert main(fill_mask) == 0, where(kill)  # the earlier demo put back first, if needed
        evaluate = ["evaluate", "--task", recipe.task, "--model", str(out / best),
                    "--data", recipe.test_file]  # fmt: skip
        assert main(evaluate) == 0, where(kill)
        assert not (out / ".replaced").exists(), where(kill)
        same = [_digest(out / name) == _digest(earlier / name) for name in (final, "results.json")]
        assert same in ([True, True], [False, False]), where(kill)  # the earlier demo, or the new
    capsys.readouterr()
