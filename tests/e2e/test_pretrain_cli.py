"""`bertlab pretrain` end to end on a synthetic corpus: outputs, exact resume after SIGKILL,
DDP equivalence, and bad input."""

from __future__ import annotations

import json
import math
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from bertlab.cli import main
from bertlab.config import BertConfig
from bertlab.training.metrics_log import read_metrics

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
    extra = ["--max-steps", "8", "--log-every", "1", "--schedule", "one-cycle", "--warmup", "0.5"]
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

    folders = ["final", "generator"] if objective == "electra" else ["final"]
    for folder in folders:  # ELECTRA: the discriminator and the generator
        expected, actual = _weights(reference / folder), _weights(killed / folder)
        assert expected.keys() == actual.keys()
        for key in expected:
            assert torch.equal(expected[key], actual[key]), key
    train = [r for r in read_metrics(killed / "metrics.jsonl") if r["kind"] == "train"]
    assert [r["step"] for r in train] == list(range(10, 25, 10)) + [24]


def test_two_processes_follow_the_one_process_loss_curve(pretrain_files, tmp_path) -> None:
    # Dropout off: each process draws its own dropout masks, so only then can the curves agree.
    same = ["--max-steps", "8", "--log-every", "1", "--dropout", "0"]
    one = tmp_path / "one"
    assert main(_args(pretrain_files, tmp_path, one, *same)) == 0
    two = tmp_path / "two"
    args = _args(pretrain_files, tmp_path, two, *same)
    args[args.index("--batch-size") + 1] = "4"
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node"]
    command += ["2", "-m", "bertlab", *args]
    subprocess.run(command, check=True, capture_output=True, timeout=300)
    losses = {
        run: [r["loss"] for r in read_metrics(run / "metrics.jsonl") if r["kind"] == "train"]
        for run in (one, two)
    }
    assert len(losses[one]) == 8
    assert losses[two] == pytest.approx(losses[one], rel=1e-4)


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
    args += ["--checkpoint-every", "1", "--keep-checkpoints", "2", "--warmup", "0"]
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


HOLD_LOCK = """
import sys, time
from bertlab.atomic import run_lock
with run_lock(sys.argv[1]):
    print("held", flush=True)
    time.sleep(60)
"""


def test_a_second_writer_on_one_out_is_refused_with_the_holders_pid(
    pretrain_files, tmp_path, capsys
) -> None:
    out = tmp_path / "run"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(out)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        error = _fails(_args(pretrain_files, tmp_path, out, "--max-steps", "1"), capsys, "pid")
    finally:
        holder.kill()
        holder.wait()
    assert f"pid {holder.pid}" in error and "another bertlab process" in error
    assert main(_args(pretrain_files, tmp_path, out, "--max-steps", "1")) == 0  # freed by the kill
    refused = tmp_path / "refused"
    binary = tmp_path / "binary.txt"
    binary.write_bytes(bytes(range(256)) * 10)
    args = _args(pretrain_files, tmp_path, refused, "--max-steps", "1")
    args[args.index("--corpus") + 1] = str(binary)
    _fails(args, capsys, "binary.txt")
    assert not refused.exists()  # a refused run leaves no empty --out behind
