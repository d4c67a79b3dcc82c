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

from bertlab.config import BertConfig
from bertlab.modeling import BertForPreTraining

VOCAB_SIZE = 30522  # bert-base-uncased
SEQ_LEN = 128
MAX_PREDICTIONS = 20  # Google's max_predictions_per_seq at length 128 (15% of 128, rounded)
SENTENCE_BATCH = 32
BATCH = {"tiny": 32, "mini": 32, "small": 32, "medium": 32, "base": 8, "large": 8}


def make_steps(size: str, dropout: float):
    """One training-step closure per side, on the same batch and the same initial weights."""
    import transformers

    batch = BATCH[size]
    config = BertConfig.from_preset(
        size,
        vocab_size=VOCAB_SIZE,
        hidden_dropout_prob=dropout,
        attention_probs_dropout_prob=dropout,
    )
    generator = torch.Generator().manual_seed(0)
    input_ids = torch.randint(1000, VOCAB_SIZE, (batch, SEQ_LEN), generator=generator)
    positions = torch.stack(
        [
            torch.randperm(SEQ_LEN - 1, generator=generator)[:MAX_PREDICTIONS] + 1
            for _ in range(batch)
        ]
    )  # (B, P), never [CLS]
    labels = input_ids.gather(1, positions)  # (B, P)
    dense_labels = torch.full((batch, SEQ_LEN), -100).scatter_(1, positions, labels)  # (B, L)
    next_sentence = torch.randint(0, 2, (batch,), generator=generator)

    ours = BertForPreTraining(config).train()
    values = {k: v for k, v in config.to_dict().items() if k not in ("is_causal", "model_type")}
    reference = transformers.BertForPreTraining(
        transformers.BertConfig(**values, attn_implementation="sdpa")
    ).train()
    reference.load_state_dict(ours.state_dict(), strict=True)
    ours_optimizer = torch.optim.AdamW(ours.parameters(), lr=1e-4, fused=True)
    reference_optimizer = torch.optim.AdamW(reference.parameters(), lr=1e-4, fused=True)

    def ours_step() -> None:
        output = ours(
            input_ids, masked_positions=positions, labels=labels, next_sentence_label=next_sentence
        )
        ours_optimizer.zero_grad(set_to_none=True)
        output.loss.backward()
        ours_optimizer.step()

    def reference_step() -> None:
        output = reference(input_ids, labels=dense_labels, next_sentence_label=next_sentence)
        reference_optimizer.zero_grad(set_to_none=True)
        output.loss.backward()
        reference_optimizer.step()

    return ours_step, reference_step, batch * SEQ_LEN


def ab_sentences(size: str, count: int, passes: int) -> None:
    """Alternating inference passes over SST-2 sentences (helpers shared with bench_model.py)."""
    from bench_model import SST2_TRAIN, build_encoder, padded_batches, read_sst2, tokenize

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
    parser.add_argument("--dropouts", default="0.1,0.0", help="dropout settings to measure")
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
        for dropout in (float(d) for d in args.dropouts.split(",")):
            ours_step, reference_step, tokens = make_steps(size, dropout)
            ours_step(), reference_step()  # warm-up
            ours_times, reference_times = [], []
            for _ in range(args.steps):
                for step, times in ((ours_step, ours_times), (reference_step, reference_times)):
                    start = time.perf_counter()
                    step()
                    times.append(time.perf_counter() - start)
            ours_s, reference_s = statistics.median(ours_times), statistics.median(reference_times)
            print(
                f"{size:5s} dropout {dropout:.1f}: bertlab {tokens / ours_s:7.0f} tokens/s, "
                f"transformers {tokens / reference_s:7.0f} tokens/s, "
                f"ratio {reference_s / ours_s:.2f}x",
                flush=True,
            )


if __name__ == "__main__":
    main()
