"""`bertlab finetune|evaluate|predict|score` end to end on the tiny fixtures in tests/data/tasks,
with BERT-Tiny models trained from scratch for one epoch, and the bad inputs users will try."""

from __future__ import annotations

import argparse
import dataclasses
import io
import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors import SafetensorError
from safetensors.torch import load_file

from bertlab.cli import build_parser, main, task_configs
from bertlab.core.finetune_config import FinetuneConfig, TaskDataConfig
from bertlab.network import checkpoint as hf_checkpoint

TASK_DATA = Path(__file__).resolve().parents[1] / "data" / "tasks"
EXIT_USER_ERROR = 1
REVIEW_COLUMNS = ("--text-column", "review", "--label-column", "sentiment", "--id-column", "id")

# task, training (and dev) file, extra flags, the head transformers must load it as.
TASKS = [
    ("rte", "rte_style.tsv", (), "AutoModelForSequenceClassification"),
    ("stsb", "stsb_style.tsv", (), "AutoModelForSequenceClassification"),
    ("classification", "reviews.csv", REVIEW_COLUMNS, "AutoModelForSequenceClassification"),
    ("conll2003", "conll_iob1.txt", (), "AutoModelForTokenClassification"),
    ("tagging", "resume_style.bmes", (), "AutoModelForTokenClassification"),
    ("squad", "squad_style.json", (), "AutoModelForQuestionAnswering"),
    ("swag", "swag_style.csv", (), "AutoModelForMultipleChoice"),
    ("multiple-choice", "choices.jsonl", (), "AutoModelForMultipleChoice"),
]


pytestmark = pytest.mark.usefixtures("one_thread")


