"""benchmarks/gpu_speed.py: its FLOP formula against torch's FLOP counter, and a tiny run on the
CPU (the JSON it writes and the MFU arithmetic)."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from bertlab.core.config import BertConfig
from bertlab.network.bert import BertForPreTraining

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture(scope="module")
def gpu_speed():
    sys.path.insert(0, str(BENCHMARKS))
    try:
        yield importlib.import_module("gpu_speed")
    finally:
        sys.path.remove(str(BENCHMARKS))


def test_the_flop_formula_matches_torch_flop_counter_on_a_tiny_model(gpu_speed) -> None:
    config = BertConfig(
        vocab_size=500,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=256,
        max_position_embeddings=64,
    )
    batch_size, seq_len, masked = 3, 48, 7
    torch.manual_seed(0)
    model = BertForPreTraining(config).train()
    generator = torch.Generator().manual_seed(0)
    input_ids = torch.randint(5, config.vocab_size, (batch_size, seq_len), generator=generator)
    positions = torch.stack(
        [torch.randperm(seq_len - 1, generator=generator)[:masked] + 1 for _ in range(batch_size)]
    )  # (B, P)
    with FlopCounterMode(display=False) as counter:
        loss = model(
            input_ids,
            token_type_ids=torch.zeros_like(input_ids),
            masked_positions=positions,
            labels=torch.randint(5, config.vocab_size, positions.shape, generator=generator),
            next_sentence_label=torch.zeros(batch_size, dtype=torch.long),
        ).loss
        loss.backward()
    counted = counter.get_total_flops()
    formula = gpu_speed.model_flops_per_step(config, batch_size, seq_len, masked)
    assert counted > 0
    assert formula == pytest.approx(counted, rel=0.03)


def test_a_tiny_run_writes_the_table_json_and_its_mfu_arithmetic(gpu_speed, tmp_path) -> None:
    sides = "bertlab,transformers" if gpu_speed.transformers_version() else "bertlab"
    out = tmp_path / "speed.json"
    argv = ["--tiny", "--sides", sides, "--pretrain-sizes", "", "--work", str(tmp_path)]
    gpu_speed.main([*argv, "--out", str(out)])
    result = json.loads(out.read_text(encoding="utf-8"))
    assert result["device"] == "CPU"
    settings = result["settings"]
    assert (settings["batch_size"], settings["seq_len"], settings["masked_per_sequence"]) == (
        4,
        32,
        5,
    )
    assert settings["dropout"] is True and settings["optimizer"] == "AdamW fused"
    peak = result["peak"]
    assert peak["dtype"] == "float32" and peak["size"] == 512 and peak["flops"] > 0
    rows = result["rows"]
    assert [row["side"] for row in rows] == sides.split(",")
    config = BertConfig.from_preset("tiny", vocab_size=gpu_speed.VOCAB_SIZE)
    flops = gpu_speed.model_flops_per_step(config, 4, 32, 5)
    for row in rows:
        assert row["size"] == "tiny" and row["compiled"] is False and "error" not in row
        seconds = row["ms_per_step"] / 1e3
        assert row["model_flops_per_step"] == flops
        assert row["tokens_per_s"] == pytest.approx(4 * 32 / seconds)
        assert row["mfu"] == pytest.approx(flops / seconds / peak["flops"])
        assert 0 < row["mfu"] < 1
    if len(rows) == 2:
        ratio = rows[1]["ms_per_step"] / rows[0]["ms_per_step"]
        assert result["speedup"] == {"tiny": pytest.approx(ratio)}
    assert "pretrain" not in result and "finetune" not in result
