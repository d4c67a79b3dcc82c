"""Corpus formats benchmark: the same text as plain text, JSON Lines, Parquet (and CSV, a saved
dataset) tokenized by `build_corpus`, time and peak resident size against plain text.

Run from the repository root, alone (other people's benchmarks must not overlap with it):

    flock /tmp/bertlab-bench.lock .venv/bin/python benchmarks/bench_corpus_formats.py

Writes the 100,000 IMDB reviews of ../shared/data/corpus_reviews_en, repeated up to --megabytes
of text, in each format under --work-dir (Parquet as `pandas.to_parquet` and `write_table` write
it by default: one row group for the whole file, the worst case for memory), then tokenizes each
in a fresh process with the bert-base-uncased vocabulary and every core, and deletes the files
(unless --keep). Each format must give plain text's token count and documents. The issue's target:
a peak within about 100 MB of plain text's for every format.

Peak memory is sampled over the process tree (the builder and its workers) every SAMPLE_SECONDS:
the sum of their resident sizes (RSS, as bench_corpus.py measures it: pages the workers share
with the builder after the fork counted in each) and the sum of their proportional sizes (PSS:
each shared page counted once, what the machine holds); the builder's own peak (VmHWM) beside.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench_corpus import KIB_PER_MIB, SAMPLE_SECONDS, _children

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"
REVIEWS = SHARED_DATA / "corpus_reviews_en" / "imdb_reviews.txt.gz"
VOCAB = SHARED_DATA / "vocab" / "bert-base-uncased-vocab.txt"
BYTES_PER_MB = 1e6
TARGET_EXTRA_MIB = 100  # the issue: within about 100 MB of plain text's peak
FILE_NAMES = {
    "text": "corpus.txt",
    "jsonl": "corpus.jsonl",
    "parquet": "corpus.parquet",
    "csv": "corpus.csv",
    "dataset": "corpus-dataset",
}


def _status_kib(pid: int | str, path: str, key: str) -> int:
    try:
        with open(f"/proc/{pid}/{path}") as file:
            for line in file:
                if line.startswith(key):
                    return int(line.split()[1])
    except OSError:  # the process just exited
        pass
    return 0


class TreeMemorySampler:
    """Samples the RSS and PSS sums of this process tree in a thread; peaks in MiB."""

    def __init__(self) -> None:
        self.peak_rss_kib = self.peak_pss_kib = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            rss = pss = 0
            stack = [os.getpid()]
            while stack:
                pid = stack.pop()
                rss += _status_kib(pid, "status", "VmRSS:")
                pss += _status_kib(pid, "smaps_rollup", "Pss:")
                stack += _children(pid)
            self.peak_rss_kib = max(self.peak_rss_kib, rss)
            self.peak_pss_kib = max(self.peak_pss_kib, pss)
            self._stop.wait(SAMPLE_SECONDS)

    def __enter__(self) -> TreeMemorySampler:
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._stop.set()
        self._thread.join()


def repeated_reviews(megabytes: float) -> tuple[list[str], int]:
    """The reviews (the first ones, for less than all), and how many times they must be repeated
    to make `megabytes` of text."""
    with gzip.open(REVIEWS, "rt", encoding="utf-8") as file:
        reviews = [line.strip() for line in file if line.strip()]
    size = sum(len(review.encode("utf-8")) + 2 for review in reviews)  # a review and a blank line
    wanted = megabytes * BYTES_PER_MB
    if wanted < size:
        return reviews[: max(1, round(len(reviews) * wanted / size))], 1
    return reviews, round(wanted / size)


def write_formats(formats: list[str], work: Path, megabytes: float) -> dict[str, Path]:
    reviews, repeats = repeated_reviews(megabytes)
    paths = {name: work / FILE_NAMES[name] for name in formats}
    if "text" in paths:
        with open(paths["text"], "w", encoding="utf-8") as file:
            for _ in range(repeats):
                file.write("\n\n".join(reviews) + "\n\n")
    if "jsonl" in paths:
        records = "".join(json.dumps({"text": review}) + "\n" for review in reviews)
        with open(paths["jsonl"], "w", encoding="utf-8") as file:
            for _ in range(repeats):
                file.write(records)
    if "csv" in paths:
        import csv

        with open(paths["csv"], "w", encoding="utf-8", newline="") as file:
            writer = csv.writer(file)
            writer.writerow(["id", "text"])
            for _ in range(repeats):
                writer.writerows(enumerate(reviews))
    if "parquet" in paths or "dataset" in paths:
        import pyarrow
        import pyarrow.parquet

        # The same buffers repeated: the table costs one copy of the reviews, not `repeats`.
        table = pyarrow.concat_tables([pyarrow.table({"text": reviews})] * repeats)
        if "parquet" in paths:
            pyarrow.parquet.write_table(table, paths["parquet"])  # default row groups
        if "dataset" in paths:
            import datasets

            datasets.Dataset(table).save_to_disk(str(paths["dataset"]))
    return paths


def build(name: str, path: Path, out: Path, num_workers: int | None) -> dict:
    """Tokenize one format in this process (the child); what it measured."""
    from bertlab.corpus.build import build_corpus
    from bertlab.corpus.sources import open_corpus
    from bertlab.tokenizer.wordpiece import Tokenizer

    tokenizer = Tokenizer.from_pretrained(VOCAB)
    started = time.perf_counter()
    with TreeMemorySampler() as sampler:
        corpus = build_corpus(
            [path], tokenizer, out, "en", show_progress=False, num_workers=num_workers
        )
    seconds = time.perf_counter() - started
    digest = hashlib.blake2b()
    with open(corpus.directory / "token_ids.bin", "rb") as file:
        while block := file.read(1 << 22):
            digest.update(block)
    return {
        "format": name,
        "text_mb": sum(source.size() for source in open_corpus([path])) / BYTES_PER_MB,
        "seconds": seconds,
        "tree_rss_mib": sampler.peak_rss_kib / KIB_PER_MIB,
        "tree_pss_mib": sampler.peak_pss_kib / KIB_PER_MIB,
        # VmHWM, not getrusage's ru_maxrss, which a process keeps from its parent across exec
        "main_peak_mib": _status_kib("self", "status", "VmHWM:") / KIB_PER_MIB,
        "documents": corpus.num_documents,
        "tokens": corpus.num_tokens,
        "token_digest": digest.hexdigest()[:16],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=float, default=1040, help="text per format")
    parser.add_argument("--formats", default="text,jsonl,parquet", help=", ".join(FILE_NAMES))
    parser.add_argument("--work-dir", type=Path, help="default: a temporary folder")
    parser.add_argument("--num-workers", type=int)
    parser.add_argument("--keep", action="store_true", help="keep the files written")
    parser.add_argument(
        "--build", nargs=3, metavar=("FORMAT", "PATH", "OUT"), help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    if args.build:  # the child: one format, one process
        name, path, out = args.build
        print(json.dumps(build(name, Path(path), Path(out), args.num_workers)))
        return
    formats = args.formats.split(",")
    if formats[0] != "text" or not set(formats) <= set(FILE_NAMES):
        raise SystemExit(f"--formats: text first, then any of {', '.join(FILE_NAMES)}")
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="bench-corpus-formats-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        started = time.perf_counter()
        paths = write_formats(formats, work, args.megabytes)
        print(f"wrote {', '.join(formats)} in {time.perf_counter() - started:.0f} s to {work}")
        results = []
        for name, path in paths.items():
            command = [sys.executable, __file__, "--build", name, str(path), str(work / "out")]
            if args.num_workers is not None:
                command += ["--num-workers", str(args.num_workers)]
            child = subprocess.run(command, check=True, capture_output=True, text=True)
            results.append(json.loads(child.stdout.strip().splitlines()[-1]))
            shutil.rmtree(work / "out")
            report(results)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


def report(results: list[dict]) -> None:
    text = results[0]
    result = results[-1]
    same = (result["tokens"], result["documents"], result["token_digest"]) == (
        text["tokens"],
        text["documents"],
        text["token_digest"],
    )
    rss, pss = result["tree_rss_mib"], result["tree_pss_mib"]
    print(
        f"{result['format']:8s} {result['text_mb']:5.0f} MB on disk, {result['seconds']:5.1f} s "
        f"({result['seconds'] / text['seconds']:.2f}x plain text); peak RSS {rss:4.0f} MiB "
        f"({rss - text['tree_rss_mib']:+4.0f}; target <= +{TARGET_EXTRA_MIB}), PSS {pss:4.0f} MiB "
        f"({pss - text['tree_pss_mib']:+4.0f}), builder {result['main_peak_mib']:4.0f} MiB; "
        f"{result['documents']:,} documents, {result['tokens']:,} tokens: "
        f"{'the same' if same else 'NOT the same'} as plain text",
        flush=True,
    )


if __name__ == "__main__":
    main()
