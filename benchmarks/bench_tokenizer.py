"""Tokenizer benchmark: training time, encoding speed (ours vs the reference) and peak memory.

Run from the repository root (other people's benchmarks must not overlap with it):

    flock /tmp/bertlab-bench.lock .venv/bin/python benchmarks/bench_tokenizer.py
    flock /tmp/bertlab-bench.lock .venv/bin/python benchmarks/bench_tokenizer.py \
        --vocab ../shared/data/vocab/bert-base-uncased-vocab.txt   # encoding only, no training

Trains a 30k uncased vocabulary on both files of ../shared/data/corpus_en and a 21k vocabulary on
../shared/data/corpus_zh, reports their held-out [UNK] rates, then encodes the English corpus
(ids, no offsets) in the same run with: bertlab's bulk `encode_ids` on both cores, the stock
`tokenizers.BertWordPieceTokenizer` (the pipeline `transformers.BertTokenizerFast` wraps; their
ratio is printed), bertlab's `__call__` in one process, bertlab's exact pipeline without the chunk
cache, and, on a sample, the pure-Python reference. Each bertlab figure starts from an empty chunk
cache: one pass over the corpus, as preprocessing makes.
"""

from __future__ import annotations

import argparse
import gzip
import resource
import sys
import tempfile
import time
from pathlib import Path

from bertlab.tokenizer.training import TokenizerTrainingConfig, train_tokenizer
from bertlab.tokenizer.wordpiece import VOCAB_FILE, Tokenizer

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"
ENGLISH_VOCAB_SIZE = 30000  # a 30k English vocabulary, as BERT
CHINESE_VOCAB_SIZE = 21128  # 21k, the size of Google's bert-base-chinese
LINES_PER_BATCH = 10_000
REFERENCE_SAMPLE_BYTES = 2_000_000  # the reference is slow; a sample gives its speed
BYTES_PER_MB = 1e6
KIB_PER_MIB = 1024  # ru_maxrss is in KiB on Linux
TARGET_MB_PER_S = 5.0  # the target: bulk encoding at >= 5 MB/s on 2 cores


def read_lines(paths: list[Path], max_bytes: float) -> tuple[list[str], int]:
    lines, size = [], 0
    for path in paths:
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", encoding="utf-8") as file:
            for line in file:
                lines.append(line)
                size += len(line.encode("utf-8"))
                if size >= max_bytes:
                    return lines, size
    return lines, size


def peak_rss_mib(who: int = resource.RUSAGE_SELF) -> float:
    return resource.getrusage(who).ru_maxrss / KIB_PER_MIB


def bench_training(name: str, paths: list[Path], vocab_size: int, out: Path) -> Tokenizer:
    started = time.perf_counter()
    config = TokenizerTrainingConfig(vocab_size=vocab_size)
    tokenizer, report = train_tokenizer(paths, config, show_progress=False)
    seconds = time.perf_counter() - started
    tokenizer.save_pretrained(out)
    corpus_mb = sum(path.stat().st_size for path in paths) / BYTES_PER_MB
    print(
        f"[{name}] trained {report.vocab_size} pieces on {len(paths)} files "
        f"({corpus_mb:.0f} MB on disk) in {seconds:.1f} s; peak RSS {peak_rss_mib():.0f} MiB"
    )
    for line in report.summary():
        print(f"[{name}]   {line}")
    return tokenizer


def report_speed(name: str, size: int, seconds: float, num_pieces: int, how: str) -> float:
    speed = size / BYTES_PER_MB / seconds
    print(
        f"[encode] {name}: {size / BYTES_PER_MB:.1f} MB, {num_pieces} pieces in {seconds:.1f} s"
        f" = {speed:.2f} MB/s ({how})"
    )
    return speed


def bench_bulk_encoding(
    tokenizer: Tokenizer, lines: list[str], size: int, num_workers: int
) -> float:
    """MB/s of `encode_ids` from an empty chunk cache (a fresh copy of `tokenizer`)."""
    fresh = Tokenizer(tokenizer.get_vocab(), tokenizer.options)
    started = time.perf_counter()
    num_pieces = sum(map(len, fresh.encode_ids(lines, num_workers=num_workers)))
    seconds = time.perf_counter() - started
    how = f"{num_workers} worker processes"
    speed = report_speed("ours, encode_ids (chunk cache)", size, seconds, num_pieces, how)
    print(f"[memory] peak RSS of one worker: {peak_rss_mib(resource.RUSAGE_CHILDREN):.0f} MiB")
    return speed


