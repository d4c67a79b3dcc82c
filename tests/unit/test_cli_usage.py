"""Usage errors: one line on stderr that names the mistake and, where one is close, the fix;
exit code 2 (the Unix convention), never a usage dump."""

import pytest

from bertlab.cli import main
from bertlab.cli.common import EXIT_USAGE_ERROR


def usage_error(capsys, *argv: str) -> str:
    with pytest.raises(SystemExit) as stop:
        main(list(argv))
    assert stop.value.code == EXIT_USAGE_ERROR == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "usage:" not in err, err
    return err.strip()


def test_a_misspelt_flag_suggests_the_right_one(capsys):
    assert usage_error(capsys, "pretrain", "--tokeniser", "x") == (
        "bertlab pretrain: error: unrecognized argument --tokeniser; did you mean --tokenizer?"
    )


def test_a_misspelt_flag_is_named_before_missing_required_ones(capsys):
    message = usage_error(capsys, "pretrain", "--corpus", "c", "--ot", "o", "--max-steps", "1")
    assert "unrecognized argument --ot; did you mean --out?" in message


def test_an_unknown_flag_without_a_close_one_says_where_the_options_are(capsys):
    message = usage_error(capsys, "finetune", "--zzzzzz")
    assert message == (
        "bertlab finetune: error: unrecognized argument --zzzzzz; "
        "run `bertlab finetune --help` for the options"
    )


def test_a_bad_duration_names_the_flag_and_the_accepted_form(capsys):
    message = usage_error(capsys, "pretrain", "--corpus", "c", "--out", "o", "--max-time", "2min")
    assert message.startswith("bertlab pretrain: error: argument --max-time: not a duration")
    assert "30m, 1h, 90s" in message


def test_a_bad_number_says_what_is_expected(capsys):
    message = usage_error(capsys, "pretrain", "--corpus", "c", "--out", "o", "--max-steps", "x")
    assert "argument --max-steps: expected a whole number (e.g. 8), got 'x'" in message


def test_a_close_choice_is_suggested_instead_of_the_whole_list(capsys):
    message = usage_error(capsys, "finetune", "--task", "sst")
    assert (
        message
        == "bertlab finetune: error: argument --task: invalid choice: 'sst'; did you mean sst2?"
    )


def test_a_choice_with_no_close_one_lists_the_choices(capsys):
    message = usage_error(capsys, "embed", "--model", "m", "--out", "o", "--pooling", "zzz")
    assert "invalid choice: 'zzz'; choose from pieces, first" in message


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["pretrian"], "bertlab: error: unknown command 'pretrian'; did you mean pretrain?"),
        (
            ["experiment", "transfr"],
            "bertlab experiment: error: unknown experiment 'transfr'; did you mean transfer?",
        ),
        (
            ["--verbse", "demo"],
            "bertlab: error: unrecognized argument --verbse; did you mean --verbose?",
        ),
    ],
)
def test_a_misspelt_command_suggests_the_right_one(capsys, argv, expected):
    assert usage_error(capsys, *argv) == expected


def test_a_flag_of_an_experiment_is_suggested(capsys):
    message = usage_error(
        capsys, "experiment", "transfer", "--data", "d", "--out", "o", "--budgte", "1m"
    )
    assert message.endswith("unrecognized argument --budgte; did you mean --budget?")


def test_abbreviations_and_negative_numbers_are_no_unknown_flags(capsys):
    # `--mod` is argparse's abbreviation of --model; -1 -2 are values of --layers
    message = usage_error(capsys, "embed", "--mod", "m", "--layers", "-1", "-2", "--pooling", "zzz")
    assert "unrecognized" not in message and "--pooling" in message
