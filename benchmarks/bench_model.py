"""Speed of bertlab against `transformers` BERT, measured in one process on the same batches.

Run from the repository root:

    python benchmarks/bench_model.py           # tiny, mini, small, base (~15 min on 2 cores)
    python benchmarks/bench_model.py --quick   # tiny + mini, default variants only (~2 min)

Three measurements, each printed as a markdown table (and written with `--json OUT`):

1. Pre-training step: forward + backward + AdamW step at sequence length 128, batch 32 (8 for base),
   15% masked positions (P = 20 per sequence, Google's `max_predictions_per_seq` at length 128) and
   NSP. bertlab predicts only the masked positions (`masked_positions`, as Google's BERT);
   `transformers.BertForPreTraining` predicts every position with labels -100 elsewhere, which is
   how it computes the masked-LM loss. Each side runs every variant it supports (fp32 or bf16
   autocast, AdamW fused or foreach, HF attention "sdpa" or "eager", `torch.compile` with
   `--compile`) and the fastest of each is compared. Both sides keep the config's dropout; a "no
   dropout" row repeats the fastest variants with all dropout off, since attention dropout rules
   out the fused SDPA kernels.
2. Inference, equal precision: fp32 `BertModel` eval forward under `torch.inference_mode()` on a
   fixed batch of random ids, 32 x 128.
3. Inference on real sentences: SST-2 train sentences, batch 32. `transformers` is used the usual
   way (corpus order, padding to the batch's longest, fp32); bertlab sorts by length first (bf16
   autocast only where bf16 matmuls are faster than fp32 here). Tokenization is not timed.

FLOPs of one training step (each side counts what it computes), with T = B * L tokens,
M = B * P predicted tokens for bertlab (M = T for transformers), H hidden, I intermediate, V vocab,
Nl layers:

    matmul_params_per_token = Nl * (4 H^2 + 2 H I)   # Q, K, V, output; two feed-forward layers
    encoder    = 6 * matmul_params_per_token * T     # 2 (multiply-add) x 3 (forward, 2 backward)
    attention  = 6 * Nl * 2 * B * L^2 * H            # Q K^T and probs V, forward + backward
    mlm_head   = 6 * (H^2 + H V) * M                 # transform dense, tied decoder
    nsp_pooler = 6 * (H^2 + 2 H) * B
    flops      = encoder + attention + mlm_head + nsp_pooler

Model FLOPs utilization (MFU) is flops / step time / peak, where peak is this machine's matmul
peak for the step's precision: measured in the same run with a 2048 x 2048 `torch.mm`, and the
reference constants below.
"""

# Shapes: B batch, L sequence length, H hidden_size, N attention heads, D = H // N head size,
#         I intermediate_size, V vocab, C labels, K choices, P masked positions per sequence.

from __future__ import annotations

import argparse
import contextlib
import csv
import dataclasses
import json
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from bertlab.core.config import BertConfig
from bertlab.network.bert import BertForPreTraining, BertModel

try:
    import transformers
except ImportError:
    transformers = None

REPO_ROOT = Path(__file__).resolve().parent.parent
VOCAB_SIZE = 30522  # bert-base-uncased
SEQ_LEN = 128  # BERT paper §A.2: 90% of pre-training steps at length 128
MASK_PROB = 0.15  # BERT paper §3.1: 15% of WordPiece tokens are masked
# Google BERT create_pretraining_data.py: max_predictions_per_seq for length 128.
MAX_PREDICTIONS = 20
TRAIN_BATCH = {"tiny": 32, "mini": 32, "small": 32, "medium": 32, "base": 8, "large": 8}
INFERENCE_BATCH = 32
# Matmul peaks measured on the 2-core development machine (AMD EPYC, AVX2) with torch.mm at 2048:
# the figures quoted in the benchmark issue. Each run also measures and prints its own.
REFERENCE_PEAK_FLOPS = {torch.float32: 165e9, torch.bfloat16: 405e9}
PEAK_MATMUL_SIZE = {"cpu": 2048, "cuda": 8192}
BF16_FALLBACK_SIZE = 256
# bf16 variants are skipped when a bf16 matmul runs slower than this fraction of fp32 (CPUs without
# AVX512_BF16 or AMX fall back to a scalar bf16 GEMM, hundreds of times slower than fp32).
BF16_USEFUL_RATIO = 0.5
DROPOUT_FIELDS = ("hidden_dropout_prob", "attention_probs_dropout_prob")
SST2_TRAIN = REPO_ROOT.parent / "shared/data/glue/SST-2/train.tsv"
VOCAB_FILE = REPO_ROOT.parent / "shared/data/vocab/bert-base-uncased-vocab.txt"
PRECISIONS = {"fp32": torch.float32, "bf16": torch.bfloat16}


