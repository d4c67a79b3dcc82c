"""Figures a student reads at a glance: no label runs into another head's map, the demo's
comparison starts at chance with the one-class line drawn, epochs are whole numbers."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib
import pytest
import torch

matplotlib.use("Agg")
from matplotlib import pyplot as plt  # noqa: E402

import bertlab.use.inspection as inspection  # noqa: E402
from bertlab.apps.demo.config import PRETRAINED, SCRATCH  # noqa: E402
from bertlab.apps.demo.report import (  # noqa: E402
    comparison_figure,
    finetuning_figure,
    run_name,
)
from bertlab.apps.flows import TEST_FILE, seed_dir  # noqa: E402
from bertlab.core.run_folder import METRICS_FILE  # noqa: E402

PIECES = ["[CLS]", "the", "unbelievably", "charming", "film", "was", "shot", "in", "[SEP]"]


def _attention_figure(monkeypatch, num_heads: int):
    """plot_attention's figure, kept open instead of written."""
    kept = []
    monkeypatch.setattr(
        inspection, "save_figure", lambda figure, families, out, dpi: kept.append(figure)
    )
    attentions = torch.softmax(torch.randn(num_heads, len(PIECES), len(PIECES)), dim=-1)
    inspection.plot_attention(PIECES, attentions, 2, "a sentence", "unused.png")
    figure = kept[0]
    figure.canvas.draw()
    return figure


@pytest.mark.parametrize("num_heads", [2, 6])
def test_no_head_label_runs_into_another_heads_map(monkeypatch, num_heads: int) -> None:
    figure = _attention_figure(monkeypatch, num_heads)
    renderer = figure.canvas.get_renderer()
    heads = [axis for axis in figure.axes if axis.get_title().startswith("head")]
    assert len(heads) == num_heads
    for axis in heads:
        labels = [
            label.get_window_extent(renderer)
            for label in axis.get_xticklabels() + axis.get_yticklabels()
            if label.get_text()
        ]
        title = axis.title.get_window_extent(renderer)
        for other in heads:
            if other is axis:
                continue
            area = other.get_window_extent(renderer)  # the other head's map
            assert not any(box.overlaps(area) for box in labels), (axis.get_title(), other)
            assert not title.overlaps(area)
    named = [axis for axis in heads if any(t.get_text() for t in axis.get_yticklabels())]
    assert named and all(axis.get_yticklabels()[1].get_text() == "the" for axis in named)
    plt.close(figure)


def _demo_runs(runs: Path, scores: dict[str, list[float]]) -> None:
    for name, values in scores.items():
        for seed, value in enumerate(values, 1):
            run_dir = seed_dir(runs, run_name(name), seed)
            run_dir.mkdir(parents=True)
            (run_dir / TEST_FILE).write_text(json.dumps({"accuracy": value}))
            records = [
                {"kind": "train", "step": 10 * epoch, "loss": 0.7 - 0.1 * epoch}
                for epoch in range(1, 4)
            ] + [
                {"kind": "eval", "step": 10 * epoch, "epoch": epoch, "accuracy": value}
                for epoch in range(1, 4)
            ]
            (run_dir / METRICS_FILE).write_text("".join(json.dumps(r) + "\n" for r in records))


def test_the_comparison_starts_at_chance_with_the_one_class_line(tmp_path: Path) -> None:
    scores = {PRETRAINED: [0.74, 0.76], SCRATCH: [0.72, 0.75]}
    _demo_runs(tmp_path, scores)
    result = {"recipe": {"task": "sst2"}, "seeds": [1, 2], "scores": scores, "majority": 0.512}
    figure = comparison_figure(result, tmp_path)
    axis = figure.axes[0]
    assert axis.get_ylim() == (0.5, 1.0)
    flat = [line for line in axis.get_lines() if set(line.get_ydata()) == {0.512}]
    assert flat, "no line at the commonest label's share"
    assert any("51.2%" in text.get_text() for text in axis.texts)
    plt.close(figure)
    low = {PRETRAINED: [0.40, 0.76], SCRATCH: [0.72, 0.75]}  # a seed below chance stays shown
    assert comparison_figure(result | {"scores": low}, tmp_path).axes[0].get_ylim()[0] < 0.40
    plt.close("all")


def test_epochs_are_whole_numbers(tmp_path: Path) -> None:
    scores = {PRETRAINED: [0.74], SCRATCH: [0.72]}
    _demo_runs(tmp_path, scores)
    result = {"recipe": {"task": "sst2"}, "seeds": [1], "scores": scores}
    figure = finetuning_figure(result, tmp_path)
    figure.canvas.draw()
    ticks = [tick for tick in figure.axes[1].get_xticks() if 1 <= tick <= 3]
    assert ticks and all(float(tick).is_integer() for tick in ticks)
    plt.close(figure)
