"""One corpus in every format: the same documents, tokens and training batches as plain text.

2,000 IMDB reviews (the demo's shipped slice) written as `.txt` in Google's layout, JSON Lines
(plain and gzipped), CSV, TSV, Parquet, a folder of files, a pattern and a folder saved by
`datasets`, each tokenized by `build_corpus` (the path of `bertlab pretrain`), used by tokenizer
training and by the word vectors.
"""

from __future__ import annotations

import csv
import gzip
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from bertlab.core.config import PretrainDataConfig
from bertlab.corpus.build import build_corpus
from bertlab.corpus.preflight import preflight_report
from bertlab.corpus.sources import CorpusReading
from bertlab.data.pretraining import SpecialIds
from bertlab.data.stream import PretrainingStream, StreamSpec
from bertlab.tokenizer.training import TokenizerTrainingConfig, train_tokenizer
from bertlab.tokenizer.wordpiece import Tokenizer
from bertlab.training.word2vec.vectors import write_word_corpus

PACKAGE = Path(__file__).resolve().parents[2] / "bertlab"
REVIEWS_SLICE = PACKAGE / "demo_data" / "imdb_reviews_slice.txt.gz"
SHIPPED_VOCAB = PACKAGE / "models" / "mini-reviews-en"
NUM_REVIEWS = 2000
NUM_BATCHES = 5
FOLDER_FILES = 8  # the folder format: the reviews split over this many files


@pytest.fixture(scope="module")
def reviews() -> list[str]:
    with gzip.open(REVIEWS_SLICE, "rt", encoding="utf-8") as file:
        lines = [line.strip() for line in file if line.strip()]
    return lines[:NUM_REVIEWS]


@pytest.fixture(scope="module")
def tokenizer() -> Tokenizer:
    return Tokenizer.from_pretrained(SHIPPED_VOCAB)


def write_text(path: Path, reviews: list[str]) -> Path:
    path.write_text("\n\n".join(reviews) + "\n", encoding="utf-8")
    return path


def write_jsonl(path: Path, reviews: list[str]) -> Path:
    lines = "".join(json.dumps({"id": i, "text": text}) + "\n" for i, text in enumerate(reviews))
    data = lines.encode("utf-8")
    path.write_bytes(gzip.compress(data) if path.suffix == ".gz" else data)
    return path


def write_csv(path: Path, reviews: list[str]) -> Path:
    with open(path, "w", encoding="utf-8", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["id", "text", "rating"])
        writer.writerows([i, text, 10] for i, text in enumerate(reviews))
    return path


def write_tsv(path: Path, reviews: list[str]) -> Path:
    """As GLUE's TSV: no quoting, quote marks kept as they are."""
    assert not any("\t" in text for text in reviews)
    rows = ["id\ttext\trating", *(f"{i}\t{text}\t10" for i, text in enumerate(reviews))]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def write_parquet(path: Path, reviews: list[str]) -> Path:
    pyarrow = pytest.importorskip("pyarrow")
    parquet = pytest.importorskip("pyarrow.parquet")
    table = pyarrow.table({"id": list(range(len(reviews))), "text": reviews})
    parquet.write_table(table, path, row_group_size=700)  # three row groups
    return path


