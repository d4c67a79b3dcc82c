"""`bertlab pretrain` end to end on a synthetic corpus: outputs, exact resume after SIGKILL,
DDP equivalence, bad input, a full disk and kills while checkpoints are written."""

from __future__ import annotations

import json
import math
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from bertlab.cli import main
from bertlab.core.config import BertConfig
from bertlab.network import checkpoint as hf_checkpoint
from bertlab.training.metrics_log import read_metrics
from bertlab.training.pretraining import checkpointing

SYNTHETIC_VOCAB_SIZE = 126  # 5 special tokens, 120 words, "."


def _config_file(directory: Path, vocab_size: int = SYNTHETIC_VOCAB_SIZE) -> Path:
    config = BertConfig(
        vocab_size=vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=64,
    )
    path = directory / "config.json"
    config.to_json_file(path)
    return path


def _args(pretrain_files, tmp_path: Path, out: Path, *extra: str) -> list[str]:
    vocab, corpus = pretrain_files
    return [
        "pretrain",
        "--corpus", str(corpus),
        "--tokenizer", str(vocab),
        "--config", str(_config_file(tmp_path)),
        "--max-seq-length", "32",
        "--batch-size", "8",
        "--eval-examples", "16",
        "--corpus-cache", str(tmp_path / "corpus"),
        "--no-progress",
        "--out", str(out),
        *extra,
    ]  # fmt: skip


def _weights(directory: Path) -> dict[str, torch.Tensor]:
    return load_file(directory / "model.safetensors")


def test_pretrain_writes_model_metrics_and_curves(pretrain_files, tmp_path) -> None:
    out = tmp_path / "run"
    args = _args(pretrain_files, tmp_path, out, "--max-steps", "6", "--log-every", "2")
    assert main([*args, "--eval-every", "3", "--checkpoint-every", "3"]) == 0
    final = out / "final"
    assert {"config.json", "model.safetensors", "vocab.txt"} <= {p.name for p in final.iterdir()}
    records = read_metrics(out / "metrics.jsonl")
    assert [r["step"] for r in records if r["kind"] == "train"] == [2, 4, 6]
    assert [r["step"] for r in records if r["kind"] == "eval"] == [3, 6]
    assert all(0 <= r["mlm_accuracy"] <= 1 and r["loss"] > 0 for r in records)
    assert (out / "curves.png").read_bytes()[:4] == b"\x89PNG"
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["step-000003", "step-000006"]
    # A finished run refuses to be overwritten, and resuming it has nothing left to do.
    assert main(args + ["--max-steps", "6"]) == 1
    assert main([*args, "--resume"]) == 0


def test_one_cycle_over_steps_rises_and_falls_along_cosines(pretrain_files, tmp_path) -> None:
    out = tmp_path / "run"
    extra = ["--max-steps", "8", "--log-every", "1", "--schedule", "one-cycle"]
    extra += ["--warmup-proportion", "0.5"]
    assert main(_args(pretrain_files, tmp_path, out, "--learning-rate", "1e-3", *extra)) == 0
    records = [r for r in read_metrics(out / "metrics.jsonl") if r["kind"] == "train"]
    # step k ran at progress (k - 1) / 8: a cosine rise over the first half, a cosine fall after
    expected = [
        1e-3 * (1 - math.cos(math.pi * p / 0.5)) / 2 if p < 0.5
        else 1e-3 * (1 + math.cos(math.pi * (p - 0.5) / 0.5)) / 2
        for p in ((k - 1) / 8 for k in range(1, 9))
    ]  # fmt: skip
    assert [r["learning_rate"] for r in records] == pytest.approx(expected)


