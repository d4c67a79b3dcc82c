"""The strategies experiment's report, drawn from its `results.json` alone: `table.md`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bertlab.apps.flows import (
    RESULTS_FILE,
    compare,
    one_class_mark,
    one_class_note,
    sign_test,
    summary,
    win_loss_level,
)
from bertlab.core.atomic import write_json, write_text
from bertlab.core.run_folder import FINAL_DIR

TABLE_FILE = "table.md"


def write_results(out: Path, results: dict[str, Any]) -> None:
    """results.json and table.md from the scores so far (runs not yet made: -)."""
    write_json(out / RESULTS_FILE, results)
    write_text(out / TABLE_FILE, "\n".join(results_table(results)) + "\n")


def model_name(path: str) -> str:
    """A model folder as the table names it: `runs/x/pretrain-in-domain/final` ->
    `pretrain-in-domain`."""
    folder = Path(path)
    return folder.parent.name if folder.name == FINAL_DIR and folder.parent.name else folder.name


def results_table(results: dict[str, Any]) -> list[str]:
    """Two tables: the test scores, median (min–max) of the seeds per row and strategy, each
    strategy's verdict against the baseline beside its score; then the margins, spreads and the
    sign test's p-values behind the verdicts; then the seeds that predicted one class."""
    strategies = results["config"]["strategies"]
    baseline = results["config"]["baseline"]
    others = [name for name in strategies if name != baseline]
    labels = {name: results["strategies"][name]["label"] for name in strategies}
    seeds = ", ".join(map(str, results["config"]["seeds"]))
    lines = [
        f"Test scores, median (min–max) of seeds {seeds}; against {labels[baseline]}: win or "
        "loss when the median differs by more than the larger seed spread, else level, and the "
        "paired seeds won–lost.",
        "",
        "| task (metric) | model | " + " | ".join(labels[name] for name in strategies) + " |",
        "|---|---|" + "---:|" * len(strategies),
    ]
    details = [
        "",
        f"Against {labels[baseline]}: median difference vs the larger seed spread, paired seeds "
        "won–lost, two-sided exact sign test p.",
        "",
        "| task (metric) | " + " | ".join(labels[name] for name in others) + " |",
        "|---|" + "---|" * len(others),
    ]
    for row, by_strategy in results["scores"].items():
        name = f"{row} ({results['metrics'][row]})"
        base = by_strategy.get(baseline)
        cells, detail_cells = [], []
        for strategy in strategies:
            values = by_strategy.get(strategy)
            if not values:
                cells.append("–")
                continue
            cell = summary(values) + one_class_mark(results, row, strategy)
            is_paired = strategy != baseline and base and len(base) == len(values)
            if is_paired:
                cell += f", {win_loss_level(base, values)}"
            cells.append(cell)
        for strategy in others:
            values = by_strategy.get(strategy)
            if not values or not base or len(base) != len(values):
                detail_cells.append("–")
                continue
            comparison = compare(base, values)
            wins, losses, p_value = sign_test(base, values)
            detail_cells.append(
                f"{comparison.margin:+.4f} vs {comparison.spread:.4f}, {wins}–{losses}, "
                f"p {p_value:.2f}"
            )
        model = model_name(results["tasks"][row]["model"])
        lines.append(f"| {name} | {model} | " + " | ".join(cells) + " |")
        details.append(f"| {name} | " + " | ".join(detail_cells) + " |")
    return lines + details + one_class_note(results)
