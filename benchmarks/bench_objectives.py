"""Cost of one pre-training step by objective: ELECTRA against masked LM at the budget recipe's
60-minute shape, the "tokens/s of each objective" of docs/pretraining.md's ELECTRA section.

Run from the repository root, with nothing else running:

    flock /tmp/bertlab-bench.lock .venv/bin/python benchmarks/bench_objectives.py

Both sides are BERT-mini (4 x 256) over an 8,000-piece vocabulary, a fixed random batch of
32 x 128 tokens, dropout off, forward + backward + gradient clipping + AdamW as the pre-training
loop builds it (`build_optimizer`: the fused kernel, weight decay on the weight matrices):

- mlm: `BertForPreTraining` predicting `--mask` of the positions (no NSP: the recipe packs).
- electra: `ElectraForPreTraining` with its defaults (a generator of 1/4 the width, lambda 50):
  the generator predicts the same positions, samples replacements, and the discriminator scores
  every position.

The sides alternate for `--rounds` rounds of `--seconds` each in one process, since this machine's
speed drifts between runs; the table gives each side's median, and the ratio of the medians.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch
from torch import nn

from bertlab.core.config import BertConfig
from bertlab.network.bert import BertForPreTraining
from bertlab.network.electra import ElectraForPreTraining
from bertlab.training.optim import build_optimizer

VOCAB = 8000  # the budget recipe's vocabulary


def make_step(objective: str, batch: int, length: int, mask: float) -> Callable[[], None]:
    """One optimizer step of `objective` on a fixed random batch."""
    torch.manual_seed(0)
    config = BertConfig.from_preset(
        "mini", vocab_size=VOCAB, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0
    )
    model = ElectraForPreTraining(config) if objective == "electra" else BertForPreTraining(config)
    optimizer = build_optimizer(model, 1e-4)
    predicted = round(length * mask)
    inputs = {
        "input_ids": torch.randint(5, VOCAB, (batch, length)),  # (B, L)
        "attention_mask": torch.ones(batch, length, dtype=torch.int64),
        "token_type_ids": torch.zeros(batch, length, dtype=torch.int64),
        "masked_positions": torch.stack(  # (B, P), never [CLS] at 0
            [torch.randperm(length - 1)[:predicted] + 1 for _ in range(batch)]
        ),
        "labels": torch.randint(5, VOCAB, (batch, predicted)),  # (B, P)
    }

    def step() -> None:
        model(**inputs).loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    for _ in range(2):  # warm-up
        step()
    return step


def timed(step: Callable[[], None], seconds: float) -> float:
    """Seconds per step over about `seconds`."""
    steps, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        step()
        steps += 1
    return (time.perf_counter() - started) / steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=10.0, help="timed seconds per side")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--length", type=int, default=128)
    parser.add_argument("--mask", type=float, default=0.4, help="share of positions masked")
    args = parser.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {args.rounds} rounds")
    steps = {
        name: make_step(name, args.batch, args.length, args.mask) for name in ("mlm", "electra")
    }
    times: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(args.rounds):
        for name, step in steps.items():
            times[name].append(timed(step, args.seconds))
    tokens = args.batch * args.length
    medians = {name: statistics.median(values) for name, values in times.items()}
    print("| objective | ms per step (median; min-max) | tokens/s | vs mlm |")
    print("|---|---:|---:|---:|")
    for name, values in times.items():
        print(
            f"| {name} | {medians[name] * 1000:,.0f} ({min(values) * 1000:,.0f}-"
            f"{max(values) * 1000:,.0f}) | {tokens / medians[name]:,.0f} | "
            f"{medians[name] / medians['mlm']:.2f}x |"
        )


if __name__ == "__main__":
    main()