@pytest.mark.golden
def test_final_model_loads_in_transformers_without_missing_keys(pretrain_files, tmp_path) -> None:
    transformers = pytest.importorskip("transformers")
    out = tmp_path / "run"
    assert main(_args(pretrain_files, tmp_path, out, "--max-steps", "1")) == 0
    model, info = transformers.BertForPreTraining.from_pretrained(
        out / "final", output_loading_info=True
    )
    assert not info["missing_keys"] and not info["unexpected_keys"]
    tokenizer = transformers.BertTokenizerFast.from_pretrained(out / "final")
    assert tokenizer.tokenize("w1 w2 .") == ["w1", "w2", "."]


def test_objectives_mlm_and_clm_train(pretrain_files, tmp_path) -> None:
    for objective in ("mlm", "clm"):
        out = tmp_path / objective
        args = _args(pretrain_files, tmp_path, out, "--max-steps", "2", "--objective", objective)
        assert main(args) == 0
        config = json.loads((out / "final" / "config.json").read_text())
        assert config["is_decoder"] is (objective == "clm")
        records = read_metrics(out / "metrics.jsonl")
        loss = "lm_loss" if objective == "clm" else "mlm_loss"  # next-token or masked tokens
        assert "nsp_loss" not in records[-1] and records[-1][loss] > 0


def _run_cli(args: list[str]) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "bertlab", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.parametrize("objective", ["mlm+nsp", "electra"])
def test_sigkill_then_resume_gives_bit_identical_weights(
    pretrain_files, tmp_path, objective
) -> None:
    steps = ["--max-steps", "24", "--checkpoint-every", "3", "--eval-every", "5"]
    steps += ["--objective", objective]
    reference = tmp_path / "reference"
    assert main(_args(pretrain_files, tmp_path, reference, *steps)) == 0

    killed = tmp_path / "killed"
    args = _args(pretrain_files, tmp_path, killed, *steps, "--keep-checkpoints", "1")
    process = _run_cli(args)
    deadline = time.monotonic() + 120
    while not list((killed / "checkpoints").glob("step-*")):
        assert process.poll() is None, process.stderr.read()
        assert time.monotonic() < deadline
        time.sleep(0.05)
    time.sleep(random.Random(os.getpid()).uniform(0.0, 1.0))  # an arbitrary moment
    process.send_signal(signal.SIGKILL)
    process.wait()
    if (killed / "final").exists():
        pytest.skip("the run finished before it could be killed")
    assert main([*args, "--resume"]) == 0

    folders = ["final", "generator", "discriminator"] if objective == "electra" else ["final"]
    for folder in folders:  # ELECTRA: the discriminator as a BERT, the generator, the pair
        expected, actual = _weights(reference / folder), _weights(killed / folder)
        assert expected.keys() == actual.keys()
        for key in expected:
            assert torch.equal(expected[key], actual[key]), key
    train = _train_records(killed)
    assert [r["step"] for r in train] == list(range(10, 25, 10)) + [24]


@pytest.mark.parametrize("workers", ["1", "2"])
def test_any_number_of_workers_trains_and_resumes_on_the_same_batches(
    pretrain_files, tmp_path, workers
) -> None:
    steps = ["--max-steps", "6", "--checkpoint-every", "3", "--eval-every", "6", "--log-every", "3"]
    reference = tmp_path / "reference"
    assert main([*_args(pretrain_files, tmp_path, reference, *steps), "--num-workers", "0"]) == 0
    run = tmp_path / "run"
    args = _args(pretrain_files, tmp_path, run, *steps)
    assert main([*args, "--num-workers", workers]) == 0
    uninterrupted = _weights(run / "final")
    # Back to the step-3 checkpoint, as if stopped there, and on in the training process.
    shutil.rmtree(run / "final")
    shutil.rmtree(run / "checkpoints" / "step-000006")
    assert main([*args, "--num-workers", "0", "--resume"]) == 0
    expected = _weights(reference / "final")
    for actual in (uninterrupted, _weights(run / "final")):
        assert expected.keys() == actual.keys()
        for key in expected:
            assert torch.equal(expected[key], actual[key]), key
    train = {directory: _train_records(directory) for directory in (reference, run)}
    for directory in (reference, run):
        train[directory] = [(r["step"], r["tokens"], r["loss"]) for r in train[directory]]
    assert train[run] == train[reference]


