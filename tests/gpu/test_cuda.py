"""On a CUDA device: bf16 autocast against fp32, the CLI's runs (pre-training in bf16, fine-tuning,
evaluation, prediction), resuming after a kill, and torchrun with NCCL. Short runs of tiny models;
the whole file took 95 s on one H200, most of it starting the eight subprocesses.

Marked `gpu` (not in the default run) and skipped without CUDA. From the repository root, with
or without bertlab installed: `PYTHONPATH=. python3 -m pytest -q -m gpu tests/gpu`.
"""

# Shapes: B batch, L sequence length, V vocab.

from __future__ import annotations

import contextlib
import json
import math
import os
import random
import signal
import socket
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest
import torch

import bertlab.task_families.base as task_families_base
import bertlab.training.finetuning.loop as finetune_loop
from bertlab.apps.serve import inference
from bertlab.apps.serve.language_model import score
from bertlab.apps.serve.models import load_served_model
from bertlab.cli import main
from bertlab.core.config import BertConfig, PretrainConfig, PretrainDataConfig
from bertlab.core.finetune_config import FinetuneConfig
from bertlab.core.hub import resolve
from bertlab.core.runtime import DistributedContext, autocast, distributed, set_seed
from bertlab.network.bert import BertForPreTraining
from bertlab.network.heads import BertForSequenceClassification
from bertlab.training.metrics_log import MetricsLog, read_metrics
from bertlab.training.pretraining import loop as pretrain_loop
from bertlab.training.pretraining.objectives import objective_of
from bertlab.use.language_model import generate

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

# bf16 keeps 8 bits of mantissa (a relative rounding error of 2**-9 per operation); through two
# layers the logits stay within about 1% of fp32. fp32 on CUDA (no TF32) and on the CPU differ
# only in the order of summation.
BF16_RELATIVE_L2 = 2e-2
FP32_RELATIVE_L2 = 1e-4
RUN_TIMEOUT_SECONDS = 300
CHECKPOINT_WAIT_SECONDS = 180


def relative_l2(actual: torch.Tensor, expected: torch.Tensor) -> float:
    expected = expected.float().cpu()
    return float((actual.float().cpu() - expected).norm() / expected.norm())


def random_batch(vocab_size: int, generator: torch.Generator) -> dict[str, torch.Tensor]:
    """Four sequences of 48 random ids, the last two padded, with A/B segments."""
    input_ids = torch.randint(5, vocab_size, (4, 48), generator=generator)  # (B, L)
    attention_mask = torch.ones_like(input_ids)
    attention_mask[2, 30:] = 0
    attention_mask[3, 11:] = 0
    token_type_ids = (torch.rand(4, 48, generator=generator) > 0.5).long().cummax(dim=1).values
    return {
        "input_ids": input_ids,
        "attention_mask": attention_mask,
        "token_type_ids": token_type_ids,
    }


@pytest.fixture
def no_tf32():
    """Full fp32 matmuls on CUDA for the fp32 comparison (TF32 rounds inputs to 10 bits)."""
    previous = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32 = previous


def test_bf16_autocast_logits_are_close_to_fp32_and_cuda_fp32_to_cpu(no_tf32) -> None:
    config = BertConfig(
        vocab_size=211,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=128,
        max_position_embeddings=64,
    )
    torch.manual_seed(0)
    model = BertForPreTraining(config).eval()
    batch = random_batch(config.vocab_size, torch.Generator().manual_seed(1))
    cuda = torch.device("cuda")
    with torch.no_grad():
        cpu = model(**batch)
        model.to(cuda)
        cuda_batch = {key: value.to(cuda) for key, value in batch.items()}
        fp32 = model(**cuda_batch)
        with autocast(cuda, "bf16"):
            bf16 = model(**cuda_batch)
    assert fp32.mlm_logits.is_cuda and bf16.mlm_logits.dtype == torch.bfloat16
    assert torch.isfinite(bf16.mlm_logits).all()
    assert relative_l2(fp32.mlm_logits, cpu.mlm_logits) < FP32_RELATIVE_L2
    assert relative_l2(fp32.nsp_logits, cpu.nsp_logits) < FP32_RELATIVE_L2
    assert relative_l2(bf16.mlm_logits, fp32.mlm_logits) < BF16_RELATIVE_L2
    assert relative_l2(bf16.nsp_logits, fp32.nsp_logits) < BF16_RELATIVE_L2