# --- machine ------------------------------------------------------------------------------------


def synchronize(device: torch.device) -> None:
    """Wait for queued device work, so wall-clock times cover it."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure_matmul_peak(
    device: torch.device, dtype: torch.dtype, size: int | None = None, repeats: int = 5
) -> float:
    """FLOP/s of the best of `repeats` square matmuls (2 n^3 FLOPs each) in `dtype`."""
    size = size or PEAK_MATMUL_SIZE[device.type]
    a = torch.randn(size, size, device=device).to(dtype)
    b = torch.randn(size, size, device=device).to(dtype)
    a @ b  # warm-up: first call pays for kernel selection and page faults
    synchronize(device)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        a @ b
        synchronize(device)
        best = min(best, time.perf_counter() - start)
    return 2 * size**3 / best


def measure_peaks(device: torch.device) -> dict[str, float]:
    """Measured matmul FLOP/s by precision name."""
    peaks = {"fp32": measure_matmul_peak(device, torch.float32)}
    if device.type == "cpu" and not torch.ops.mkldnn._is_mkldnn_bf16_supported():
        # No AVX512_BF16 or AMX: bf16 GEMMs take a scalar fallback that needs about a minute at
        # the full size, so measure it on a small matrix.
        peaks["bf16"] = measure_matmul_peak(device, torch.bfloat16, size=BF16_FALLBACK_SIZE)
    else:
        peaks["bf16"] = measure_matmul_peak(device, torch.bfloat16)
    return peaks


def autocast(device: torch.device, precision: str) -> contextlib.AbstractContextManager:
    """bf16 autocast, or nothing for fp32."""
    if precision == "fp32":
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=PRECISIONS[precision])


# --- models and batches -------------------------------------------------------------------------


def bertlab_config(size: str, use_dropout: bool = True) -> BertConfig:
    """A preset at bert-base-uncased vocabulary size, dropout off when not `use_dropout`."""
    config = BertConfig.from_preset(size, vocab_size=VOCAB_SIZE)
    if not use_dropout:
        config = config.replace(**dict.fromkeys(DROPOUT_FIELDS, 0.0))
    return config


def hf_config(config: BertConfig, attn_implementation: str) -> Any:
    """The same architecture as a `transformers.BertConfig`."""
    return transformers.BertConfig(**config.to_dict(), attn_implementation=attn_implementation)


@dataclass
class PretrainingBatch:
    """One pre-training batch in both layouts.

    input_ids, token_type_ids, attention_mask: (B, L) int64. masked_positions, masked_labels:
    (B, P) int64. dense_labels: (B, L) int64, -100 except at the masked positions.
    next_sentence_label: (B,) int64.
    """

    input_ids: torch.Tensor
    token_type_ids: torch.Tensor
    attention_mask: torch.Tensor
    masked_positions: torch.Tensor
    masked_labels: torch.Tensor
    dense_labels: torch.Tensor
    next_sentence_label: torch.Tensor

    def bertlab_inputs(self) -> dict[str, torch.Tensor]:
        return {
            "input_ids": self.input_ids,
            "attention_mask": self.attention_mask,
            "token_type_ids": self.token_type_ids,
            "masked_positions": self.masked_positions,
            "labels": self.masked_labels,
            "next_sentence_label": self.next_sentence_label,
        }

    def hf_inputs(self) -> dict[str, torch.Tensor]:
        return {
            "input_ids": self.input_ids,
            "attention_mask": self.attention_mask,
            "token_type_ids": self.token_type_ids,
            "labels": self.dense_labels,
            "next_sentence_label": self.next_sentence_label,
        }


def make_pretraining_batch(
    batch_size: int, seq_len: int, device: torch.device, generator: torch.Generator
) -> PretrainingBatch:
    """Random ids, segments A|B split at a random point, 15% masked positions (never [CLS])."""
    num_masked = min(MAX_PREDICTIONS, max(1, round(MASK_PROB * seq_len)))
    input_ids = torch.randint(1, VOCAB_SIZE, (batch_size, seq_len), generator=generator)
    split = torch.randint(1, seq_len, (batch_size, 1), generator=generator)
    token_type_ids = (torch.arange(seq_len) >= split).long()  # (B, L)
    scores = torch.rand(batch_size, seq_len - 1, generator=generator)
    masked_positions = scores.topk(num_masked, dim=1).indices + 1  # (B, P), distinct, skips [CLS]
    masked_labels = torch.randint(1, VOCAB_SIZE, masked_positions.shape, generator=generator)
    dense_labels = torch.full_like(input_ids, -100).scatter(1, masked_positions, masked_labels)
    batch = PretrainingBatch(
        input_ids=input_ids,
        token_type_ids=token_type_ids,
        attention_mask=torch.ones_like(input_ids),
        masked_positions=masked_positions,
        masked_labels=masked_labels,
        dense_labels=dense_labels,  # (B, L)
        next_sentence_label=torch.randint(0, 2, (batch_size,), generator=generator),
    )
    return PretrainingBatch(**{k: v.to(device) for k, v in dataclasses.asdict(batch).items()})


def training_flops(config: BertConfig, batch_size: int, seq_len: int, predicted: int) -> float:
    """FLOPs of one training step by the formula in the module docstring."""
    hidden, inter = config.hidden_size, config.intermediate_size
    layers, tokens = config.num_hidden_layers, batch_size * seq_len
    encoder = 6 * layers * (4 * hidden**2 + 2 * hidden * inter) * tokens
    attention = 6 * layers * 2 * batch_size * seq_len**2 * hidden
    mlm_head = 6 * (hidden**2 + hidden * config.vocab_size) * predicted
    nsp_pooler = 6 * (hidden**2 + 2 * hidden) * batch_size
    return float(encoder + attention + mlm_head + nsp_pooler)


# --- pre-training step --------------------------------------------------------------------------


@dataclass(frozen=True)
class Variant:
    """One way to run a side's training step."""

    side: str  # "bertlab" or "transformers"
    precision: str  # "fp32" or "bf16"
    optimizer: str  # "fused" or "foreach" AdamW
    attention: str  # "sdpa" or "eager" (bertlab: always its SDPA fast path)
    compiled: bool
    use_dropout: bool = True

    def label(self) -> str:
        parts = [self.precision, f"AdamW {self.optimizer}", self.attention]
        if self.compiled:
            parts.append("compile")
        if not self.use_dropout:
            parts.append("no dropout")
        return ", ".join(parts)