def _one_and_two_processes(pretrain_files, tmp_path: Path, *flags: str) -> tuple[Path, Path]:
    """The same run in one process (batch 8) and under torchrun in two (batch 4 each): their
    output directories."""
    one = tmp_path / "one"
    assert main(_args(pretrain_files, tmp_path, one, *flags)) == 0
    two = tmp_path / "two"
    args = _args(pretrain_files, tmp_path, two, *flags)
    args[args.index("--batch-size") + 1] = "4"
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node"]
    command += ["2", "-m", "bertlab", *args]
    subprocess.run(command, check=True, capture_output=True, timeout=300)
    return one, two


def _train_records(run: Path) -> list[dict]:
    return [r for r in read_metrics(run / "metrics.jsonl") if r["kind"] == "train"]


def test_two_processes_follow_the_one_process_loss_curve(pretrain_files, tmp_path) -> None:
    # Dropout off: each process draws its own dropout masks, so only then can the curves agree.
    one, two = _one_and_two_processes(
        pretrain_files, tmp_path, "--max-steps", "8", "--log-every", "1", "--dropout", "0"
    )
    losses = {run: [r["loss"] for r in _train_records(run)] for run in (one, two)}
    assert len(losses[one]) == 8
    assert losses[two] == pytest.approx(losses[one], rel=1e-4)


def test_electra_in_two_processes_trains_on_the_one_process_batches(pretrain_files, tmp_path):
    # Each process samples its own replacements, so only what comes before the sampling can
    # agree with one process: the tokens of every step and the generator's first loss.
    one, two = _one_and_two_processes(
        pretrain_files, tmp_path, "--max-steps", "3", "--log-every", "1", "--dropout", "0",
        "--objective", "electra",
    )  # fmt: skip
    train = {run: _train_records(run) for run in (one, two)}
    assert [r["tokens"] for r in train[two]] == [r["tokens"] for r in train[one]]
    assert train[two][0]["mlm_loss"] == pytest.approx(train[one][0]["mlm_loss"], rel=1e-4)
    assert all(math.isfinite(r["rtd_loss"]) for r in train[two])
    for folder in ("final", "generator", "discriminator"):
        assert (two / folder / "model.safetensors").is_file()


# --- bad input: one line on stderr, exit 1, nothing half-written ------------------------------


def _fails(args: list[str], capsys, message: str) -> str:
    assert main(args) == 1
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0 and "Traceback" not in error, error
    assert message in error, error
    return error


def test_bad_input_fails_with_one_line(pretrain_files, tmp_path, capsys) -> None:
    vocab, _ = pretrain_files
    out = tmp_path / "run"

    def args_with_corpus(path: Path) -> list[str]:
        args = _args(pretrain_files, tmp_path, out, "--max-steps", "1")
        args[args.index("--corpus") + 1] = str(path)
        return args

    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n")
    _fails(args_with_corpus(empty), capsys, "empty")
    binary = tmp_path / "binary.txt"
    binary.write_bytes(bytes(range(256)) * 10)
    _fails(args_with_corpus(binary), capsys, "binary.txt")
    _fails(args_with_corpus(tmp_path / "missing.txt"), capsys, "missing.txt")

    mismatch = _args(pretrain_files, tmp_path, out, "--max-steps", "1")
    mismatch[mismatch.index("--config") + 1] = str(_config_file(tmp_path, vocab_size=200))
    _fails(mismatch, capsys, "vocabulary")
    huge = _args(pretrain_files, tmp_path, out, "--max-steps", "1")
    huge[huge.index("--batch-size") + 1] = "100000000"
    _fails(huge, capsys, "--batch-size")
    _fails(
        [*_args(pretrain_files, tmp_path, out, "--max-steps", "1"), "--resume"],
        capsys,
        "no complete checkpoint",
    )
    for flag in ("--checkpoint-every", "--checkpoint-minutes"):
        _fails(
            [*_args(pretrain_files, tmp_path, out, "--max-steps", "1"), flag, "-1"],
            capsys,
            "must be positive",
        )
    assert not (out / "final").exists() and not (out / "checkpoints").exists()


