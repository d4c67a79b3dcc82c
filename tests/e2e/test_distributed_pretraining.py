"""`bertlab pretrain` under torchrun as users run it (gloo on the CPU): every objective and
every LSTM-era architecture in two processes with checkpoints, stopped (a rank killed by SIGKILL
for masked LM, ELMo and AWD-LSTM) and resumed onto the uninterrupted run's weights bit for bit;
the budget recipe on two "machines" on the loopback (torchrun's c10d rendezvous, one process
each), its main process killed and the run resumed."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

import bertlab
from bertlab.core.config import BertConfig
from bertlab.training.metrics_log import read_metrics
from bertlab.training.pretraining import checkpointing

TORCHRUN = [sys.executable, "-m", "torch.distributed.run"]
OBJECTIVES = ("mlm+nsp", "mlm", "clm", "electra")
# The LSTM-era networks, each with its own objective, at their tests' size.
ARCHITECTURES = ("nnlm", "elmo", "awd-lstm")
RUNS = (*OBJECTIVES, *ARCHITECTURES)  # what the runs below are keyed by
KILLED = ("mlm", "elmo", "awd-lstm")  # stopped by a real kill of the process that does not write
MAX_STEPS = 4
CHECKPOINT_EVERY = 2

# A frame of bertlab's own code in a traceback names a file under the package's folder (not
# "bertlab/": a checkout named bertlab holds torchrun's files too).
OUR_CODE = f"{Path(bertlab.__file__).parent}{os.sep}"


@pytest.fixture(scope="module")
def model_config(tmp_path_factory) -> Path:
    """A tiny architecture at the synthetic corpus's vocabulary (`pretrain_files`)."""
    config = BertConfig(
        vocab_size=126,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=64,
    )
    path = tmp_path_factory.mktemp("distributed") / "config.json"
    config.to_json_file(path)
    return path


def _pretrain(pretrain_files, model_config: Path, out: Path, *extra: str) -> list[str]:
    """The command of a run: BERT of `model_config`, or the tiny preset of the architecture that
    `extra` names."""
    vocab, corpus = pretrain_files
    model = (
        ["--model-size", "tiny"] if "--architecture" in extra else ["--config", str(model_config)]
    )
    return [
        "-m", "bertlab", "pretrain",
        "--corpus", str(corpus),
        "--tokenizer", str(vocab),
        *model,
        "--max-seq-length", "32",
        "--batch-size", "4",
        "--eval-examples", "16",
        "--log-every", "1",
        "--no-progress",
        "--out", str(out),
        *extra,
    ]  # fmt: skip


def _two_processes(args: list[str]) -> list[str]:
    return [*TORCHRUN, "--standalone", "--nproc_per_node", "2", *args]


def _run(command: list[str], env: dict[str, str]) -> None:
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]


def _steps(name: str) -> list[str]:
    """The run's length and checkpoints, and `--objective name` or `--architecture name`."""
    steps = ["--max-steps", str(MAX_STEPS), "--checkpoint-every", str(CHECKPOINT_EVERY)]
    which = "--architecture" if name in ARCHITECTURES else "--objective"
    return [*steps, "--eval-every", "3", which, name]


def _weights(directory: Path) -> dict[str, torch.Tensor]:
    return load_file(directory / "model.safetensors")


def _assert_same_weights(expected_dir: Path, actual_dir: Path) -> None:
    expected, actual = _weights(expected_dir), _weights(actual_dir)
    assert expected.keys() == actual.keys()
    for key in expected:
        assert torch.equal(expected[key], actual[key]), key


def _records(run: Path, kind: str) -> list[tuple]:
    """(step, tokens, loss) of the run's `kind` records, as metrics.jsonl holds them."""
    records = read_metrics(run / "metrics.jsonl")
    return [(r["step"], r["tokens"], r["loss"]) for r in records if r["kind"] == kind]


def _saved_folders(objective: str) -> list[str]:
    return ["final", "generator", "discriminator"] if objective == "electra" else ["final"]


