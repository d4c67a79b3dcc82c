"""Each corpus reader on small files: what it reads, and each misread it refuses in one line
naming the file, the line (or row) and the setting that fixes it."""

from __future__ import annotations

import gzip
import io
import json
import random
import sys
from pathlib import Path

import pytest

from bertlab.cli.wording import in_flag_words
from bertlab.core.optional import MissingPackageError
from bertlab.corpus.readers import document_lines
from bertlab.corpus.sources import CorpusReading, corpus_lines, open_corpus, reader_for
from bertlab.corpus.text_files import MAX_LINE_BYTES, bounded_lines, cut_line

TEXT = "First paragraph. Two sentences.\n\nSecond paragraph."
LINES = ["First paragraph. Two sentences.", "Second paragraph."]  # the record's text, as lines


def lines_of(path: Path | list, reading: CorpusReading | None = None) -> list[str]:
    return list(corpus_lines(open_corpus(path if isinstance(path, list) else [path], reading)))


def raw_lines(path: Path, reading: CorpusReading | None = None) -> list[bytes]:
    [source] = open_corpus([path], reading)
    return [line for chunk in source.chunks() for line in chunk.lines]


def refused(path, reading: CorpusReading | None = None, error=ValueError) -> str:
    """The one-line message of reading `path` (checked, then read through)."""
    with pytest.raises(error) as caught:
        lines_of(path, reading)
    message = str(caught.value)
    assert "\n" not in message, message
    return message


def write_jsonl(path: Path, records: list, raw: str = "") -> Path:
    text = "".join(json.dumps(record) + "\n" for record in records) + raw
    path.write_bytes(gzip.compress(text.encode()) if path.suffix == ".gz" else text.encode())
    return path


# --- records become documents ------------------------------------------------------------------


def test_a_record_is_one_document_of_its_lines():
    assert document_lines(TEXT) == [line.encode() for line in LINES]
    assert document_lines("a\r\nb\n\n\n") == [b"a", b"b"]
    assert document_lines("") == document_lines(None) == document_lines(" \n\t") == []


def test_a_long_line_is_read_in_pieces_cut_after_a_space_never_inside_a_character():
    """A dump in one line ended in a Rust panic and 2.4 GB: lines longer than MAX_LINE_BYTES
    are handed on in pieces, the same whether the line comes from plain text (read a piece at a
    time) or from a record; a piece of blanks only is left out (it would end the document)."""
    assert cut_line(b"one two three", limit=8) == [b"one two ", b"three"]
    assert cut_line("ab中文字".encode(), limit=6) == ["ab中".encode(), "文字".encode()]
    assert cut_line(b"abc" + b" " * 20 + b"def", limit=8) == [b"abc     ", b"def"]
    rng = random.Random(0)
    words = ["a", "bb", "中文", "é", " ", "\t", "  "]
    for _ in range(2000):
        limit = rng.randint(4, 12)
        lines = ["".join(rng.choice(words) for _ in range(rng.randint(1, 30))) for _ in "ab"]
        data = "\r\n".join(lines).encode()
        read = [piece.rstrip(b"\r\n") for piece in bounded_lines(io.BytesIO(data), limit)]
        cut = [piece for line in data.split(b"\r\n") for piece in cut_line(line, limit)]
        assert read == cut
        assert all(len(piece) <= limit and piece.decode() for piece in read)


def test_a_long_line_gives_the_same_pieces_as_plain_text_and_as_a_record(tmp_path):
    text = " ".join(f"word{index}" for index in range(40_000))  # 348 KB in one line
    plain = tmp_path / "dump.txt"
    plain.write_text(text, encoding="utf-8")
    record = write_jsonl(tmp_path / "dump.jsonl", [{"text": text}])
    pieces = lines_of(plain)
    assert len(pieces) == 6 and all(len(piece) <= MAX_LINE_BYTES for piece in pieces)
    assert " ".join(pieces) == text and lines_of(record) == pieces


def test_json_lines_become_documents_in_googles_layout(tmp_path):
    path = write_jsonl(tmp_path / "r.jsonl.gz", [{"text": TEXT, "id": 1}, {"text": "Two."}])
    assert raw_lines(path) == [*(line.encode() for line in LINES), b"", b"Two.", b""]


