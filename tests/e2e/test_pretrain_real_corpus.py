"""`bertlab pretrain` on a slice of the English Wikipedia sample: the masked-LM loss falls
(docs/pretraining.md). Slow; skipped when ../shared/data is absent."""

from __future__ import annotations

import gzip
import statistics
from pathlib import Path

import pytest

from bertlab.cli import main
from bertlab.training.metrics_log import read_metrics

SLICE_BYTES = 1_000_000  # 662 documents, 13 of them held out
MAX_STEPS = 100
LOG_EVERY = 5
EVAL_EVERY = 20
EDGE_RECORDS = 5  # training records averaged at the start and at the end
# Margins, in nats, about half of what the run shows (docs/pretraining.md): the held-out masked-LM
# loss falls from 8.76 at step 20 to 7.78 at step 100 (ln 30522 = 10.33 at chance); the mean of
# the first five training records is 9.44, of the last five 7.65.
MIN_EVAL_DROP = 0.4
MIN_TRAIN_DROP = 1.0
MAX_EVAL_REBOUND = 0.05


def _write_slice(source: Path, target: Path, limit: int) -> Path:
    """The first `limit` bytes of text of `source`, ending at a document boundary."""
    written = 0
    with gzip.open(source, "rt", encoding="utf-8") as reader, target.open("w") as writer:
        for line in reader:
            if written >= limit and not line.strip():
                break
            writer.write(line)
            written += len(line.encode("utf-8"))
    return target


@pytest.mark.slow
def test_masked_lm_loss_falls_on_a_wikipedia_slice(shared_data, tmp_path) -> None:
    corpus = _write_slice(
        shared_data / "corpus_en" / "enwiki_sample_2021.txt.gz", tmp_path / "wiki.txt", SLICE_BYTES
    )
    out = tmp_path / "run"
    args = [
        "pretrain",
        "--corpus", str(corpus),
        "--lang", "en",
        "--tokenizer", str(shared_data / "vocab" / "bert-base-uncased-vocab.txt"),
        "--model-size", "tiny",
        "--max-seq-length", "64",
        "--batch-size", "16",
        "--learning-rate", "1e-3",
        "--max-steps", str(MAX_STEPS),
        "--log-every", str(LOG_EVERY),
        "--eval-every", str(EVAL_EVERY),
        "--eval-examples", "128",
        "--corpus-cache", str(tmp_path / "corpus"),
        "--no-progress",
        "--out", str(out),
    ]  # fmt: skip
    assert main(args) == 0

    records = read_metrics(out / "metrics.jsonl")
    evals = [r["mlm_loss"] for r in records if r["kind"] == "eval"]
    train = [r["mlm_loss"] for r in records if r["kind"] == "train"]
    assert len(evals) == MAX_STEPS // EVAL_EVERY
    assert len(train) == MAX_STEPS // LOG_EVERY
    # Held out: every later evaluation below the first, the last clearly below it and near the
    # best (no rebound). Not strictly monotone: on the unigram plateau (about 7.7 nats) successive
    # evaluations differ by hundredths, which another CPU's rounding could reorder.
    assert all(later < evals[0] for later in evals[1:]), evals
    assert evals[-1] < evals[0] - MIN_EVAL_DROP, evals
    assert evals[-1] < min(evals) + MAX_EVAL_REBOUND, evals
    # Training: the mean of the last records clearly below the mean of the first.
    start = statistics.mean(train[:EDGE_RECORDS])
    end = statistics.mean(train[-EDGE_RECORDS:])
    assert end < start - MIN_TRAIN_DROP, train
    assert (out / "final" / "model.safetensors").is_file()
