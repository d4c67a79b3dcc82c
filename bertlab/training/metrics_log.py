"""Training metrics: one JSON object per line in `metrics.jsonl`, and a PNG of the curves.

Every record has a `kind` ("train", "eval", ...) and the optimizer `step`; the rest are numbers.
The file is appended to and flushed after each record, so a killed run keeps what it logged. On
resume, records past the checkpoint's step are dropped first, so the file reads as one run.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bertlab.core.atomic import append_text, atomic_file, json_text, write_text

FIGURE_COLUMNS = 2
SUBPLOT_SIZE_INCHES = (5.0, 3.2)
FIGURE_DPI = 110


def read_metrics(path: str | os.PathLike) -> list[dict[str, Any]]:
    """The records of a metrics file, in order; a torn last line (killed mid-write) is skipped."""
    path = Path(path)
    if not path.is_file():
        return []
    records = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return records


class MetricsLog:
    """Appends records to `path`; `resume_step` keeps only the records up to that step."""

    def __init__(self, path: str | os.PathLike, resume_step: int | None = None) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if resume_step is None:
            write_text(self.path, "")
        else:
            kept = [r for r in read_metrics(self.path) if r.get("step", 0) <= resume_step]
            write_text(self.path, "".join(json_text(r) + "\n" for r in kept))

    def log(self, kind: str, step: int, **values: float) -> dict[str, Any]:
        record = {"kind": kind, "step": step, **values}
        append_text(self.path, json_text(record) + "\n")
        return record

    def records(self) -> list[dict[str, Any]]:
        return read_metrics(self.path)


def plot_curves(
    records: Sequence[dict[str, Any]],
    panels: Sequence[tuple[str, str, str]],
    out_path: str | os.PathLike,
    title: str,
    x_key: str = "step",
    x_label: str = "optimizer step",
) -> Path | None:
    """Draw one panel per (key, y-axis label, panel title); each kind of record is a line.

    Example:
        panels=[("loss", "loss (nats)", "training loss"), ("mlm_accuracy", "accuracy", "MLM")]

    Returns:
        The PNG's path, or None when no record has any of the keys (nothing to draw).
    """
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt
    from matplotlib.ticker import EngFormatter

    drawn = [p for p in panels if any(_number(r.get(p[0])) for r in records)]
    if not drawn:
        return None
    rows = math.ceil(len(drawn) / FIGURE_COLUMNS)
    columns = min(FIGURE_COLUMNS, len(drawn))
    width, height = SUBPLOT_SIZE_INCHES
    figure, axes = plt.subplots(rows, columns, figsize=(width * columns, height * rows))
    axes = list(getattr(axes, "flat", [axes]))
    for axis, (key, y_label, panel_title) in zip(axes, drawn, strict=False):
        kinds = dict.fromkeys(r["kind"] for r in records if _number(r.get(key)))
        for kind in kinds:
            points = [
                (r[x_key], r[key]) for r in records if r["kind"] == kind and _number(r.get(key))
            ]
            xs, ys = zip(*points, strict=True)
            axis.plot(xs, ys, marker="o" if len(xs) < 30 else None, markersize=3, label=kind)
        axis.set_title(panel_title)
        axis.set_xlabel(x_label)
        axis.xaxis.set_major_formatter(EngFormatter(sep=""))  # 20k, not 20000: labels stay apart
        axis.set_ylabel(y_label)
        axis.grid(alpha=0.3)
        if len(kinds) > 1:
            axis.legend()
    for axis in axes[len(drawn) :]:
        axis.set_visible(False)
    figure.suptitle(title)
    figure.tight_layout()
    out_path = Path(out_path)
    with atomic_file(out_path) as temporary:
        figure.savefig(temporary, dpi=FIGURE_DPI)
    plt.close(figure)
    return out_path


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