def run_cli(capsys, *argv: object) -> tuple[int, str, str]:
    code = main([str(arg) for arg in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def finetune(capsys, task_vocab, out, task, data, *extra) -> tuple[int, str, str]:
    return run_cli(
        capsys,
        "finetune",
        "--task", task,
        "--train", data,
        "--from-scratch", "--model-size", "tiny",
        "--tokenizer", task_vocab,
        "--out", out,
        "--epochs", 1,
        "--batch-size", 2,
        "--no-progress",
        *extra,
    )  # fmt: skip


def last_json(stdout: str) -> dict:
    return json.loads(stdout.strip().splitlines()[-1])


def assert_one_line_error(code: int, stderr: str, *fragments: str) -> None:
    assert code == EXIT_USER_ERROR
    errors = [line for line in stderr.splitlines() if line.startswith("bertlab: error:")]
    assert len(errors) == 1, stderr
    assert "Traceback" not in stderr
    for fragment in fragments:
        assert fragment in errors[0], errors[0]


@pytest.mark.parametrize(("task", "file_name", "extra", "auto_class"), TASKS)
def test_finetune_evaluate_predict_score_agree(
    tmp_path, capsys, task_vocab, task, file_name, extra, auto_class
):
    data = TASK_DATA / file_name
    out = tmp_path / "run"
    code, stdout, stderr = finetune(capsys, task_vocab, out, task, data, "--dev", data, *extra)
    assert code == 0, stderr
    result = last_json(stdout)
    assert result["best_epoch"] == 1 and result["dev"]
    best = out / "best"
    assert {"config.json", "model.safetensors", "vocab.txt", "bertlab_task.json"} <= {
        path.name for path in best.iterdir()
    }
    assert (out / "metrics.jsonl").is_file() and (out / "curves.png").is_file()

    code, stdout, stderr = run_cli(
        capsys, "evaluate", "--task", task, "--model", best, "--data", data, *extra
    )
    assert code == 0, stderr
    metrics = last_json(stdout)
    assert metrics == pytest.approx(result["dev"])

    predictions = tmp_path / "predictions"
    code, _, stderr = run_cli(
        capsys, "predict", "--task", task, "--model", best, "--data", data,
        "--output", predictions, *extra,
    )  # fmt: skip
    assert code == 0, stderr
    score_extra = [flag for flag in extra if flag != "--id-column" and flag != "id"]
    code, stdout, stderr = run_cli(
        capsys, "score", "--task", task, "--data", data, "--predictions", predictions, *score_extra
    )
    assert code == 0, stderr
    assert last_json(stdout) == pytest.approx(metrics)


@pytest.mark.parametrize(("task", "file_name", "extra", "auto_class"), TASKS[::2])
def test_best_model_loads_in_transformers_without_missing_or_unexpected_keys(
    tmp_path, capsys, task_vocab, task, file_name, extra, auto_class
):
    transformers = pytest.importorskip("transformers")
    out = tmp_path / "run"
    code, _, stderr = finetune(capsys, task_vocab, out, task, TASK_DATA / file_name, *extra)
    assert code == 0, stderr
    model, info = getattr(transformers, auto_class).from_pretrained(
        out / "best", output_loading_info=True
    )
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    stored = json.loads((out / "best" / "config.json").read_text())
    assert stored["architectures"] == [type(model).__name__]
    if "id2label" in stored:
        assert {int(k): v for k, v in stored["id2label"].items()} == model.config.id2label
    assert transformers.AutoTokenizer.from_pretrained(out / "best").tokenize("Denver won")


def test_predict_tagging_appends_a_column_and_keeps_docstart_lines(tmp_path, capsys, task_vocab):
    data = TASK_DATA / "conll_iob1.txt"
    out = tmp_path / "run"
    assert finetune(capsys, task_vocab, out, "conll2003", data)[0] == 0
    predictions = tmp_path / "predicted.txt"
    code, _, _ = run_cli(
        capsys, "predict", "--task", "conll2003", "--model", out / "best", "--data", data,
        "--output", predictions,
    )  # fmt: skip
    assert code == 0
    gold_lines = data.read_text().splitlines()
    predicted_lines = predictions.read_text().splitlines()
    assert len(predicted_lines) == len(gold_lines)
    for gold, predicted in zip(gold_lines, predicted_lines, strict=True):
        if gold.split() and gold.split()[0] != "-DOCSTART-":
            assert predicted.startswith(gold + " ") and len(predicted.split()) == 5
        else:
            assert predicted == gold


def test_seeds_report_mean_median_and_std(tmp_path, capsys, task_vocab):
    data = TASK_DATA / "reviews.csv"
    out = tmp_path / "run"
    code, stdout, stderr = finetune(
        capsys, task_vocab, out, "classification", data, "--dev", data, "--seeds", "1,2,3",
        *REVIEW_COLUMNS,
    )  # fmt: skip
    assert code == 0, stderr
    summary = last_json(stdout)
    assert summary["seeds"] == [1, 2, 3]
    accuracy = summary["dev"]["accuracy"]
    assert set(accuracy) == {"mean", "median", "std", "values"} and len(accuracy["values"]) == 3
    assert (out / "best" / "model.safetensors").is_file()
    assert all((out / f"seed-{seed}" / "best" / "config.json").is_file() for seed in (1, 2, 3))
    assert json.loads((out / "seeds.json").read_text())["best_seed"] == summary["best_seed"]


def test_freeze_flags_are_accepted_and_exclusive(tmp_path, capsys, task_vocab):
    data = TASK_DATA / "rte_style.tsv"
    assert finetune(capsys, task_vocab, tmp_path / "a", "rte", data, "--freeze-encoder")[0] == 0
    assert finetune(capsys, task_vocab, tmp_path / "b", "rte", data, "--freeze-layers", 1)[0] == 0
    code, _, stderr = finetune(
        capsys, task_vocab, tmp_path / "c", "rte", data, "--freeze-layers", 1, "--freeze-encoder"
    )
    assert_one_line_error(code, stderr, "not both")
    code, _, stderr = finetune(
        capsys, task_vocab, tmp_path / "d", "rte", data, "--freeze-layers", 9
    )
    assert_one_line_error(code, stderr, "freeze_layers 9")


# --- bad input: one clear line, exit 1, no traceback, nothing half-written ------------------------


@pytest.fixture(scope="module")
def review_model(tmp_path_factory, task_vocab) -> Path:
    out = tmp_path_factory.mktemp("review_model")
    code = main(
        [
            "finetune", "--task", "classification", "--train", str(TASK_DATA / "reviews.csv"),
            "--from-scratch", "--model-size", "tiny", "--tokenizer", str(task_vocab),
            "--out", str(out), "--epochs", "1", "--no-progress", *REVIEW_COLUMNS,
        ]
    )  # fmt: skip
    assert code == 0
    return out / "best"


def test_missing_column_stops_before_writing(tmp_path, capsys, task_vocab):
    out = tmp_path / "run"
    code, _, stderr = finetune(
        capsys, task_vocab, out, "classification", TASK_DATA / "reviews.csv",
        "--text-column", "review", "--label-column", "stars",
    )  # fmt: skip
    assert_one_line_error(code, stderr, "reviews.csv", "'stars'")
    assert not out.exists()


def test_label_unseen_in_training_at_evaluation(tmp_path, capsys, review_model):
    data = tmp_path / "dev.csv"
    data.write_text('id,review,topic,sentiment\nx1,"Fine.",phone,positive\nx2,Meh,phone,mixed\n')
    code, stdout, stderr = run_cli(
        capsys, "evaluate", "--task", "classification", "--model", review_model, "--data", data
    )
    assert_one_line_error(code, stderr, "dev.csv:3", "'mixed'", "positive")
    assert stdout == ""


def test_tag_unseen_in_training_at_evaluation(tmp_path, capsys, task_vocab):
    out = tmp_path / "run"
    assert finetune(capsys, task_vocab, out, "tagging", TASK_DATA / "resume_style.bmes")[0] == 0
    data = tmp_path / "dev.bmes"
    data.write_text("高 B-NAME\n勇 E-NAME\n\n中 B-EDU\n国 E-EDU\n")
    code, _, stderr = run_cli(
        capsys, "evaluate", "--task", "tagging", "--model", out / "best", "--data", data
    )
    assert_one_line_error(code, stderr, "dev.bmes:4", "'B-EDU'")


@pytest.mark.parametrize(
    ("task", "name", "text", "fragment"),
    [
        ("rte", "empty.tsv", "", "no examples"),
        (
            "stsb",
            "nan.tsv",
            "sentence1\tsentence2\tscore\na\tb\t1.0\nc\td\tnan\n",
            "nan.tsv:3: regression target 'nan' is not a finite number",
        ),  # one NaN target turned every weight into NaN
        ("conll2003", "empty.txt", "\n\n", "no examples"),
        ("squad", "broken.json", '{"data": [', "malformed JSON"),
        (
            "multiple-choice",
            "broken.jsonl",
            '{"choices": ["a", "b"]}\n{"choices": [\n',
            "malformed",
        ),
        (
            "squad",
            "absent.json",
            json.dumps(
                {
                    "data": [
                        {
                            "paragraphs": [
                                {
                                    "context": "Denver won.",
                                    "qas": [
                                        {
                                            "id": "q",
                                            "question": "Who?",
                                            "answers": [{"text": "Carolina", "answer_start": 0}],
                                        }
                                    ],
                                }
                            ]
                        }
                    ]
                }
            ),
            "does not occur in its context",
        ),  # fmt: skip
    ],
)
def test_bad_training_files_are_one_line_errors(
    tmp_path, capsys, task_vocab, task, name, text, fragment
):
    data = tmp_path / name
    data.write_text(text)
    out = tmp_path / "run"
    code, _, stderr = finetune(capsys, task_vocab, out, task, data)
    assert_one_line_error(code, stderr, name, fragment)
    assert not out.exists()


def test_max_train_examples_below_one_is_refused_before_anything_is_written(
    tmp_path, capsys, task_vocab
):
    out = tmp_path / "run"
    data = TASK_DATA / "rte_style.tsv"
    code, _, stderr = finetune(capsys, task_vocab, out, "rte", data, "--max-train-examples", 0)
    assert_one_line_error(code, stderr, "at least 1, got 0")
    assert not out.exists()


def test_predict_on_a_bad_file_writes_nothing(tmp_path, capsys, review_model):
    data = tmp_path / "input.jsonl"
    data.write_text('{"id": "a", "text": "fine"}\n{"id": "b", "text": \n')
    output = tmp_path / "predictions.jsonl"
    code, _, stderr = run_cli(
        capsys, "predict", "--task", "classification", "--model", review_model,
        "--data", data, "--output", output, "--text-column", "text", "--label-column", "label",
    )  # fmt: skip
    assert_one_line_error(code, stderr, "input.jsonl:2", "malformed JSON")
    assert list(tmp_path.iterdir()) == [data]


def test_predict_reads_unlabeled_input(tmp_path, capsys, review_model):
    data = tmp_path / "input.csv"
    data.write_text("id,review\nu1,Great battery.\nu2,Cracked screen.\n")
    output = tmp_path / "predictions.jsonl"
    code, _, stderr = run_cli(
        capsys, "predict", "--task", "classification", "--model", review_model,
        "--data", data, "--output", output,
    )  # fmt: skip
    assert code == 0, stderr
    records = [json.loads(line) for line in output.read_text().splitlines()]
    assert [record["id"] for record in records] == ["u1", "u2"]
    assert {record["prediction"] for record in records} <= {"negative", "neutral", "positive"}


def test_predict_and_evaluate_warn_when_the_text_is_mostly_unknown(tmp_path, capsys, review_model):
    data = tmp_path / "input.csv"
    data.write_text("id,review,sentiment\nu1,这家酒店很好。,positive\nu2,Great battery.,positive\n")
    output = tmp_path / "predictions.jsonl"
    code, _, stderr = run_cli(
        capsys, "predict", "--task", "classification", "--model", review_model,
        "--data", data, "--output", output,
    )  # fmt: skip
    assert code == 0, stderr
    warning = [line for line in stderr.splitlines() if line.startswith("bertlab: warning: ")]
    assert len(warning) == 1 and "% of the input's pieces are [UNK]" in warning[0]
    assert len(output.read_text().splitlines()) == 2  # the predictions are still written
    code, _, stderr = run_cli(
        capsys, "evaluate", "--task", "classification", "--model", review_model, "--data", data
    )
    assert code == 0 and "pieces are [UNK]" in stderr
    data.write_text("id,review,sentiment\nu2,Great battery.,positive\n")
    code, _, stderr = run_cli(
        capsys, "evaluate", "--task", "classification", "--model", review_model, "--data", data
    )
    assert code == 0 and "[UNK]" not in stderr


def test_over_long_inputs_are_cut_with_a_counted_warning(tmp_path, capsys, caplog, task_vocab):
    data = TASK_DATA / "rte_style.tsv"
    code, _, stderr = finetune(
        capsys, task_vocab, tmp_path / "run", "rte", data, "--max-seq-length", 8
    )
    assert code == 0, stderr
    assert "4 of 4 examples were longer than max_seq_length 8 and were cut" in caplog.text


def test_training_data_of_one_class_or_without_text_is_warned_about_once(
    tmp_path, capsys, caplog, task_vocab
):
    """Both were trained without a word (the one-class check looked at dev predictions only)."""
    data = tmp_path / "train.csv"
    data.write_text("text,label\na good film,pos\n  ,pos\nawful,pos\n", encoding="utf-8")
    code, _, stderr = finetune(
        capsys, task_vocab, tmp_path / "run", "classification", data, "--seeds", "1,2"
    )
    assert code == 0, stderr
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [
        "all 3 training labels are 'pos': a classifier learns nothing from one class; give "
        "examples of at least two labels",
        "1 of 3 training examples have no text (empty or whitespace only): they teach the model "
        "nothing; remove them or give their text",
    ]


def test_a_dev_set_is_encoded_once_not_every_epoch(tmp_path, capsys, caplog, task_vocab):
    data = TASK_DATA / "rte_style.tsv"
    code, _, stderr = finetune(
        capsys, task_vocab, tmp_path / "run", "rte", data, "--dev", data,
        "--epochs", 3, "--max-seq-length", 8,
    )  # fmt: skip
    assert code == 0, stderr
    # The training set and the dev set are each cut once, not once per epoch.
    assert caplog.text.count("4 of 4 examples were longer than max_seq_length 8") == 2


def test_max_seq_length_beyond_the_model_is_refused(tmp_path, capsys, task_vocab):
    code, _, stderr = finetune(
        capsys, task_vocab, tmp_path / "run", "rte", TASK_DATA / "rte_style.tsv",
        "--max-seq-length", 1000,
    )  # fmt: skip
    assert_one_line_error(code, stderr, "max_position_embeddings 512")


def test_model_without_the_task_head_is_refused(tmp_path, capsys, review_model):
    code, _, stderr = run_cli(
        capsys, "evaluate", "--task", "conll2003", "--model", review_model,
        "--data", TASK_DATA / "conll_iob1.txt",
    )  # fmt: skip
    assert_one_line_error(
        code, stderr, "BertForSequenceClassification", "BertForTokenClassification"
    )


def test_a_diverging_fine_tuning_stops_without_saving_a_nan_model(tmp_path, capsys, task_vocab):
    out = tmp_path / "run"
    data = TASK_DATA / "rte_style.tsv"
    code, stdout, stderr = finetune(
        capsys, task_vocab, out, "rte", data, "--learning-rate", "1e9", "--epochs", "3"
    )
    assert_one_line_error(code, stderr, "fine-tuning diverged at step", "lower --learning-rate")
    if (out / "best").exists():  # an epoch before the divergence: its weights are finite
        weights = load_file(out / "best" / "model.safetensors")
        assert all(bool(torch.isfinite(tensor).all()) for tensor in weights.values())
    for line in (out / "metrics.jsonl").read_text().splitlines():
        json.loads(line)  # valid JSON: no NaN


@pytest.mark.parametrize("command", ["evaluate", "predict"])
def test_a_tokenizer_larger_than_the_model_is_refused_plainly(
    tmp_path, capsys, review_model, command
):
    """The check finetune makes, not an index error from the embedding later."""
    vocab = (review_model / "vocab.txt").read_text(encoding="utf-8")
    larger = tmp_path / "vocab.txt"
    larger.write_text(vocab + "".join(f"extra{i}\n" for i in range(50)), encoding="utf-8")
    output = ("--output", tmp_path / "out.jsonl") if command == "predict" else ()
    code, _, stderr = run_cli(
        capsys, command, "--task", "classification", "--model", review_model,
        "--tokenizer", larger, "--data", TASK_DATA / "reviews.csv", *REVIEW_COLUMNS, *output,
    )  # fmt: skip
    assert_one_line_error(code, stderr, "pieces but the model's vocabulary only")
    assert not (tmp_path / "out.jsonl").exists()


def test_finetune_help_names_every_registered_task(capsys):
    from bertlab.data.tasks.registry import TASKS, task_names

    with pytest.raises(SystemExit):
        main(["finetune", "--help"])
    text = "".join(capsys.readouterr().out.split())  # argparse wraps lines, at hyphens too
    assert all(f"{name}(" in text for name in task_names())
    assert all("".join(spec.description.split()) in text for spec in TASKS.values())


def _finetune_parser() -> argparse.ArgumentParser:
    subparsers = next(
        action
        for action in build_parser()._actions
        if isinstance(action, argparse._SubParsersAction)
    )
    return subparsers.choices["finetune"]


def test_every_finetune_setting_flag_is_a_config_field_of_its_name_and_back() -> None:
    flags = {action.dest for action in _finetune_parser()._actions}
    # The flags that choose the data, the model, the output and the process, not a setting.
    run_flags = {"help", "task", "train", "dev", "dev_fraction", "max_train_examples", "model"}
    run_flags |= {"from_scratch", "model_size", "tokenizer", "out", "overwrite", "seeds"}
    run_flags |= {"features", "bilstm", "no_progress", "threads", "no_header", "regression"}
    run_flags |= {"text_column", "text_pair_column", "label_column", "id_column"}
    finetune_fields = {field.name for field in dataclasses.fields(FinetuneConfig)}
    data_fields = {field.name for field in dataclasses.fields(TaskDataConfig)}
    assert flags - run_flags == (finetune_fields | data_fields) - {
        *task_configs.FINETUNE_FIELDS_WITHOUT_FLAG,  # log_every_steps: the config's default
        task_configs.SQUAD_MAX_SEQ_LENGTH,  # set by --max-seq-length for SQuAD-style tasks
    }
    assert not run_flags & (finetune_fields | data_fields)


def test_finetune_flags_become_the_config_and_the_task_inputs() -> None:
    common = ["finetune", "--train", "t", "--model", "m", "--out", "o"]
    args = build_parser().parse_args(
        [*common, "--task", "rte", "--epochs", "2", "--freeze-layers", "1", "--seed", "7"]
        + ["--gradual-unfreezing", "--warmup-proportion", "0.2", "--max-seq-length", "64"]
    )
    config = task_configs.finetune_config(args)
    assert (config.num_train_epochs, config.freeze_layers, config.seed) == (2, 1, 7)
    assert config.do_gradual_unfreezing and config.warmup_proportion == 0.2
    assert config.log_every_steps == FinetuneConfig.log_every_steps
    assert task_configs.task_of(args).data.max_seq_length == 64
    defaults = build_parser().parse_args([*common, "--task", "rte"])
    assert task_configs.finetune_config(defaults) == FinetuneConfig(num_train_epochs=3)
    squad = build_parser().parse_args([*common, "--task", "squad", "--max-seq-length", "256"])
    data = task_configs.task_of(squad).data
    assert (data.squad_max_seq_length, data.max_seq_length) == (256, TaskDataConfig.max_seq_length)
    frozen = build_parser().parse_args([*common, "--task", "rte", "--freeze-encoder"])
    assert task_configs.finetune_config(frozen).do_freeze_encoder


@pytest.mark.parametrize(
    ("size", "learning_rate", "epochs"),
    [("tiny", 1e-3, 4), ("mini", 3e-4, 4), ("small", 1e-4, 4), ("base", 2e-5, 3)],
)
def test_finetune_chooses_the_rate_and_epochs_by_the_models_width_and_says_so(
    caplog, size, learning_rate, epochs
) -> None:
    common = ["finetune", "--task", "sst2", "--train", "t", "--out", "o", "--from-scratch"]
    args = build_parser().parse_args([*common, "--model-size", size, "--tokenizer", "v"])
    with caplog.at_level(logging.INFO, logger="bertlab"):
        config = task_configs.finetune_config(args, task_configs.model_source(args))
    assert (config.learning_rate, config.num_train_epochs) == (learning_rate, epochs)
    said = [record.getMessage() for record in caplog.records]
    assert any(f"learning rate {learning_rate:g}, {epochs} epochs" in line for line in said)
    given = build_parser().parse_args(
        [*common, "--model-size", size, "--tokenizer", "v", "--learning-rate", "5e-5"]
    )
    config = task_configs.finetune_config(given, task_configs.model_source(given))
    assert (config.learning_rate, config.num_train_epochs) == (5e-5, epochs)  # the flag wins


def test_finetune_of_the_shipped_mini_takes_minis_rate_not_bases(caplog) -> None:
    args = build_parser().parse_args(
        ["finetune", "--task", "sst2", "--train", "t", "--out", "o"]
        + ["--model", "bertlab:mini-reviews-en"]
    )
    with caplog.at_level(logging.INFO, logger="bertlab"):
        config = task_configs.finetune_config(args, task_configs.model_source(args))
    assert (config.learning_rate, config.num_train_epochs) == (3e-4, 4)
    said = " ".join(record.getMessage() for record in caplog.records)
    assert "a model 256 wide (BERT-mini; measured on SST-2)" in said


@pytest.mark.parametrize(
    "argv",
    [
        ("--model-size", "tiny"),  # neither --model nor --from-scratch
        ("--from-scratch", "--model-size", "tiny"),  # no tokenizer
        ("--from-scratch", "--model-size", "tiny", "--tokenizer", "x", "--seeds", "1,x"),
        ("--from-scratch", "--model-size", "tiny", "--tokenizer", "x", "--threads", "0"),
    ],
)
def test_inconsistent_model_flags(tmp_path, capsys, argv):
    code, _, stderr = run_cli(
        capsys, "finetune", "--task", "rte", "--train", TASK_DATA / "rte_style.tsv",
        "--out", tmp_path / "run", *argv,
    )  # fmt: skip
    assert_one_line_error(code, stderr)


# --- one run per --out, `-` for the standard streams -------------------------------------------


def test_finetune_refuses_an_earlier_run_unless_overwrite(tmp_path, capsys, task_vocab):
    """A second finetune into one --out silently replaced the first one's best/, metrics and
    result (pretrain refused that case)."""
    out, data = tmp_path / "run", TASK_DATA / "rte_style.tsv"
    assert finetune(capsys, task_vocab, out, "rte", data)[0] == 0
    first = load_file(out / "best" / "model.safetensors")
    code, _, stderr = finetune(capsys, task_vocab, out, "rte", data, "--seed", "7")
    assert_one_line_error(
        code, stderr, f"--out {out} already holds a fine-tuning run", "--overwrite"
    )
    kept = load_file(out / "best" / "model.safetensors")
    assert all(torch.equal(first[key], kept[key]) for key in first)
    assert finetune(capsys, task_vocab, out, "rte", data, "--seed", "7", "--overwrite")[0] == 0
    replaced = load_file(out / "best" / "model.safetensors")
    assert not all(torch.equal(first[key], replaced[key]) for key in first)


def test_finetune_refuses_a_pretraining_runs_out(tmp_path, capsys, task_vocab):
    out = tmp_path / "run"
    (out / "final").mkdir(parents=True)
    code, _, stderr = finetune(capsys, task_vocab, out, "rte", TASK_DATA / "rte_style.tsv")
    assert_one_line_error(code, stderr, "holds a pre-training run (final/)")
    assert not (out / "metrics.jsonl").exists()


def test_a_second_finetune_on_one_out_is_refused_with_the_holders_pid(
    tmp_path, capsys, task_vocab, another_writer
):
    out = tmp_path / "run"
    with another_writer(out) as pid:
        code, _, stderr = finetune(capsys, task_vocab, out, "rte", TASK_DATA / "rte_style.tsv")
    assert_one_line_error(code, stderr, f"pid {pid}", "another bertlab process")
    assert [path.name for path in out.iterdir()] == [".bertlab.lock"]


def test_predict_reads_stdin_and_writes_stdout_through_a_pipe(tmp_path, review_model):
    command = [sys.executable, "-m", "bertlab", "predict", "--task", "classification"]
    command += ["--model", str(review_model), "--data", "-", "--output", "-"]
    text = "id,review\nu1,Great battery.\nu2,Cracked screen.\n"
    result = subprocess.run(command, input=text, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert [record["id"] for record in records] == ["u1", "u2"]
    assert "wrote 2 predictions to standard output" in result.stderr
    assert result.stdout.count("wrote") == 0  # the summary is not among the predictions


def test_predict_to_dev_stdout_writes_the_redirected_file_in_place(tmp_path, review_model):
    """As root, --output /dev/stdout with stdout redirected to a file replaced the /dev/stdout
    link with a regular file. Now the stream is written in place, appended to (`>>`)."""
    command = [sys.executable, "-m", "bertlab", "predict", "--task", "classification"]
    command += ["--model", str(review_model), "--data", str(TASK_DATA / "reviews.csv")]
    redirected = tmp_path / "predictions.jsonl"
    redirected.write_text('{"earlier": "line"}\n')
    with open(redirected, "a") as stdout:
        result = subprocess.run(
            [*command, "--output", "/dev/stdout"], stdout=stdout, stderr=subprocess.PIPE, text=True
        )
    assert result.returncode == 0, result.stderr
    assert Path("/dev/stdout").is_symlink()
    lines = redirected.read_text().splitlines()
    assert lines[0] == '{"earlier": "line"}' and len(lines) == 1 + 4  # 4 reviews


def test_evaluate_reads_stdin_and_names_it_in_errors(capsys, monkeypatch, review_model):
    good = (TASK_DATA / "reviews.csv").read_bytes()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(good)))
    code, stdout, stderr = run_cli(
        capsys, "evaluate", "--task", "classification", "--model", review_model, "--data", "-"
    )
    assert code == 0, stderr
    assert "accuracy" in last_json(stdout)
    bad = b"id,review,topic,sentiment\nx1,Fine.,phone,positive\nx2,Meh,phone\n"
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(bad)))
    code, _, stderr = run_cli(
        capsys, "evaluate", "--task", "classification", "--model", review_model, "--data", "-"
    )
    assert_one_line_error(code, stderr, "<stdin>:3")


