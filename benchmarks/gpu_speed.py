"""Pre-training speed on one GPU: bertlab's BertForPreTraining against transformers', and MFU.

Three parts, each printed as a table and written together to `--out FILE` (JSON):

1. Step table (sizes `--sizes`, default base and large; BertConfig presets at the
   bert-base-uncased vocabulary): one random pre-training batch of `--batch-size` x `--seq-len`
   (default 128 x 128; A|B segments, 15% masked positions, at most 20 per sequence as Google's
   `max_predictions_per_seq` at length 128, NSP labels), bf16 autocast on CUDA (fp32 on the CPU),
   AdamW fused, dropout on (the config's 0.1). `--warmup` untimed steps, then `--steps` steps timed
   with CUDA events (wall clock on the CPU): ms/step, tokens/s and MFU of
   `bertlab.network.bert.BertForPreTraining` (MLM logits only at the masked positions) and of
   `transformers.BertForPreTraining` (SDPA attention; the same config through
   `BertConfig.to_dict()`, the HF config.json fields; labels -100 off the masked positions, so its
   MLM head runs at every position), and bertlab's speed-up. `--compile` adds `torch.compile`
   rows (compilation happens in the warm-up steps).
2. Real pre-training (`--pretrain-sizes`, default mini and base): `bertlab pretrain` for
   `--pretrain-steps` steps on `--corpus` (the reviews `gpu_check.sh prepare` copies), batches of
   `--batch-size` x `--seq-len`, the shipped mini model's tokenizer; tokens/s read from its
   metrics.jsonl, between its first and last train records (start-up excluded). Started through
   `gpu_check.py`'s `_pretrain`.
3. Fine-tuning (`--finetune`): one SST-2 epoch from the same model folder (`--finetune-model`,
   default the shipped BERT-mini) on the same rows of `--sst2` (the last 872 rows, SST-2's dev
   size, held out as dev; `--finetune-limit` training rows for a check), batch 32, learning rate
   5e-5, 128 tokens at most, bf16 on CUDA: `bertlab finetune` (length-grouped batches) against
   the Hugging Face Trainer as run_glue.py sets it up (every sentence padded to 128, `bf16=True`,
   `optim="adamw_torch_fused"`). Seconds of the epoch (training, and training plus the dev
   evaluation, as bertlab's metrics.jsonl records it) and dev accuracy.

FLOPs of one training step (model FLOPs: what the model needs, whatever a side computes), with
B sequences of L tokens, T = B L, P masked positions per sequence, H hidden, I intermediate,
V vocabulary, Nl layers, and 2 FLOPs per multiply-add:

    forward matmuls per token  = 2 * Nl * (4 H^2 + 2 H I)      # Q, K, V, attention output;
                                                               # the two feed-forward layers
    attention per layer        = 2 * 2 B L^2 H                 # Q K^T and probabilities x V
    forward                    = 2 Nl (4 H^2 + 2 H I) T + 4 Nl B L^2 H
                                 + 2 (H^2 + H V) B P           # MLM transform and tied decoder,
                                                               # at the masked positions only
                                 + 2 (H^2 + 2 H) B             # pooler and NSP classifier
    step = 3 * forward         # the backward pass costs twice the forward (input and weight
                               # gradients of every matmul)
         = 6 * Nl (4 H^2 + 2 H I) * T + 12 * Nl * H * L^2 * B
           + 6 (H^2 + H V) B P + 6 (H^2 + 2 H) B

i.e. 6 x (parameters in matmuls) x (tokens through them) plus attention's 12 Nl H L^2 B.
Embedding lookups, biases, LayerNorm, GELU, softmax and dropout are not counted (they are not
matmuls). `tests/unit/test_gpu_speed.py` checks the formula against
`torch.utils.flop_counter.FlopCounterMode` on a tiny model.

MFU = model FLOPs per step / seconds per step / peak, where the peak is MEASURED in the same run:
a square matmul (8192 on CUDA in bf16, 2048 on the CPU in fp32) timed after warm-up (CUDA events
on CUDA), the best of three rounds. MFU is the same formula for both sides, so their MFU ratio is
their speed ratio.

    python benchmarks/gpu_speed.py --out runs/gpu-speed/gpu_speed.json --finetune   # on a GPU
    python benchmarks/gpu_speed.py --tiny --out /tmp/gpu_speed.json                 # CPU, < 1 min
"""

# Shapes: B batch, L sequence length, H hidden_size, I intermediate_size, V vocab,
#         P masked positions per sequence, T = B * L tokens.

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