@pytest.fixture(scope="module")
def uninterrupted(
    pretrain_files, model_config, module_cli_env, tmp_path_factory
) -> dict[str, Path]:
    """Each objective's and architecture's uninterrupted two-process run, with every checkpoint
    kept."""
    runs = {}
    for objective in RUNS:
        out = tmp_path_factory.mktemp("uninterrupted") / objective
        steps = [*_steps(objective), "--keep-checkpoints", "0"]
        _run(_two_processes(_pretrain(pretrain_files, model_config, out, *steps)), module_cli_env)
        runs[objective] = out
    return runs


# Masked LM, ELMo and AWD-LSTM are stopped by a real kill (below); the others as a kill after
# the first checkpoint leaves a run.
@pytest.mark.parametrize("objective", [name for name in RUNS if name not in KILLED])
def test_two_processes_stopped_at_a_checkpoint_resume_onto_the_same_weights(
    objective, uninterrupted, pretrain_files, model_config, cli_env, tmp_path
) -> None:
    reference = uninterrupted[objective]
    names = [path.name for path in checkpointing.list_checkpoints(reference)]
    assert names == ["step-000002", "step-000004"]  # every checkpoint kept
    assert (reference / "final" / "model.safetensors").is_file()
    run = tmp_path / "run"
    shutil.copytree(reference, run)
    for folder in _saved_folders(objective):
        shutil.rmtree(run / folder)
    for later in checkpointing.list_checkpoints(run)[1:]:
        shutil.rmtree(later)
    steps = [*_steps(objective), "--keep-checkpoints", "1", "--resume"]
    _run(_two_processes(_pretrain(pretrain_files, model_config, run, *steps)), cli_env)
    for folder in _saved_folders(objective):
        _assert_same_weights(reference / folder, run / folder)
    assert _records(run, "train") == _records(reference, "train")
    assert _records(run, "eval") == _records(reference, "eval")
    # --keep-checkpoints 1: the latest is left
    assert [path.name for path in checkpointing.list_checkpoints(run)] == ["step-000004"]


def _rank_pids(launchers: list[subprocess.Popen]) -> dict[int, int]:
    """{rank: pid} of the worker processes that the torchrun launchers started (their
    children with RANK in the environment)."""
    parents = {launcher.pid for launcher in launchers}
    pids = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            environ = (entry / "environ").read_bytes().split(b"\0")
        except (OSError, IndexError, ValueError):
            continue  # ended meanwhile
        if parent not in parents:
            continue
        for variable in environ:
            if variable.startswith(b"RANK="):
                pids[int(variable[len(b"RANK=") :])] = int(entry.name)
    return pids


def _kill_after_first_checkpoint(launchers: list[subprocess.Popen], run: Path, rank: int) -> None:
    """SIGKILL to process `rank` once `run` has a complete checkpoint; then wait for the job to
    end (torchrun ends the other processes). Skips the test if the run finished first."""
    deadline = time.monotonic() + 120
    while not checkpointing.list_checkpoints(run):
        for launcher in launchers:
            assert launcher.poll() is None, launcher.communicate()[1][-3000:]
        assert time.monotonic() < deadline
        time.sleep(0.01)
    pids = _rank_pids(launchers)
    assert rank in pids, pids
    os.kill(pids[rank], signal.SIGKILL)
    for launcher in launchers:
        launcher.communicate(timeout=120)
    if (run / "final").exists():
        pytest.skip("the run finished before a process could be killed")
    assert any(launcher.returncode != 0 for launcher in launchers)