def build_model(variant: Variant, size: str, device: torch.device) -> torch.nn.Module:
    """A freshly initialized pre-training model for `variant`, in train mode."""
    config = bertlab_config(size, variant.use_dropout)
    if variant.side == "bertlab":
        model = BertForPreTraining(config)
    else:
        model = transformers.BertForPreTraining(hf_config(config, variant.attention))
    return model.to(device).train()


def time_training(
    variant: Variant, size: str, batch: PretrainingBatch, args: argparse.Namespace
) -> list[float]:
    """Seconds per step of `args.steps` timed steps after `args.warmup` untimed ones."""
    device = batch.input_ids.device
    torch.manual_seed(0)
    model = build_model(variant, size, device)
    use_fused = variant.optimizer == "fused"
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=1e-4, fused=use_fused, foreach=not use_fused
    )
    forward = torch.compile(model) if variant.compiled else model
    inputs = batch.bertlab_inputs() if variant.side == "bertlab" else batch.hf_inputs()
    times = []
    for step in range(args.warmup + args.steps):
        synchronize(device)
        start = time.perf_counter()
        with autocast(device, variant.precision):
            loss = forward(**inputs).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        synchronize(device)
        if step >= args.warmup:
            times.append(time.perf_counter() - start)
    return times


def training_variants(
    side: str, precisions: list[str], use_compile: bool, use_all: bool
) -> list[Variant]:
    """Every combination a side supports, fastest-guess first; only the first unless `use_all`."""
    attentions = ["sdpa"] if side == "bertlab" else ["sdpa", "eager"]
    compiles = [False, True] if use_compile else [False]
    variants = [
        Variant(side, precision, optimizer, attention, compiled)
        for compiled in compiles
        for precision in precisions
        for attention in attentions
        for optimizer in ("fused", "foreach")
    ]
    return variants if use_all else variants[:1]


