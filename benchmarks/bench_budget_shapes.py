"""Cost of one pre-training step by model shape and vocabulary size: the figures behind the budget
recipe's model and vocabulary (docs/budget.md §2.1).

Run from the repository root, with nothing else running:

    flock /tmp/bertlab-bench.lock .venv/bin/python benchmarks/bench_budget_shapes.py

Each row times `BertForPreTraining` forward + backward + AdamW on a fixed random batch (64 x 128
tokens, 20% of the positions predicted, NSP on, dropout off) for `--seconds` after two warm-up
steps, and prints milliseconds per step, tokens per second and parameters.
"""

from __future__ import annotations

import argparse
import time

import torch

from bertlab.core.config import BertConfig
from bertlab.network.bert import BertForPreTraining

SHAPES = ((2, 128, 2), (4, 128, 2), (2, 256, 4), (4, 256, 4))  # layers, hidden, heads
MASKED_SHARE = 0.2


def step_cost(
    layers: int, hidden: int, heads: int, vocab: int, batch: int, length: int, seconds: float
):
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=vocab,
        num_hidden_layers=layers,
        hidden_size=hidden,
        num_attention_heads=heads,
        intermediate_size=4 * hidden,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    model = BertForPreTraining(config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    predicted = int(length * MASKED_SHARE)
    input_ids = torch.randint(5, vocab, (batch, length))
    positions = torch.stack([torch.randperm(length)[:predicted] for _ in range(batch)])
    labels = torch.randint(5, vocab, (batch, predicted))
    next_sentence = torch.randint(0, 2, (batch,))
    mask, types = torch.ones_like(input_ids), torch.zeros_like(input_ids)

    def step() -> None:
        output = model(input_ids, mask, types, positions, labels, next_sentence)
        output.loss.backward()
        optimizer.step()
        optimizer.zero_grad()

    for _ in range(2):
        step()
    steps, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        step()
        steps += 1
    per_step = (time.perf_counter() - started) / steps
    parameters = sum(p.numel() for p in model.parameters())
    return per_step, batch * length / per_step, parameters


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=8.0, help="timed seconds per row")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--length", type=int, default=128)
    args = parser.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    print("| layers x hidden | vocabulary | ms per step | tokens/s | parameters |")
    print("|---|---:|---:|---:|---:|")
    rows = [(2, 128, 2, 16000)] + [(*shape, 8000) for shape in SHAPES]
    for layers, hidden, heads, vocab in rows:
        per_step, speed, parameters = step_cost(
            layers, hidden, heads, vocab, args.batch, args.length, args.seconds
        )
        print(
            f"| {layers} x {hidden} | {vocab:,} | {per_step * 1000:,.0f} | {speed:,.0f} | "
            f"{parameters / 1e6:.2f}M |"
        )


if __name__ == "__main__":
    main()
