"""bertlab.core.outputs: an output never lands on, or in, what the command reads."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bertlab.cli.wording import error_in_flag_words
from bertlab.core.outputs import check_outputs


@pytest.fixture
def files(tmp_path) -> Path:
    """tmp_path holding data.tsv and a model folder, model/config.json."""
    (tmp_path / "data.tsv").write_text("text\tlabel\n", encoding="utf-8")
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text("{}", encoding="utf-8")
    return tmp_path


def _refusal(inputs, outputs, replaced=None) -> str:
    with pytest.raises(ValueError) as raised:
        check_outputs(inputs, outputs, replaced)
    return str(raised.value)


def test_an_output_that_is_an_input_is_refused_naming_both(files) -> None:
    message = _refusal({"--data": files / "data.tsv"}, {"--output": files / "data.tsv"})
    assert message == (
        f"--output {files / 'data.tsv'} is --data {files / 'data.tsv'}, which the command "
        "reads; choose another --output"
    )


def test_an_output_reached_another_way_is_still_the_input(files) -> None:
    """Through `..`, a symbolic link, or a second name of the same file (a hard link)."""
    (files / "link.tsv").symlink_to(files / "data.tsv")
    os.link(files / "data.tsv", files / "hard.tsv")
    for other in (files / "model" / ".." / "data.tsv", files / "link.tsv", files / "hard.tsv"):
        assert " is --data " in _refusal({"--data": files / "data.tsv"}, {"--output": other})


def test_an_output_inside_an_input_folder_is_refused(files) -> None:
    message = _refusal({"--model": files / "model"}, {"--output": files / "model" / "p.jsonl"})
    assert message.startswith(f"--output {files / 'model' / 'p.jsonl'} is inside --model ")


def test_nothing_may_lie_inside_a_folder_replaced_whole(files) -> None:
    cache = files / "cache"
    message = _refusal({}, {"out": cache / "run"}, {"corpus_cache": cache})
    assert message.startswith(f"out {cache / 'run'} is inside corpus_cache {cache}, which is ")
    assert " is corpus_cache " in _refusal({}, {"out": cache}, {"corpus_cache": cache})
    (files / "cache").mkdir()
    (files / "cache" / "c.txt").write_text("text\n", encoding="utf-8")
    message = _refusal({"corpus": [files / "cache" / "c.txt"]}, {}, {"corpus_cache": cache})
    assert message.endswith("move it out, or choose another corpus_cache")


def test_the_command_line_names_its_flags_and_the_api_its_keywords(files) -> None:
    with pytest.raises(ValueError) as raised:
        check_outputs({"tokenizer": files / "model"}, {"out": files / "model"})
    assert str(raised.value).startswith("out ")
    assert error_in_flag_words(raised.value).startswith(
        f"--out {files / 'model'} is --tokenizer {files / 'model'}, which"
    )


def test_what_does_not_overlap_passes(files) -> None:
    """Separate paths; a folder beside an input; an output holding an input that it does not
    replace (a run folder beside its data); standard streams; inputs that are no local path (a
    Hub id), or none."""
    (files / "run").mkdir()
    (files / "run" / "train.tsv").write_text("text\tlabel\n", encoding="utf-8")
    check_outputs(
        {
            "--data": [files / "data.tsv", "-"],
            "--model": "google-bert/bert-base-uncased",
            "--train": files / "run" / "train.tsv",
            "--dev": None,
        },
        {"--out": files / "run", "--output": "-", "--figure": None},
        {"corpus_cache": files / "run" / "corpus"},
    )
    check_outputs({"--data": files / "data.tsv"}, {"--output": Path("/dev/stdout")})