def bench_training_size(
    size: str, precisions: list[str], peaks: dict[str, float], args: argparse.Namespace
) -> list[dict[str, Any]]:
    """Every variant of both sides at one size, then the no-dropout rerun of each side's best."""
    device = torch.device(args.device)
    batch_size = TRAIN_BATCH[size]
    generator = torch.Generator().manual_seed(0)
    batch = make_pretraining_batch(batch_size, SEQ_LEN, device, generator)
    config = bertlab_config(size)
    predicted = {
        "bertlab": batch.masked_positions.numel(),
        "transformers": batch_size * SEQ_LEN,
    }
    sides = ["bertlab"] + (["transformers"] if transformers is not None else [])
    rows = []
    for side in sides:
        side_rows = [
            measure_variant(v, size, batch, config, predicted[side], peaks, args)
            for v in training_variants(side, precisions, args.compile, not args.quick)
        ]
        side_rows = [row for row in side_rows if row is not None]
        best = min(side_rows, key=lambda row: row["seconds"])
        best["is_best"] = True
        no_dropout = dataclasses.replace(best["variant"], use_dropout=False)
        row = measure_variant(no_dropout, size, batch, config, predicted[side], peaks, args)
        rows += side_rows + ([row] if row is not None else [])
    return rows


def measure_variant(
    variant: Variant,
    size: str,
    batch: PretrainingBatch,
    config: BertConfig,
    predicted: int,
    peaks: dict[str, float],
    args: argparse.Namespace,
) -> dict[str, Any] | None:
    """Time one variant and derive tokens/s and MFU; None (with a message) if it cannot run."""
    try:
        times = time_training(variant, size, batch, args)
    except (RuntimeError, NotImplementedError) as error:  # e.g. a compile backend failure
        print(f"  {size} {variant.side} [{variant.label()}]: skipped ({error!s:.200})", flush=True)
        return None
    seconds = statistics.median(times)
    tokens = batch.input_ids.numel()
    flops = training_flops(config, *batch.input_ids.shape, predicted)
    dtype = PRECISIONS[variant.precision]
    row = {
        "size": size,
        "variant": variant,
        "seconds": seconds,
        "tokens_per_s": tokens / seconds,
        "tflops": flops / 1e12,
        "mfu_measured": flops / seconds / peaks[variant.precision],
        "mfu_reference": flops / seconds / REFERENCE_PEAK_FLOPS[dtype],
        "is_best": False,
    }
    print(
        f"  {size:5s} {variant.side:12s} [{variant.label()}]: {seconds * 1e3:8.1f} ms/step, "
        f"{row['tokens_per_s']:8.0f} tokens/s, MFU {row['mfu_measured']:.0%}",
        flush=True,
    )
    return row


# --- inference ----------------------------------------------------------------------------------


