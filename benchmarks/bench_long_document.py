"""Instance building on one long document against the same text with its document breaks.

A corpus without blank lines is one document. Building a pass of pre-training instances from it
must cost about what the same text costs with its breaks: linear in the document's length. The
benchmark cuts the first `--kilobytes` of the shipped English Wikipedia slice, writes it twice
(as it is, and with the blank lines removed), tokenizes both into corpus directories, and times
one pass of instance building (`create_instances_from_document` per document, or
`pack_documents`), A/B interleaved, printing the medians and the ratio one document / broken.

    .venv/bin/python benchmarks/bench_long_document.py --kilobytes 400 --repeats 3
"""

from __future__ import annotations

import argparse
import gzip
import random
import statistics
import tempfile
import time
from pathlib import Path

from bertlab.corpus.build import build_corpus
from bertlab.data.pretraining import SpecialIds, create_instances_from_document, pack_documents
from bertlab.tokenizer.training import TokenizerTrainingConfig, train_tokenizer

SLICE = Path(__file__).resolve().parents[1] / "bertlab" / "demo_data" / "enwiki_slice.txt.gz"
MAX_SEQ_LENGTH = 128
OBJECTIVES = ("mlm+nsp", "mlm", "packed")


def one_pass(corpus, objective: str, separator: int) -> int:
    """Build every instance of the corpus once; returns how many."""
    documents = corpus.documents
    if objective == "packed":
        return len(pack_documents(documents, range(len(documents)), MAX_SEQ_LENGTH, separator))
    count = 0
    for doc_index in range(len(documents)):
        rng = random.Random(doc_index)
        instances = create_instances_from_document(
            documents, doc_index, MAX_SEQ_LENGTH, 0.1, rng, objective
        )
        count += len(instances)
    return count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kilobytes", type=int, default=400)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with gzip.open(SLICE, "rt", encoding="utf-8") as source:
        text = source.read(args.kilobytes * 1024)
    text = text[: text.rfind("\n\n")]  # whole documents
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        broken, single = work / "broken.txt", work / "single.txt"
        broken.write_text(text + "\n", encoding="utf-8")
        # One document; a second, short one lets next-sentence prediction draw its random Bs.
        lines = [line for line in text.splitlines() if line.strip()]
        single.write_text("\n".join(lines[:-1]) + "\n\n" + lines[-1] + "\n", encoding="utf-8")
        config = TokenizerTrainingConfig(vocab_size=8000)
        tokenizer, _ = train_tokenizer([broken], config, show_progress=False)
        special = SpecialIds.from_vocab(tokenizer.get_vocab())
        corpora = {
            name: build_corpus([path], tokenizer, work / name, "en", show_progress=False)
            for name, path in (("broken", broken), ("single", single))
        }
        print(
            f"{len(text) / 1024:.0f} KB: {corpora['broken'].num_documents} documents, "
            f"{corpora['broken'].num_sentences} sentences; as one document: "
            f"{corpora['single'].num_documents} documents"
        )
        print("| objective | with breaks (s) | one document (s) | ratio |")
        print("|---|---:|---:|---:|")
        for objective in OBJECTIVES:
            times: dict[str, list[float]] = {"broken": [], "single": []}
            for _ in range(args.repeats):
                for name in ("broken", "single"):  # interleaved
                    started = time.perf_counter()
                    one_pass(corpora[name], objective, special.sep)
                    times[name].append(time.perf_counter() - started)
            a, b = statistics.median(times["broken"]), statistics.median(times["single"])
            print(f"| {objective} | {a:.3f} | {b:.3f} | {b / a:.2f}x |")


if __name__ == "__main__":
    main()
