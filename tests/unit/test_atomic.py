"""bertlab.atomic: every file and directory the project writes is complete or absent."""

from __future__ import annotations

import json
import math
import os
import stat

import pytest

from bertlab.atomic import (
    atomic_directory,
    atomic_file,
    atomic_files,
    json_text,
    write_json,
    write_text,
)


def test_write_text_leaves_no_temporary_file(tmp_path):
    target = tmp_path / "out" / "predictions.jsonl"
    write_text(target, "x\n")
    assert target.read_text() == "x\n"
    assert [path.name for path in target.parent.iterdir()] == ["predictions.jsonl"]
    assert stat.S_IMODE(target.stat().st_mode) == 0o644


def test_a_failed_write_keeps_the_previous_file(tmp_path):
    target = tmp_path / "results.json"
    write_json(target, {"accuracy": 0.5})
    with pytest.raises(RuntimeError), atomic_file(target) as temporary:
        temporary.write_text("{half")
        raise RuntimeError("disk full")
    assert target.read_text() == '{\n  "accuracy": 0.5\n}\n'
    assert [path.name for path in tmp_path.iterdir()] == ["results.json"]


def test_the_temporary_file_keeps_the_destination_suffix(tmp_path):
    with atomic_file(tmp_path / "curves.png") as temporary:
        assert temporary.suffix == ".png"  # matplotlib picks the format by it
        temporary.write_bytes(b"png")
    assert (tmp_path / "curves.png").read_bytes() == b"png"


def test_files_written_together_replace_none_when_one_fails(tmp_path):
    first, second = tmp_path / "vocab.txt", tmp_path / "tokenizer.json"
    write_text(first, "old\n")
    with pytest.raises(ValueError), atomic_files([first, second]) as (a, b):
        a.write_text("new\n")
        raise ValueError("the second file could not be written")
    assert first.read_text() == "old\n"
    assert not second.exists()
    assert sorted(path.name for path in tmp_path.iterdir()) == ["vocab.txt"]


def test_a_special_file_is_written_in_place(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        write_text(fifo, "through the pipe\n")
        assert os.read(reader, 100) == b"through the pipe\n"
    finally:
        os.close(reader)
    assert stat.S_ISFIFO(fifo.stat().st_mode)  # still the pipe, not a regular file


def test_a_directory_is_replaced_whole_or_not_at_all(tmp_path):
    model = tmp_path / "best"
    with atomic_directory(model) as temporary:
        (temporary / "config.json").write_text("{}")
    with pytest.raises(OSError), atomic_directory(model) as temporary:
        (temporary / "config.json").write_text('{"new": 1}')
        raise OSError(28, "No space left on device")
    assert (model / "config.json").read_text() == "{}"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["best"]
    with atomic_directory(model) as temporary:
        (temporary / "weights").write_text("w")
    assert sorted(path.name for path in model.iterdir()) == ["weights"]
    assert stat.S_IMODE(model.stat().st_mode) == 0o755


def test_json_text_is_valid_json_without_nan(tmp_path):
    """A correlation of constant predictions is NaN, which json.dumps writes as invalid JSON."""
    value = {"pearson": math.nan, "loss": [1.0, math.inf, -math.inf], "n": 3, "name": "x"}
    expected = {"pearson": None, "loss": [1.0, None, None], "n": 3, "name": "x"}
    assert json.loads(json_text(value)) == expected
    path = write_json(tmp_path / "result.json", value)
    assert json.loads(path.read_text())["pearson"] is None
