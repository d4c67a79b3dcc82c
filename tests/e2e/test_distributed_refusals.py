"""`bertlab pretrain` under torchrun (two processes, gloo) refused as users meet it: a second job
or a single process on an --out that a job is writing, a finished run started again, an --out
that cannot be written, a damaged checkpoint to resume. One job trains, and every refusal is one
line that names the cause and the way on, with no traceback in any process (each process's
output is read apart: torchrun's --redirects)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

import bertlab
from bertlab.core.config import BertConfig
from bertlab.training.metrics_log import read_metrics
from bertlab.training.pretraining import checkpointing

TORCHRUN = [sys.executable, "-m", "torch.distributed.run"]
# Each process says its rank and pid on stdout, then runs `bertlab`: the refusal must name the
# pid of the main process of the job that holds --out.
WITH_PID = """
import os, sys
print(f"rank {os.environ.get('RANK', '0')} pid {os.getpid()}", flush=True)
from bertlab.cli import main
sys.exit(main(sys.argv[1:]))
"""
TIMEOUT = 300
# A frame of bertlab's own code in a traceback names a file under the package's folder (not
# "bertlab/": a checkout named bertlab holds torchrun's files too).
OUR_CODE = f"{Path(bertlab.__file__).parent}{os.sep}"
# The steps of a job that holds --out while another process starts and is refused: long enough
# that the other's start (importing torch, some seconds on a loaded machine) ends before the job
# does, which would find a finished run instead of the job's lock.
HELD_STEPS = 400


@pytest.fixture(scope="module")
def files(pretrain_files, tmp_path_factory) -> dict[str, Path]:
    """The synthetic corpus, its vocabulary, a tiny architecture and the pid-saying script."""
    directory = tmp_path_factory.mktemp("refusals")
    config = directory / "config.json"
    BertConfig(
        vocab_size=126,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=64,
    ).to_json_file(config)
    script = directory / "with_pid.py"
    script.write_text(WITH_PID, encoding="utf-8")
    vocab, corpus = pretrain_files
    return {"vocab": vocab, "corpus": corpus, "config": config, "script": script}


def _pretrain(files: dict[str, Path], out: Path, *extra: str) -> list[str]:
    return [
        "pretrain",
        "--corpus", str(files["corpus"]),
        "--tokenizer", str(files["vocab"]),
        "--config", str(files["config"]),
        "--max-seq-length", "32",
        "--batch-size", "4",
        "--eval-examples", "16",
        "--log-every", "1",
        "--no-progress",
        "--out", str(out),
        *extra,
    ]  # fmt: skip


class Job:
    """A torchrun job of two processes running `bertlab ARGS`, each process's stdout and stderr
    in a file of its own under `logs`."""

    def __init__(self, files: dict[str, Path], args: list[str], logs: Path, env: dict) -> None:
        self.logs = logs
        command = [
            *TORCHRUN, "--standalone", "--nproc_per_node", "2",
            "--redirects", "3", "--log-dir", str(logs),
            str(files["script"]), *args,
        ]  # fmt: skip
        self.process = subprocess.Popen(
            command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )

    def wait(self) -> int:
        _, self.launcher_stderr = self.process.communicate(timeout=TIMEOUT)
        return self.process.returncode

    def output(self, rank: int, stream: str) -> str:
        (path,) = self.logs.glob(f"*/attempt_0/{rank}/{stream}.log")
        return path.read_text(encoding="utf-8")

    def pid(self, rank: int) -> int:
        return int(re.search(r"rank \d+ pid (\d+)", self.output(rank, "stdout"))[1])

    def said(self, rank: int) -> list[str]:
        """The lines of bertlab in process `rank`'s stderr; no traceback is there."""
        stderr = self.output(rank, "stderr")
        assert "Traceback" not in stderr, stderr[-3000:]
        return [line for line in stderr.splitlines() if line.startswith("bertlab:")]


def _refused_in_one_line(job: Job) -> str:
    """The job failed, and said why once: one line in the main process, none in the other."""
    assert job.wait() != 0
    assert OUR_CODE not in job.launcher_stderr  # no traceback of ours (torchrun prints its own)
    said = job.said(0)
    assert len(said) == 1, said
    assert job.said(1) == []
    return said[0]


def _train_steps(out: Path) -> list[int]:
    return [r["step"] for r in read_metrics(out / "metrics.jsonl") if r["kind"] == "train"]


@pytest.fixture(scope="module")
def finished(files, module_cli_env, tmp_path_factory) -> Path:
    """A two-process run of 4 steps with a checkpoint at 2 and at 4, every checkpoint kept."""
    root = tmp_path_factory.mktemp("finished")
    out = root / "run"
    extra = ("--max-steps", "4", "--checkpoint-every", "2", "--keep-checkpoints", "0")
    job = Job(files, _pretrain(files, out, *extra), root / "logs", module_cli_env)
    assert job.wait() == 0, job.launcher_stderr[-3000:]
    return out


