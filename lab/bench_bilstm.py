"""The feature-based heads' BiLSTM (BERT Sec. 5.3): `feature_heads.BiLSTM` over the padded batch
against `nn.LSTM(bidirectional=True)` over a packed batch, what the heads ran before.

Forward and backward of a two-layer BiLSTM (128 units per direction, BERT-Tiny's width, unless
`--hidden`) on a batch of 32 whose lengths spread as a length-grouped batch's do, at a CoNLL-2003
sentence's length and at a SQuAD window's. Both sides start from the same weights and run in this
process, alternating, for each thread count; medians of `--repeats`, and the ratio.

    flock /tmp/bertlab-bench.lock .venv/bin/python lab/bench_bilstm.py
"""

# Shapes: B batch, L sequence length, H hidden units per direction.

from __future__ import annotations

import argparse
import functools
import statistics
import time

import torch
from torch import nn

from bertlab.network.feature_head_config import NUM_LSTM_LAYERS
from bertlab.network.feature_heads import BiLSTM

SHAPES = {"CoNLL-2003 sentence": (24, 18), "SQuAD window": (256, 200)}  # (L, shortest length)


def packed_lstm(lstm: nn.LSTM, inputs: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """The head before: nn.LSTM over the packed batch, padded back. (B, L, H_in) -> (B, L, 2H)."""
    packed = nn.utils.rnn.pack_padded_sequence(
        inputs, lengths, batch_first=True, enforce_sorted=False
    )
    output, _ = lstm(packed)
    output, _ = nn.utils.rnn.pad_packed_sequence(
        output, batch_first=True, total_length=inputs.shape[1]
    )
    return output


def step_seconds(forward) -> float:
    """One forward and backward pass."""
    start = time.perf_counter()
    forward().sum().backward()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hidden", type=int, default=128, help="units per direction and input")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=9, help="timed steps per side (median)")
    parser.add_argument("--threads", default="2,1", help="thread counts to run, comma-separated")
    args = parser.parse_args()

    print("| shape | threads | nn.LSTM packed, ms | BiLSTM padded, ms | speed-up |")
    print("|---|---:|---:|---:|---:|")
    for threads in (int(t) for t in args.threads.split(",")):
        torch.set_num_threads(threads)
        for name, (length, shortest) in SHAPES.items():
            torch.manual_seed(0)
            reference = nn.LSTM(
                args.hidden, args.hidden, NUM_LSTM_LAYERS, batch_first=True, bidirectional=True
            )
            bilstm = BiLSTM(args.hidden, args.hidden, NUM_LSTM_LAYERS)
            bilstm.load_state_dict(reference.state_dict())
            inputs = torch.randn(args.batch, length, args.hidden, requires_grad=True)
            lengths = torch.randint(shortest, length + 1, (args.batch,))  # (B,)
            lengths[0] = length

            sides = {
                "before": functools.partial(packed_lstm, reference, inputs, lengths),
                "after": functools.partial(bilstm, inputs, lengths),
            }
            times: dict[str, list[float]] = {side: [] for side in sides}
            for repeat in range(args.repeats + 1):  # alternating, one step each; the first warms up
                for side, forward in sides.items():
                    elapsed = step_seconds(forward)
                    if repeat:
                        times[side].append(elapsed)
            old, new = (1000 * statistics.median(times[side]) for side in ("before", "after"))
            print(f"| {name} (L {length}) | {threads} | {old:.0f} | {new:.0f} | {old / new:.2f}x |")


if __name__ == "__main__":
    main()
