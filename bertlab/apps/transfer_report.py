"""The transfer experiment's report, drawn from its `results.json`: `table.md` and the plot."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bertlab.apps.flows import RESULTS_FILE, compare, scored, summary
from bertlab.atomic import atomic_file, write_json, write_text

TABLE_FILE = "table.md"
PLOT_FILE = "transfer.png"
FIGURE_DPI = 120


def write_results(out: Path, results: dict[str, Any]) -> None:
    """results.json, table.md and transfer.png from the scores so far (missing points: -)."""
    write_json(out / RESULTS_FILE, results)
    write_text(out / TABLE_FILE, "\n".join(results_table(results)) + "\n")
    plot_transfer(results, out / PLOT_FILE)


def results_table(results: dict[str, Any]) -> list[str]:
    """Median (min-max) per task and point; a verdict of the full budget against scratch."""
    points = results["config"]["points"]
    budget = points[-1]
    lines = [
        "| task (metric) | "
        + " | ".join(points)
        + f" | {budget} beats scratch by more than the spread? |",
        "|---|" + "---:|" * len(points) + "---|",
    ]
    for name, by_point in results["scores"].items():
        cells = []
        for point in points:
            values = by_point.get(point)
            cells.append(summary(values) if values else "–")
        done = "scratch" in by_point and budget in by_point
        answer = verdict(by_point["scratch"], by_point[budget]) if done else "–"
        lines.append(
            f"| {name} ({results['metrics'][name]}) | " + " | ".join(cells) + f" | {answer} |"
        )
    return lines


def verdict(scratch: Sequence[float], pretrained: Sequence[float]) -> str:
    """ "yes" when the pre-trained median beats scratch's by more than either model's seed spread
    (`bertlab.apps.flows.compare`), "no" otherwise, with the margin."""
    comparison = compare(scratch, pretrained)
    answer = "yes" if comparison.wins else "no"
    return f"{answer} ({comparison.margin:+.4f} vs spread {comparison.spread:.4f})"


def plot_transfer(results: dict[str, Any], path: Path) -> Path:
    """Downstream score against pre-training minutes, one panel per task (median, min-max)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(results["scores"])
    columns = min(4, len(names))
    rows = math.ceil(len(names) / columns)
    figure, axes = plt.subplots(rows, columns, figsize=(3.2 * columns, 2.8 * rows), squeeze=False)
    minutes = results["config"]["point_minutes"]
    points = results["config"]["points"]
    for axis, name in zip(axes.flat, names, strict=False):
        by_point = results["scores"][name]
        done = [
            (m, scored(by_point[p])) for m, p in zip(minutes, points, strict=True) if p in by_point
        ]
        medians = [statistics.median(v) for _, v in done]
        low = [m - min(v) for m, (_, v) in zip(medians, done, strict=True)]
        high = [max(v) - m for m, (_, v) in zip(medians, done, strict=True)]
        axis.errorbar([m for m, _ in done], medians, yerr=[low, high], marker="o", capsize=3)
        axis.set_title(name, fontsize=10)
        axis.set_xlabel("pre-training minutes")
        axis.set_ylabel(results["metrics"][name], fontsize=8)
        axis.grid(alpha=0.3)
    for axis in list(axes.flat)[len(names) :]:
        axis.axis("off")
    seeds = len(results["config"]["seeds"])
    figure.suptitle(
        f"fine-tuned test score vs pre-training time (median, min-max of {seeds} seeds)"
    )
    figure.tight_layout()
    with atomic_file(path) as temporary:
        figure.savefig(temporary, dpi=FIGURE_DPI)
    plt.close(figure)
    return path