@pytest.mark.skipif(not Path("/dev/full").is_char_device(), reason="needs /dev/full")
def test_a_full_disk_is_one_line_naming_the_file(
    tmp_path, capsys, monkeypatch, task_vocab, review_model
):
    """A full disk ended predict with "[Errno 28] No space left on device" (no file named) and
    finetune with safetensors' traceback."""
    code, _, stderr = run_cli(
        capsys, "predict", "--task", "classification", "--model", review_model,
        "--data", TASK_DATA / "reviews.csv", "--output", "/dev/full",
    )  # fmt: skip
    assert_one_line_error(code, stderr, "could not write /dev/full: no space left on device")

    def full_disk(*args, **kwargs):
        raise SafetensorError("I/O error: No space left on device (os error 28)")

    monkeypatch.setattr(hf_checkpoint, "save_file", full_disk)
    out = tmp_path / "run"
    code, _, stderr = finetune(capsys, task_vocab, out, "rte", TASK_DATA / "rte_style.tsv")
    assert_one_line_error(code, stderr, f"could not write {out / 'best'}: no space left on device")


def _run_files(out: Path) -> dict[str, bytes]:
    """Every file of a run directory, by relative path (the lock file aside)."""
    return {
        str(path.relative_to(out)): path.read_bytes()
        for path in sorted(out.rglob("*"))
        if path.is_file() and path.name != ".bertlab.lock"
    }