def eval_losses(run: Path) -> list[float]:
    return [
        record["loss"] for record in read_metrics(run / "metrics.jsonl") if record["kind"] == "eval"
    ]


def test_pretrain_in_bf16_on_cuda_writes_a_model_with_a_finite_held_out_loss(
    tmp_path, tiny_pretrain_args
) -> None:
    torch.cuda.reset_peak_memory_stats()
    out = tmp_path / "run"
    flags = ["--max-steps", "20", "--eval-every", "10", "--precision", "bf16"]
    assert main(tiny_pretrain_args(out, *flags)) == 0
    assert torch.cuda.max_memory_allocated() > 0  # the model and its batches were on the GPU
    assert (out / "final" / "model.safetensors").is_file()
    losses = eval_losses(out)
    assert len(losses) == 2 and all(math.isfinite(loss) and loss > 0 for loss in losses)


def last_json(stdout: str) -> dict:
    return json.loads(stdout.strip().splitlines()[-1])


def test_finetune_evaluate_predict_on_cuda(tmp_path, capsys, sst2_files) -> None:
    train, dev, vocab = sst2_files
    out = tmp_path / "finetune"
    torch.cuda.reset_peak_memory_stats()
    code = main(
        [
            "finetune", "--task", "sst2", "--train", str(train), "--dev", str(dev),
            "--from-scratch", "--model-size", "tiny", "--tokenizer", str(vocab),
            "--out", str(out), "--epochs", "2", "--batch-size", "8", "--max-seq-length", "32",
            "--no-progress",
        ]
    )  # fmt: skip
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert torch.cuda.max_memory_allocated() > 0
    dev_accuracy = last_json(captured.out)["dev"]["accuracy"]
    assert 0.0 <= dev_accuracy <= 1.0

    best = str(out / "best")
    assert main(["evaluate", "--task", "sst2", "--model", best, "--data", str(dev)]) == 0
    captured = capsys.readouterr()
    # The same model on the same rows; bf16 in batches of another size may flip a borderline one.
    assert last_json(captured.out)["accuracy"] == pytest.approx(dev_accuracy, abs=0.1)

    predictions = tmp_path / "predictions.jsonl"
    argv = ["predict", "--task", "sst2", "--model", best, "--data", str(dev)]
    assert main([*argv, "--output", str(predictions)]) == 0
    lines = predictions.read_text().splitlines()
    assert len(lines) == 20 and {json.loads(line)["prediction"] for line in lines} <= {"0", "1"}


def test_finetuning_on_cuda_trains_in_bf16_autocast_over_length_grouped_batches(tmp_path) -> None:
    config = BertConfig(
        vocab_size=64,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=64,
    )
    torch.manual_seed(0)
    model = BertForSequenceClassification(config, id2label={0: "neg", 1: "pos"}).cuda()
    rng = random.Random(0)
    features = []
    for _ in range(64):
        ids = [2, *(rng.randrange(5, 64) for _ in range(rng.randrange(1, 48))), 3]
        features.append({"input_ids": ids, "token_type_ids": [0] * len(ids), "labels": ids[1] % 2})
    shapes, dtypes = [], []
    model.bert.embeddings.word_embeddings.register_forward_hook(
        lambda module, inputs, output: shapes.append((inputs[0].shape, inputs[0].device.type))
    )
    model.classifier.register_forward_hook(
        lambda module, inputs, output: dtypes.append(output.dtype)
    )
    config = FinetuneConfig(batch_size=8, num_train_epochs=1)  # precision "auto"
    loop = finetune_loop.FinetuneLoop(
        model, features, config, MetricsLog(tmp_path / "m.jsonl"), False
    )
    assert loop.device.type == "cuda" and loop.precision == "bf16"
    loop.run_epoch(1)
    assert len(shapes) == 8 and {device for _, device in shapes} == {"cuda"}
    assert set(dtypes) == {torch.bfloat16}
    # Length-grouped: each batch is padded to its own longest sequence, far less than to the
    # longest of all (random batches of these lengths would pad about twice as much).
    padded = sum(batch * length for (batch, length), _ in shapes)
    longest = max(len(feature["input_ids"]) for feature in features)
    assert len({length for (_, length), _ in shapes}) > 1
    assert padded < 0.75 * len(features) * longest


