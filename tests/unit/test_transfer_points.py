"""Which pre-training checkpoint the transfer experiment takes for a point of N minutes."""

from __future__ import annotations

from pathlib import Path

import pytest

from bertlab.apps.experiments import transfer


def _checkpoints(monkeypatch, progress: dict[str, tuple[int, float]]) -> None:
    """Fake checkpoints: name -> (step, minutes of training)."""
    paths = [Path(name) for name in progress]
    monkeypatch.setattr(transfer, "list_checkpoints", lambda run_dir: paths)
    monkeypatch.setattr(
        transfer,
        "load_state",
        lambda path: {
            "progress": {"step": progress[path.name][0], "elapsed": 60 * progress[path.name][1]}
        },
    )


def test_a_point_takes_the_nearest_checkpoint_within_twenty_percent(monkeypatch) -> None:
    _checkpoints(monkeypatch, {"step-000600": (600, 10.02), "step-001800": (1800, 30.01)})
    assert transfer._checkpoint_near(Path("run"), 30, print).name == "step-001800"
    assert transfer._checkpoint_near(Path("run"), 10, print).name == "step-000600"


def test_a_checkpoint_a_slow_step_past_the_mark_still_counts(monkeypatch) -> None:
    # Steps of ~2.9 s: the checkpoint right after the 0.2-min mark lies 23% past it.
    _checkpoints(monkeypatch, {"step-000002": (2, 0.105), "step-000005": (5, 0.245)})
    assert transfer._checkpoint_near(Path("run"), 0.2, print).name == "step-000005"


def test_no_checkpoint_near_the_point_is_refused(monkeypatch) -> None:
    # Fast steps (0.05 s), checkpoints 5 minutes apart: nothing within 20% of 7.5 minutes.
    _checkpoints(monkeypatch, {"step-006000": (6000, 5.0), "step-012000": (12000, 10.0)})
    with pytest.raises(ValueError, match=r"no checkpoint near 7.5 min .*\(nearest: 5.00 min"):
        transfer._checkpoint_near(Path("run"), 7.5, print)
