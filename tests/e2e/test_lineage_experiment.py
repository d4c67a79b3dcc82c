"""`bertlab experiment lineage` end to end, tiny: every arm pre-trains on the synthetic corpus for
one second (word2vec too), the probes read every arm's layers, every task row runs on a few
examples of the shared SST-2 and CoNLL-2003 files, the report has every arm's row, and running
the command again, results.json lost, finds every model and cell done in its folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

import bertlab
from bertlab.apps.experiments.lineage_options import ARM_NAMES
from bertlab.apps.flows import concurrent_runs
from bertlab.cli import main

# The layers each arm is read at: word2vec one, NNLM its vectors and its tanh layer, ELMo its
# token layer and two biLSTM layers, AWD-LSTM its embedding and three LSTMs, a BERT-Tiny (GPT,
# BERT, the random arm) its embeddings and two layers.
LAYERS = {"word2vec": 1, "nnlm": 2, "elmo": 3, "awd-lstm": 4, "gpt": 3, "bert": 3, "scratch": 3}


def test_a_tiny_lineage_runs_every_arm_and_continues(shared_data, pretrain_files, tmp_path, capfd):
    vocab, corpus = pretrain_files
    out = tmp_path / "lineage"
    argv = ["experiment", "lineage", "--data", str(shared_data), "--out", str(out)]
    argv += ["--budget", "1s", "--seeds", "1", "--tasks", "sst2-1k,conll2003", "--probes", "play"]
    argv += ["--max-examples", "12", "--corpus", str(corpus), "--tokenizer", str(vocab)]
    assert main([*argv, "--no-progress"]) == 0
    said = capfd.readouterr().out
    jobs = min(concurrent_runs(torch.get_num_threads(), "cpu"), 6)
    if jobs > 1:  # the six arms that pre-train did so `jobs` at once, each in its own process
        assert f"{jobs} at once, one CPU thread each" in said
        for arm in ("nnlm", "word2vec", "elmo", "awd-lstm", "gpt", "bert"):
            assert f"[{arm}] == " in said, arm

    results = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert list(results["arms"]) == list(ARM_NAMES)
    pretraining = results["pretraining"]
    for arm in ARM_NAMES:
        trained = arm != "scratch"
        assert (pretraining[arm]["tokens"] > 0) == trained, arm
        assert (pretraining[arm]["flops"] > 0) == trained, arm
    for arm in ("nnlm", "elmo", "awd-lstm", "gpt"):  # the left-to-right models
        assert pretraining[arm]["perplexity"] > 1, arm
    for arm in ("word2vec", "bert", "scratch"):
        assert pretraining[arm]["perplexity"] is None, arm

    rows = {"sst2-1k:paper", "sst2-1k:probe", "conll2003:mix", "conll2003:whole"}
    assert set(results["scores"]) == rows
    for row in rows - {"conll2003:whole"}:
        assert set(results["scores"][row]) == set(ARM_NAMES), row
    assert set(results["scores"]["conll2003:whole"]) == {"bert"}
    assert 0 <= results["scores"]["sst2-1k:paper"]["awd-lstm"][0]["accuracy"] <= 1

    probes = results["probes"]["play"]
    assert {arm: len(runs[0]["layers"]) for arm, runs in probes.items()} == LAYERS
    static = probes["word2vec"][0]["layers"][0]  # one vector in every sentence: no separation
    assert static["within_minus_across"] == static["low"] == static["high"] == 0
    assert abs(static["nearest_neighbour_accuracy"] - probes["word2vec"][0]["chance"]) < 1e-9

    report = (out / "report.md").read_text(encoding="utf-8")
    for about in results["arms"].values():
        assert f"| {about['label']} |" in report
    assert '**Probe "play"**' in report and "FLOPs of ELMo's biLM" in report
    assert (out / "lineage.png").is_file()

    # Killed before results.json was first written: running again finds every model and cell in
    # its own folder and trains nothing again.
    written = [*out.rglob("test.json"), *(out / "pretrain").glob("*/final/*")]
    stamps = {path: path.stat().st_mtime_ns for path in written}
    (out / "results.json").unlink()
    assert main([*argv, "--no-progress"]) == 0
    again = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert again["scores"] == results["scores"] and again["probes"] == results["probes"]
    assert {path: path.stat().st_mtime_ns for path in written} == stamps
    assert main([*argv[:-2], "--corpus", str(vocab), "--no-progress"]) == 1  # other settings


@pytest.mark.slow
def test_a_tiny_chinese_lineage_reads_characters_through_wordpiece(shared_data, tmp_path):
    """`--lang zh`: a vocabulary trained on Chinese reviews (characters as pieces), every arm,
    ChnSentiCorp and Resume NER; no probe word for Chinese yet."""
    corpus = Path(bertlab.__file__).parent / "demo_data" / "chnsenticorp_unlabeled.txt.gz"
    out = tmp_path / "lineage-zh"
    argv = ["experiment", "lineage", "--data", str(shared_data), "--out", str(out), "--lang", "zh"]
    argv += ["--budget", "1s", "--seeds", "1", "--max-examples", "12", "--corpus", str(corpus)]
    assert main([*argv, "--tasks", "chnsenticorp-1k,resume-ner", "--no-progress"]) == 0
    results = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert set(results["scores"]) == {
        "chnsenticorp-1k:paper",
        "chnsenticorp-1k:probe",
        "resume-ner:mix",
        "resume-ner:whole",
    }
    assert set(results["scores"]["resume-ner:mix"]) == set(ARM_NAMES)
    assert results["probes"] == {} and results["config"]["probes"] == []
    vocabulary = (out / "tokenizer" / "vocab.txt").read_text(encoding="utf-8").split()
    assert "酒" in vocabulary and "店" in vocabulary  # characters, never bytes
