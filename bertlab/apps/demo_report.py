"""The demo's report folder: `report.md` and its figures (every one titled, with axis units).

Everything is drawn from the demo's `results.json` and the runs' own files (`metrics.jsonl`,
`test.json`): the report shows what that run measured and nothing else.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

from bertlab.apps.flows import (
    RESULTS_FILE,
    one_class_mark,
    one_class_note,
    read_test,
    seed_dir,
)
from bertlab.atomic import atomic_file, write_text
from bertlab.training.metrics_log import METRICS_FILE, plot_curves, read_metrics

FIGURE_DPI = 110
COLORS = {"pre-trained": "tab:blue", "word vectors": "tab:green", "from scratch": "tab:orange"}
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
    vectors = result["word_vectors"]
    first, last = pretrain.get("first_eval", {}), pretrain.get("eval", {})
    lines = [
        f"# bertlab demo ({recipe['lang']}): pre-training on text of the task's own kind",
        "",
        f"Total time {result['timings']['total'] / 60:.1f} min: "
        + ", ".join(f"{k} {v:.0f} s" for k, v in result["timings"].items() if k != "total")
        + ".",
        "",
        "## 1. Vocabulary",
        "",
        f"A {recipe['vocab_size']:,}-piece WordPiece vocabulary trained on `{recipe['corpus']}` "
        "(unlabeled text of the kind the task is about).",
        f"`{recipe['example_sentence']}` becomes `{' '.join(result['tokenization'])}`.",
        "",
        "## 2. Pre-training",
        "",
        f"{pretrain['recipe']}: {pretrain['steps']} steps, {pretrain['tokens']:,} tokens in "
        f"{pretrain['seconds'] / 60:.1f} min. Held-out masked-LM accuracy "
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
        "## 4. Word vectors of the same text",
        "",
        f"word2vec ({vectors['method']}, {vectors['vector_size']} dimensions, "
        f"{vectors['epochs']} epochs) over the same pieces, {vectors['pieces']:,} of them, in "
        f"{vectors['seconds']:.0f} s. Nearest pieces by cosine similarity:",
        "",
    ]
    for word, near in vectors["neighbours"].items():
        lines.append(f"- `{word}`: " + ", ".join(f"`{t}` {score:.2f}" for t, score in near))
    lines += [
        "",
        f"## 5. Fine-tuning on {recipe['task']}: does pre-training transfer?",
        "",
        "Three models of one shape, each fine-tuned with the same budget "
        f"({recipe['finetune_epochs']} epochs, learning rate "
        f"{recipe['finetune_learning_rate']:g}, batch {recipe['finetune_batch_size']}) and the "
        "same seeds: the pre-trained BERT; a random encoder whose embedding matrix starts from "
        "the word vectors; a random encoder from scratch. Both random encoders of a seed are the "
        "same but for the embeddings. The best epoch is picked on a dev split of the training "
        "sentences and scored once on the held-out test slice.",
        *results_table(result),
        "",
        *_verdicts(result),
        "",
        "![fine-tuning curves](finetuning.png)",
        "",
        "![test accuracy](comparison.png)",
        "",
        "## 6. Attention",
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


def run_name(model: str) -> str:
    """The folder of a model's fine-tuning runs: "from scratch" -> "from-scratch"."""
    return model.replace(" ", "-")


def results_table(result: dict[str, Any]) -> list[str]:
    """The final table: test accuracy median and range over the seeds, per model (and how
    many of them predicted one class), then the seeds that predicted one class."""
    task = result["recipe"]["task"]
    lines = [
        "",
        f"| {task} test accuracy | median | min | max | seeds |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, values in result["scores"].items():
        lines.append(
            f"| {name} | {statistics.median(values):.1%} | {min(values):.1%} | "
            f"{max(values):.1%} | {len(values)}{one_class_mark(result, task, name)} |"
        )
    return lines + one_class_note(result)


def _verdicts(result: dict[str, Any]) -> list[str]:
    """What the numbers show, no more: per model, the medians' gap against the seeds' spread
    (the rule), and the paired seeds with the exact sign test beside it."""
    lines = []
    for name, found in result["comparisons"].items():
        gap, spread = 100 * found["margin"], 100 * found["spread"]  # percentage points
        paired = (
            f"paired by seed it is ahead in {found['paired_wins']} of {len(result['seeds'])} "
            f"(sign test p = {found['sign_test_p']:.3f})"
        )
        if found["beats_scratch"]:
            verdict = (
                f"**{name}** beats scratch: its median is {gap:.1f} points higher, more than the "
                f"spread between seeds ({spread:.1f}); {paired}."
            )
        elif gap > 0:
            verdict = (
                f"**{name}**: the median is {gap:.1f} points higher, but that is within the "
                f"spread between seeds ({spread:.1f}), so no gain is established; {paired}."
            )
        elif gap == 0:
            verdict = f"**{name}** does not beat scratch: the medians are equal; {paired}."
        else:
            verdict = (
                f"**{name}** does not beat scratch at this budget: its median is {-gap:.1f} "
                f"points lower (seed spread {spread:.1f}); {paired}."
            )
        lines += [f"- {verdict}"]
    return lines


def _plot_finetuning(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    figure, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    for name in result["scores"]:
        color = COLORS[name]
        for number, seed in enumerate(result["seeds"]):
            run_dir = seed_dir(path.parent / "finetune", run_name(name), seed)
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
            read_test(seed_dir(runs, run_name(name), seed))[metric] for seed in result["seeds"]
        ]
        median = statistics.median(values)
        axis.bar(
            index,
            median,
            color=COLORS[name],
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
