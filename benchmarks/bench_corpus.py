"""Pre-training corpus benchmark: tokenize the whole English sample into the on-disk format.

Run from the repository root (other people's benchmarks must not overlap with it):

    flock /tmp/bertlab-bench.lock .venv/bin/python benchmarks/bench_corpus.py

Builds both files of ../shared/data/corpus_en with the bert-base-uncased vocabulary into a
temporary directory, then builds again to time the cache hit. Prints wall time, MB/s of
uncompressed text, tokens, peak RSS (this process plus its worker processes) and the pre-flight
summary. The issue's target: at most 3 minutes and 2 GB on 2 cores.
"""

from __future__ import annotations

import argparse
import gzip
import resource
import tempfile
import time
from pathlib import Path

from bertlab.data.corpus import build_corpus, default_num_workers, preflight_report
from bertlab.tokenization import Tokenizer

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"
BYTES_PER_MB = 1e6
KIB_PER_MIB = 1024  # ru_maxrss is in KiB on Linux
TARGET_SECONDS = 180  # issue: the whole 150 MB English sample in at most 3 minutes
TARGET_RSS_MIB = 2048  # issue: peak RSS at most 2 GB


def uncompressed_bytes(paths: list[Path]) -> int:
    total = 0
    for path in paths:
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rb") as file:
            while block := file.read(1 << 22):
                total += len(block)
    return total


def peak_rss_mib() -> tuple[float, float]:
    """Peak RSS of this process and of the largest waited-for child (worker), in MiB."""
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / KIB_PER_MIB
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / KIB_PER_MIB
    return own, children


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vocab", default=SHARED_DATA / "vocab" / "bert-base-uncased-vocab.txt")
    parser.add_argument("--num-workers", type=int, default=None)
    parser.add_argument("--whole-word", action="store_true")
    args = parser.parse_args()
    paths = sorted((SHARED_DATA / "corpus_en").glob("*.txt.gz"))
    tokenizer = Tokenizer.from_pretrained(args.vocab)
    size = uncompressed_bytes(paths)
    with tempfile.TemporaryDirectory() as tmp:
        out_dir = Path(tmp) / "corpus_en"
        started = time.perf_counter()
        corpus = build_corpus(
            paths, tokenizer, out_dir, whole_word=args.whole_word, num_workers=args.num_workers
        )
        seconds = time.perf_counter() - started
        started = time.perf_counter()
        build_corpus(paths, tokenizer, out_dir, whole_word=args.whole_word, show_progress=False)
        cache_seconds = time.perf_counter() - started
        disk = sum(path.stat().st_size for path in out_dir.iterdir()) / BYTES_PER_MB
        report = preflight_report(corpus, tokenizer, "mlm+nsp")
    own, children = peak_rss_mib()
    print(
        f"built {len(paths)} files, {size / BYTES_PER_MB:.0f} MB of text, in {seconds:.1f} s "
        f"({size / BYTES_PER_MB / seconds:.2f} MB/s; target <= {TARGET_SECONDS} s)"
    )
    print(f"{corpus.num_tokens:,} tokens ({corpus.meta['dtype']}), {disk:.0f} MB on disk")
    print(f"cache hit: {cache_seconds:.2f} s (fingerprinting the files)")
    print(
        f"peak RSS: main {own:.0f} MiB, largest worker {children:.0f} MiB, "
        f"sum bound {own + children * corpus_workers(args.num_workers):.0f} MiB "
        f"(target <= {TARGET_RSS_MIB} MiB)"
    )
    for line in report.summary():
        print(line)


def corpus_workers(num_workers: int | None) -> int:
    return default_num_workers() if num_workers is None else max(num_workers, 1)


if __name__ == "__main__":
    main()
