"""The lineage experiment's report, drawn from its `results.json` alone: `report.md` (one row per
arm: what its pre-training read and computed, its held-out perplexity, every task row; each arm
against the random one; the probes layer by layer; how each number was made) and `lineage.png`.

Scores are percentages, median (min–max) over the seeds, on test splits carved from the shared
training files. An arm is ahead of another when its median leads by more than either's seed
spread (`flows.compare`); the paired sign test over the seeds is given beside it. The papers'
own figures stand in brackets where a paper reports the same task and method (their data,
splits and model sizes; `lineage_options.PAPER_FIGURES` says where each is from).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bertlab.apps.experiments.ablation_report import cell, judge
from bertlab.apps.flows import RESULTS_FILE, one_class_mark, one_class_note, scored
from bertlab.core.atomic import atomic_file, write_json, write_text
from bertlab.core.metrics import as_percent

REPORT_FILE = "report.md"
PLOT_FILE = "lineage.png"
FIGURE_DPI = 120
PRIMARY = {"accuracy": "accuracy", "entity_f1": "f1"}  # the figure reported, per metric set


def write_results(out: Path, results: dict[str, Any]) -> None:
    """results.json, report.md and lineage.png from the results so far (missing cells: –)."""
    write_json(out / RESULTS_FILE, results)
    write_text(out / REPORT_FILE, "\n".join(report_lines(results)) + "\n")
    plot_lineage(results, out / PLOT_FILE)


def values(results: dict[str, Any], row: str, arm: str) -> list[float] | None:
    """The seeds' primary metric of one cell in %, or None when it has not run yet."""
    runs = results["scores"].get(row, {}).get(arm)
    if not runs:
        return None
    metric_set = results["rows"][row]["metric_set"]
    metric = PRIMARY[metric_set]
    return [as_percent(metric_set, value) for value in scored([run[metric] for run in runs])]


def _cell(results: dict[str, Any], row: str, arm: str) -> str:
    numbers = values(results, row, arm)
    text = cell(numbers) + (one_class_mark(results, row, arm) if numbers else "")
    paper = results["rows"][row]["paper"].get(arm)
    return text + (f" [{paper['value']:g}]" if paper else "")


def _number(value: float | None, spec: str) -> str:
    return "–" if value is None else format(value, spec)


def _flops(value: float) -> str:
    if not value:
        return "0"
    exponent = math.floor(math.log10(value))
    return f"{value / 10**exponent:.1f}e{exponent}"


def _tokens(value: float) -> str:
    """1,234 -> 1.2k; 3,442,265 -> 3.44M."""
    if value >= 1e6:
        return f"{value / 1e6:.2f}M"
    return f"{value / 1e3:.1f}k" if value >= 1e3 else f"{value:.0f}"


def report_lines(results: dict[str, Any]) -> list[str]:
    """report.md: the setting, the table, the verdicts, the probes, how each number was made."""
    lines = ["# From NNLM to BERT on one corpus", "", *_setting(results), ""]
    lines += _table(results) + [""] + _verdicts(results)
    for word in results["config"]["probes"]:
        lines += [""] + _probe_table(results, word)
    return lines + [""] + _methods(results) + one_class_note(results)


def _setting(results: dict[str, Any]) -> list[str]:
    config = results["config"]
    corpus = ", ".join(Path(name).name for name in config["corpus"])
    seeds = ", ".join(map(str, config["seeds"]))
    capped = (
        f" Every task's parts capped at {config['max_examples']:,} examples."
        if config["max_examples"]
        else ""
    )
    return [
        f"Every arm pre-trained on {corpus} ({config['lang']}) with one WordPiece vocabulary "
        f"({config['tokenizer']}) for {config['budget_minutes']:g} minutes of training each "
        f"(word2vec too; the random arm not at all). Fine-tuning seeds {seeds}; scores on "
        f"test splits carved from each task's training file, %, median (min–max) over the "
        f"seeds; the papers' own figures in brackets (their data and sizes, not ours).{capped}"
    ]


