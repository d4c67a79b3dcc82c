"""Rebuild the small slices in bertlab/demo_data/ from the shared datasets (deterministic).

python tools/make_demo_data.py ../shared/data
"""

from __future__ import annotations

import csv
import gzip
import random
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "bertlab" / "demo_data"
EN_WIKI_BYTES = 4_000_000  # about 0.8M words: more than the demo's pre-training budget reads
# In-domain text for the demo's pre-training: IMDB reviews of the unlabelled part (50,000 reviews
# after the 50,000 labelled ones in the shared file), whole reviews up to this many bytes; more
# than a few minutes of BERT-Tiny read (about two passes in four minutes on 2 cores).
IMDB_BYTES = 6_000_000
IMDB_LABELLED_REVIEWS = 50_000
SST2_SPLIT = (2000, 1000)  # train, test: the few-labels regime where pre-training matters most
CHNSENTICORP_SPLIT = (1000, 500)  # reviews are long (~100 characters): fewer rows, same size
MIN_SST2_WORDS = 4  # SST-2 train rows include phrases of one or two words
SEED = 0


def documents(lines):
    document = []
    for line in lines:
        if line.strip():
            document.append(line.rstrip("\n"))
        elif document:
            yield document
            document = []
    if document:
        yield document


def slice_corpus(lines, limit: int) -> str:
    kept, size = [], 0
    for document in documents(lines):
        text = "\n".join(document)
        if size + len(text.encode()) > limit:
            break
        kept.append(text)
        size += len(text.encode()) + 2
    return "\n\n".join(kept) + "\n"


def split_rows(rows: list, header: list[str], name: str, train: int, test: int) -> list:
    """Write the train and test slices; return the rows in neither (shuffled)."""
    rng = random.Random(SEED)
    rng.shuffle(rows)
    for part, chosen in (("train", rows[:train]), ("test", rows[train : train + test])):
        with (OUT / f"{name}_{part}.tsv").open("w", encoding="utf-8", newline="") as handle:
            writer = csv.writer(
                handle, delimiter="\t", lineterminator="\n", quoting=csv.QUOTE_NONE, escapechar="\\"
            )
            writer.writerow(header)
            writer.writerows(chosen)
    return rows[train + test :]


def write_gzip(name: str, text: str) -> None:
    with gzip.GzipFile(OUT / name, "wb", mtime=0) as f:
        f.write(text.encode())


def main(shared: Path) -> None:
    with gzip.open(shared / "corpus_en" / "enwiki_sample_2021.txt.gz", "rt", encoding="utf-8") as f:
        text = slice_corpus(f, EN_WIKI_BYTES)
    with gzip.GzipFile(OUT / "enwiki_slice.txt.gz", "wb", mtime=0) as f:
        f.write(text.encode())

    with (shared / "glue" / "SST-2" / "train.tsv").open(encoding="utf-8") as f:
        reader = csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
        header = next(reader)
        rows = [r for r in reader if len(r[0].split()) >= MIN_SST2_WORDS]
    split_rows(rows, header, "sst2", *SST2_SPLIT)
    with (shared / "chnsenticorp" / "train.tsv").open(encoding="utf-8") as f:
        reader = csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
        header = next(reader)
        rows = [r for r in reader if len(r) == 2 and r[1].strip()]
    rest = split_rows(rows, header, "chnsenticorp", *CHNSENTICORP_SPLIT)
    # The reviews in neither slice, without their labels: in-domain text for pre-training.
    write_gzip("chnsenticorp_unlabeled.txt.gz", "\n\n".join(r[1].strip() for r in rest) + "\n")

    with gzip.open(
        shared / "corpus_reviews_en" / "imdb_reviews.txt.gz", "rt", encoding="utf-8"
    ) as f:
        unlabelled = list(documents(f))[IMDB_LABELLED_REVIEWS:]
    kept, size = [], 0
    for review in unlabelled:
        text = " ".join(review)
        if size + len(text.encode()) > IMDB_BYTES:
            break
        kept.append(text)
        size += len(text.encode()) + 2
    write_gzip("imdb_reviews_slice.txt.gz", "\n\n".join(kept) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