@pytest.mark.parametrize(
    "failing",
    [
        ("--max-seq-length", "100000"),  # refused once the model is known
        ("--learning-rate", "1e6"),  # diverges while training
    ],
)
def test_a_failed_overwrite_keeps_the_earlier_run_whole(tmp_path, capsys, task_vocab, failing):
    """`finetune --overwrite` that was then refused or diverged deleted the earlier run's best/
    and result.json before it failed: no model was left."""
    out, data = tmp_path / "run", TASK_DATA / "rte_style.tsv"
    assert finetune(capsys, task_vocab, out, "rte", data)[0] == 0
    before = _run_files(out)
    assert "best/model.safetensors" in before and "result.json" in before
    code, _, stderr = finetune(capsys, task_vocab, out, "rte", data, "--overwrite", *failing)
    assert_one_line_error(code, stderr)
    assert _run_files(out) == before
    assert not (out / ".replaced").exists()


def test_an_overwrite_with_seeds_that_fails_removes_its_own_seeds_and_keeps_the_earlier(
    tmp_path, capsys, task_vocab
):
    out, data = tmp_path / "run", TASK_DATA / "rte_style.tsv"
    assert finetune(capsys, task_vocab, out, "rte", data, "--seeds", "1")[0] == 0
    before = _run_files(out)
    code, _, stderr = finetune(
        capsys, task_vocab, out, "rte", data, "--overwrite", "--seeds", "2,3",
        "--learning-rate", "1e6",
    )  # fmt: skip
    assert_one_line_error(code, stderr)
    assert _run_files(out) == before
    assert not (out / "seed-2").exists() and not (out / "seed-3").exists()