def _table(results: dict[str, Any]) -> list[str]:
    rows = list(results["rows"])
    names = [_row_title(results, row) for row in rows]
    lines = [
        "| arm | tokens read | training FLOPs | held-out perplexity per piece | "
        + " | ".join(names)
        + " |",
        "|---|---:|---:|---:|" + "---:|" * len(rows),
    ]
    for arm, about in results["arms"].items():
        run = results["pretraining"].get(arm, {})
        cells = [
            _cell(results, row, arm) if arm in results["rows"][row]["arms"] else "" for row in rows
        ]
        lines.append(
            f"| {about['label']} | {_tokens(run.get('tokens', 0))} | {_flops(run.get('flops', 0))}"
            f" | {_number(run.get('perplexity'), '.1f')} | " + " | ".join(cells) + " |"
        )
    return lines


def _row_title(results: dict[str, Any], row: str) -> str:
    about = results["rows"][row]
    metric = "F1" if about["metric_set"] == "entity_f1" else "acc."
    return f"{about['task']}: {about['method_label']} ({metric})"


def _verdicts(results: dict[str, Any]) -> list[str]:
    """Every arm against the baseline arm (no pre-training), row by row; nothing without it."""
    baselines = [arm for arm, about in results["arms"].items() if about.get("is_baseline")]
    if not baselines:
        return []
    baseline = baselines[0]
    label = results["arms"][baseline]["label"]
    lines = [
        f"**Against {label}** (each arm's median against its: ahead or behind when the medians "
        "differ by more than either arm's seed spread, else level; paired seeds won-lost and "
        "the two-sided sign test):",
        "",
        "| arm | " + " | ".join(_row_title(results, row) for row in results["rows"]) + " |",
        "|---|" + "---|" * len(results["rows"]),
    ]
    for arm, about in results["arms"].items():
        if arm == baseline:
            continue
        cells = [
            _judge(values(results, row, arm), values(results, row, baseline))
            if arm in results["rows"][row]["arms"]
            else ""
            for row in results["rows"]
        ]
        lines.append(f"| {about['label']} | " + " | ".join(cells) + " |")
    return lines


def _judge(first: list[float] | None, second: list[float] | None) -> str:
    """`ablation_report.judge`, but never a verdict from one seed (a spread of 0 would make any
    gap a lead): the gap of the medians alone."""
    if first and second and min(len(first), len(second)) < 2:
        gap = statistics.median(first) - statistics.median(second)
        return f"{gap:+.1f}, one seed: no spread to judge by"
    return judge(first, second)


def _probe_table(results: dict[str, Any], word: str) -> list[str]:
    by_arm = results["probes"].get(word, {})
    if not by_arm:
        return [f'**Probe "{word}"**: not run yet.']
    first = next(iter(by_arm.values()))[0]
    senses = ", ".join(f"{sense} {count}" for sense, count in first["senses"].items())
    lines = [
        f'**Probe "{word}"** ({first["sentences"]} sentences: {senses}). Per layer (0 the '
        "lowest): the mean cosine of the word's vectors within a sense minus across senses, "
        "with its 95% bootstrap interval over the sentences, and the leave-one-out "
        f"nearest-neighbour sense accuracy (chance {first['chance']:.2f}); * an interval above 0:",
        "",
        "| arm | layer | within − across [95% interval] | nearest-neighbour accuracy |",
        "|---|---:|---|---:|",
    ]
    for arm, runs in by_arm.items():
        label = results["arms"].get(arm, {}).get("label", arm)
        control = " (control)" if results["arms"].get(arm, {}).get("is_control") else ""
        for index, layer in enumerate(runs[0]["layers"]):
            mark = "*" if layer["low"] > 0 else ""
            lines.append(
                f"| {label}{control if index == 0 else ''} | {index} | "
                f"{layer['within_minus_across']:+.4f} [{layer['low']:+.4f}, "
                f"{layer['high']:+.4f}]{mark} | {layer['nearest_neighbour_accuracy']:.2f} |"
            )
    return lines


