"""Two ways to keep DistributedDataParallel from waiting for the gradients of weights that an
objective never trains (masked LM: the pooler and the NSP head), timed in two processes:

- `frozen` (what the loop does): those modules take no gradient while the run trains, and DDP
  expects a gradient for every other parameter;
- `search`: everything requires a gradient and DDP searches each step's graph for the unused
  parameters (`find_unused_parameters=True`); the model leaves those heads out of the graph.

    python lab/ddp_unused.py --rounds 3 -- --corpus wiki.txt --tokenizer tok \\
        --model-size mini --max-seq-length 128 --batch-size 16 --objective mlm --max-steps 60

Each round runs both arms (alternating which goes first) under `torchrun --standalone
--nproc_per_node 2` into a fresh folder and prints the training tokens a second of each, read
from its metrics.jsonl (training time only, the first log window left out).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ARMS = ("frozen", "search")


def _run_arm(arm: str, args: list[str]) -> None:
    """Inside torchrun: `bertlab` with the loop's DDP as `arm` says."""
    from torch.nn.parallel import DistributedDataParallel

    from bertlab.cli import main
    from bertlab.network.bert import BertForPreTraining
    from bertlab.training.pretraining import loop as pretrain_loop

    if arm == "search":
        pretrain_loop.frozen_untrained_modules = lambda model, modules: contextlib.nullcontext()
        pretrain_loop.DistributedDataParallel = lambda module: DistributedDataParallel(
            module, find_unused_parameters=True
        )
        forward = BertForPreTraining.forward

        def without_nsp_head(self, *inputs, **kwargs):  # the heads out of the graph
            output = forward(self, *inputs, **kwargs)
            output.nsp_logits = output.nsp_logits.detach()
            return output

        BertForPreTraining.forward = without_nsp_head
    sys.exit(main(args))


def _tokens_per_second(out: Path) -> float:
    """Training tokens a second after the first log window (which warms up)."""
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    train = [record for record in records if record["kind"] == "train"]
    first, last = train[0], train[-1]
    return (last["tokens"] - first["tokens"]) / (last["elapsed_seconds"] - first["elapsed_seconds"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arm", choices=ARMS, help=argparse.SUPPRESS)  # inside torchrun
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("pretrain", nargs=argparse.REMAINDER, help="-- then pretrain's flags")
    options = parser.parse_args()
    flags = [flag for flag in options.pretrain if flag != "--"]
    if options.arm:
        _run_arm(options.arm, ["pretrain", *flags])
    results: dict[str, list[float]] = {arm: [] for arm in ARMS}
    for round_number in range(options.rounds):
        order = ARMS if round_number % 2 == 0 else ARMS[::-1]
        for arm in order:
            with tempfile.TemporaryDirectory() as directory:
                out = Path(directory) / "run"
                command = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
                command += ["--nproc_per_node", "2", __file__, "--arm", arm, "--"]
                command += [*flags, "--no-progress", "--log-every", "10", "--out", str(out)]
                subprocess.run(command, check=True, capture_output=True)
                results[arm].append(_tokens_per_second(out))
        line = ", ".join(f"{arm} {results[arm][-1]:,.0f}" for arm in ARMS)
        print(f"round {round_number + 1}: tokens/s {line}", flush=True)
    for arm in ARMS:
        values = sorted(results[arm])
        median = values[len(values) // 2]
        print(f"{arm}: median {median:,.0f} tokens/s ({values[0]:,.0f}-{values[-1]:,.0f})")


if __name__ == "__main__":
    main()