def test_finetune_evaluate_predict_run_on_cuda_in_bf16_over_length_sorted_batches(
    tmp_path, capsys, monkeypatch, sst2_files
) -> None:
    """The CLI's three commands: every forward under bf16 autocast on the GPU, training over
    length-grouped batches and evaluation over length-sorted ones."""
    calls = {"autocast": [], "grouped": 0, "sorted": 0}

    def recording_autocast(device, precision):
        calls["autocast"].append((device.type, precision))
        return autocast(device, precision)

    def counting(name, function):
        def wrapper(*args, **kwargs):
            calls[name] += 1
            return function(*args, **kwargs)

        return wrapper

    for module in (finetune_loop, task_families_base):
        monkeypatch.setattr(module, "autocast", recording_autocast)
    grouped = counting("grouped", finetune_loop.length_grouped_batches)
    monkeypatch.setattr(finetune_loop, "length_grouped_batches", grouped)
    ordered = counting("sorted", task_families_base.sorted_length_batches)
    monkeypatch.setattr(task_families_base, "sorted_length_batches", ordered)
    train, dev, vocab = sst2_files
    out = tmp_path / "finetune"
    code = main(
        [
            "finetune", "--task", "sst2", "--train", str(train), "--dev", str(dev),
            "--from-scratch", "--model-size", "tiny", "--tokenizer", str(vocab),
            "--out", str(out), "--epochs", "1", "--batch-size", "8", "--max-seq-length", "32",
            "--no-progress",
        ]
    )  # fmt: skip
    assert code == 0, capsys.readouterr().err
    assert calls["grouped"] == 1 and calls["sorted"] >= 1
    best = str(out / "best")
    assert main(["evaluate", "--task", "sst2", "--model", best, "--data", str(dev)]) == 0
    predictions = tmp_path / "predictions.jsonl"
    argv = ["predict", "--task", "sst2", "--model", best, "--data", str(dev)]
    assert main([*argv, "--output", str(predictions)]) == 0
    assert calls["sorted"] >= 3
    assert calls["autocast"] and set(calls["autocast"]) == {("cuda", "bf16")}