def bench_other_encodings(tokenizer: Tokenizer, lines: list[str], size: int) -> None:
    """`__call__` (fresh cache), the exact pipeline without the cache, and with offsets."""
    fresh = Tokenizer(tokenizer.get_vocab(), tokenizer.options)
    started = time.perf_counter()
    num_pieces = 0
    for start in range(0, len(lines), LINES_PER_BATCH):
        batch = fresh(lines[start : start + LINES_PER_BATCH], truncation=False)
        num_pieces += sum(map(len, batch["input_ids"]))
    seconds = time.perf_counter() - started
    how = "batches, one process; the library encodes misses on both cores"
    report_speed("ours, __call__ (chunk cache)", size, seconds, num_pieces, how)

    started = time.perf_counter()
    num_pieces = 0
    for start in range(0, len(lines), LINES_PER_BATCH):
        batch = lines[start : start + LINES_PER_BATCH]
        encodings = tokenizer.backend.encode_batch_fast(batch, add_special_tokens=True)
        num_pieces += sum(len(encoding.ids) for encoding in encodings)
    seconds = time.perf_counter() - started
    report_speed("ours, exact pipeline, no cache", size, seconds, num_pieces, "batch, both cores")

    started = time.perf_counter()
    batch = tokenizer(lines[:LINES_PER_BATCH], truncation=False, return_offsets=True)
    sample = sum(len(line.encode("utf-8")) for line in lines[:LINES_PER_BATCH])
    seconds = time.perf_counter() - started
    speed = sample / BYTES_PER_MB / seconds
    print(f"[encode] ours with offsets (exact pipeline): {speed:.2f} MB/s")


def bench_stock_library(vocab_dir: Path, lines: list[str], size: int) -> float:
    """The `tokenizers` library's own BERT pipeline, the one `transformers.BertTokenizerFast`
    wraps (not equal to the reference: see the docs)."""
    from tokenizers import BertWordPieceTokenizer

    stock = BertWordPieceTokenizer(str(vocab_dir / VOCAB_FILE), lowercase=True)
    started = time.perf_counter()
    num_pieces = 0
    for start in range(0, len(lines), LINES_PER_BATCH):
        encodings = stock.encode_batch(lines[start : start + LINES_PER_BATCH])
        num_pieces += sum(len(encoding.ids) for encoding in encodings)
    seconds = time.perf_counter() - started
    how = "encode_batch, both cores"
    return report_speed("stock tokenizers.BertWordPieceTokenizer", size, seconds, num_pieces, how)


def bench_reference(vocab_dir: Path, lines: list[str]) -> None:
    from transformers.models.bert.tokenization_bert_legacy import BertTokenizerLegacy

    reference = BertTokenizerLegacy(str(vocab_dir / "vocab.txt"), do_lower_case=True)
    sample, size = [], 0
    for line in lines:
        if size >= REFERENCE_SAMPLE_BYTES:
            break
        sample.append(line)
        size += len(line.encode("utf-8"))
    started = time.perf_counter()
    for line in sample:
        reference(line, truncation=False)
    seconds = time.perf_counter() - started
    print(
        f"[encode] reference BertTokenizerLegacy: {size / BYTES_PER_MB:.1f} MB sample in "
        f"{seconds:.1f} s = {size / BYTES_PER_MB / seconds:.2f} MB/s (pure Python, one core)"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--encode-mb",
        type=float,
        default=float("inf"),
        help="encode at most this many MB of the English corpus",
    )
    parser.add_argument("--skip-chinese", action="store_true")
    parser.add_argument(
        "--vocab",
        type=Path,
        help="encode with this vocab.txt (uncased) instead of training: encoding figures only",
    )
    parser.add_argument("--num-workers", type=int, default=2, help="processes for encode_ids")
    parser.add_argument(
        "--bulk-only",
        action="store_true",
        help="skip `__call__`, the exact pipeline and offsets: encode_ids, stock and reference",
    )
    args = parser.parse_args()
    english = sorted((SHARED_DATA / "corpus_en").glob("*.txt.gz"))
    chinese = sorted((SHARED_DATA / "corpus_zh").glob("*.txt"))
    if not english:
        print(f"no corpus under {SHARED_DATA}", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch)
        if args.vocab is None:
            tokenizer = bench_training("en-30k", english, ENGLISH_VOCAB_SIZE, out / "en")
            if chinese and not args.skip_chinese:
                bench_training("zh-21k", chinese, CHINESE_VOCAB_SIZE, out / "zh")
        else:
            tokenizer = Tokenizer.from_pretrained(args.vocab, lowercase=True)
            tokenizer.save_pretrained(out / "en")
        lines, size = read_lines(english, args.encode_mb * BYTES_PER_MB)
        ours = bench_bulk_encoding(tokenizer, lines, size, args.num_workers)
        stock = bench_stock_library(out / "en", lines, size)
        print(
            f"[encode] encode_ids: {ours:.2f} MB/s = {ours / stock:.2f}x the stock `tokenizers` "
            f"pipeline of this run (target >= {TARGET_MB_PER_S:.0f} MB/s: "
            f"{'met' if ours >= TARGET_MB_PER_S else 'NOT met'})"
        )
        if not args.bulk_only:
            bench_other_encodings(tokenizer, lines, size)
        bench_reference(out / "en", lines)
    print(f"[memory] peak RSS of the main process: {peak_rss_mib():.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