@pytest.mark.parametrize("name", KILLED)
def test_a_killed_rank_is_resumed_onto_the_uninterrupted_weights(
    name, uninterrupted, pretrain_files, model_config, cli_env, tmp_path
) -> None:
    """SIGKILL to the process that does not write (`--objective mlm`, `--architecture elmo`,
    `awd-lstm`): torchrun ends the job, and `--resume` ends where the uninterrupted run did,
    bit for bit."""
    reference = uninterrupted[name]
    run = tmp_path / "run"
    args = _pretrain(pretrain_files, model_config, run, *_steps(name), "--keep-checkpoints", "1")
    launcher = subprocess.Popen(
        _two_processes(args), env=cli_env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    _kill_after_first_checkpoint([launcher], run, rank=1)
    _run(_two_processes([*args, "--resume"]), cli_env)
    _assert_same_weights(reference / "final", run / "final")
    assert _records(run, "train") == _records(reference, "train")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _two_nodes(args: list[str], run_id: str, env: dict[str, str]) -> list[subprocess.Popen]:
    """`args` on two "machines" of one process each, as docs/pretraining.md shows: torchrun
    once per node, both meeting at a c10d rendezvous on the loopback."""
    endpoint = f"127.0.0.1:{_free_port()}"
    return [
        subprocess.Popen(
            [
                *TORCHRUN,
                "--nnodes",
                "2",
                "--node_rank",
                str(rank),
                "--nproc_per_node",
                "1",
                "--rdzv-backend",
                "c10d",
                "--rdzv-endpoint",
                endpoint,
                "--rdzv-id",
                run_id,
                *args,
            ],  # fmt: skip
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for rank in (0, 1)
    ]


def test_the_budget_recipe_on_two_nodes_is_killed_and_resumes(
    pretrain_files, cli_env, tmp_path
) -> None:
    """The recipe's masked LM on two "machines": the main process (rank 0, which writes) is
    killed after its first checkpoint; `--resume` on both goes on to the end of the budget,
    and the run has one final model and one metrics.jsonl, by the main process."""
    vocab, corpus = pretrain_files
    run = tmp_path / "run"
    args = [
        "-m", "bertlab", "pretrain",
        "--corpus", str(corpus),
        "--tokenizer", str(vocab),
        "--model-size", "tiny",
        "--max-seq-length", "32",
        "--eval-examples", "16",
        "--budget", "2s",
        "--checkpoint-every", "2",
        "--log-every", "1",
        "--no-progress",
        "--out", str(run),
    ]  # fmt: skip
    _kill_after_first_checkpoint(_two_nodes(args, "killed", cli_env), run, rank=0)
    first = checkpointing.latest_checkpoint(run)
    for node in _two_nodes([*args, "--resume"], "resumed", cli_env):
        _, stderr = node.communicate(timeout=300)
        assert node.returncode == 0, stderr[-3000:]
    plan = json.loads((run / "budget_plan.json").read_text())
    assert plan["processes"] == 2
    card = (run / "final" / "README.md").read_text()
    assert "| processes | 2 |" in card and "| global batch (sequences) | 64 |" in card
    assert sorted(path.name for path in run.glob("final*")) == ["final"]
    assert sorted(path.name for path in run.glob("*.jsonl")) == ["metrics.jsonl"]
    steps = [r["step"] for r in read_metrics(run / "metrics.jsonl") if r["kind"] == "train"]
    assert steps == list(range(1, len(steps) + 1))  # each step once, the resumed ones after
    assert steps[-1] > int(first.name.split("-")[1])


# Each process with its own --out: as a process on another machine sees a folder of that path
# on its own disk, not the main process's.
OWN_OUT_PER_RANK = """
import os, sys
from bertlab.cli import main
sys.exit(main([*sys.argv[1:-1], "--out", sys.argv[-1] + "-" + os.environ["RANK"]]))
"""


def test_a_process_that_does_not_see_the_main_processs_out_stops_the_job(
    pretrain_files, model_config, cli_env, tmp_path
) -> None:
    script = tmp_path / "own_out.py"
    script.write_text(OWN_OUT_PER_RANK, encoding="utf-8")
    args = _pretrain(pretrain_files, model_config, tmp_path / "run", "--max-steps", "2")
    out = args.pop(args.index("--out") + 1)  # the script adds each rank's own --out
    args.remove("--out")
    command = [*TORCHRUN, "--standalone", "--nproc_per_node", "2", str(script), *args[2:], out]
    done = subprocess.run(command, env=cli_env, capture_output=True, text=True, timeout=300)
    assert done.returncode != 0
    lines = [line for line in done.stderr.splitlines() if "cannot see" in line]
    assert lines, done.stderr[-3000:]
    # Each process says it, naming its own --out (unless torchrun ended it first).
    for line in lines:
        assert re.search(
            "bertlab: error: process 1 of this torchrun job cannot see --out "
            f"{re.escape(out)}-[01] as the main process writes it; on several machines --out "
            "must be a folder on a file system that they all share \\(e.g. NFS\\), at the same "
            "path$",
            line,
        ), line
    assert OUR_CODE not in done.stderr  # no traceback of ours (torchrun prints its own)
    assert not (tmp_path / "run-0" / "final").exists()
