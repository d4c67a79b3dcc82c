"""Interleaved A/B of one pre-training step: bertlab against transformers, alternating steps.

On a shared or virtual machine the speed drifts between runs; alternating the two sides' steps in
one process gives both the same conditions. fp32, fused AdamW on both sides, transformers with
SDPA attention, sequence length 128, 15% masked positions (P = 20) and NSP; batch 32 (8 for base).

    .venv/bin/python benchmarks/ab_training_step.py --sizes mini,base --steps 5
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="mini,base", help="comma-separated preset names")
    parser.add_argument("--dropouts", default="0.1,0.0", help="dropout settings to measure")
    parser.add_argument("--steps", type=int, default=5, help="timed steps per side (median)")
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {args.threads} threads, fp32")
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