def build_encoder(side: str, size: str, device: torch.device, attention: str = "sdpa") -> Any:
    """`BertModel` (with pooler) in eval mode; both sides share bertlab's initial weights."""
    config = bertlab_config(size)
    torch.manual_seed(0)
    ours = BertModel(config)
    if side == "bertlab":
        return ours.to(device).eval()
    reference = transformers.BertModel(hf_config(config, attention))
    reference.load_state_dict(ours.state_dict(), strict=True)
    return reference.to(device).eval()


def time_forward(
    model: Any,
    batches: list[dict[str, torch.Tensor]],
    precision: str,
    repeats: int,
    device: torch.device,
) -> float:
    """Median seconds over `repeats` passes over `batches`, after a warm-up batch of each shape.

    CPU kernels are prepared per input shape on first use, so the warm-up covers every shape
    (otherwise whichever side runs first pays that cost inside its timed pass).
    """
    with torch.inference_mode(), autocast(device, precision):
        warmed = set()
        for inputs in batches:
            if tuple(inputs["input_ids"].shape) not in warmed:
                warmed.add(tuple(inputs["input_ids"].shape))
                model(**inputs)
        totals = []
        for _ in range(repeats):
            synchronize(device)
            start = time.perf_counter()
            for inputs in batches:
                model(**inputs)
            synchronize(device)
            totals.append(time.perf_counter() - start)
    return statistics.median(totals)


def bench_fixed_batch(size: str, args: argparse.Namespace) -> list[dict[str, Any]]:
    """fp32 eval forward of one random (32, 128) batch: bertlab and each HF attention.

    The sides alternate forward by forward, so that a drift in the machine's speed hits all alike.
    """
    device = torch.device(args.device)
    generator = torch.Generator().manual_seed(0)
    input_ids = torch.randint(1, VOCAB_SIZE, (INFERENCE_BATCH, SEQ_LEN), generator=generator)
    inputs = {
        "input_ids": input_ids.to(device),
        "attention_mask": torch.ones_like(input_ids).to(device),
    }
    runs = [("bertlab", "sdpa")]
    if transformers is not None:
        runs += [("transformers", "sdpa"), ("transformers", "eager")]
    models = [build_encoder(side, size, device, attention) for side, attention in runs]
    times: list[list[float]] = [[] for _ in runs]
    with torch.inference_mode():
        for model in models:
            model(**inputs)  # warm-up
        for _ in range(max(args.steps, 3)):
            for model, seconds in zip(models, times, strict=True):
                synchronize(device)
                start = time.perf_counter()
                model(**inputs)
                synchronize(device)
                seconds.append(time.perf_counter() - start)
    rows = []
    for (side, attention), seconds in zip(runs, times, strict=True):
        median = statistics.median(seconds)
        rows.append(
            {
                "size": size,
                "side": side,
                "attention": attention,
                "seconds": median,
                "tokens_per_s": input_ids.numel() / median,
            }
        )
        print(
            f"  {size:5s} {side:12s} fp32 {attention:5s}: {median * 1e3:8.1f} ms/batch", flush=True
        )
    return rows


def read_sst2(path: Path, limit: int) -> list[str]:
    """The first `limit` sentences of the SST-2 train split (column `sentence`)."""
    with path.open(encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE)
        sentences = [row["sentence"] for row, _ in zip(reader, range(limit), strict=False)]
    return sentences


def tokenize(sentences: list[str]) -> list[list[int]]:
    """[CLS] WordPiece ids [SEP] with bert-base-uncased's vocabulary (not timed)."""
    from tokenizers import BertWordPieceTokenizer

    tokenizer = BertWordPieceTokenizer(str(VOCAB_FILE), lowercase=True)
    return [encoding.ids for encoding in tokenizer.encode_batch(sentences)]