BENCHMARKS = Path(__file__).resolve().parent
REPO_ROOT = BENCHMARKS.parent
if str(BENCHMARKS) not in sys.path:
    sys.path.insert(0, str(BENCHMARKS))
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench_model import MASK_PROB, MAX_PREDICTIONS, make_pretraining_batch  # noqa: E402

from bertlab.core.config import BertConfig  # noqa: E402
from bertlab.network.bert import BertForPreTraining  # noqa: E402

VOCAB_SIZE = 30522  # bert-base-uncased, as bench_model's batches
PEAK_SIZE = {"cuda": 8192, "cpu": 2048}
TINY_PEAK_SIZE = 512
PEAK_ROUNDS, PEAK_REPEATS = 3, 10
SIDES = ("bertlab", "transformers")
SHIPPED_MINI = REPO_ROOT / "bertlab" / "models" / "mini-reviews-en"
CORPUS = Path(".gpu_data/corpus_reviews_en/imdb_reviews.txt.gz")
SST2 = Path(".gpu_data/glue/SST-2/train.tsv")
TINY_CORPUS = REPO_ROOT / "bertlab" / "demo_data" / "imdb_reviews_slice.txt.gz"
SST2_DEV_ROWS = 872  # the size of SST-2's official dev set
FINETUNE_BATCH, FINETUNE_LEARNING_RATE, FINETUNE_SEQ_LEN, FINETUNE_SEED = 32, 5e-5, 128, 0
PRETRAIN_LOG_EVERY = 10


def import_transformers():
    """transformers, or a one-line exit: it is a test-only dependency of bertlab."""
    try:
        import transformers
    except ImportError:
        sys.exit("gpu_speed.py compares with transformers: pip install transformers")
    return transformers


def transformers_version() -> str | None:
    try:
        import transformers
    except ImportError:
        return None
    return transformers.__version__


# --- FLOPs and the peak ---------------------------------------------------------------------------


def model_flops_per_step(
    config: BertConfig, batch_size: int, seq_len: int, masked_per_sequence: int
) -> float:
    """Training FLOPs of one step by the formula of the module docstring (MLM head at the masked
    positions only)."""
    hidden, inter, layers = config.hidden_size, config.intermediate_size, config.num_hidden_layers
    tokens = batch_size * seq_len
    encoder = 6 * layers * (4 * hidden**2 + 2 * hidden * inter) * tokens
    attention = 12 * layers * hidden * seq_len**2 * batch_size
    mlm_head = 6 * (hidden**2 + hidden * config.vocab_size) * batch_size * masked_per_sequence
    pooler_nsp = 6 * (hidden**2 + 2 * hidden) * batch_size
    return float(encoder + attention + mlm_head + pooler_nsp)


def masked_per_sequence(seq_len: int) -> int:
    """P of bench_model's batches: 15% of the positions, at most 20 (Google's default at 128)."""
    return min(MAX_PREDICTIONS, max(1, round(MASK_PROB * seq_len)))


def mfu(flops_per_step: float, seconds_per_step: float, peak_flops: float) -> float:
    return flops_per_step / seconds_per_step / peak_flops


def measure_peak(device: torch.device, size: int) -> dict[str, Any]:
    """The best FLOP/s of `PEAK_ROUNDS` rounds of `PEAK_REPEATS` square matmuls of `size`, after
    warm-up: bf16 on CUDA, fp32 on the CPU."""
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    a = torch.randn(size, size, device=device, dtype=dtype)
    b = torch.randn(size, size, device=device, dtype=dtype)
    seconds = min(
        time_calls(lambda: torch.mm(a, b), PEAK_REPEATS, device, warmup=3 if r == 0 else 0)
        for r in range(PEAK_ROUNDS)
    )
    return {
        "flops": 2 * size**3 / seconds,
        "dtype": str(dtype).removeprefix("torch."),
        "size": size,
    }


def time_calls(
    call: Callable[[], Any], repeats: int, device: torch.device, warmup: int = 0
) -> float:
    """Seconds per call of `repeats` calls after `warmup` untimed ones: CUDA events on CUDA (after
    a synchronize), the wall clock on the CPU."""
    for _ in range(warmup):
        call()
    if device.type == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize(device)
        start.record()
        for _ in range(repeats):
            call()
        end.record()
        torch.cuda.synchronize(device)
        return start.elapsed_time(end) / 1e3 / repeats
    started = time.perf_counter()
    for _ in range(repeats):
        call()
    return (time.perf_counter() - started) / repeats