def test_suffixes_choose_the_reader_and_gz_is_looked_through():
    names = {
        "a.txt": "text", "a.txt.gz": "text", "wiki_00": "text", "a.md": "text",
        "a.jsonl": "jsonl", "a.JSON": "jsonl", "a.jsonl.gz": "jsonl", "a.ndjson": "jsonl",
        "a.csv": "csv", "a.csv.gz": "csv", "a.tsv": "tsv", "a.parquet": "parquet",
    }  # fmt: skip
    assert {name: reader_for(Path(name)).name for name in names} == names


# --- JSON Lines ----------------------------------------------------------------------------------


def test_json_lines_refuse_a_malformed_line_naming_it(tmp_path):
    path = write_jsonl(tmp_path / "r.jsonl", [{"text": "One."}] * 2, '{"text": "unclosed\n')
    assert refused(path).startswith(f"{path}:3: not a JSON object (malformed JSON")
    path = write_jsonl(tmp_path / "array.jsonl", [{"text": "One."}, ["a", "list"]])
    assert refused(path).startswith(f"{path}:2: an array, not a JSON object")


def test_json_lines_name_the_missing_field_and_the_one_holding_text(tmp_path):
    records = [{"id": 1, "body": "A review of some length.", "title": "Short"}] * 3
    path = write_jsonl(tmp_path / "r.jsonl", records)
    with pytest.raises(ValueError) as caught:
        lines_of(path)
    message = caught.value.args[0]
    assert str(message) == (
        f"{path}:1: no field 'text' (text_column); its fields are 'id', 'body', 'title'; to "
        "read 'body', give text_column='body'"
    )
    assert in_flag_words(message).endswith("to read 'body', give --text-field 'body'")
    assert lines_of(path, CorpusReading(text_column="body")) == ["A review of some length."] * 3


def test_json_lines_refuse_a_field_that_is_not_text(tmp_path):
    path = write_jsonl(tmp_path / "r.jsonl", [{"text": "One."}, {"text": 5}])
    assert refused(path).startswith(f"{path}:2: field 'text' (text_column) holds a number, not")


def test_json_lines_skip_empty_records_but_refuse_a_field_empty_in_most(tmp_path):
    path = write_jsonl(tmp_path / "r.jsonl", [{"text": "One."}, {"text": None}, {"text": "Two."}])
    assert lines_of(path) == ["One.", "Two."]
    mostly = write_jsonl(tmp_path / "m.jsonl", [{"text": ""}, {"text": None}, {"text": "Two."}])
    assert refused(mostly) == (
        f"{mostly}:1: field 'text' (text_column) is empty here and in 1 more of the 3 records; "
        "give text_column the field that holds the text"
    )


