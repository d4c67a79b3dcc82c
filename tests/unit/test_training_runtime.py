import json
import random

import numpy as np
import pytest
import torch

from bertlab.core.runtime import (
    DistributedContext,
    autocast,
    resolve_precision,
    rng_state,
    set_rng_state,
    set_seed,
)
from bertlab.training.metrics_log import MetricsLog, plot_curves, read_metrics


def test_rng_state_round_trip_continues_every_generator():
    set_seed(3)
    state = rng_state()
    first = (random.random(), np.random.rand(), torch.rand(2))
    set_seed(99)
    set_rng_state(state)
    second = (random.random(), np.random.rand(), torch.rand(2))
    assert first[0] == second[0] and first[1] == second[1]
    assert torch.equal(first[2], second[2])


def test_precision_auto_is_fp32_where_bf16_is_not_native():
    cpu = torch.device("cpu")
    expected = "bf16" if torch.ops.mkldnn._is_mkldnn_bf16_supported() else "fp32"
    assert resolve_precision("auto", cpu) == expected
    assert resolve_precision("fp32", cpu) == "fp32"
    with pytest.raises(ValueError, match="unknown precision"):
        resolve_precision("fp16x", cpu)


def test_bf16_autocast_changes_matmul_dtype_and_fp32_does_not():
    a = torch.randn(4, 4)
    cpu = torch.device("cpu")
    with autocast(cpu, "bf16"):
        assert (a @ a).dtype == torch.bfloat16
    with autocast(cpu, "fp32"):
        assert (a @ a).dtype == torch.float32


def test_single_process_context_is_main():
    context = DistributedContext()
    assert context.is_main and not context.is_distributed
    assert DistributedContext(rank=1, world_size=2).is_main is False


def test_metrics_log_appends_and_truncates_on_resume(tmp_path):
    path = tmp_path / "metrics.jsonl"
    log = MetricsLog(path)
    for step in (1, 2, 3):
        log.log("train", step, loss=1.0 / step)
    log.log("eval", 3, loss=0.5)
    with path.open("a") as handle:
        handle.write('{"kind": "train", "st')  # torn line of a killed run
    assert [r["step"] for r in read_metrics(path)] == [1, 2, 3, 3]
    resumed = MetricsLog(path, resume_step=2)
    assert [r["step"] for r in resumed.records()] == [1, 2]
    assert json.loads(path.read_text().splitlines()[0]) == {"kind": "train", "step": 1, "loss": 1.0}


def test_plot_curves_writes_png_and_skips_missing_keys(tmp_path):
    records = [{"kind": "train", "step": s, "loss": 5.0 - s} for s in range(1, 5)]
    records.append({"kind": "eval", "step": 4, "loss": 1.5})
    png = plot_curves(
        records,
        [("loss", "loss (nats)", "loss"), ("absent", "x", "never drawn")],
        tmp_path / "curves.png",
        "test",
    )
    assert png is not None and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert plot_curves(records, [("absent", "x", "y")], tmp_path / "none.png", "t") is None
    assert not (tmp_path / "none.png").exists()