def process_tree(pid: int) -> list[int]:
    """`pid` and its descendants, read from /proc: torchrun starts its workers in sessions of
    their own, so a kill of its process group would leave them running."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            state_and_parent = stat.read_text().rpartition(")")[2].split()[:2]
        except OSError:  # the process ended while we read
            continue
        children.setdefault(int(state_and_parent[1]), []).append(int(stat.parent.name))
    tree, pending = [], [pid]
    while pending:
        tree.append(pending.pop())
        pending.extend(children.get(tree[-1], []))
    return tree


def is_running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")  # a zombie holds no files and no locks


def start(command: list[str], env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen(
        command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )


def kill_after_first_checkpoint(process: subprocess.Popen, out: Path) -> None:
    """SIGKILL the run and every process it started once a checkpoint is complete, or skip the
    test when the run finished first."""
    deadline = time.monotonic() + CHECKPOINT_WAIT_SECONDS
    while not list((out / "checkpoints").glob("step-*")):
        assert process.poll() is None, process.stderr.read()
        assert time.monotonic() < deadline, "no checkpoint appeared"
        time.sleep(0.05)
    tree = process_tree(process.pid)
    for pid in tree:
        with contextlib.suppress(ProcessLookupError):  # ended on its own meanwhile
            os.kill(pid, signal.SIGKILL)
    process.wait()
    while any(map(is_running, tree)):
        time.sleep(0.05)
    if (out / "final").exists():
        pytest.skip("the run finished before it could be killed")


def resumed_run_is_complete(command: list[str], env: dict[str, str], out: Path, steps: int):
    result = subprocess.run(
        [*command, "--resume"], env=env, capture_output=True, text=True,
        timeout=RUN_TIMEOUT_SECONDS,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "resuming from" in result.stderr, result.stderr
    assert (out / "final" / "model.safetensors").is_file()
    train = [r for r in read_metrics(out / "metrics.jsonl") if r["kind"] == "train"]
    assert train[-1]["step"] == steps
    losses = eval_losses(out)
    assert losses and all(math.isfinite(loss) for loss in losses)


LONG_RUN = ["--max-steps", "60", "--checkpoint-every", "10", "--eval-every", "0"]


def test_pretrain_killed_on_cuda_resumes_to_the_end(tmp_path, tiny_pretrain_args, cli_env):
    out = tmp_path / "run"
    command = [sys.executable, "-m", "bertlab", *tiny_pretrain_args(out, *LONG_RUN)]
    kill_after_first_checkpoint(start(command, cli_env), out)
    resumed_run_is_complete(command, cli_env, out, steps=60)


def test_torchrun_with_one_process_runs_and_resumes_after_a_kill(
    tmp_path, tiny_pretrain_args, cli_env
) -> None:
    out = tmp_path / "run"
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    command = [*torchrun, "--nproc_per_node", "1", "-m", "bertlab"]
    command += tiny_pretrain_args(out, *LONG_RUN)
    kill_after_first_checkpoint(start(command, cli_env), out)
    resumed_run_is_complete(command, cli_env, out, steps=60)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_distributed_joins_an_nccl_group_on_cuda(monkeypatch) -> None:
    # One GPU holds one NCCL rank: a group of one, entered as a multi-process job would be.
    monkeypatch.setattr(DistributedContext, "is_distributed", property(lambda self: True))
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(free_port()))
    context = DistributedContext(rank=0, world_size=1, local_rank=0)
    with distributed(context):
        assert torch.distributed.get_backend() == "nccl"
        values = torch.arange(4.0, device=context.device())
        total = values.clone()
        torch.distributed.all_reduce(total)  # a sum over the one rank
        torch.testing.assert_close(total, values)
    assert not torch.distributed.is_initialized()


def test_serve_loads_onto_cuda_and_its_answers_equal_the_cpus(tmp_path, no_tf32) -> None:
    """`bertlab serve` puts every model on the GPU: fill-mask, attention, score and generate
    (fp32) equal the CPU's; a classifier runs under bf16 autocast there, fp32 on the CPU."""
    shipped = resolve("bertlab:mini-reviews-en")
    on_gpu = load_served_model("en", shipped)  # the default device: the GPU
    on_cpu = load_served_model("en", shipped, torch.device("cpu"))
    assert on_gpu.device.type == "cuda" and on_cpu.device.type == "cpu"
    texts = ["The movie was [MASK].", "A [MASK] film with a [MASK] ending."]
    gpu_masks = inference.fill_mask(on_gpu, texts, 5)
    cpu_masks = inference.fill_mask(on_cpu, texts, 5)
    for gpu_text, cpu_text in zip(gpu_masks, cpu_masks, strict=True):
        for gpu_mask, cpu_mask in zip(gpu_text["masks"], cpu_text["masks"], strict=True):
            assert gpu_mask["tokens"][0] == cpu_mask["tokens"][0]
            assert gpu_mask["probabilities"][0] == pytest.approx(
                cpu_mask["probabilities"][0], rel=1e-3
            )
    gpu_maps = inference.attention(on_gpu, "A fine film.", None, 128, "It was long.")
    cpu_maps = inference.attention(on_cpu, "A fine film.", None, 128, "It was long.")
    assert gpu_maps["tokens"] == cpu_maps["tokens"]
    gpu_weights = torch.tensor(gpu_maps["attentions"])
    assert relative_l2(gpu_weights, torch.tensor(cpu_maps["attentions"])) < FP32_RELATIVE_L2 * 10
    gpu_scores = score(on_gpu, ["The acting was great."], 64)
    cpu_scores = score(on_cpu, ["The acting was great."], 64)
    assert gpu_scores[0]["total"] == pytest.approx(cpu_scores[0]["total"], rel=1e-3)

    causal = BertConfig(
        vocab_size=on_cpu.tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        is_causal=True,
    )
    torch.manual_seed(0)
    BertForPreTraining(causal).save_pretrained(tmp_path / "causal")
    on_cpu.tokenizer.save_pretrained(tmp_path / "causal")
    lm_gpu = load_served_model("clm", tmp_path / "causal").lm
    lm_cpu = load_served_model("clm", tmp_path / "causal", torch.device("cpu")).lm
    prompt = "the movie"
    assert generate(lm_gpu, on_cpu.tokenizer, prompt, 8, seed=3) == generate(
        lm_cpu, on_cpu.tokenizer, prompt, 8, seed=3
    )

    torch.manual_seed(0)
    classifier = BertForSequenceClassification(
        BertConfig.from_json_file(shipped / "config.json"), num_labels=2
    )
    classifier.save_pretrained(tmp_path / "classifier")
    on_cpu.tokenizer.save_pretrained(tmp_path / "classifier")
    gpu_classifier = load_served_model("sentiment", tmp_path / "classifier")
    cpu_classifier = load_served_model("sentiment", tmp_path / "classifier", torch.device("cpu"))
    assert (gpu_classifier.precision, cpu_classifier.precision) == ("bf16", "fp32")
    inputs = [("A fine film.", None), ("Dull and long.", None)]
    gpu_rows = inference.classify(gpu_classifier, inputs)
    cpu_rows = inference.classify(cpu_classifier, inputs)
    for gpu_row, cpu_row in zip(gpu_rows, cpu_rows, strict=True):
        gpu_p = [
            p["probability"] for p in sorted(gpu_row["probabilities"], key=lambda p: p["label"])
        ]
        cpu_p = [
            p["probability"] for p in sorted(cpu_row["probabilities"], key=lambda p: p["label"])
        ]
        assert gpu_p == pytest.approx(cpu_p, abs=BF16_RELATIVE_L2)