# --- the step table -------------------------------------------------------------------------------


def build_model(side: str, config: BertConfig, device: torch.device) -> torch.nn.Module:
    """A freshly initialized pre-training model in train mode (dropout on)."""
    if side == "bertlab":
        model = BertForPreTraining(config)
    else:
        transformers = import_transformers()
        hf_config = transformers.BertConfig(**config.to_dict(), attn_implementation="sdpa")
        model = transformers.BertForPreTraining(hf_config)
    return model.to(device).train()


def time_side(
    side: str,
    config: BertConfig,
    inputs: dict[str, torch.Tensor],
    args: argparse.Namespace,
    device: torch.device,
    compiled: bool,
) -> float:
    """Seconds per training step (forward, backward, fused AdamW step) of one side."""
    torch.manual_seed(0)
    model = build_model(side, config, device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    forward = torch.compile(model) if compiled else model
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32

    def step() -> None:
        with torch.autocast(device.type, dtype=dtype, enabled=device.type == "cuda"):
            loss = forward(**inputs).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return time_calls(step, args.steps, device, warmup=args.warmup)


def free_memory(device: torch.device) -> None:
    """Drop the last model's memory before the next one is built."""
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def step_rows(args: argparse.Namespace, device: torch.device, peak: float) -> list[dict]:
    """One row per size, side and compile setting."""
    rows = []
    generator = torch.Generator().manual_seed(0)
    batch = make_pretraining_batch(args.batch_size, args.seq_len, device, generator)
    masked = batch.masked_positions.shape[1]
    assert masked == masked_per_sequence(args.seq_len)
    inputs = {"bertlab": batch.bertlab_inputs(), "transformers": batch.hf_inputs()}
    for size in args.sizes:
        config = BertConfig.from_preset(size, vocab_size=VOCAB_SIZE)
        flops = model_flops_per_step(config, args.batch_size, args.seq_len, masked)
        for compiled in [False, True] if args.compile else [False]:
            for side in args.sides:
                row: dict[str, Any] = {"size": size, "side": side, "compiled": compiled}
                try:
                    seconds = time_side(side, config, inputs[side], args, device, compiled)
                except (RuntimeError, NotImplementedError) as error:  # OOM, compile failure
                    row["error"] = f"{type(error).__name__}: {error!s:.300}"
                    print(f"  {size} {side}: {row['error']}", flush=True)
                    rows.append(row)
                    continue
                finally:
                    free_memory(device)
                row.update(
                    ms_per_step=seconds * 1e3,
                    tokens_per_s=args.batch_size * args.seq_len / seconds,
                    model_flops_per_step=flops,
                    mfu=mfu(flops, seconds, peak),
                )
                print(
                    f"  {size} {side}{' compiled' if compiled else ''}: "
                    f"{row['ms_per_step']:.1f} ms/step, {row['tokens_per_s']:,.0f} tokens/s, "
                    f"MFU {row['mfu']:.1%}",
                    flush=True,
                )
                rows.append(row)
    return rows


def speedups(rows: list[dict]) -> dict[str, float]:
    """bertlab's speed-up over transformers (their ms/step ratio) per size and compile setting."""
    times = {(r["size"], r["compiled"], r["side"]): r.get("ms_per_step") for r in rows}
    result = {}
    for (size, compiled, side), ours in times.items():
        theirs = times.get((size, compiled, "transformers"))
        if side == "bertlab" and ours and theirs:
            result[size + (" compiled" if compiled else "")] = theirs / ours
    return result


# --- real pre-training ----------------------------------------------------------------------------


def pretrain_rows(args: argparse.Namespace, work: Path) -> list[dict]:
    """`bertlab pretrain` for `--pretrain-steps` steps at each of `--pretrain-sizes`, one after
    the other (sharing one corpus cache), through gpu_check.py's `_pretrain`."""
    from gpu_check import _pretrain, _pretrain_summary

    rows = []
    for size in args.pretrain_sizes:
        out = work / f"pretrain-{size}"
        extra = [
            "--max-steps", str(args.pretrain_steps), "--batch-size", str(args.batch_size),
            "--max-seq-length", str(args.seq_len), "--log-every", str(PRETRAIN_LOG_EVERY),
            "--tokenizer", str(args.tokenizer), "--corpus-cache", str(work / "corpus-cache"),
        ]  # fmt: skip
        started = time.perf_counter()
        code = _pretrain(args.corpus, out, None, size, work, extra).wait()
        row: dict[str, Any] = {"size": size, "exit_code": code}
        row["log"] = str(work / f"pretrain_{out.name}.log")
        row["wall_s"] = time.perf_counter() - started
        summary = _pretrain_summary(out)
        row.update(
            {k: summary[k] for k in ("steps", "tokens", "tokens_per_second") if k in summary}
        )
        row["steady_tokens_per_s"] = steady_tokens_per_second(out / "metrics.jsonl")
        print(
            f"  pretrain {size}: exit {code}, {row.get('steps', 0)} steps, "
            f"{row['steady_tokens_per_s'] or 0:,.0f} tokens/s ({row['wall_s']:.0f} s in all)",
            flush=True,
        )
        rows.append(row)
    return rows


def steady_tokens_per_second(metrics: Path) -> float | None:
    """Tokens per second between the first and the last train record of a metrics.jsonl."""
    if not metrics.is_file():
        return None
    records = [json.loads(line) for line in metrics.read_text(encoding="utf-8").splitlines()]
    train = [r for r in records if r.get("kind") == "train"]
    if len(train) < 2:
        return None
    first, last = train[0], train[-1]
    seconds = last["elapsed_seconds"] - first["elapsed_seconds"]
    return (last["tokens"] - first["tokens"]) / seconds if seconds > 0 else None


# --- fine-tuning: bertlab finetune against the Trainer --------------------------------------------


def write_sst2_split(
    source: Path, work: Path, limit: int | None, dev_size: int = SST2_DEV_ROWS
) -> tuple[Path, Path]:
    """The last `dev_size` rows of `source` as dev, the others (the first `limit`) as train."""
    lines = source.read_text(encoding="utf-8").splitlines()
    header, rows = lines[0], lines[1:]
    train_rows, dev_rows = rows[:-dev_size], rows[-dev_size:]
    train, dev = work / "sst2_train.tsv", work / "sst2_dev.tsv"
    train.write_text("\n".join([header, *train_rows[:limit]]) + "\n", encoding="utf-8")
    dev.write_text("\n".join([header, *dev_rows]) + "\n", encoding="utf-8")
    return train, dev


def bertlab_finetune(model: Path, train: Path, dev: Path, out: Path) -> dict[str, Any]:
    """`bertlab finetune --task sst2` for one epoch in a fresh process; its metrics.jsonl."""
    command = [
        sys.executable, "-m", "bertlab", "finetune", "--task", "sst2", "--train", str(train),
        "--dev", str(dev), "--model", str(model), "--epochs", "1", "--batch-size",
        str(FINETUNE_BATCH), "--learning-rate", str(FINETUNE_LEARNING_RATE), "--max-seq-length",
        str(FINETUNE_SEQ_LEN), "--seed", str(FINETUNE_SEED), "--no-progress", "--overwrite",
        "--out", str(out),
    ]  # fmt: skip
    started = time.perf_counter()
    with (out.parent / "bertlab_finetune.log").open("w") as log:
        code = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT).returncode
    result: dict[str, Any] = {"exit_code": code, "wall_s": time.perf_counter() - started}
    metrics = out / "metrics.jsonl"
    if code == 0 and metrics.is_file():
        records = [json.loads(line) for line in metrics.read_text(encoding="utf-8").splitlines()]
        epoch = [r for r in records if r["kind"] == "eval"][-1]
        result.update(epoch_with_eval_s=epoch["seconds"], dev_accuracy=epoch["accuracy"])
    return result