def test_nsp_on_one_document_is_refused(pretrain_files, tmp_path, capsys) -> None:
    one_document = tmp_path / "one.txt"
    one_document.write_text("w1 w2 w3 .\nw4 w5 .\nw6 w7 w8 .\n")
    args = _args(pretrain_files, tmp_path, tmp_path / "run", "--max-steps", "1")
    args[args.index("--corpus") + 1] = str(one_document)
    _fails(args, capsys, "NSP needs at least two documents")


def test_gradient_accumulation_follows_the_full_batch(pretrain_files, tmp_path) -> None:
    """Batch 8 in one pass and in 2 micro-batches of 4: the same losses (dropout off)."""
    same = ["--max-steps", "4", "--log-every", "1", "--dropout", "0", "--num-workers", "0"]
    runs = {}
    for accumulation in ("1", "2"):
        out = tmp_path / f"accumulate-{accumulation}"
        args = _args(pretrain_files, tmp_path, out, *same)
        assert main([*args, "--gradient-accumulation-steps", accumulation]) == 0
        runs[accumulation] = [
            r["loss"] for r in read_metrics(out / "metrics.jsonl") if r["kind"] == "train"
        ]
    assert len(runs["1"]) == 4
    assert runs["2"] == pytest.approx(runs["1"], rel=1e-4)


def test_init_from_continues_an_existing_model(pretrain_files, tmp_path) -> None:
    first = tmp_path / "first"
    assert main(_args(pretrain_files, tmp_path, first, "--max-steps", "2")) == 0
    args = _args(
        pretrain_files,
        tmp_path,
        tmp_path / "second",
        "--max-steps",
        "1",
        "--init-from",
        str(first / "final"),
        "--learning-rate",
        "1e-9",
    )
    args = args[: args.index("--config")] + args[args.index("--config") + 2 :]
    assert main(args) == 0
    before, after = _weights(first / "final"), _weights(tmp_path / "second" / "final")
    key = "bert.encoder.layer.0.attention.self.query.weight"
    assert torch.allclose(before[key], after[key], atol=1e-6)  # started from it, barely moved


def test_a_diverging_run_stops_keeping_its_last_finite_checkpoints(
    pretrain_files, tmp_path, capsys
) -> None:
    """--learning-rate 1e6 trained to NaN, exited 0, wrote a NaN final/ and rotated the finite
    checkpoints away. Now it stops at the first non-finite step with one line, exit 1."""
    out = tmp_path / "run"
    args = _args(pretrain_files, tmp_path, out, "--max-steps", "60", "--learning-rate", "1e6")
    args += ["--checkpoint-every", "1", "--keep-checkpoints", "2", "--warmup-proportion", "0"]
    error = _fails(args, capsys, "training diverged at step")
    assert "is not finite" in error and "lower --learning-rate" in error
    assert not (out / "final").exists()
    checkpoints = sorted((out / "checkpoints").iterdir())
    assert checkpoints, "the first step's checkpoint is kept"
    for checkpoint in checkpoints:
        weights = _weights(checkpoint)
        assert all(bool(torch.isfinite(tensor).all()) for tensor in weights.values())
    assert checkpoints[-1].name in error
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert all(math.isfinite(r.get("loss", 0.0)) for r in records)