def _methods(results: dict[str, Any]) -> list[str]:
    lines = ["**How each number was made.**", ""]
    for arm, run in results["pretraining"].items():
        if run.get("formula"):
            label = results["arms"][arm]["label"]
            lines.append(f"- FLOPs of {label}: {run['formula']}.")
    sources = {
        f"{results['arms'].get(arm, {}).get('label', arm)}, {row}: {figure['source']}"
        for row, about in results["rows"].items()
        for arm, figure in about["paper"].items()
    }
    if sources:
        lines.append("- The bracketed figures: " + "; ".join(sorted(sources)) + ".")
    budgets = [
        f"{about['task']} {about['budget']['epochs']} epoch(s) on "
        + (
            f"{about['budget']['max_train_examples']:,} training examples"
            if about["budget"]["max_train_examples"]
            else "the whole training part"
        )
        for about in {r["task"]: r for r in results["rows"].values()}.values()
    ]
    lines.append("- Fine-tuning budgets, every arm alike: " + "; ".join(budgets) + ".")
    return lines


def plot_lineage(results: dict[str, Any], path: Path) -> Path:
    """One panel per task row (each arm's median with its min-max) and one per probe word
    (within minus across by layer, each arm a line with its interval)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = list(results["rows"])
    words = [word for word in results["config"]["probes"] if results["probes"].get(word)]
    panels = len(rows) + len(words)
    columns = min(3, max(panels, 1))
    figure_rows = max(1, math.ceil(panels / columns))
    figure, axes = plt.subplots(
        figure_rows, columns, figsize=(4.4 * columns, 3.6 * figure_rows), squeeze=False
    )
    flat = list(axes.flat)
    for axis, row in zip(flat, rows, strict=False):
        _bars(axis, results, row)
    for axis, word in zip(flat[len(rows) :], words, strict=False):
        _probe_lines(axis, results, word)
    for axis in flat[panels:]:
        axis.axis("off")
    figure.suptitle(
        f"The lineage at {results['config']['budget_minutes']:g} minutes of pre-training each "
        f"(median and min-max of {len(results['config']['seeds'])} seed(s))"
    )
    figure.tight_layout()
    with atomic_file(path) as temporary:
        figure.savefig(temporary, dpi=FIGURE_DPI)
    plt.close(figure)
    return path


def _bars(axis: Any, results: dict[str, Any], row: str) -> None:
    done = [(arm, numbers) for arm in results["arms"] if (numbers := values(results, row, arm))]
    medians = [statistics.median(numbers) for _, numbers in done]
    low = [m - min(n) for m, (_, n) in zip(medians, done, strict=True)]
    high = [max(n) - m for m, (_, n) in zip(medians, done, strict=True)]
    axis.bar(range(len(done)), medians, yerr=[low, high], capsize=3, alpha=0.8)
    axis.set_xticks(range(len(done)), [arm for arm, _ in done], rotation=40, ha="right")
    axis.tick_params(axis="x", labelsize=7)
    bottom = min((min(n) for _, n in done), default=0.0)
    axis.set_ylim(max(0.0, bottom - 5.0), None)
    axis.set_title(_row_title(results, row), fontsize=8)
    axis.set_ylabel("%", fontsize=8)
    axis.grid(alpha=0.3, axis="y")


def _probe_lines(axis: Any, results: dict[str, Any], word: str) -> None:
    for arm, runs in results["probes"][word].items():
        layers = runs[0]["layers"]
        middle = [layer["within_minus_across"] for layer in layers]
        errors = [
            [m - layer["low"] for m, layer in zip(middle, layers, strict=True)],
            [layer["high"] - m for m, layer in zip(middle, layers, strict=True)],
        ]
        axis.errorbar(range(len(layers)), middle, yerr=errors, marker="o", capsize=2, label=arm)
    axis.axhline(0.0, color="grey", linewidth=0.8)
    axis.set_title(f'"{word}": within minus across senses, by layer', fontsize=8)
    axis.set_xlabel("layer (0 = lowest)", fontsize=8)
    axis.legend(fontsize=6)
    axis.grid(alpha=0.3)


def probe_verdict(layers: Sequence[dict[str, float]]) -> str:
    """Whether any layer's interval lies above 0, in words (for the docs' summary)."""
    above = [index for index, layer in enumerate(layers) if layer["low"] > 0]
    return f"separates in layer(s) {', '.join(map(str, above))}" if above else "no layer separates"
