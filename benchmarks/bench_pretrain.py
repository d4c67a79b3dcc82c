"""Pre-training throughput with the data pipeline against the bare model step.

Same config on both sides: the mini preset at the bert-base-uncased vocabulary (30,522), sequence
length 128, batch 32, masked LM + NSP, fp32, dropout 0.1, on a slice of the English Wikipedia
sample (the first `--megabytes` MB of text, cut at a document boundary, tokenized once by
`build_corpus` and cached in `--work-dir`).

- bare: forward + backward + gradient clipping + AdamW step (`build_optimizer`, as the loop) on
  `BARE_BATCHES` batches drawn from the same stream beforehand and held in memory, cycled.
- pipeline: the real `pretrain()` loop for `--steps` steps, batches from `PretrainingStream`
  through a DataLoader worker (`--num-workers`, default 1 as the CLI), no evaluation, no
  checkpoints. Throughput is read from `metrics.jsonl`: the loop's own `tokens_per_second` over
  its records after the first `--warmup-records` (the first holds the worker's start and its
  first block of instances).

Both count non-padding tokens. The sides alternate in rounds in one process, since this machine's
speed drifts between runs. A third measurement, the stream alone in this process, gives the CPU
seconds the data worker spends per batch: on 2 cores that time is taken from the model's threads.

    flock /tmp/bertlab-bench.lock .venv/bin/python benchmarks/bench_pretrain.py
    flock /tmp/bertlab-bench.lock .venv/bin/python benchmarks/bench_pretrain.py --rounds 5
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import statistics
import tempfile
import time
from pathlib import Path

import torch
from bench_model import REPO_ROOT, SEQ_LEN, VOCAB_FILE, bertlab_config

from bertlab.core.config import PretrainConfig, PretrainDataConfig
from bertlab.core.run_folder import METRICS_FILE
from bertlab.core.runtime import set_seed
from bertlab.corpus.build import build_corpus
from bertlab.corpus.format import TokenizedCorpus
from bertlab.data.pretraining import SpecialIds
from bertlab.data.stream import PretrainingStream, StreamSpec
from bertlab.network.bert import BertForPreTraining
from bertlab.tokenizer.wordpiece import Tokenizer
from bertlab.training.metrics_log import read_metrics
from bertlab.training.optim import build_optimizer
from bertlab.training.pretraining.loop import pretrain

CORPUS_GZ = REPO_ROOT.parent / "shared/data/corpus_en/enwiki_sample_2021.txt.gz"
SIZE = "mini"
BATCH_SIZE = 32
BARE_BATCHES = 8  # distinct batches cycled by the bare step (real lengths and padding)
MAX_GRAD_NORM = PretrainConfig.max_grad_norm
SEED = 0
BYTES_PER_MEGABYTE = 1_000_000


def write_slice(source: Path, target: Path, megabytes: float) -> Path:
    """The first `megabytes` MB of `source`'s text, ending at a blank line (a document end)."""
    if target.is_file():
        return target
    limit, written = megabytes * BYTES_PER_MEGABYTE, 0
    partial = target.with_suffix(".partial")
    with gzip.open(source, "rt", encoding="utf-8") as reader, partial.open("w") as writer:
        for line in reader:
            if written >= limit and not line.strip():
                break
            writer.write(line)
            written += len(line.encode("utf-8"))
    partial.replace(target)
    return target


def stream_spec(corpus: TokenizedCorpus, tokenizer: Tokenizer) -> StreamSpec:
    """The loop's training stream for this run (all documents; no held-out split)."""
    return StreamSpec(
        corpus.directory,
        (0, corpus.num_documents),
        PretrainDataConfig(max_seq_length=SEQ_LEN),
        SpecialIds.from_vocab(tokenizer.get_vocab()),
        tokenizer.vocab_size,
        SEED,
        BATCH_SIZE,
    )


def bare_tokens_per_second(batches: list[dict[str, torch.Tensor]], steps: int, warmup: int):
    """Tokens/s of the bare step on batches held in memory, after `warmup` untimed steps."""
    set_seed(SEED)
    model = BertForPreTraining(bertlab_config(SIZE)).train()
    optimizer = build_optimizer(model, PretrainConfig.learning_rate)
    cycle = itertools.cycle(batches)
    tokens, seconds = 0, 0.0
    for step in range(warmup + steps):
        batch = next(cycle)
        start = time.perf_counter()
        model(**batch).loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), MAX_GRAD_NORM)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if step >= warmup:
            seconds += time.perf_counter() - start
            tokens += int(batch["attention_mask"].sum())
    return tokens / seconds


