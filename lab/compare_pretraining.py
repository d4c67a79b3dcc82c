"""Compare pre-training runs: a table of their last held-out evaluation and throughput, and their
held-out MLM loss and accuracy against tokens seen on shared axes.

    python lab/compare_pretraining.py --out docs/figures/budget_vs_naive.png \\
        recipe=runs/transfer-en/pretrain naive=runs/naive

Each RUN is LABEL=DIRECTORY, a `bertlab pretrain --out` directory (its metrics.jsonl is read).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bertlab.training.metrics_log import read_metrics


def _runs(specs: list[str]) -> dict[str, list[dict]]:
    runs = {}
    for spec in specs:
        label, _, directory = spec.partition("=")
        path = Path(directory) / "metrics.jsonl"
        if not label or not directory or not path.is_file():
            raise SystemExit(
                f"compare_pretraining: expected LABEL=RUN_DIR with a metrics.jsonl: {spec}"
            )
        runs[label] = read_metrics(path)
    return runs


def summary(runs: dict[str, list[dict]]) -> list[str]:
    lines = [
        "| run | minutes | steps | tokens | tokens/s | held-out MLM loss | held-out MLM accuracy |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for label, records in runs.items():
        train = [r for r in records if r["kind"] == "train"]
        evals = [r for r in records if r["kind"] == "eval"]
        if not train or not evals:
            lines.append(f"| {label} | – | – | – | – | – | – |")
            continue
        last, last_eval = train[-1], evals[-1]
        speed = last["tokens"] / last["elapsed_seconds"]
        lines.append(
            f"| {label} | {last['elapsed_seconds'] / 60:.1f} | {last['step']:,} | "
            f"{last['tokens'] / 1e6:.2f}M | {speed:,.0f} | {last_eval['mlm_loss']:.3f} | "
            f"{last_eval['mlm_accuracy']:.1%} |"
        )
    return lines


def plot(runs: dict[str, list[dict]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for label, records in runs.items():
        evals = [r for r in records if r["kind"] == "eval"]
        tokens = [r["tokens"] / 1e6 for r in evals]
        axes[0].plot(tokens, [r["mlm_loss"] for r in evals], marker=".", label=label)
        axes[1].plot(tokens, [r["mlm_accuracy"] for r in evals], marker=".", label=label)
    for axis, name in zip(axes, ("held-out MLM loss (nats)", "held-out MLM accuracy"), strict=True):
        axis.set_xlabel("tokens seen (millions)")
        axis.set_ylabel(name)
        axis.grid(alpha=0.3)
        axis.legend(fontsize=8)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=120)
    plt.close(figure)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", help="LABEL=RUN_DIR")
    parser.add_argument("--out", type=Path, help="PNG of the curves (default: no figure)")
    args = parser.parse_args(argv)
    runs = _runs(args.runs)
    for line in summary(runs):
        print(line)
    if args.out:
        plot(runs, args.out)
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