def padded_batches(
    ids: list[list[int]], batch_size: int, device: torch.device
) -> list[dict[str, torch.Tensor]]:
    """Consecutive batches, each padded (id 0) to its own longest sequence."""
    batches = []
    for start in range(0, len(ids), batch_size):
        chunk = ids[start : start + batch_size]
        longest = max(len(sequence) for sequence in chunk)
        input_ids = torch.zeros(len(chunk), longest, dtype=torch.long)
        attention_mask = torch.zeros(len(chunk), longest, dtype=torch.long)
        for row, sequence in enumerate(chunk):
            input_ids[row, : len(sequence)] = torch.tensor(sequence)
            attention_mask[row, : len(sequence)] = 1
        batches.append(
            {"input_ids": input_ids.to(device), "attention_mask": attention_mask.to(device)}
        )
    return batches


def bench_sentences(
    size: str, ids: list[list[int]], precisions: list[str], args: argparse.Namespace
) -> list[dict[str, Any]]:
    """Sentences/s on SST-2: HF in corpus order (fp32), bertlab in corpus and in length order."""
    device = torch.device(args.device)
    corpus_order = padded_batches(ids, INFERENCE_BATCH, device)
    length_order = padded_batches(sorted(ids, key=len), INFERENCE_BATCH, device)
    runs = [("bertlab", "corpus order", corpus_order, "fp32")]
    runs += [("bertlab", "sorted by length", length_order, p) for p in precisions]
    if transformers is not None:
        runs.insert(0, ("transformers", "corpus order", corpus_order, "fp32"))
    rows = []
    for side, order, batches, precision in runs:
        model = build_encoder(side, size, device)
        seconds = time_forward(model, batches, precision, args.passes, device)
        padded = sum(batch["input_ids"].numel() for batch in batches)
        rows.append(
            {
                "size": size,
                "side": side,
                "order": order,
                "precision": precision,
                "seconds": seconds,
                "sentences_per_s": len(ids) / seconds,
                "padded_tokens": padded,
            }
        )
        print(
            f"  {size:5s} {side:12s} {order:16s} {precision}: {len(ids) / seconds:8.0f} "
            f"sentences/s ({padded} padded tokens)",
            flush=True,
        )
    return rows


# --- report -------------------------------------------------------------------------------------

TRAINING_TARGETS = {"mini": 4.0, "base": 1.7}  # the benchmark issue's speed-up targets
SENTENCE_TARGET = 1.5  # SST-2 inference speed-up target over transformers used the usual way


def markdown_table(header: list[str], rows: list[list[Any]]) -> str:
    """A GitHub markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def training_tables(rows: list[dict[str, Any]]) -> str:
    """All variants measured, then the best of each side per size with the ratio."""
    every = [
        [
            r["size"],
            r["variant"].side,
            r["variant"].label(),
            f"{r['seconds'] * 1e3:.0f}",
            f"{r['tokens_per_s']:.0f}",
            f"{r['tflops']:.3f}",
            f"{r['mfu_measured']:.0%}",
            f"{r['mfu_reference']:.0%}",
            "**best**" if r["is_best"] else "",
        ]
        for r in rows
    ]
    header = [
        "size",
        "side",
        "variant",
        "ms/step",
        "tokens/s",
        "TFLOP/step",
        "MFU (peak measured now)",
        "MFU (reference peak)",
        "",
    ]
    summary = []
    for size in dict.fromkeys(r["size"] for r in rows):
        best = {r["variant"].side: r for r in rows if r["size"] == size and r["is_best"]}
        no_dropout = {
            r["variant"].side: r for r in rows if r["size"] == size and not r["variant"].use_dropout
        }
        summary.append(
            [
                size,
                *summary_cells(best),
                *summary_cells(no_dropout),
                f">= {TRAINING_TARGETS[size]}x" if size in TRAINING_TARGETS else "",
            ]
        )
    summary_header = [
        "size",
        "bertlab tokens/s (best variant)",
        "transformers tokens/s (best)",
        "ratio",
        "no dropout: bertlab",
        "no dropout: transformers",
        "ratio",
        "target",
    ]
    return (
        markdown_table(summary_header, summary)
        + "\n\nAll variants measured:\n\n"
        + markdown_table(header, every)
    )


def summary_cells(by_side: dict[str, dict[str, Any]]) -> list[str]:
    """tokens/s (variant) for each side, and the bertlab / transformers ratio."""
    cells = []
    for side in ("bertlab", "transformers"):
        row = by_side.get(side)
        cells.append(f"{row['tokens_per_s']:.0f} ({row['variant'].label()})" if row else "n/a")
    if len(by_side) == 2:
        ratio = by_side["bertlab"]["tokens_per_s"] / by_side["transformers"]["tokens_per_s"]
        cells.append(f"**{ratio:.2f}x**")
    else:
        cells.append("n/a")
    return cells


def fixed_batch_table(rows: list[dict[str, Any]]) -> str:
    """fp32 inference, one (32, 128) batch: ms per batch and bertlab's speed-up."""
    table = []
    for size in dict.fromkeys(r["size"] for r in rows):
        by_run = {(r["side"], r["attention"]): r["seconds"] for r in rows if r["size"] == size}
        ours = by_run[("bertlab", "sdpa")]
        theirs = [by_run.get(("transformers", a)) for a in ("sdpa", "eager")]
        cells = [f"{t * 1e3:.1f}" if t else "n/a" for t in theirs]
        fastest = min((t for t in theirs if t), default=None)
        ratio = f"**{fastest / ours:.2f}x**" if fastest else "n/a"
        table.append([size, f"{ours * 1e3:.1f}", *cells, ratio])
    header = [
        "size",
        "bertlab ms/batch",
        "transformers sdpa ms",
        "transformers eager ms",
        "ratio vs fastest transformers (target >= 1.0x)",
    ]
    return markdown_table(header, table)


