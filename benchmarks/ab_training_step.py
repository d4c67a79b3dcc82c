"""Interleaved A/B: bertlab against transformers, alternating steps or passes in one process.

On a shared or virtual machine the speed drifts between runs; alternating the two sides gives both
the same conditions. Training step: fp32, fused AdamW on both sides, transformers with SDPA
attention, sequence length 128, 15% masked positions (P = 20) and NSP; batch 32 (8 for base).
With `--sentences N`: inference passes over the first N SST-2 train sentences, batch 32,
transformers in corpus order against bertlab in corpus order and grouped by length.

    .venv/bin/python benchmarks/ab_training_step.py --sizes mini,base --steps 5
    .venv/bin/python benchmarks/ab_training_step.py --sizes mini --sentences 2048
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from bench_model import (
    SEQ_LEN,
    SST2_TRAIN,
    TRAIN_BATCH,
    Variant,
    build_encoder,
    build_model,
    make_pretraining_batch,
    padded_batches,
    read_sst2,
    tokenize,
)

SENTENCE_BATCH = 32
DROPOUT_SETTINGS = {"both": (True, False), "on": (True,), "off": (False,)}


def make_steps(size: str, use_dropout: bool):
    """One training-step closure per side, on the same batch (bench_model.py's builders)."""
    device = torch.device("cpu")
    batch = make_pretraining_batch(
        TRAIN_BATCH[size], SEQ_LEN, device, torch.Generator().manual_seed(0)
    )
    steps = []
    for side, inputs in (("bertlab", batch.bertlab_inputs()), ("transformers", batch.hf_inputs())):
        torch.manual_seed(0)
        model = build_model(
            Variant(side, "fp32", "fused", "sdpa", False, use_dropout), size, device
        )
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)

        def step(model=model, optimizer=optimizer, inputs=inputs) -> None:
            loss = model(**inputs).loss
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()

        steps.append(step)
    return steps[0], steps[1], batch.input_ids.numel()


def ab_sentences(size: str, count: int, passes: int) -> None:
    """Alternating inference passes over SST-2 sentences (helpers shared with bench_model.py)."""
    device = torch.device("cpu")
    ids = tokenize(read_sst2(SST2_TRAIN, count))
    corpus_order = padded_batches(ids, SENTENCE_BATCH, device)
    grouped = padded_batches(sorted(ids, key=len), SENTENCE_BATCH, device)
    ours, reference = (
        build_encoder("bertlab", size, device),
        build_encoder("transformers", size, device),
    )
    runs = {
        "transformers, corpus order": (reference, corpus_order),
        "bertlab, corpus order": (ours, corpus_order),
        "bertlab, grouped by length": (ours, grouped),
    }

    def seconds(model, batches) -> float:
        start = time.perf_counter()
        with torch.inference_mode():
            for inputs in batches:
                model(**inputs)
        return time.perf_counter() - start

    for model, batches in runs.values():
        seconds(model, batches)  # warm-up: CPU kernels are prepared per input shape
    for _ in range(passes):
        times = {name: seconds(*run) for name, run in runs.items()}
        reference_s = times["transformers, corpus order"]
        print(
            f"{size:5s} SST-2 x{len(ids)}: "
            + ", ".join(
                f"{name} {len(ids) / t:.0f}/s ({reference_s / t:.2f}x)" for name, t in times.items()
            ),
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="mini,base", help="comma-separated preset names")
    parser.add_argument(
        "--dropout",
        choices=sorted(DROPOUT_SETTINGS),
        default="both",
        help="with the config's dropout (0.1), without, or both",
    )
    parser.add_argument("--steps", type=int, default=5, help="timed steps per side (median)")
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    parser.add_argument("--sentences", type=int, help="measure inference on N SST-2 sentences")
    parser.add_argument("--passes", type=int, default=3, help="alternating inference passes")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {args.threads} threads, fp32")
    if args.sentences:
        for size in args.sizes.split(","):
            ab_sentences(size, args.sentences, args.passes)
        return
    for size in args.sizes.split(","):
        for use_dropout in DROPOUT_SETTINGS[args.dropout]:
            ours_step, reference_step, tokens = make_steps(size, use_dropout)
            ours_step(), reference_step()  # warm-up
            ours_times, reference_times = [], []
            for _ in range(args.steps):
                for step, times in ((ours_step, ours_times), (reference_step, reference_times)):
                    start = time.perf_counter()
                    step()
                    times.append(time.perf_counter() - start)
            ours_s, reference_s = statistics.median(ours_times), statistics.median(reference_times)
            setting = "dropout 0.1" if use_dropout else "no dropout"
            print(
                f"{size:5s} {setting:11s}: bertlab {tokens / ours_s:7.0f} tokens/s, "
                f"transformers {tokens / reference_s:7.0f} tokens/s, "
                f"ratio {reference_s / ours_s:.2f}x",
                flush=True,
            )


if __name__ == "__main__":
    main()