def test_a_run_killed_in_its_first_checkpoint_runs_again_and_leaves_no_temporaries(
    pretrain_files, tmp_path, capsys
) -> None:
    """A kill while the first checkpoint was written left checkpoints/ with a temporary inside:
    a plain rerun said the directory held a run, --resume found no checkpoint. Now the rerun
    starts over and removes what the killed writer left."""
    out = tmp_path / "run"
    stale = out / "checkpoints" / ".step-000002.abc123.tmp"
    (stale / "sub").mkdir(parents=True)
    (out / ".metrics.jsonl.xyz.tmp.jsonl").write_text("half")
    args = _args(pretrain_files, tmp_path, out, "--max-steps", "2", "--checkpoint-every", "2")
    assert main(args) == 0
    assert not stale.exists() and not (out / ".metrics.jsonl.xyz.tmp.jsonl").exists()
    assert [p.name for p in (out / "checkpoints").iterdir()] == ["step-000002"]


def test_a_second_writer_on_one_out_is_refused_with_the_holders_pid(
    pretrain_files, tmp_path, capsys, another_writer
) -> None:
    out = tmp_path / "run"
    with another_writer(out) as pid:
        error = _fails(_args(pretrain_files, tmp_path, out, "--max-steps", "1"), capsys, "pid")
    assert f"pid {pid}" in error and "another bertlab process" in error
    assert main(_args(pretrain_files, tmp_path, out, "--max-steps", "1")) == 0  # freed by the kill
    refused = tmp_path / "refused"
    binary = tmp_path / "binary.txt"
    binary.write_bytes(bytes(range(256)) * 10)
    args = _args(pretrain_files, tmp_path, refused, "--max-steps", "1")
    args[args.index("--corpus") + 1] = str(binary)
    _fails(args, capsys, "binary.txt")
    assert not refused.exists()  # a refused run leaves no empty --out behind


def test_pretrain_refuses_a_fine_tuning_runs_out(pretrain_files, tmp_path, capsys) -> None:
    """Pre-training into a fine-tuning run's --out overwrote its metrics.jsonl and curves.png."""
    out = tmp_path / "run"
    (out / "best").mkdir(parents=True)
    (out / "metrics.jsonl").write_text('{"kind": "eval", "step": 3}\n')
    _fails(_args(pretrain_files, tmp_path, out, "--max-steps", "1"), capsys, "fine-tuning run")
    assert (out / "metrics.jsonl").read_text() == '{"kind": "eval", "step": 3}\n'


# --- a full disk, a kill: --out stays resumable ------------------------------------------------

RUST_FULL_DISK = "Error while serializing: I/O error: No space left on device (os error 28)"


def test_a_full_disk_in_a_checkpoint_is_one_line_and_the_run_resumes(
    pretrain_files, tmp_path, capsys, monkeypatch
) -> None:
    """safetensors' SafetensorError on a full disk ended the run with a traceback that named no
    file. Now one line names the checkpoint, the reason and how to go on."""
    out = tmp_path / "run"
    args = _args(pretrain_files, tmp_path, out, "--max-steps", "4", "--checkpoint-every", "2")
    written = []

    def full_at_the_second(tensors, path, metadata=None):
        written.append(path)
        if len(written) == 2:
            raise SafetensorError(RUST_FULL_DISK)
        return save_file(tensors, path, metadata=metadata)

    monkeypatch.setattr(hf_checkpoint, "save_file", full_at_the_second)
    error = _fails(args, capsys, "no space left on device")
    checkpoint = out / "checkpoints" / "step-000004"
    assert error.startswith(f"bertlab: error: could not write {checkpoint}: no space left")
    assert error.endswith("step-000002 is kept: make room, then run the same command with --resume")
    monkeypatch.undo()  # the space is freed
    assert main([*args, "--resume"]) == 0
    assert (out / "final" / "model.safetensors").is_file()
    assert not [path for path in out.rglob(".*") if ".tmp" in path.name]


