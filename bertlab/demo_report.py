"""The demo's report folder: `report.md` and its figures (every one titled, with axis units)."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import TYPE_CHECKING

from bertlab.training.metrics_log import plot_curves, read_metrics

if TYPE_CHECKING:
    from bertlab.demo import DemoResult

FIGURE_DPI = 110
PRETRAIN_PANELS = (
    ("mlm_loss", "loss (nats per masked token)", "masked-LM loss"),
    ("mlm_accuracy", "accuracy (share of masked tokens)", "masked-LM accuracy"),
    ("nsp_accuracy", "accuracy (share of pairs)", "next-sentence accuracy"),
    ("learning_rate", "learning rate", "learning rate (one-cycle over the budget)"),
)


def write_report(result: DemoResult, out: Path) -> Path:
    """Figures first, then `report.md` that shows them."""
    from bertlab.demo import RESULTS_FILE, recipe_dict, results_table

    results = {
        "recipe": recipe_dict(result.recipe),
        "minutes": result.minutes,
        "seeds": list(result.seeds),
        "pretrain": result.pretrain,
        "scores": result.scores,
        "timings": result.timings,
    }
    (out / RESULTS_FILE).write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    records = read_metrics(out / "pretrain" / "metrics.jsonl")
    plot_curves(
        records,
        PRETRAIN_PANELS,
        out / "pretraining.png",
        f"Pre-training ({result.minutes:g} min budget)",
        x_key="tokens",
        x_label="tokens seen",
    )
    _plot_finetuning(result, out / "finetuning.png")
    _plot_comparison(result, out / "comparison.png")
    recipe = result.recipe
    pretrain = result.pretrain
    first, last = pretrain.get("first_eval", {}), pretrain.get("eval", {})
    lines = [
        f"# bertlab demo ({recipe.lang})",
        "",
        f"Total time {result.timings['total'] / 60:.1f} min: "
        + ", ".join(f"{k} {v:.0f} s" for k, v in result.timings.items() if k != "total")
        + ".",
        "",
        "## 1. Vocabulary",
        "",
        f"A {recipe.vocab_size:,}-piece WordPiece vocabulary trained on `{recipe.corpus}`.",
        f"`{recipe.example_sentence}` becomes `{' '.join(result.tokenization)}`.",
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
    for item in result.fill_mask:
        shown = ", ".join(f"`{t}` {p:.1%}" for t, p in item["predictions"])
        lines.append(f"- `{item['sentence']}`: {shown}")
    lines += [
        "",
        f"## 4. Fine-tuning on {recipe.task}: does pre-training transfer?",
        "",
        "Both models have the same shape and the same fine-tuning budget "
        f"({recipe.finetune_epochs} epochs, learning rate {recipe.finetune_learning_rate:g}, "
        f"batch {recipe.finetune_batch_size}); the best epoch is picked on a dev split of the "
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
        *(f"{key} = {value}" for key, value in recipe_dict(recipe).items()),
        "```",
        "",
    ]
    path = out / "report.md"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def _verdict(result: DemoResult) -> str:
    """What the numbers show, no more: the gap of the medians against the seeds' spread."""
    pretrained, scratch = result.scores["pre-trained"], result.scores["from scratch"]
    gap = statistics.median(pretrained) - statistics.median(scratch)
    spread = max(max(pretrained) - min(pretrained), max(scratch) - min(scratch))
    if gap > spread:
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


def _plot_finetuning(result: DemoResult, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    figure, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    colors = {"pre-trained": "tab:blue", "from scratch": "tab:orange"}
    for name, color in colors.items():
        for number, seed in enumerate(result.seeds):
            seed_dir = path.parent / "finetune" / name.replace(" ", "-") / f"seed-{seed}"
            records = read_metrics(seed_dir / "metrics.jsonl")
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
    figure.suptitle(f"Fine-tuning on {result.recipe.task}, one line per seed")
    figure.tight_layout()
    figure.savefig(path, dpi=FIGURE_DPI)
    plt.close(figure)


def _plot_comparison(result: DemoResult, path: Path) -> None:
    """Drawn from the runs' own `test.json` files."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    from bertlab.demo import TEST_FILE

    figure, axis = plt.subplots(figsize=(5, 3.6))
    names = list(result.scores)
    metric = "accuracy"
    for index, name in enumerate(names):
        values = [
            json.loads(
                (
                    path.parent / "finetune" / name.replace(" ", "-") / f"seed-{seed}" / TEST_FILE
                ).read_text(encoding="utf-8")
            )[metric]
            for seed in result.seeds
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
    low = min(min(v) for v in result.scores.values())
    axis.set_ylim(max(0.0, low - 0.1), 1.0)
    axis.set(
        title=f"{result.recipe.task} test accuracy (median, range, seeds)",
        ylabel="accuracy (share of sentences)",
    )
    axis.grid(alpha=0.3, axis="y")
    figure.tight_layout()
    figure.savefig(path, dpi=FIGURE_DPI)
    plt.close(figure)
