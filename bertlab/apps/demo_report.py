"""The demo's report folder: `report.md` and its figures (every one titled, with axis units).

Everything is drawn from the demo's `results.json` and the runs' own files (`metrics.jsonl`,
`test.json`): the report shows what that run measured and nothing else.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

from bertlab.apps.flows import RESULTS_FILE, compare, read_test, seed_dir
from bertlab.atomic import atomic_file, write_text
from bertlab.training.metrics_log import METRICS_FILE, plot_curves, read_metrics

FIGURE_DPI = 110
PRETRAIN_PANELS = (
    ("mlm_loss", "loss (nats per masked token)", "masked-LM loss"),
    ("mlm_accuracy", "accuracy (share of masked tokens)", "masked-LM accuracy"),
    ("nsp_accuracy", "accuracy (share of pairs)", "next-sentence accuracy"),
    ("learning_rate", "learning rate", "learning rate (one-cycle over the budget)"),
)


def write_report(out: Path) -> Path:
    """Figures first, then `report.md` that shows them, from OUT/results.json."""
    result = json.loads((out / RESULTS_FILE).read_text(encoding="utf-8"))
    records = read_metrics(out / "pretrain" / METRICS_FILE)
    plot_curves(
        records,
        PRETRAIN_PANELS,
        out / "pretraining.png",
        f"Pre-training ({result['minutes']:g} min budget)",
        x_key="tokens",
        x_label="tokens seen",
    )
    _plot_finetuning(result, out / "finetuning.png")
    _plot_comparison(result, out / "comparison.png")
    recipe = result["recipe"]
    pretrain = result["pretrain"]
    first, last = pretrain.get("first_eval", {}), pretrain.get("eval", {})
    lines = [
        f"# bertlab demo ({recipe['lang']})",
        "",
        f"Total time {result['timings']['total'] / 60:.1f} min: "
        + ", ".join(f"{k} {v:.0f} s" for k, v in result["timings"].items() if k != "total")
        + ".",
        "",
        "## 1. Vocabulary",
        "",
        f"A {recipe['vocab_size']:,}-piece WordPiece vocabulary trained on `{recipe['corpus']}`.",
        f"`{recipe['example_sentence']}` becomes `{' '.join(result['tokenization'])}`.",
        "",
        "## 2. Pre-training",
        "",
        f"{pretrain['steps']} steps, {pretrain['tokens']:,} tokens in "
        f"{pretrain['seconds'] / 60:.1f} min (MLM + NSP). Held-out masked-LM accuracy "
        f"{first.get('mlm_accuracy', float('nan')):.1%} at the first evaluation, "
        f"{last.get('mlm_accuracy', float('nan')):.1%} at the end; loss "
        f"{first.get('mlm_loss', float('nan')):.2f} -> {last.get('mlm_loss', float('nan')):.2f}.",
        "",
        "![pre-training curves](pretraining.png)",
        "",
        "## 3. Fill-mask (whatever the model predicts)",
        "",
    ]
    for item in result["fill_mask"]:
        shown = ", ".join(f"`{t}` {p:.1%}" for t, p in item["predictions"])
        lines.append(f"- `{item['sentence']}`: {shown}")
    lines += [
        "",
        f"## 4. Fine-tuning on {recipe['task']}: does pre-training transfer?",
        "",
        "Both models have the same shape and the same fine-tuning budget "
        f"({recipe['finetune_epochs']} epochs, learning rate "
        f"{recipe['finetune_learning_rate']:g}, batch {recipe['finetune_batch_size']}); the best "
        "epoch is picked on a dev split of the "
        "training sentences and scored once on the held-out test slice.",
        *results_table(result),
        "",
        _verdict(result),
        "",
        "![fine-tuning curves](finetuning.png)",
        "",
        "![test accuracy](comparison.png)",
        "",
        "## 5. Attention",
        "",
        "![attention map](attention.png)",
        "",
        "## Recipe",
        "",
        "```",
        *(f"{key} = {value}" for key, value in recipe.items()),
        "```",
        "",
    ]
    return write_text(out / "report.md", "\n".join(lines))


def results_table(result: dict[str, Any]) -> list[str]:
    """The final table: test accuracy median and range over the seeds, per model."""
    lines = [
        "",
        f"| {result['recipe']['task']} test accuracy | median | min | max | seeds |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, values in result["scores"].items():
        lines.append(
            f"| {name} | {statistics.median(values):.1%} | {min(values):.1%} | "
            f"{max(values):.1%} | {len(values)} |"
        )
    return lines


def _verdict(result: dict[str, Any]) -> str:
    """What the numbers show, no more: the gap of the medians against the seeds' spread."""
    comparison = compare(result["scores"]["from scratch"], result["scores"]["pre-trained"])
    gap, spread = comparison.margin, comparison.spread
    if comparison.wins:
        return (
            f"Pre-training helped: the median is {gap:.1%} higher, more than the spread between "
            f"seeds ({spread:.1%})."
        )
    if gap > 0:
        return (
            f"The pre-trained model's median is {gap:.1%} higher, but that is within the spread "
            f"between seeds ({spread:.1%}): at this budget the gain is not clearly established."
        )
    return (
        f"Pre-training did not help at this budget: the median is {-gap:.1%} lower or equal "
        f"(seed spread {spread:.1%}). A few CPU-minutes are not much pre-training; try --minutes."
    )