@pytest.fixture
def small_disk(tmp_path) -> Iterator[Path]:
    """A 900 KB tmpfs (root only): room for one checkpoint of the test model, not two."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mount = ["mount", "-t", "tmpfs", "-o", "size=900k", "tmpfs", str(disk)]
    if os.geteuid() != 0 or subprocess.run(mount, capture_output=True).returncode != 0:
        pytest.skip("mounting a small tmpfs needs root")
    yield disk
    subprocess.run(["umount", "--lazy", str(disk)], check=True)  # lazy: a failed run's open files


def test_a_full_disk_leaves_out_resumable_once_space_is_freed(
    pretrain_files, tmp_path, capsys, small_disk
) -> None:
    """A real full disk: torch.save's "unexpected pos" RuntimeError ended the run with a
    traceback. Now one line, exit 1, and once the disk has room the run goes on from its last
    complete checkpoint to the weights of an uninterrupted run."""
    steps = ["--max-steps", "6", "--checkpoint-every", "1", "--keep-checkpoints", "0"]
    reference = tmp_path / "reference"
    assert main(_args(pretrain_files, tmp_path, reference, *steps)) == 0
    out = small_disk / "run"
    args = _args(pretrain_files, tmp_path, out, *steps)
    error = _fails(args, capsys, f"could not write {out}")
    assert "no space left on device" in error
    remount = ["mount", "-o", "remount,size=20m", str(small_disk)]
    subprocess.run(remount, check=True)  # the space is freed
    has_checkpoint = checkpointing.latest_checkpoint(out) is not None
    assert main([*args, "--resume"] if has_checkpoint else args) == 0
    expected, actual = _weights(reference / "final"), _weights(out / "final")
    assert all(torch.equal(expected[key], actual[key]) for key in expected)


# Runs `bertlab pretrain ARGS` and SIGKILLs itself at the KILL_AT-th moment of its checkpoint
# writing (0: never; then it prints how many moments there were): before and after each step
# bertlab.core.atomic takes (a temporary made, a file renamed, a directory removed) and each library
# write (safetensors, torch.save, tokenizers); at a safetensors moment, with the file half written.
KILL_IN_CHECKPOINT = """
import os, signal, sys, tempfile
import torch
from bertlab.core import atomic
from bertlab.network import checkpoint
from bertlab.tokenizer import wordpiece as tokenization
from bertlab.cli import main
from bertlab.training.pretraining import checkpointing

kill_at, moments, writing = int(sys.argv[1]), [], [False]