def test_json_lines_refuse_a_line_that_is_not_utf8(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_bytes(b'{"text": "One."}\n{"text": "caf\xe9"}\n')
    assert refused(path).startswith(f"{path}:2: not UTF-8 (byte 0xe9")


# --- CSV and TSV ---------------------------------------------------------------------------------


def test_csv_reads_quoted_multi_line_fields_and_a_byte_order_mark(tmp_path):
    path = tmp_path / "r.csv"
    long_text = "word " * 40_000  # over the csv module's 128 KiB field limit
    path.write_text(
        f'\ufeffid,text\n1,"{TEXT}"\n2,"He said ""yes"", twice."\n3,{long_text}\n',
        encoding="utf-8",
    )
    pieces = [piece.decode().strip() for piece in cut_line(long_text.encode())]  # over 64 KiB
    assert len(pieces) == 4
    assert lines_of(path) == [*LINES, 'He said "yes", twice.', *pieces]


def test_csv_refuses_a_malformed_row_naming_its_line(tmp_path):
    path = tmp_path / "r.csv"
    path.write_text('id,text\n1,"Fine."\n2,"A "quoted" word."\n', encoding="utf-8")
    assert refused(path).startswith(f"{path}:3: ")
    path.write_text("id,text\n1,Fine.\n2,Commas, unquoted, here.\n", encoding="utf-8")
    assert refused(path) == (
        f"{path}:3: 4 fields where the header has 2 (a comma in a text that is not quoted?)"
    )


def test_csv_names_the_missing_column_and_the_one_holding_text(tmp_path):
    path = tmp_path / "r.csv"
    path.write_text("id,review,label\n1,A long review text.,pos\n", encoding="utf-8")
    with pytest.raises(ValueError) as caught:
        lines_of(path)
    assert in_flag_words(caught.value.args[0]) == (
        f"{path}:1: no column 'text' (--text-column); its columns are 'id', 'review', 'label'; "
        "to read 'review', give --text-column 'review'"
    )


def test_tsv_keeps_quote_marks_and_refuses_a_tab_in_a_text(tmp_path):
    path = tmp_path / "r.tsv"
    path.write_text('label\ttext\n1\t"Quoted" start.\n', encoding="utf-8")
    assert lines_of(path) == ['"Quoted" start.']
    path.write_text("label\ttext\n1\tFine.\n0\tA\ttab.\n", encoding="utf-8")
    assert refused(path).startswith(f"{path}:3: 3 fields where the header has 2 (a tab in a text?")


def test_a_column_empty_in_most_rows_is_refused(tmp_path):
    path = tmp_path / "r.csv"
    path.write_text("title,text\n,One.\n,Two.\nT,Three.\n", encoding="utf-8")
    assert refused(path, CorpusReading(text_column="title")) == (
        f"{path}:2: column 'title' (text_column) is empty here and in 1 more of the 3 records; "
        "give text_column the column that holds the text"
    )


# --- plain text that is something else ----------------------------------------------------------


def test_json_lines_named_txt_are_refused_unless_read_as_text(tmp_path):
    path = write_jsonl(tmp_path / "reviews.txt", [{"id": 1, "text": "Bromwell High."}] * 5)
    with pytest.raises(ValueError) as caught:
        lines_of(path)
    assert in_flag_words(caught.value.args[0]) == (
        f"{path}:1: a JSON object where plain text was expected (5 of the first 5 lines are); "
        "name the file .jsonl (or give --corpus-format 'jsonl') to read each object's text "
        "(--text-field), or give --corpus-format 'text' to read the lines as they are"
    )
    assert lines_of(path, CorpusReading("jsonl")) == ["Bromwell High."] * 5
    assert len(lines_of(path, CorpusReading("text"))) == 5


def test_a_csv_named_txt_is_refused_by_its_header_row(tmp_path):
    path = tmp_path / "reviews.txt"
    path.write_text('review,sentiment\n"Great, really.",positive\nBad.,negative\n')
    assert refused(path).startswith(f"{path}:1: a header row ('review,sentiment') where plain")
    assert lines_of(path, CorpusReading("csv", "review")) == ["Great, really.", "Bad."]
    prose = tmp_path / "prose.txt"  # a title and a sentence with commas: no header
    prose.write_text("Anarchism\nAnarchism is a political philosophy, and a movement.\n")
    assert len(lines_of(prose)) == 2
    long_line = tmp_path / "long.txt"  # a first line longer than the start that is checked
    long_line.write_text("word, " * 20_000 + "\n")
    assert len(lines_of(long_line)) == 2  # read, in two pieces of at most MAX_LINE_BYTES


# --- Parquet -------------------------------------------------------------------------------------


@pytest.fixture
def parquet_file(tmp_path):
    pyarrow = pytest.importorskip("pyarrow")
    parquet = pytest.importorskip("pyarrow.parquet")

    def write(name: str, columns: dict, **options) -> Path:
        path = tmp_path / name
        parquet.write_table(pyarrow.table(columns), path, **options)
        return path

    return write


def test_parquet_reads_the_text_column_of_every_row_group(parquet_file):
    texts = [f"Review number {i}." for i in range(10)]
    path = parquet_file("r.parquet", {"id": list(range(10)), "text": texts}, row_group_size=3)
    assert lines_of(path) == texts


def test_parquet_names_a_missing_or_non_text_column(parquet_file):
    path = parquet_file("r.parquet", {"id": [1, 2], "body": ["A.", "B."]})
    assert refused(path) == (
        f"{path}: no column 'text' (text_column); its columns are 'id', 'body'; to read 'body', "
        "give text_column='body'"
    )
    assert refused(path, CorpusReading(text_column="id")) == (
        f"{path}: column 'id' (text_column) holds values of type int64, not text"
    )


def test_parquet_refuses_a_damaged_row_group_naming_it(parquet_file):
    texts = [f"Review {i} " + "word " * 50 for i in range(40)]
    path = parquet_file("r.parquet", {"text": texts}, row_group_size=20, compression="none")
    data = bytearray(path.read_bytes())
    middle = data.index(b"Review 30 ")
    data[middle - 40 : middle + 200] = b"\xff" * 240  # inside the second row group's pages
    path.write_bytes(bytes(data))
    message = refused(path)
    assert message.startswith(f"{path}: row group 2 of 2 (after row 20) cannot be read"), message


def test_a_parquet_file_named_txt_is_named_as_parquet(parquet_file):
    path = parquet_file("r.txt", {"text": ["A."]})
    assert refused(path).startswith(f"{path} is a Parquet file, not plain text; name it .parquet")


def test_parquet_without_pyarrow_says_how_to_install_it(parquet_file, monkeypatch):
    path = parquet_file("r.parquet", {"text": ["A."]})
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # as if not installed
    assert refused(path, error=MissingPackageError) == (
        "reading Parquet corpora needs the package 'pyarrow', which is not installed: "
        "pip install pyarrow"
    )


# --- saved datasets ------------------------------------------------------------------------------


@pytest.fixture
def datasets():
    return pytest.importorskip("datasets")


def test_a_saved_dataset_is_read_shard_by_shard_in_order(datasets, tmp_path):
    texts = [f"Review {i}." for i in range(9)]
    folder = tmp_path / "saved"
    datasets.Dataset.from_dict({"text": texts, "label": [0] * 9}).save_to_disk(folder, num_shards=3)
    assert lines_of(folder) == texts
    assert refused(folder, CorpusReading(text_column="label")).endswith(
        "column 'label' (text_column) holds values of type int64, not text"
    )


def test_a_dataset_dict_is_refused_naming_its_splits(datasets, tmp_path):
    folder = tmp_path / "saved"
    split = datasets.Dataset.from_dict({"text": ["A."]})
    datasets.DatasetDict({"train": split, "test": split}).save_to_disk(folder)
    assert refused(folder) == (
        f"{folder} holds a DatasetDict of several splits (test, train); give the folder of the "
        f"one to read, e.g. {folder / 'test'}"
    )
    assert lines_of(folder / "train") == ["A."]


# --- folders and patterns ------------------------------------------------------------------------


def test_a_folder_is_its_files_in_sorted_order_hidden_ones_aside(tmp_path):
    folder = tmp_path / "corpus"
    (folder / "b").mkdir(parents=True)
    (folder / "b" / "2.txt").write_text("Two.\n")
    (folder / "a.txt").write_text("One.\n")
    write_jsonl(folder / "c.jsonl.gz", [{"text": "Three."}])
    (folder / ".hidden.txt").write_text("Hidden.\n")
    (folder / "b" / ".git").mkdir()
    (folder / "b" / ".git" / "x.txt").write_text("Hidden.\n")
    assert lines_of(folder) == ["One.", "Two.", "Three."]
    sources = open_corpus([folder])
    assert [source.reader.name for source in sources] == ["text", "text", "jsonl"]


def test_patterns_are_expanded_sorted_and_a_pattern_without_match_is_named(tmp_path):
    for name in ("b.txt", "a.txt", "c.md"):
        (tmp_path / name).write_text(f"{name}\n")
    assert lines_of([str(tmp_path / "*.txt")]) == ["a.txt", "b.txt"]
    assert refused([str(tmp_path / "*.jsonl")], error=FileNotFoundError) == (
        f"no corpus file matches {tmp_path / '*.jsonl'}"
    )


def test_an_unknown_format_is_refused_when_the_reading_is_made():
    with pytest.raises(ValueError, match="unknown corpus format 'xml'; choose one of auto, text"):
        CorpusReading("xml")