def trainer_finetune(model_dir: Path, train: Path, dev: Path, out: Path) -> dict[str, Any]:
    """One epoch with transformers' Trainer, set up as run_glue.py: sentences padded to 128."""
    transformers = import_transformers()
    import numpy as np

    started = time.perf_counter()
    tokenizer = transformers.BertTokenizerFast(
        vocab_file=str(model_dir / "vocab.txt"), do_lower_case=True
    )

    def read(path: Path) -> list[dict[str, Any]]:
        rows = [line.split("\t") for line in path.read_text(encoding="utf-8").splitlines()[1:]]
        encoded = tokenizer(
            [row[0] for row in rows],
            padding="max_length",
            max_length=FINETUNE_SEQ_LEN,
            truncation=True,
        )
        return [
            {key: encoded[key][i] for key in encoded} | {"labels": int(rows[i][1])}
            for i in range(len(rows))
        ]

    def accuracy(prediction) -> dict[str, float]:
        predicted = np.argmax(prediction.predictions, axis=-1)
        return {"accuracy": float((predicted == prediction.label_ids).mean())}

    transformers.set_seed(FINETUNE_SEED)
    model = transformers.BertForSequenceClassification.from_pretrained(
        model_dir, num_labels=2, attn_implementation="sdpa"
    )
    cuda = torch.cuda.is_available()
    training_args = transformers.TrainingArguments(
        output_dir=str(out),
        per_device_train_batch_size=FINETUNE_BATCH,
        per_device_eval_batch_size=64,
        learning_rate=FINETUNE_LEARNING_RATE,
        num_train_epochs=1,
        **warmup_share(transformers, 0.1),
        bf16=cuda,
        use_cpu=not cuda,
        optim="adamw_torch_fused",
        save_strategy="no",
        report_to="none",
        seed=FINETUNE_SEED,
        disable_tqdm=True,
    )
    trainer = transformers.Trainer(
        model=model,
        args=training_args,
        train_dataset=read(train),
        eval_dataset=read(dev),
        compute_metrics=accuracy,
    )
    train_s = trainer.train().metrics["train_runtime"]
    evaluated = time.perf_counter()
    metrics = trainer.evaluate()
    eval_s = time.perf_counter() - evaluated
    result = {
        "epoch_s": train_s,
        "epoch_with_eval_s": train_s + eval_s,
        "dev_accuracy": metrics["eval_accuracy"],
        "wall_s": time.perf_counter() - started,
    }
    del trainer, model
    free_memory(torch.device("cuda" if cuda else "cpu"))
    return result