def moment(path=None):
    if writing[0]:
        moments.append(path)
        if len(moments) == kill_at:
            if path is not None:  # a file cut short, as by a kill while it was written
                os.truncate(path, os.path.getsize(path) // 2)
            os.kill(os.getpid(), signal.SIGKILL)

def hooked(function, cuts_file=False):
    def call(*args, **kwargs):
        moment()
        result = function(*args, **kwargs)
        moment(args[1] if cuts_file else None)
        return result
    return call

def checkpoints(*args, **kwargs):
    writing[0] = True  # from the first checkpoint on, the final model's writing included
    return save_checkpoint(*args, **kwargs)

for module, name in [(os, "replace"), (os, "rename"), (os, "chmod"), (atomic.shutil, "rmtree"),
                     (tempfile, "mkstemp"), (tempfile, "mkdtemp"), (torch, "save")]:
    setattr(module, name, hooked(getattr(module, name)))
checkpoint.save_file = hooked(checkpoint.save_file, cuts_file=True)
save_checkpoint, checkpointing.save_checkpoint = checkpointing.save_checkpoint, checkpoints
code = main(sys.argv[2:])
print(len(moments))
sys.exit(code)
"""


def _killed_at(moment: int, args: list[str]) -> subprocess.CompletedProcess:
    command = [sys.executable, "-c", KILL_IN_CHECKPOINT, str(moment), *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_a_kill_at_any_moment_of_a_checkpoint_leaves_a_loadable_resumable_run(
    pretrain_files, tmp_path, capsys
) -> None:
    """SIGKILL at random moments of the checkpoints' (and the final model's) writing: every
    checkpoint left, the previous or the new one, loads for fill-mask, and --resume (a plain
    rerun when no checkpoint was complete) ends with the uninterrupted run's weights and no
    temporaries."""
    steps = ["--max-steps", "3", "--checkpoint-every", "1", "--keep-checkpoints", "1"]
    reference = tmp_path / "reference"
    finished = _killed_at(0, _args(pretrain_files, tmp_path, reference, *steps))
    assert finished.returncode == 0, finished.stderr
    num_moments = int(finished.stdout.split()[-1])
    for moment in sorted(random.Random().sample(range(1, num_moments + 1), 3)):
        out = tmp_path / f"killed-at-{moment}"
        args = _args(pretrain_files, tmp_path, out, *steps)
        killed = _killed_at(moment, args)
        where = f"killed at moment {moment} of {num_moments}"
        assert killed.returncode == -signal.SIGKILL, (where, killed.stderr)
        checkpoints = checkpointing.list_checkpoints(out)  # each complete, none half-removed
        for model in [*checkpoints, out / "final"]:
            if model.exists():
                assert main(["fill-mask", "--model", str(model), "w1 w2 [MASK] ."]) == 0, where
        assert main([*args, "--resume"] if checkpoints else args) == 0, where
        expected, actual = _weights(reference / "final"), _weights(out / "final")
        assert all(torch.equal(expected[key], actual[key]) for key in expected), where
        assert not [path for path in out.rglob(".*") if ".tmp" in path.name], where
    capsys.readouterr()


@pytest.mark.parametrize("change", ["whole words", "sequence length and cache"])
def test_a_resume_with_other_settings_is_refused_before_it_builds_a_corpus_cache(
    pretrain_files, tmp_path, capsys, change
) -> None:
    """The refusal came after the corpus was tokenized again: OUT/corpus was replaced by one
    for the new settings, or a new --corpus-cache was left behind."""
    out = tmp_path / "run"
    args = _args(pretrain_files, tmp_path, out, "--max-steps", "2", "--checkpoint-every", "2")
    at = args.index("--corpus-cache")
    del args[at : at + 2]  # the default cache: OUT/corpus
    assert main(args) == 0
    if change == "whole words":
        other = ["--whole-word-mask"]
    else:
        other = ["--max-seq-length", "16", "--corpus-cache", str(tmp_path / "new-cache")]
    before = _files_and_times(tmp_path)
    capsys.readouterr()
    assert main([*args, "--resume", *other]) == 1
    assert "cannot resume from" in capsys.readouterr().err
    assert _files_and_times(tmp_path) == before


def test_a_resume_with_another_budget_is_refused_before_the_plan_is_made_again(
    pretrain_files, tmp_path, capsys
) -> None:
    """The refusal came after the corpus was read and OUT/budget_plan.json was rewritten for
    the new budget."""
    out = tmp_path / "run"
    args = _args(pretrain_files, tmp_path, out, "--checkpoint-every", "2")
    at = args.index("--config")
    args[at : at + 2] = ["--model-size", "tiny"]  # a budget plans a preset
    assert main([*args, "--budget", "2s"]) == 0
    before = _files_and_times(tmp_path)
    plan = (out / "budget_plan.json").read_text()
    capsys.readouterr()
    assert main([*args, "--budget", "3s", "--resume"]) == 1
    assert capsys.readouterr().err == (
        f"bertlab: error: cannot resume from {out}: its plan (budget_plan.json) is for budget "
        "2 s, now 3 s; use the same settings or a new --out\n"
    )
    assert _files_and_times(tmp_path) == before and (out / "budget_plan.json").read_text() == plan


@pytest.mark.parametrize("tokenizer", ["given", "trained on the corpus"])
def test_values_that_cannot_run_are_refused_before_the_corpus_is_read(
    pretrain_files, tmp_path, capsys, tokenizer
) -> None:
    """`--max-seq-length 100000` was refused only after the corpus was tokenized into OUT/corpus
    (and a vocabulary trained on it); a budget of a billion hours ran until killed."""
    out = tmp_path / "run"
    args = _args(pretrain_files, tmp_path, out)
    at = args.index("--corpus-cache")
    del args[at : at + 2]  # the default cache: OUT/corpus
    if tokenizer != "given":
        at = args.index("--tokenizer")
        args[at : at + 2] = ["--vocab-size", "150"]
        at = args.index("--config")
        args[at : at + 2] = ["--model-size", "tiny"]
    long = [*args, "--max-steps", "1", "--max-seq-length", "100000"]
    limit = 64 if tokenizer == "given" else 512
    message = f"--max-seq-length 100000 exceeds the model's max_position_embeddings {limit}"
    _fails(long, capsys, message)
    assert not out.exists()
    _fails([*args, "--budget", "1000000000h"], capsys, "the budget must be at most a year")
    _fails([*args, "--max-time", "9000h"], capsys, "max_time must be at most a year")
    huge = [*args, "--max-steps", "1", "--batch-size", "100000000"]
    _fails(huge, capsys, "--batch-size")
    assert not out.exists()


def _files_and_times(directory: Path) -> dict[str, int | None]:
    """Every path under `directory`, with the modification time of each file."""
    return {
        str(path): path.stat().st_mtime_ns if path.is_file() else None
        for path in directory.rglob("*")
    }


# --- Ctrl-C and SIGTERM: an orderly stop that says what is kept --------------------------------


def test_ctrl_c_names_the_checkpoint_kept_and_the_resume_command(
    pretrain_files, tmp_path, capsys, monkeypatch
) -> None:
    """Ctrl-C printed `bertlab: interrupted` only."""
    from bertlab.training.pretraining import loop as pretrain_loop

    step = pretrain_loop._Run._step

    def interrupted_at_step_5(self, *args, **kwargs):
        if self.progress.step == 4:
            raise KeyboardInterrupt
        return step(self, *args, **kwargs)

    out = tmp_path / "run"
    args = _args(pretrain_files, tmp_path, out, "--max-steps", "6", "--checkpoint-every", "2")
    with monkeypatch.context() as patch:
        patch.setattr(pretrain_loop._Run, "_step", interrupted_at_step_5)
        assert main(args) == 130
    stderr = capsys.readouterr().err
    assert stderr.strip().splitlines()[-1] == (
        "bertlab: interrupted; step-000004 is kept: run the same command with --resume to go on"
    )
    assert main([*args, "--resume"]) == 0
    assert (out / "final" / "model.safetensors").is_file()


def test_ctrl_c_before_the_first_checkpoint_says_to_start_over(
    pretrain_files, tmp_path, capsys, monkeypatch
) -> None:
    from bertlab.training.pretraining import loop as pretrain_loop

    def interrupted(self, *args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(pretrain_loop._Run, "_step", interrupted)
    assert main(_args(pretrain_files, tmp_path, tmp_path / "run", "--max-steps", "3")) == 130
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "bertlab: interrupted; no checkpoint was complete: run the same command again to start over"
    )


def test_sigterm_stops_in_order_and_says_what_is_kept(pretrain_files, tmp_path, cli_env) -> None:
    """SIGTERM (a scheduler's, `docker stop`'s) ended the process at once, without a message,
    and once left a temporary curves file behind. The corpus is encoded by a pool of workers and
    batches come from a data loader's worker: both are forked processes."""
    out = tmp_path / "run"
    args = _args(pretrain_files, tmp_path, out, "--max-steps", "100000", "--checkpoint-every", "2")
    process = subprocess.Popen(
        [sys.executable, "-m", "bertlab", *args, "--num-workers", "1"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=cli_env,
    )
    deadline = time.monotonic() + 120
    while not checkpointing.list_checkpoints(out):
        assert process.poll() is None, process.stderr.read()
        assert time.monotonic() < deadline, "no checkpoint in time"
        time.sleep(0.2)
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 143, stderr
    last = stderr.strip().splitlines()[-1]
    assert last.startswith("bertlab: interrupted by SIGTERM; step-"), stderr
    assert last.endswith(" is kept: run the same command with --resume to go on")
    assert not [path for path in tmp_path.rglob("*") if ".tmp" in path.name]