def test_an_overwrite_killed_midway_is_undone_by_the_next_run(tmp_path, capsys, task_vocab):
    """A kill leaves the earlier run in OUT/.replaced and the new run's first files: the next
    command puts the earlier run back before it decides anything."""
    out, data = tmp_path / "run", TASK_DATA / "rte_style.tsv"
    assert finetune(capsys, task_vocab, out, "rte", data)[0] == 0
    before = _run_files(out)
    backup = out / ".replaced"
    backup.mkdir()
    for name in ("best", "result.json", "metrics.jsonl", "curves.png"):  # as `replacing` does
        (out / name).rename(backup / name)
    (out / "best").mkdir()  # what the killed run had begun to write
    (out / "best" / "config.json").write_text("{}", encoding="utf-8")
    code, _, stderr = finetune(capsys, task_vocab, out, "rte", data, "--seed", "7")
    assert_one_line_error(code, stderr, "already holds a fine-tuning run", "--overwrite")
    assert _run_files(out) == before and not backup.exists()


def test_finetune_refuses_zero_epochs_instead_of_running_the_default(tmp_path, capsys, task_vocab):
    """`--epochs 0` was read as "not given" and ran the task's 3 epochs."""
    out = tmp_path / "run"
    code, _, stderr = finetune(
        capsys, task_vocab, out, "rte", TASK_DATA / "rte_style.tsv", "--epochs", "0"
    )
    assert_one_line_error(code, stderr, "num_train_epochs must be a positive integer, got 0")
    assert not (out / "best").exists()