def warmup_share(transformers, share: float) -> dict[str, float]:
    """A warm-up of `share` of the steps: `warmup_ratio` where TrainingArguments has it (4.x),
    else a float `warmup_steps` (5.x)."""
    import dataclasses

    fields = {field.name for field in dataclasses.fields(transformers.TrainingArguments)}
    return {"warmup_ratio": share} if "warmup_ratio" in fields else {"warmup_steps": share}


def finetune_comparison(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    train, dev = write_sst2_split(args.sst2, work, args.finetune_limit, args.finetune_dev_rows)
    rows = len(train.read_text(encoding="utf-8").splitlines()) - 1
    result: dict[str, Any] = {
        "model": str(args.finetune_model),
        "train_rows": rows,
        "dev_rows": args.finetune_dev_rows,
        "batch_size": FINETUNE_BATCH,
        "learning_rate": FINETUNE_LEARNING_RATE,
        "max_seq_length": FINETUNE_SEQ_LEN,
    }
    result["bertlab"] = bertlab_finetune(args.finetune_model, train, dev, work / "finetune-bertlab")
    print(f"  finetune bertlab: {result['bertlab']}", flush=True)
    result["transformers"] = trainer_finetune(
        args.finetune_model, train, dev, work / "finetune-trainer"
    )
    print(f"  finetune transformers Trainer: {result['transformers']}", flush=True)
    return result


# --- the report -----------------------------------------------------------------------------------


def table(result: dict[str, Any]) -> str:
    settings = result["settings"]
    peak = result["peak"]
    lines = [
        f"device: {result['device']}; torch {result['torch']}; peak {peak['flops'] / 1e12:.1f} "
        f"TFLOP/s ({peak['dtype']} {peak['size']}^3 matmul, measured in this run)",
        f"batch {settings['batch_size']} x {settings['seq_len']}, "
        f"{settings['masked_per_sequence']} masked per sequence, {settings['precision']}, "
        f"AdamW fused, dropout on, {settings['warmup']} warm-up + {settings['steps']} timed steps",
        "",
        "| size | side | ms/step | tokens/s | MFU | bertlab speed-up |",
        "|---|---|---:|---:|---:|---:|",
    ]
    speedup = result["speedup"]
    for row in result["rows"]:
        name = row["size"] + (" compiled" if row["compiled"] else "")
        if "error" in row:
            lines.append(f"| {name} | {row['side']} | {row['error'][:60]} | | | |")
            continue
        ratio = f"{speedup[name]:.2f}x" if row["side"] == "bertlab" and name in speedup else ""
        lines.append(
            f"| {name} | {row['side']} | {row['ms_per_step']:.1f} | "
            f"{row['tokens_per_s'] / 1e3:,.1f}k | {row['mfu']:.1%} | {ratio} |"
        )
    if result.get("pretrain"):
        lines += [
            "",
            "| bertlab pretrain | steps | tokens/s (steady) | exit |",
            "|---|---:|---:|---:|",
        ]
        for row in result["pretrain"]:
            steady = row.get("steady_tokens_per_s")
            lines.append(
                f"| {row['size']} | {row.get('steps', 0)} | "
                f"{'-' if steady is None else f'{steady / 1e3:,.1f}k'} | {row['exit_code']} |"
            )
    finetune = result.get("finetune")
    if finetune:
        lines += [
            "",
            f"SST-2, one epoch of {finetune['train_rows']:,} sentences from {finetune['model']}:",
            "| side | epoch s | epoch + dev eval s | dev accuracy | wall s |",
            "|---|---:|---:|---:|---:|",
        ]
        for side in SIDES:
            values = finetune[side]
            cells = [
                _cell(values.get("epoch_s"), ".1f"),
                _cell(values.get("epoch_with_eval_s"), ".1f"),
                _cell(values.get("dev_accuracy"), ".4f"),
                _cell(values.get("wall_s"), ".0f"),
            ]
            lines.append(f"| {side} | {' | '.join(cells)} |")
    return "\n".join(lines)


def _cell(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="base,large", help="BertConfig presets, comma separated")
    parser.add_argument("--sides", default="bertlab,transformers")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--compile", action="store_true", help="also time torch.compile")
    parser.add_argument("--peak-size", type=int, default=None, help="default: 8192 CUDA, 2048 CPU")
    parser.add_argument("--pretrain-sizes", default="mini,base", help="empty: no pretrain rows")
    parser.add_argument("--pretrain-steps", type=int, default=200)
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--tokenizer", type=Path, default=SHIPPED_MINI)
    parser.add_argument("--finetune", action="store_true", help="the SST-2 epoch comparison")
    parser.add_argument("--finetune-model", type=Path, default=SHIPPED_MINI)
    parser.add_argument("--finetune-limit", type=int, default=None, help="SST-2 training rows")
    parser.add_argument("--finetune-dev-rows", type=int, default=SST2_DEV_ROWS)
    parser.add_argument("--sst2", type=Path, default=SST2)
    parser.add_argument("--work", type=Path, default=Path("/tmp/gpu-speed"))
    parser.add_argument("--out", type=Path, default=None, help="JSON file")
    parser.add_argument(
        "--tiny",
        action="store_true",
        help="a CPU smoke test: size tiny, batch 4 x 32, 1 + 2 steps, pretrain tiny for 20 steps "
        "on the demo's review slice, fine-tuning on 64 rows (64 dev rows)",
    )
    args = parser.parse_args(argv)
    if args.tiny:
        args.sizes, args.pretrain_sizes = "tiny", "tiny" if args.pretrain_sizes else ""
        args.batch_size, args.seq_len, args.warmup, args.steps = 4, 32, 1, 2
        args.pretrain_steps, args.peak_size = 20, args.peak_size or TINY_PEAK_SIZE
        args.finetune_limit = args.finetune_limit or 64
        args.finetune_dev_rows = min(args.finetune_dev_rows, 64)
        args.corpus = TINY_CORPUS if args.corpus == CORPUS else args.corpus
    args.sizes = [s for s in args.sizes.split(",") if s]
    args.sides = [s for s in args.sides.split(",") if s]
    args.pretrain_sizes = [s for s in args.pretrain_sizes.split(",") if s]
    return args


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    args.work.mkdir(parents=True, exist_ok=True)
    if "transformers" in args.sides or args.finetune:
        import_transformers()
    peak = measure_peak(device, args.peak_size or PEAK_SIZE[device.type])
    print(
        f"peak: {peak['flops'] / 1e12:.2f} TFLOP/s ({peak['dtype']} {peak['size']}^3)", flush=True
    )
    rows = step_rows(args, device, peak["flops"])
    result: dict[str, Any] = {
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU",
        "torch": torch.__version__,
        "transformers": transformers_version(),
        "settings": {
            "batch_size": args.batch_size,
            "seq_len": args.seq_len,
            "masked_per_sequence": masked_per_sequence(args.seq_len),
            "vocab_size": VOCAB_SIZE,
            "precision": "bf16 autocast" if device.type == "cuda" else "fp32",
            "optimizer": "AdamW fused",
            "dropout": True,
            "warmup": args.warmup,
            "steps": args.steps,
            "compile": args.compile,
        },
        "peak": peak,
        "rows": rows,
        "speedup": speedups(rows),
    }
    if args.pretrain_sizes:
        result["pretrain"] = pretrain_rows(args, args.work)
    if args.finetune:
        result["finetune"] = finetune_comparison(args, args.work)
    text = table(result)
    print(text, flush=True)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return result


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