def _plot_finetuning(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    figure, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    colors = {"pre-trained": "tab:blue", "from scratch": "tab:orange"}
    for name, color in colors.items():
        for number, seed in enumerate(result["seeds"]):
            run_dir = seed_dir(path.parent / "finetune", name.replace(" ", "-"), seed)
            records = read_metrics(run_dir / METRICS_FILE)
            train = [r for r in records if r["kind"] == "train"]
            evals = [r for r in records if r["kind"] == "eval"]
            label = name if number == 0 else None
            axes[0].plot(
                [r["step"] for r in train],
                [r["loss"] for r in train],
                color=color,
                alpha=0.6,
                label=label,
            )
            axes[1].plot(
                [r["epoch"] for r in evals],
                [r["accuracy"] for r in evals],
                color=color,
                marker="o",
                alpha=0.6,
                label=label,
            )
    axes[0].set(title="training loss", xlabel="optimizer step", ylabel="loss (nats)")
    axes[1].set(title="dev accuracy after each epoch", xlabel="epoch", ylabel="accuracy")
    for axis in axes:
        axis.grid(alpha=0.3)
        axis.legend()
    figure.suptitle(f"Fine-tuning on {result['recipe']['task']}, one line per seed")
    figure.tight_layout()
    with atomic_file(path) as temporary:
        figure.savefig(temporary, dpi=FIGURE_DPI)
    plt.close(figure)


def _plot_comparison(result: dict[str, Any], path: Path) -> None:
    """Drawn from the runs' own `test.json` files."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    figure, axis = plt.subplots(figsize=(5, 3.6))
    names = list(result["scores"])
    metric = "accuracy"
    for index, name in enumerate(names):
        runs = path.parent / "finetune"
        values = [
            read_test(seed_dir(runs, name.replace(" ", "-"), seed))[metric]
            for seed in result["seeds"]
        ]
        median = statistics.median(values)
        axis.bar(
            index,
            median,
            color=["tab:blue", "tab:orange"][index],
            alpha=0.7,
            yerr=[[median - min(values)], [max(values) - median]],
            capsize=6,
        )
        axis.scatter([index] * len(values), values, color="black", zorder=3, s=12)
    axis.set_xticks(range(len(names)), names)
    low = min(min(v) for v in result["scores"].values())
    axis.set_ylim(max(0.0, low - 0.1), 1.0)
    axis.set(
        title=f"{result['recipe']['task']} test accuracy (median, range, seeds)",
        ylabel="accuracy (share of sentences)",
    )
    axis.grid(alpha=0.3, axis="y")
    figure.tight_layout()
    with atomic_file(path) as temporary:
        figure.savefig(temporary, dpi=FIGURE_DPI)
    plt.close(figure)
