"""Messages that suggest the fix, in the caller's words: the Python API names its keywords
(`resume=True`, `ColumnSpec(text_a=...)`), the command line its flags (`--resume`,
`--text-column`)."""

from __future__ import annotations

import pytest

from bertlab.apps.flows import check_settings
from bertlab.cli.wording import error_in_flag_words
from bertlab.core.wording import Worded
from bertlab.data.tasks.classification import ColumnSpec, read_classification
from bertlab.network.checkpoint import read_model
from bertlab.tokenizer.wordpiece import Tokenizer
from bertlab.training.pretraining.run import PretrainRun
from bertlab.training.pretraining.runner import run_pretraining


def test_a_worded_message_is_in_the_apis_words_and_the_flags_words_on_demand() -> None:
    message = Worded("{out} {path} already holds a run; add {resume}", path="runs/x")
    assert message == "out runs/x already holds a run; add resume=True"
    assert error_in_flag_words(ValueError(message)) == (
        "--out runs/x already holds a run; add --resume"
    )


def test_an_existing_run_is_refused_in_the_apis_words(tmp_path) -> None:
    """The API said 'add --resume or choose another --out', a flag it does not have."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("a b c.\n", encoding="utf-8")
    (tmp_path / "run" / "final").mkdir(parents=True)
    with pytest.raises(ValueError) as caught:
        run_pretraining(
            PretrainRun(corpus=[corpus], out=tmp_path / "run", max_steps=1, vocab_size=100)
        )
    assert "add resume=True or choose another out" in str(caught.value)
    assert "--" not in str(caught.value)
    assert "add --resume or choose another --out" in error_in_flag_words(caught.value)


def test_a_missing_corpus_from_python_names_the_file(tmp_path) -> None:
    """The API ended in a bare `FileNotFoundError: [Errno 2]` from deep in the corpus code."""
    missing = tmp_path / "missing.txt"
    with pytest.raises(FileNotFoundError) as caught:
        run_pretraining(
            PretrainRun(corpus=[missing], out=tmp_path / "run", max_steps=1, vocab_size=100)
        )
    assert str(caught.value) == f"corpus file not found: {missing}"
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("has_final", [True, False])
def test_a_pretraining_runs_folder_given_as_a_model_names_the_model_inside(
    tmp_path, has_final
) -> None:
    """`--model runs/my-bert` said "no vocab.txt or tokenizer.json" and nothing else."""
    run = tmp_path / "my-bert"
    for step in ("step-000002", "step-000004"):
        (run / "checkpoints" / step).mkdir(parents=True)
    if has_final:
        (run / "final").mkdir()
    inside = run / "final" if has_final else run / "checkpoints" / "step-000004"
    with pytest.raises(FileNotFoundError, match=f"is a pre-training run: its .* is {inside}$"):
        Tokenizer.from_pretrained(run)
    with pytest.raises(FileNotFoundError, match=f"no config.json in {run}; .* is {inside}$"):
        read_model(run)


def test_a_missing_column_suggests_the_closest_free_column(tmp_path) -> None:
    """A missing column said "(text_a)" and listed the columns, without the setting to change."""
    path = tmp_path / "train.tsv"
    path.write_text("sentence\tlabel\nfine\t1\n", encoding="utf-8")
    with pytest.raises(ValueError) as caught:
        read_classification(path, ColumnSpec(text_a="text", label="label"))
    assert str(caught.value) == (
        f"{path}:1: no column 'text' (text_a) in the file; columns are ['sentence', 'label']; "
        "to read 'sentence', give ColumnSpec(text_a='sentence')"
    )
    assert error_in_flag_words(caught.value) == (
        f"{path}:1: no column 'text' (--text-column) in the file; columns are "
        "['sentence', 'label']; to read 'sentence', give --text-column 'sentence'"
    )


def test_a_missing_json_key_suggests_the_closest_one(tmp_path) -> None:
    path = tmp_path / "train.jsonl"
    path.write_text('{"review": "fine", "label": 1}\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"give ColumnSpec\(text_a='review'\)$"):
        read_classification(path, ColumnSpec(text_a="text", label="label"))


def test_an_apps_run_with_other_settings_is_refused_in_the_apis_words(tmp_path) -> None:
    """The experiments' library said 'use another --out' to Python callers too."""
    check_settings(tmp_path, {"finetune_learning_rate": 5e-4})
    with pytest.raises(ValueError) as caught:
        check_settings(tmp_path, {"finetune_learning_rate": 1e-3})
    assert "finetune_learning_rate 0.0005 there, 0.001 now" in str(caught.value)
    assert "use another out," in str(caught.value) and "--" not in str(caught.value)
    assert "use another --out," in error_in_flag_words(caught.value)
