"""`bertlab experiment ablation` end to end on the shared data, tiny: every objective pre-trains
for seconds, every row, the feature-based block and a second shape fine-tune on a few examples,
the report is written, and running the command again continues instead of starting over."""

from __future__ import annotations

import json
import time

import pytest

from bertlab.cli import main

pytestmark = pytest.mark.slow


def test_a_tiny_ablation_runs_every_row_and_continues(shared_data, pretrain_files, tmp_path):
    _, corpus = pretrain_files
    out = tmp_path / "ablation"
    argv = ["experiment", "ablation", "--data", str(shared_data), "--out", str(out)]
    argv += ["--budget", "5s", "--seeds", "1", "--tasks", "mrpc,conll2003,squad"]
    argv += ["--max-examples", "24", "--corpus", str(corpus), "--model-sizes", "mini"]
    assert main([*argv, "--no-progress"]) == 0
    results = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert set(results["pretraining"]) == {"mlm-nsp", "mlm", "clm", "mlm-nsp-mini"}
    assert "lm_loss" in results["pretraining"]["clm"]["last_eval"]
    rows = {"mlm+nsp", "mlm", "ltr", "ltr+bilstm", "word-vectors", "no-pretraining"}
    for task in ("mrpc", "conll2003", "squad"):
        assert rows | {"mlm+nsp@mini"} <= set(results["scores"][task])
    assert {f"features-{layers}" for layers in ("embeddings", "scalar-mix")} <= set(
        results["scores"]["conll2003"]
    )
    table = (out / "table.md").read_text(encoding="utf-8")
    assert "**Table 7: fine-tuning against features**" in table and "**Table 6" in table
    assert (out / "ablation.png").is_file()
    started = time.perf_counter()
    assert main([*argv, "--no-progress"]) == 0  # everything is found done
    assert time.perf_counter() - started < 60
    assert main([*argv[:-2], "--model-sizes", "small", "--learning-rate", "1e-3"]) == 1