def test_predict_writes_the_label_its_name_every_probability_and_the_text(
    tmp_path, capsys, task_vocab
):
    """`predict` wrote only {"index": 0, "prediction": "1"}: no probabilities, no text, and
    CoLA's or SST-2's labels as "0"/"1" (issue 51, item 5)."""
    data = TASK_DATA / "cola_style.tsv"
    out = tmp_path / "run"
    code, _, stderr = finetune(capsys, task_vocab, out, "cola", data)
    assert code == 0, stderr
    predictions = tmp_path / "predictions.jsonl"
    code, _, stderr = run_cli(
        capsys, "predict", "--task", "cola", "--model", out / "best", "--data", data,
        "--output", predictions, "--with-text",
    )  # fmt: skip
    assert code == 0, stderr
    records = [json.loads(line) for line in predictions.read_text().splitlines()]
    texts = [line.split("\t")[3] for line in data.read_text().splitlines()]
    assert len(records) == len(texts)
    names = {"0": "unacceptable", "1": "acceptable"}  # CoLA's
    for record, text in zip(records, texts, strict=True):
        assert list(record) == ["index", "prediction", "label_name", "probabilities", "text"]
        probabilities = record["probabilities"]
        assert list(probabilities) == ["0", "1"]
        assert sum(probabilities.values()) == pytest.approx(1.0, abs=1e-5)
        assert max(probabilities, key=probabilities.get) == record["prediction"]
        assert record["label_name"] == names[record["prediction"]]
        assert record["text"] == text
    code, stdout, stderr = run_cli(
        capsys, "score", "--task", "cola", "--data", data, "--predictions", predictions
    )
    assert code == 0, stderr

    code, _, stderr = run_cli(
        capsys, "predict", "--task", "cola", "--model", out / "best", "--data", data,
        "--output", predictions,
    )  # fmt: skip
    assert code == 0, stderr
    assert "text" not in json.loads(predictions.read_text().splitlines()[0])
