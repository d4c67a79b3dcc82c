"""Cost of one pre-training step of the LSTM-era networks' CPU presets against BERT-mini's masked
LM, measured in the same run: the speed table of the LSTM era (issue 72, Deliver 4).

Run from the repository root, with nothing else running:

    flock /tmp/bertlab-bench.lock .venv/bin/python benchmarks/bench_lstm_era.py
    flock /tmp/bertlab-bench.lock .venv/bin/python benchmarks/bench_lstm_era.py --flush-denormal

Every side is forward + backward + gradient clipping at 1.0 + AdamW (`build_optimizer`, as the
pre-training loop builds it) on a fixed random batch of 32 x 128 pieces over an 8,000-piece
vocabulary, fp32, in training mode with each network's own dropouts:

- bert-mini: `BertForPreTraining` (BertConfig's mini preset, 4 x 256) predicting `--mask` of the
  positions (no NSP; the budget recipe's masked LM).
- nnlm, elmo, awd-lstm: `NnlmConfig.cpu()`, `ElmoConfig.cpu()` (WordPiece input) and
  `AwdLstmConfig.cpu()`, each predicting every next piece (ELMo: and every previous piece) over
  the full softmax; AWD-LSTM's loss includes its AR and TAR terms.

Tokens/s counts the batch's pieces (32 x 128). The sides alternate for `--rounds` rounds of
`--seconds` each in one process, since this machine's speed drifts between runs; the table gives
each side's median and the ratio of its tokens/s to BERT-mini's. `--flush-denormal` runs with
`torch.set_flush_denormal(True)`, to see whether denormal numbers slow any step; after the
rounds, each side's subnormal float32 values (in its weights and AdamW states) are counted.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from bertlab.core.config import BertConfig
from bertlab.core.lstm_config import AwdLstmConfig, ElmoConfig, NnlmConfig
from bertlab.network.awd_lstm import AwdLstmForLanguageModeling
from bertlab.network.bert import BertForPreTraining
from bertlab.network.elmo import ElmoForLanguageModeling
from bertlab.network.lm_base import next_piece_labels
from bertlab.network.nnlm import NnlmForLanguageModeling
from bertlab.training.optim import build_optimizer

VOCAB = 8000  # the budget recipe's vocabulary
LEARNING_RATE = 1e-4  # any: the step's cost does not depend on it
MAX_GRAD_NORM = 1.0  # the pre-training loop's clipping


def cpu_model() -> str:
    """The CPU's model name as lscpu gives it."""
    try:
        lines = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return "unknown CPU"
    names = [line.split(":", 1)[1].strip() for line in lines.splitlines() if "Model name" in line]
    return names[0] if names else "unknown CPU"


@dataclass
class Side:
    """One side of the comparison: its step, and the model and optimizer the step trains."""

    step: Callable[[], None]
    model: nn.Module
    optimizer: torch.optim.Optimizer


def bert_step(batch: int, length: int, mask: float) -> Side:
    """BERT-mini's masked-LM step (as benchmarks/bench_objectives.py builds it)."""
    torch.manual_seed(0)
    model = BertForPreTraining(BertConfig.from_preset("mini", vocab_size=VOCAB)).train()
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
    return optimizer_step(model, lambda: model(**inputs).loss)


def lstm_step(model: nn.Module, batch: int, length: int) -> Side:
    """A language model's step over every next piece of a random batch."""
    input_ids = torch.randint(5, VOCAB, (batch, length))  # (B, L)
    labels = next_piece_labels(input_ids, None)

    def loss() -> torch.Tensor:
        output = model(input_ids, labels=labels, output_logits=False)
        total = output.loss
        for term in ("activation_regularization", "temporal_activation_regularization"):
            if getattr(output, term, None) is not None:
                total = total + getattr(output, term)
        return total

    return optimizer_step(model.train(), loss)


def optimizer_step(model: nn.Module, loss: Callable[[], torch.Tensor]) -> Side:
    optimizer = build_optimizer(model, LEARNING_RATE)

    def step() -> None:
        loss().backward()
        nn.utils.clip_grad_norm_(model.parameters(), MAX_GRAD_NORM)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    for _ in range(2):  # warm-up
        step()
    return Side(step, model, optimizer)


def subnormals(side: Side) -> str:
    """The side's subnormal float32 values now: in its weights and AdamW states."""

    def count(tensors) -> int:
        tiny = torch.finfo(torch.float32).tiny
        return sum(int(((t != 0) & (t.abs() < tiny)).sum()) for t in tensors if t is not None)

    parameters = list(side.model.parameters())
    states = [
        value
        for state in side.optimizer.state.values()
        for value in state.values()
        if torch.is_tensor(value) and value.is_floating_point() and value.dim() > 0
    ]
    return (
        f"weights {count(p.detach() for p in parameters)}, AdamW states {count(states)} "
        f"(of {sum(p.numel() for p in parameters):,} parameters)"
    )


def timed(step: Callable[[], None], seconds: float) -> float:
    """Seconds per step over about `seconds` (at least one step)."""
    steps, started = 0, time.perf_counter()
    while steps == 0 or time.perf_counter() - started < seconds:
        step()
        steps += 1
    return (time.perf_counter() - started) / steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=10.0, help="timed seconds per side")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--length", type=int, default=128)
    parser.add_argument("--mask", type=float, default=0.4, help="BERT's share of masked positions")
    parser.add_argument("--flush-denormal", action="store_true", help="flush denormals to zero")
    args = parser.parse_args()
    flushing = torch.set_flush_denormal(args.flush_denormal) and args.flush_denormal
    print(
        f"{cpu_model()}; torch {torch.__version__}, {torch.get_num_threads()} threads, "
        f"denormals {'flushed' if flushing else 'kept'}; {args.rounds} rounds of "
        f"{args.seconds:g} s; batch {args.batch} x {args.length}, vocabulary {VOCAB:,}, fp32"
    )
    torch.manual_seed(0)
    steps = {
        "bert-mini (mlm)": bert_step(args.batch, args.length, args.mask),
        "nnlm cpu": lstm_step(
            NnlmForLanguageModeling(NnlmConfig.cpu(vocab_size=VOCAB)), args.batch, args.length
        ),
        "elmo cpu (wordpiece)": lstm_step(
            ElmoForLanguageModeling(ElmoConfig.cpu(vocab_size=VOCAB)), args.batch, args.length
        ),
        "awd-lstm cpu": lstm_step(
            AwdLstmForLanguageModeling(AwdLstmConfig.cpu(vocab_size=VOCAB)), args.batch, args.length
        ),
    }
    times: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(args.rounds):
        for name, side in steps.items():
            times[name].append(timed(side.step, args.seconds))
    tokens = args.batch * args.length
    medians = {name: statistics.median(values) for name, values in times.items()}
    reference = tokens / medians["bert-mini (mlm)"]
    print("| network | ms per step (median; min-max) | tokens/s | vs bert-mini |")
    print("|---|---:|---:|---:|")
    for name, values in times.items():
        speed = tokens / medians[name]
        print(
            f"| {name} | {medians[name] * 1000:,.0f} ({min(values) * 1000:,.0f}-"
            f"{max(values) * 1000:,.0f}) | {speed:,.0f} | {speed / reference:.2f}x |"
        )
    print("subnormal float32 values after the rounds:")
    for name, side in steps.items():
        print(f"- {name}: {subnormals(side)}")


if __name__ == "__main__":
    main()
