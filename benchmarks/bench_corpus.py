"""Pre-training corpus benchmark: tokenize the whole English sample into the on-disk format.

Run from the repository root (other people's benchmarks must not overlap with it):

    flock /tmp/bertlab-bench.lock .venv/bin/python benchmarks/bench_corpus.py

Builds both files of ../shared/data/corpus_en with the bert-base-uncased vocabulary into a
temporary directory, then builds again to time the cache hit. Prints wall time, MB/s of
uncompressed text, CPU time, the corpus counts, peak RSS and the pre-flight summary. The issue's
target: at most 3 minutes and 2 GB on 2 cores.

Peak RSS is measured three ways: the whole process tree (this process and every descendant, their
RSS summed, sampled every SAMPLE_SECONDS from /proc: what the machine has to hold at once), and the
kernel's exact peaks of this process and of the largest worker (`getrusage`).
"""

from __future__ import annotations

import argparse
import gzip
import os
import resource
import tempfile
import threading
import time
from pathlib import Path

from bertlab.corpus.build import build_corpus, default_num_workers
from bertlab.corpus.preflight import preflight_report
from bertlab.tokenizer.wordpiece import Tokenizer

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"
BYTES_PER_MB = 1e6
KIB_PER_MIB = 1024  # ru_maxrss and /proc VmRSS are in KiB on Linux
TARGET_SECONDS = 180  # issue: the whole 150 MB English sample in at most 3 minutes
TARGET_RSS_MIB = 2048  # issue: peak RSS at most 2 GB
SAMPLE_SECONDS = 0.05  # RSS sampling period of the process tree


def uncompressed_bytes(paths: list[Path]) -> int:
    total = 0
    for path in paths:
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rb") as file:
            while block := file.read(1 << 22):
                total += len(block)
    return total


def _children(pid: int) -> list[int]:
    children = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as file:
                children += [int(child) for child in file.read().split()]
    except OSError:  # the process just exited
        pass
    return children


def _rss_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as file:
            for line in file:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def tree_rss_kib(root: int) -> int:
    """RSS of `root` and all its descendants, summed (shared pages counted in each)."""
    total, stack = 0, [root]
    while stack:
        pid = stack.pop()
        total += _rss_kib(pid)
        stack += _children(pid)
    return total


class TreeRssSampler:
    """Samples the RSS of this process tree in a thread; `peak_mib` is the largest sum seen."""

    def __init__(self) -> None:
        self.peak_kib = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak_kib = max(self.peak_kib, tree_rss_kib(os.getpid()))
            self._stop.wait(SAMPLE_SECONDS)

    def __enter__(self) -> TreeRssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def peak_mib(self) -> float:
        return self.peak_kib / KIB_PER_MIB


def cpu_seconds() -> tuple[float, float]:
    """User + system CPU time of this process and of its waited-for children (workers)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vocab", default=SHARED_DATA / "vocab" / "bert-base-uncased-vocab.txt")
    parser.add_argument("--num-workers", type=int, default=None)
    parser.add_argument("--whole-word", action="store_true")
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args()
    paths = sorted((SHARED_DATA / "corpus_en").glob("*.txt.gz"))
    if not paths:
        raise SystemExit(f"no *.txt.gz under {SHARED_DATA / 'corpus_en'}")
    tokenizer = Tokenizer.from_pretrained(args.vocab)
    size_mb = uncompressed_bytes(paths) / BYTES_PER_MB
    num_workers = default_num_workers() if args.num_workers is None else args.num_workers
    with tempfile.TemporaryDirectory() as tmp:
        out_dir = Path(tmp) / "corpus_en"
        cpu_before = cpu_seconds()
        started = time.perf_counter()
        with TreeRssSampler() as sampler:
            corpus = build_corpus(
                paths,
                tokenizer,
                out_dir,
                whole_word=args.whole_word,
                num_workers=num_workers,
                show_progress=not args.no_progress,
            )
        seconds = time.perf_counter() - started
        cpu_after = cpu_seconds()
        own_cpu, workers_cpu = (cpu_after[i] - cpu_before[i] for i in range(2))
        started = time.perf_counter()
        build_corpus(paths, tokenizer, out_dir, whole_word=args.whole_word, show_progress=False)
        cache_seconds = time.perf_counter() - started
        disk_mb = sum(path.stat().st_size for path in out_dir.iterdir()) / BYTES_PER_MB
        report = preflight_report(corpus, tokenizer, "mlm+nsp")
    own_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / KIB_PER_MIB
    worker_peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / KIB_PER_MIB
    meets = seconds <= TARGET_SECONDS and sampler.peak_mib <= TARGET_RSS_MIB
    print(
        f"built {len(paths)} files, {size_mb:.0f} MB of text, with {num_workers} workers in "
        f"{seconds:.1f} s: {size_mb / seconds:.2f} MB/s (target <= {TARGET_SECONDS} s)"
    )
    print(
        f"CPU: main process {own_cpu:.1f} s, workers {workers_cpu:.1f} s "
        f"({(own_cpu + workers_cpu) / seconds:.2f} cores busy on average)"
    )
    print(
        f"corpus: {corpus.num_documents:,} documents, {corpus.num_sentences:,} sentences, "
        f"{corpus.num_tokens:,} tokens ({corpus.meta['dtype']}), {disk_mb:.0f} MB on disk"
    )
    print(
        f"peak RSS: process tree {sampler.peak_mib:.0f} MiB (sampled sum; target <= "
        f"{TARGET_RSS_MIB} MiB); main {own_peak:.0f} MiB, largest worker {worker_peak:.0f} MiB"
    )
    print(f"cache hit (second build_corpus): {cache_seconds:.2f} s")
    print(f"target {'met' if meets else 'NOT met'}")
    for line in report.summary():
        print(line)


if __name__ == "__main__":
    main()
