import json
import random

import numpy as np
import pytest
import torch

from bertlab.core import runtime
from bertlab.core.runtime import (
    DistributedContext,
    autocast,
    choose_precision,
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


# /proc/cpuinfo's flags of three CPUs users have (abridged)
ZEN4_FLAGS = "fpu sse2 avx avx2 avx512f avx512bw avx512_bf16 avx512_vnni"
SKYLAKE_SP_FLAGS = "fpu sse2 avx avx2 avx512f avx512bw avx512cd avx512dq avx512vl"
AVX2_FLAGS = "fpu sse2 avx avx2 fma"


@pytest.mark.parametrize(
    ("flags", "expected", "reason"),
    [
        (ZEN4_FLAGS, "bf16", "this CPU has bf16 units (avx512_bf16)"),
        (SKYLAKE_SP_FLAGS + " amx_bf16 amx_tile", "bf16", "this CPU has bf16 units (amx_bf16)"),
        (SKYLAKE_SP_FLAGS, "fp32", "this CPU has no bf16 units"),  # AVX-512, no bf16 units
        (AVX2_FLAGS, "fp32", "this CPU has no bf16 units"),  # no AVX-512
    ],
)
def test_auto_picks_bf16_only_on_a_cpu_with_bf16_units(
    monkeypatch, tmp_path, flags, expected, reason
):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(f"processor\t: 0\nmodel name\t: a CPU\nflags\t\t: {flags}\n\n")
    monkeypatch.setattr(runtime, "CPU_INFO", cpuinfo)
    monkeypatch.setattr(runtime.cpu_flags, "__defaults__", (cpuinfo,))
    monkeypatch.setattr(runtime, "measure_bf16_speedup", _never_measured)
    choice = choose_precision("auto", torch.device("cpu"))
    assert (choice.precision, choice.reason) == (expected, reason)
    assert str(choice) == f"{expected} ({reason})"
    assert resolve_precision("auto", torch.device("cpu")) == expected


def _never_measured() -> float:
    raise AssertionError("the flags decide: nothing is measured")


def test_a_precision_asked_for_is_kept_and_a_bad_one_refused():
    cpu = torch.device("cpu")
    assert choose_precision("fp32", cpu) == runtime.PrecisionChoice("fp32", "as asked")
    assert resolve_precision("bf16", cpu) == "bf16"
    with pytest.raises(ValueError, match="unknown precision"):
        resolve_precision("fp16x", cpu)


def test_cpu_flags_are_read_from_x86_cpuinfo_and_not_guessed_elsewhere(tmp_path):
    x86 = tmp_path / "x86"
    x86.write_text(f"processor\t: 0\nflags\t\t: {AVX2_FLAGS}\n\nprocessor\t: 1\nflags\t: x\n")
    assert runtime.cpu_flags(x86) == frozenset(AVX2_FLAGS.split())  # the first processor's
    arm = tmp_path / "arm"
    arm.write_text("processor\t: 0\nFeatures\t: fp asimd bf16 sve\n")
    assert runtime.cpu_flags(arm) is None
    assert runtime.cpu_flags(tmp_path / "missing") is None


def test_where_flags_are_unknown_a_probe_measured_once_per_machine_decides(monkeypatch, tmp_path):
    monkeypatch.setattr(runtime, "cpu_flags", lambda path=None: None)  # e.g. macOS, ARM
    cache = tmp_path / "cache" / "probe.json"
    original = runtime.probed_bf16_speedup
    monkeypatch.setattr(runtime, "probed_bf16_speedup", lambda: original(cache))
    measured = []

    def measure(speedup: float):
        return lambda: measured.append(speedup) or speedup

    monkeypatch.setattr(runtime, "measure_bf16_speedup", measure(2.5))
    first = choose_precision("auto", torch.device("cpu"))
    assert first == runtime.PrecisionChoice(
        "bf16", "bf16 measured 2.5x as fast as fp32 on this CPU"
    )
    monkeypatch.setattr(runtime, "measure_bf16_speedup", measure(0.2))
    assert choose_precision("auto", torch.device("cpu")) == first  # cached: not measured again
    assert measured == [2.5]
    cache.write_text("{}")  # another machine or torch version: measured anew
    slow = choose_precision("auto", torch.device("cpu"))
    assert slow == runtime.PrecisionChoice("fp32", "bf16 measured 0.20x fp32's speed on this CPU")
    assert measured == [2.5, 0.2]
    cache.write_text("not json")  # an unreadable cache is measured again, not an error
    assert choose_precision("auto", torch.device("cpu")).precision == "fp32"


def test_the_probe_compares_the_two_precisions_on_this_cpu():
    speedup = runtime.measure_bf16_speedup()
    flags = runtime.cpu_flags()
    assert speedup > 0
    if flags is not None and not set(runtime.BF16_UNIT_FLAGS) & flags:
        assert speedup < 1  # emulated bf16 is slower: the probe would also pick fp32 here


def test_this_machines_choice_follows_its_flags():
    flags = runtime.cpu_flags()
    if flags is None:
        pytest.skip("no x86 flags to read on this machine")
    has_units = bool(set(runtime.BF16_UNIT_FLAGS) & flags)
    assert resolve_precision("auto", torch.device("cpu")) == ("bf16" if has_units else "fp32")


def test_denormals_are_flushed_inside_the_block_only():
    tiny = torch.tensor([1e-39])  # a denormal float32
    cpu = torch.device("cpu")
    with runtime.denormals_flushed(cpu):
        assert (tiny * 1.0).item() == 0.0
    assert (tiny * 1.0).item() > 0.0


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