def pipeline_tokens_per_second(
    corpus: TokenizedCorpus, tokenizer: Tokenizer, args: argparse.Namespace
) -> float:
    """Tokens/s of `pretrain()` from its metrics.jsonl, leaving out the first records."""
    config = PretrainConfig(
        batch_size=BATCH_SIZE,
        max_steps=args.steps,
        seed=SEED,
        log_every_steps=args.log_every,
        eval_examples=0,
        num_workers=args.num_workers,
    )
    set_seed(SEED)
    model = BertForPreTraining(bertlab_config(SIZE))
    with tempfile.TemporaryDirectory(dir=args.work_dir) as out:
        data_config = PretrainDataConfig(max_seq_length=SEQ_LEN)
        pretrain(model, tokenizer, corpus, data_config, config, out, show_progress=False)
        records = [r for r in read_metrics(Path(out) / METRICS_FILE) if r["kind"] == "train"]
    timed = records[args.warmup_records :]
    if not timed:
        raise SystemExit("no timed records: raise --steps or lower --warmup-records")
    # Each record covers log_every steps: the harmonic mean is total tokens / total seconds.
    return len(timed) / sum(1 / r["tokens_per_second"] for r in timed)


def stream_seconds_per_batch(spec: StreamSpec, num_batches: int) -> float:
    """CPU seconds the stream takes per batch in this process (one block built, then batches)."""
    torch_threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as in a DataLoader worker
    batches = iter(PretrainingStream(spec))
    next(batches)  # opening the corpus
    start = time.process_time()
    for _ in range(num_batches):
        next(batches)
    seconds = time.process_time() - start
    torch.set_num_threads(torch_threads)
    return seconds / num_batches


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=float, default=5.0, help="corpus slice, MB of text")
    parser.add_argument("--work-dir", default=str(Path(tempfile.gettempdir()) / "bench_pretrain"))
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds")
    parser.add_argument("--steps", type=int, default=40, help="pipeline steps per round")
    parser.add_argument("--log-every", type=int, default=8, help="pipeline steps per record")
    parser.add_argument("--warmup-records", type=int, default=1, help="pipeline records dropped")
    parser.add_argument("--bare-steps", type=int, default=32, help="timed bare steps per round")
    parser.add_argument("--bare-warmup", type=int, default=3, help="untimed bare steps")
    parser.add_argument("--num-workers", type=int, default=PretrainConfig.num_workers)
    parser.add_argument("--threads", type=int, default=2, help="torch threads of the trainer")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    work_dir = Path(args.work_dir)
    work_dir.mkdir(parents=True, exist_ok=True)
    name = f"enwiki_2021_{args.megabytes:g}MB.txt"
    text = write_slice(CORPUS_GZ, work_dir / name, args.megabytes)
    tokenizer = Tokenizer.from_pretrained(VOCAB_FILE)
    corpus = build_corpus([text], tokenizer, work_dir / "corpus", "en", show_progress=False)
    spec = stream_spec(corpus, tokenizer)
    batches = [batch for batch, _ in itertools.islice(PretrainingStream(spec), BARE_BATCHES)]
    print(
        f"torch {torch.__version__}, {args.threads} threads, fp32; {SIZE} (vocab "
        f"{tokenizer.vocab_size}), batch {BATCH_SIZE} x {SEQ_LEN}, mlm+nsp; corpus "
        f"{text.name}: {corpus.num_documents:,} documents; data workers {args.num_workers}",
        flush=True,
    )
    ratios = []
    for round_index in range(args.rounds):
        bare = bare_tokens_per_second(batches, args.bare_steps, args.bare_warmup)
        pipeline = pipeline_tokens_per_second(corpus, tokenizer, args)
        ratios.append(pipeline / bare)
        print(
            f"round {round_index + 1}: bare step {bare:7.0f} tokens/s, pipeline {pipeline:7.0f} "
            f"tokens/s, pipeline / bare {pipeline / bare:.3f}",
            flush=True,
        )
    stream_s = stream_seconds_per_batch(spec, num_batches=256)
    median = statistics.median(ratios)
    print(f"median pipeline / bare: {median:.3f} ({(1 - median) * 100:+.1f}% cost)")
    print(f"stream alone: {stream_s * 1e3:.1f} ms CPU per batch of {BATCH_SIZE} (one process)")
    verdict = "met" if median >= 0.9 else "NOT met"
    print(f"target (pipeline within 10% of the bare step): {verdict}")


if __name__ == "__main__":
    main()