def write_folder(path: Path, reviews: list[str]) -> Path:
    path.mkdir()
    size = -(-len(reviews) // FOLDER_FILES)
    for index in range(FOLDER_FILES):  # names sort as the reviews' order; a file ends a document
        write_text(path / f"part-{index:02d}.txt", reviews[index * size : (index + 1) * size])
    (path / ".DS_Store").write_bytes(b"\x00\x01")  # hidden: not part of the corpus
    return path


def write_dataset(path: Path, reviews: list[str]) -> Path:
    datasets = pytest.importorskip("datasets")
    dataset = datasets.Dataset.from_dict({"id": list(range(len(reviews))), "text": reviews})
    dataset.save_to_disk(str(path), num_shards=2)
    return path


FORMATS = {  # name -> (write, the path to give, beside the written one)
    "jsonl": lambda d, r: write_jsonl(d / "reviews.jsonl", r),
    "jsonl.gz": lambda d, r: write_jsonl(d / "reviews.jsonl.gz", r),
    "csv": lambda d, r: write_csv(d / "reviews.csv", r),
    "tsv": lambda d, r: write_tsv(d / "reviews.tsv", r),
    "parquet": lambda d, r: write_parquet(d / "reviews.parquet", r),
    "folder": lambda d, r: write_folder(d / "reviews", r),
    "pattern": lambda d, r: write_folder(d / "reviews", r) / "part-*.txt",
    "dataset": lambda d, r: write_dataset(d / "reviews", r),
}


def first_batches(corpus, tokenizer: Tokenizer) -> list[dict[str, torch.Tensor]]:
    spec = StreamSpec(
        corpus.directory,
        (0, corpus.num_documents),
        PretrainDataConfig(max_seq_length=64, max_predictions_per_seq=10),
        SpecialIds.from_vocab(tokenizer.get_vocab()),
        tokenizer.vocab_size,
        seed=7,
        batch_size=8,
    )
    stream = iter(PretrainingStream(spec))
    return [next(stream)[0] for _ in range(NUM_BATCHES)]


@pytest.fixture(scope="module")
def plain(tmp_path_factory, reviews, tokenizer):
    directory = tmp_path_factory.mktemp("plain")
    path = write_text(directory / "reviews.txt", reviews)
    corpus = build_corpus([path], tokenizer, directory / "corpus", "en", False, num_workers=0)
    return path, corpus, first_batches(corpus, tokenizer)


@pytest.mark.parametrize("name", FORMATS)
def test_every_format_gives_the_tokens_and_batches_of_plain_text(
    name, plain, reviews, tokenizer, tmp_path
):
    _, expected, expected_batches = plain
    path = FORMATS[name](tmp_path, reviews)
    corpus = build_corpus([path], tokenizer, tmp_path / "corpus", "en", False, num_workers=0)
    assert corpus.num_documents == NUM_REVIEWS == expected.num_documents
    assert np.array_equal(corpus.token_ids, expected.token_ids)
    assert np.array_equal(corpus.sentence_offsets, expected.sentence_offsets)
    assert np.array_equal(corpus.document_offsets, expected.document_offsets)
    for batch, expected_batch in zip(
        first_batches(corpus, tokenizer), expected_batches, strict=True
    ):
        assert batch.keys() == expected_batch.keys()
        assert all(torch.equal(batch[key], expected_batch[key]) for key in batch)
    files = corpus.meta["files"]
    assert sum(file["documents"] for file in files) == NUM_REVIEWS
    read_as = preflight_report(corpus, tokenizer, "mlm").read_as
    assert len(read_as) == 1 and read_as[0].endswith(f"{NUM_REVIEWS:,} documents"), read_as


def test_tokenizer_training_and_word_vectors_read_only_the_text(reviews, tmp_path):
    """JSON Lines train the vocabulary of the same text as plain text: no `{"id": 1, "text": `
    pieces; the word vectors' words are the text's words."""
    text_path = write_text(tmp_path / "reviews.txt", reviews[:500])
    jsonl = write_jsonl(tmp_path / "reviews.jsonl", reviews[:500])
    config = TokenizerTrainingConfig(vocab_size=600)
    from_text, _ = train_tokenizer([text_path], config, show_progress=False)
    from_jsonl, _ = train_tokenizer([jsonl], config, show_progress=False)
    # the same pieces (the trainer's order of equally frequent pieces varies from run to run)
    assert set(from_jsonl.get_vocab()) == set(from_text.get_vocab())
    words = [write_word_corpus([path], "en", tmp_path / f"{path.name}.words") for path in
             (text_path, jsonl)]  # fmt: skip
    assert words[0] == words[1]
    assert (tmp_path / "reviews.txt.words").read_text() == (
        tmp_path / "reviews.jsonl.words"
    ).read_text()


def test_the_same_file_read_another_way_is_tokenized_again(reviews, tokenizer, tmp_path):
    path = tmp_path / "reviews.csv"
    with open(path, "w", encoding="utf-8", newline="") as file:
        rows = ((text[:30], text) for text in reviews[:500])
        csv.writer(file).writerows([("title", "text"), *rows])
    out = tmp_path / "corpus"
    whole = build_corpus([path], tokenizer, out, "en", False, num_workers=0)
    whole_tokens = whole.num_tokens
    titles = build_corpus(
        [path], tokenizer, out, "en", False, num_workers=0, reading=CorpusReading("csv", "title")
    )
    assert titles.num_tokens < whole_tokens / 5
    again = build_corpus([path], tokenizer, out, "en", False, num_workers=0)
    assert again.num_tokens == whole_tokens
    as_text = build_corpus(
        [path], tokenizer, out, "en", False, num_workers=0, reading=CorpusReading("text")
    )
    assert as_text.num_documents == 1  # every row a line of one document, the header too