@pytest.mark.parametrize("objective", ["mlm+nsp", "mlm"])
def test_a_pretraining_step_between_logs_does_not_wait_for_the_gpu(
    tiny_pretraining, pretraining_step, tmp_path, objective
) -> None:
    """Under `torch.cuda.set_sync_debug_mode("warn")`, the steps that are not log steps (nor
    the first, which sets things up) make no host synchronisation: statistics stay on the
    device, the finite check is deferred, the progress bar reads nothing."""

    tokenizer, corpus, config = tiny_pretraining
    data = PretrainDataConfig(max_seq_length=32, objective=objective)
    set_seed(0)
    model = objective_of(data).build_model(config, None)
    settings = PretrainConfig(
        batch_size=4, max_steps=8, log_every_steps=4, eval_examples=0, warmup_proportion=0.0
    )
    syncs: list[tuple[int, str]] = []
    previous = torch.cuda.get_sync_debug_mode()
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = lambda message, *args, **kwargs: syncs.append(
            (pretraining_step(), str(message))
        )
        torch.cuda.set_sync_debug_mode("warn")
        try:
            result = pretrain_loop.pretrain(
                model, tokenizer, corpus, data, settings, tmp_path / "run", show_progress=True
            )
        finally:
            torch.cuda.set_sync_debug_mode(previous)
    assert result.progress.step == 8
    between_logs = [(at, text[:200]) for at, text in syncs if at in (2, 3, 5, 6, 7)]
    assert between_logs == []
    assert any(at == 4 for at, _ in syncs)  # the log step reads the device, once the steps ran