def _copy(run: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    return copy


def test_two_jobs_on_one_out_one_trains_and_the_other_is_refused_naming_its_pid(
    files, cli_env, tmp_path
) -> None:
    out = tmp_path / "run"
    args = _pretrain(files, out, "--max-steps", str(HELD_STEPS))
    jobs = [Job(files, args, tmp_path / f"logs-{index}", cli_env) for index in range(2)]
    codes = [job.wait() for job in jobs]
    assert sorted(codes) == [0, 1], [job.launcher_stderr[-2000:] for job in jobs]
    trained, refused = (jobs[0], jobs[1]) if codes[0] == 0 else (jobs[1], jobs[0])
    line = _refused_in_one_line(refused)
    assert line == (
        f"bertlab: error: {out} is being written by another bertlab process (pid "
        f"{trained.pid(0)}); wait for it to finish or choose another --out"
    )
    assert _train_steps(out) == list(range(1, HELD_STEPS + 1))  # each step once
    assert (out / "final" / "model.safetensors").is_file()


def test_a_single_process_during_a_job_is_refused_naming_the_jobs_main_process(
    files, cli_env, tmp_path
) -> None:
    out = tmp_path / "run"
    job = Job(
        files, _pretrain(files, out, "--max-steps", str(HELD_STEPS)), tmp_path / "logs", cli_env
    )
    deadline = time.monotonic() + TIMEOUT
    while not (out / "metrics.jsonl").is_file():  # training has started
        assert job.process.poll() is None, job.process.communicate()[1][-3000:]
        assert time.monotonic() < deadline
        time.sleep(0.05)
    single = subprocess.run(
        [
            sys.executable,
            str(files["script"]),
            *_pretrain(files, out, "--max-steps", str(HELD_STEPS)),
        ],
        env=cli_env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert job.wait() == 0, job.launcher_stderr[-3000:]
    assert single.returncode == 1
    assert single.stderr.splitlines() == [
        f"bertlab: error: {out} is being written by another bertlab process (pid {job.pid(0)}); "
        "wait for it to finish or choose another --out"
    ]
    assert _train_steps(out) == list(range(1, HELD_STEPS + 1))


def test_a_finished_run_started_again_is_refused_in_one_line(
    files, finished, cli_env, tmp_path
) -> None:
    out = _copy(finished, tmp_path)
    extra = ("--max-steps", "4", "--checkpoint-every", "2", "--keep-checkpoints", "0")
    job = Job(files, _pretrain(files, out, *extra), tmp_path / "logs", cli_env)
    assert _refused_in_one_line(job) == (
        f"bertlab: error: --out {out} already holds a run; add --resume or choose another --out"
    )


def test_an_out_that_cannot_be_written_is_refused_naming_out(files, cli_env, tmp_path) -> None:
    folder = tmp_path / "read-only"
    folder.mkdir()
    mounted = _read_only(folder)
    try:
        out = folder / "run"
        job = Job(files, _pretrain(files, out, "--max-steps", "2"), tmp_path / "logs", cli_env)
        line = _refused_in_one_line(job)
    finally:
        if mounted:
            subprocess.run(["umount", str(folder)], check=True)
    reason = "read-only file system" if mounted else "permission denied"
    assert line == (
        f"bertlab: error: could not write {out}: {reason}; choose another --out, in a folder "
        "you can write to"
    )


def _read_only(folder: Path) -> bool:
    """Make `folder` one that this user cannot write in: a read-only tmpfs mounted on it as
    root (who may write anywhere else), else no write permission. Returns whether mounted."""
    if os.geteuid() != 0:
        folder.chmod(0o555)
        return False
    mount = ["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(folder)]
    if subprocess.run(mount, capture_output=True).returncode != 0:
        pytest.skip("a folder root cannot write to needs a read-only mount")
    return True


def test_a_damaged_checkpoint_names_the_last_good_one_and_how_to_resume_from_it(
    files, finished, cli_env, tmp_path
) -> None:
    out = _copy(finished, tmp_path)
    shutil.rmtree(out / "final")
    latest = out / "checkpoints" / "step-000004"
    state = latest / checkpointing.STATE_FILE
    state.write_bytes(state.read_bytes()[: state.stat().st_size // 2])  # a copy cut short
    extra = ("--max-steps", "4", "--checkpoint-every", "2", "--keep-checkpoints", "0")
    args = _pretrain(files, out, *extra, "--resume")
    line = _refused_in_one_line(Job(files, args, tmp_path / "logs", cli_env))
    assert line.startswith(f"bertlab: error: cannot resume from {latest}: it is damaged (")
    assert line.endswith(
        f"); {out / 'checkpoints' / 'step-000002'} is the last complete checkpoint: remove "
        f"{latest} and run the same command with --resume to go on from it"
    )
    # The way on works: the run goes on from step 2 to the end.
    shutil.rmtree(latest)
    job = Job(files, args, tmp_path / "logs-resumed", cli_env)
    assert job.wait() == 0, job.launcher_stderr[-3000:]
    assert (out / "final" / "model.safetensors").is_file()
    assert _train_steps(out) == [1, 2, 3, 4]
