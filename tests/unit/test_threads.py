"""Threads on a busy machine: the OpenMP wait policy set before torch loads, `--threads` for every
command (bertlab.core.threads, bertlab.cli)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from bertlab.cli import build_parser, main
from bertlab.core.threads import WAIT_POLICY_VARIABLE, set_threads


def _policy_after(code: str, policy: str | None = None) -> str:
    """OMP_WAIT_POLICY as a fresh interpreter sees it after running `code`."""
    env = {key: value for key, value in os.environ.items() if key != WAIT_POLICY_VARIABLE}
    if policy is not None:
        env[WAIT_POLICY_VARIABLE] = policy
    script = f"{code}; import os; print(os.environ.get({WAIT_POLICY_VARIABLE!r}))"
    result = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
    )
    return result.stdout.strip()


def test_importing_bertlab_makes_openmp_threads_wait_passively():
    assert _policy_after("import bertlab") == "PASSIVE"


def test_a_wait_policy_set_by_the_user_wins():
    assert _policy_after("import bertlab", policy="ACTIVE") == "ACTIVE"


def test_nothing_is_set_when_torch_was_loaded_first():
    """OpenMP has read its settings by then: claiming a policy would be false."""
    assert _policy_after("import torch; import bertlab") == "None"


@pytest.mark.parametrize(
    "argv",
    [
        ["--threads", "1", "pretrain", "--corpus", "c.txt", "--out", "o", "--max-steps", "1"],
        ["pretrain", "--threads", "1", "--corpus", "c.txt", "--out", "o", "--max-steps", "1"],
        ["demo", "--threads", "1"],
        ["--threads", "1", "tokenizer", "train", "c.txt", "--out", "o", "--vocab-size", "9"],
    ],
)
def test_every_command_takes_threads_before_or_after_its_name(argv):
    assert build_parser().parse_args(argv).threads == 1


def test_a_command_without_threads_keeps_the_top_level_value():
    args = build_parser().parse_args(["--threads", "1", "demo"])
    assert args.threads == 1
    assert build_parser().parse_args(["demo"]).threads is None


def test_set_threads_sets_torch_threads_and_refuses_zero():
    before = torch.get_num_threads()
    try:
        set_threads(1)
        assert torch.get_num_threads() == 1
        set_threads(None)  # torch's default stays as it is
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)
    with pytest.raises(ValueError, match="--threads must be positive"):
        set_threads(0)


def test_threads_zero_is_one_line_for_any_command(capsys):
    code = main(
        ["--threads", "0", "pretrain", "--corpus", "c.txt", "--out", "o", "--max-steps", "1"]
    )
    assert code == 1
    assert capsys.readouterr().err.strip() == "bertlab: error: --threads must be positive, got 0"


def _pretraining_losses(pretrain_files, out: Path, policy: str) -> list[float]:
    """Training losses of 4 steps of a 2-layer model in a fresh process under `policy`."""
    from bertlab.core.config import BertConfig

    vocab, corpus = pretrain_files
    config = out.parent / f"{out.name}-config.json"
    BertConfig(
        vocab_size=126, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=64, max_position_embeddings=64,
    ).to_json_file(config)  # fmt: skip
    argv = [
        "pretrain", "--corpus", str(corpus), "--tokenizer", str(vocab), "--config", str(config),
        "--max-seq-length", "32", "--batch-size", "8", "--max-steps", "4", "--log-every", "1",
        "--eval-examples", "0", "--num-workers", "0", "--no-progress", "--out", str(out),
    ]  # fmt: skip
    env = dict(os.environ, **{WAIT_POLICY_VARIABLE: policy})
    subprocess.run(
        [sys.executable, "-m", "bertlab", *argv], env=env, check=True, capture_output=True
    )
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return [record["loss"] for record in records if record["kind"] == "train"]


@pytest.mark.slow  # two fresh processes
def test_the_wait_policy_changes_speed_only_never_results(pretrain_files, tmp_path):
    """Passive waiting is a pure speed change: fp32 losses equal those of spinning threads."""
    passive = _pretraining_losses(pretrain_files, tmp_path / "passive", "PASSIVE")
    active = _pretraining_losses(pretrain_files, tmp_path / "active", "ACTIVE")
    assert len(passive) == 4
    assert passive == pytest.approx(active, rel=0, abs=1e-6)


def test_the_threads_help_links_to_a_heading_of_the_performance_page():
    import re

    from bertlab.cli.common import THREADS_HELP

    link = re.search(r"docs/performance\.md#([a-z0-9-]+)", THREADS_HELP.replace('"', ""))
    page = Path(__file__).resolve().parents[2] / "docs" / "performance.md"
    headings = re.findall(r"^#+ (.+)$", page.read_text(encoding="utf-8"), flags=re.M)
    anchors = {re.sub(r"[^a-z0-9 -]", "", h.lower()).replace(" ", "-") for h in headings}
    assert link is not None and link.group(1) in anchors