def sentence_table(rows: list[dict[str, Any]]) -> str:
    """SST-2 sentences/s for each run and the best bertlab run over transformers."""
    table = []
    for size in dict.fromkeys(r["size"] for r in rows):
        runs = [r for r in rows if r["size"] == size]
        reference = next((r for r in runs if r["side"] == "transformers"), None)
        for r in runs:
            ratio = (
                f"{r['sentences_per_s'] / reference['sentences_per_s']:.2f}x" if reference else ""
            )
            table.append(
                [
                    size,
                    r["side"],
                    r["order"],
                    r["precision"],
                    r["padded_tokens"],
                    f"{r['sentences_per_s']:.0f}",
                    ratio,
                ]
            )
    header = [
        "size",
        "side",
        "batch order",
        "precision",
        "padded tokens",
        "sentences/s",
        f"vs transformers (target >= {SENTENCE_TARGET}x)",
    ]
    return markdown_table(header, table)


def jsonable(value: Any) -> Any:
    """Rows with `Variant`s and dtypes made JSON-friendly."""
    if isinstance(value, Variant):
        return dataclasses.asdict(value) | {"label": value.label()}
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [jsonable(v) for v in value]
    return value


# --- profile ------------------------------------------------------------------------------------


def profile_bertlab(size: str, precision: str, args: argparse.Namespace) -> None:
    """Print the operators where bertlab's fp32 training step spends its time (3 steps)."""
    from torch.profiler import ProfilerActivity, profile

    device = torch.device(args.device)
    batch = make_pretraining_batch(
        TRAIN_BATCH[size], SEQ_LEN, device, torch.Generator().manual_seed(0)
    )
    torch.manual_seed(0)
    model = BertForPreTraining(bertlab_config(size)).to(device).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)

    def step() -> None:
        with autocast(device, precision):
            loss = model(**batch.bertlab_inputs()).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    step()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities) as profiler:
        for _ in range(3):
            step()
    sort_by = "self_cuda_time_total" if device.type == "cuda" else "self_cpu_time_total"
    print(f"\nProfile of bertlab's training step, {size}, {precision} (3 steps):")
    print(profiler.key_averages().table(sort_by=sort_by, row_limit=25))


# --- main ---------------------------------------------------------------------------------------


