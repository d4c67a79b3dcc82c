"""The transfer experiment's report, drawn from its `results.json`: `table.md` and the plot."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bertlab.apps.flows import (
    RESULTS_FILE,
    compare,
    one_class_mark,
    one_class_note,
    scored,
    sign_test,
    summary,
)
from bertlab.core.atomic import atomic_file, write_json, write_text

TABLE_FILE = "table.md"
PLOT_FILE = "transfer.png"
FIGURE_DPI = 120


def write_results(out: Path, results: dict[str, Any]) -> None:
    """results.json, table.md and transfer.png from the scores so far (missing points: -)."""
    write_json(out / RESULTS_FILE, results)
    write_text(out / TABLE_FILE, "\n".join(results_table(results)) + "\n")
    plot_transfer(results, out / PLOT_FILE)


def results_table(results: dict[str, Any]) -> list[str]:
    """Median (min-max) per task and column; a verdict of each pre-trained column against
    scratch: the whole budget for the points of one run, every arm side by side; then the seeds
    that predicted one class (`flows.one_class_note`)."""
    points = results["config"]["points"]
    if results["config"].get("point_minutes") is None:  # arms: each arm's whole budget
        judged = [point for point in points[1:] if not point.endswith("min")]
    else:
        judged = points[-1:]
    question = (
        f"{judged[0]} beats scratch by more than the spread?"
        if len(judged) == 1
        else "beats scratch by more than the spread?"
    )
    lines = [
        "| task (metric) | " + " | ".join(points) + f" | {question} |",
        "|---|" + "---:|" * len(points) + "---|",
    ]
    for name, by_point in results["scores"].items():
        cells = []
        for point in points:
            values = by_point.get(point)
            cells.append(summary(values) + one_class_mark(results, name, point) if values else "–")
        answers = []
        for point in judged:
            done = "scratch" in by_point and point in by_point
            answer = verdict(by_point["scratch"], by_point[point]) if done else "–"
            answers.append(answer if len(judged) == 1 else f"{point}: {answer}")
        lines.append(
            f"| {name} ({results['metrics'][name]}) | "
            + " | ".join(cells)
            + f" | {'; '.join(answers)} |"
        )
    return lines + one_class_note(results)


def verdict(scratch: Sequence[float], pretrained: Sequence[float]) -> str:
    """ "yes" when the pre-trained median beats scratch's by more than either model's seed spread
    (`bertlab.apps.flows.compare`), "no" otherwise, with the margin; over paired seeds (the same
    seeds, in order) also the seeds won–lost and the two-sided sign test's p (`flows.sign_test`).
    Example: "yes (+0.1000 vs spread 0.0200; 3–0 seeds, p 0.25)"."""
    comparison = compare(scratch, pretrained)
    answer = "yes" if comparison.wins else "no"
    text = f"{answer} ({comparison.margin:+.4f} vs spread {comparison.spread:.4f}"
    if len(scratch) != len(pretrained):
        return text + ")"
    wins, losses, p_value = sign_test(scratch, pretrained)
    return text + f"; {wins}–{losses} seeds, p {p_value:.2f})"


def plot_transfer(results: dict[str, Any], path: Path) -> Path:
    """Downstream score per task (median, min-max): against pre-training minutes for the points
    of one run, as bars per column for arms side by side."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(results["scores"])
    columns = min(4, len(names))
    rows = math.ceil(len(names) / columns)
    figure, axes = plt.subplots(rows, columns, figsize=(3.2 * columns, 2.8 * rows), squeeze=False)
    minutes = results["config"].get("point_minutes")
    points = results["config"]["points"]
    for axis, name in zip(axes.flat, names, strict=False):
        by_point = results["scores"][name]
        done = [(index, p, scored(by_point[p])) for index, p in enumerate(points) if p in by_point]
        medians = [statistics.median(v) for _, _, v in done]
        low = [m - min(v) for m, (_, _, v) in zip(medians, done, strict=True)]
        high = [max(v) - m for m, (_, _, v) in zip(medians, done, strict=True)]
        if minutes is None:
            positions = [index for index, _, _ in done]
            axis.bar(positions, medians, yerr=[low, high], capsize=3, alpha=0.75)
            axis.set_xticks(range(len(points)), points, rotation=45, ha="right", fontsize=7)
            bottom = min(min(v) for _, _, v in done) if done else 0.0
            axis.set_ylim(max(0.0, bottom - 0.05), None)
        else:
            xs = [minutes[index] for index, _, _ in done]
            axis.errorbar(xs, medians, yerr=[low, high], marker="o", capsize=3)
            axis.set_xlabel("pre-training minutes")
        axis.set_title(name, fontsize=10)
        axis.set_ylabel(results["metrics"][name], fontsize=8)
        axis.grid(alpha=0.3)
    for axis in list(axes.flat)[len(names) :]:
        axis.axis("off")
    seeds = len(results["config"]["seeds"])
    what = "pre-training time" if minutes is not None else "pre-training corpus"
    figure.suptitle(f"fine-tuned test score vs {what} (median, min-max of {seeds} seeds)")
    figure.tight_layout()
    with atomic_file(path) as temporary:
        figure.savefig(temporary, dpi=FIGURE_DPI)
    plt.close(figure)
    return path