FULL_DEFAULTS = {
    "sizes": "tiny,mini,small,base",
    "inference_sizes": "mini,base",
    "steps": 3,
    "warmup": 1,
    "sentences": 4096,
}
QUICK_DEFAULTS = {
    "sizes": "tiny,mini",
    "inference_sizes": "mini",
    "steps": 2,
    "warmup": 1,
    "sentences": 512,
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", help="training sizes (default tiny,mini,small,base)")
    parser.add_argument("--inference-sizes", help="inference sizes (default mini,base)")
    parser.add_argument("--steps", type=int, help="timed steps per variant, median (default 3)")
    parser.add_argument("--warmup", type=int, help="untimed steps per variant (default 1)")
    parser.add_argument("--sentences", type=int, help="SST-2 sentences to encode (default 4096)")
    parser.add_argument("--passes", type=int, default=1, help="timed passes over the sentences")
    parser.add_argument("--compile", action="store_true", help="also try torch.compile (slow)")
    parser.add_argument(
        "--force-bf16",
        action="store_true",
        help="try bf16 even where bf16 matmuls are slower than fp32",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="print a torch.profiler table of bertlab's step at each size",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="~2 minutes: tiny + mini, fp32 fused AdamW and SDPA only, 2 steps, 512 sentences",
    )
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    parser.add_argument("--json", type=Path, help="also write every result to this file")
    args = parser.parse_args(argv)
    # Flags given explicitly win over the defaults of either mode.
    for name, value in (QUICK_DEFAULTS if args.quick else FULL_DEFAULTS).items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    return args


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    if transformers is None:
        print("transformers is not installed: measuring bertlab alone (pip install -e '.[dev]').")
    peaks = measure_peaks(device)
    precisions = [
        p for p in PRECISIONS if args.force_bf16 or peaks[p] >= BF16_USEFUL_RATIO * peaks["fp32"]
    ]
    print(
        f"torch {torch.__version__}, transformers "
        f"{transformers.__version__ if transformers else 'absent'}, device {device}, "
        f"{torch.get_num_threads()} threads"
    )
    print(
        "matmul peak measured now: "
        + ", ".join(f"{p} {f / 1e9:.1f} GFLOP/s" for p, f in peaks.items())
        + " (reference: fp32 165, bf16 405 GFLOP/s)"
    )
    if "bf16" not in precisions:
        print(
            "bf16 matmuls are slower than fp32 on this device (no native bf16 units): bf16 "
            "variants skipped; --force-bf16 runs them anyway."
        )
    results: dict[str, Any] = {"peaks": peaks, "args": {k: str(v) for k, v in vars(args).items()}}
    print("\n## Pre-training step")
    results["training"] = [
        row
        for size in args.sizes.split(",")
        for row in bench_training_size(size, precisions, peaks, args)
    ]
    print("\n## Inference, fp32, one random batch 32 x 128")
    inference_sizes = args.inference_sizes.split(",")
    results["fixed_batch"] = [
        row for size in inference_sizes for row in bench_fixed_batch(size, args)
    ]
    print(f"\n## Inference, first {args.sentences} SST-2 train sentences, batch {INFERENCE_BATCH}")
    ids = tokenize(read_sst2(SST2_TRAIN, args.sentences))
    results["sentences"] = [
        row for size in inference_sizes for row in bench_sentences(size, ids, precisions, args)
    ]
    if args.profile:
        for size in args.sizes.split(","):
            profile_bertlab(size, precisions[-1], args)
    print("\n## Results\n\n### Pre-training step (seq 128; batch 32, base 8)\n")
    print(training_tables(results["training"]))
    print("\n### Inference, fp32, one batch 32 x 128\n")
    print(fixed_batch_table(results["fixed_batch"]))
    print(f"\n### Inference, SST-2 train sentences (first {len(ids)}), batch {INFERENCE_BATCH}\n")
    print(sentence_table(results["sentences"]))
    if args.json:
        args.json.write_text(json.dumps(jsonable(results), indent=2) + "\n", encoding="utf-8")
    return results


if __name__ == "__main__":
    main()
