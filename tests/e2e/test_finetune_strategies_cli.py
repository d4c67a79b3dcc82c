"""`bertlab finetune` with each fine-tuning strategy, on every task family: the run records the
strategy, and the best model loads in `transformers`' AutoModelFor* as without one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from bertlab.cli import main
from bertlab.network.heads import BertForTask
from bertlab.task_families import make_task

TASK_DATA = Path(__file__).resolve().parents[1] / "data" / "tasks"
EXIT_USER_ERROR = 1

# The strategies of docs/finetuning.md#fine-tuning-strategies, as flags.
STRATEGIES = {
    "layer-wise decay": ("--layerwise-lr-decay", "0.8"),
    "ULMFiT": (
        "--layerwise-lr-decay", "0.385", "--schedule", "slanted-triangular",
        "--gradual-unfreezing",
    ),
    "Keras staged": ("--head-warmup-epochs", "1", "--freeze-layers", "1"),
    "constant": ("--schedule", "constant", "--warmup-proportion", "0"),
}  # fmt: skip
# task, training file, the head transformers must load it as: one task per family.
FAMILIES = [
    ("rte", "rte_style.tsv", "AutoModelForSequenceClassification"),
    ("conll2003", "conll_iob1.txt", "AutoModelForTokenClassification"),
    ("squad", "squad_style.json", "AutoModelForQuestionAnswering"),
    ("swag", "swag_style.csv", "AutoModelForMultipleChoice"),
]


pytestmark = pytest.mark.usefixtures("one_thread")


def finetune(capsys, task_vocab, out, task, data, *extra) -> tuple[int, str, str]:
    argv = [
        "finetune", "--task", task, "--train", data, "--dev", data,
        "--from-scratch", "--model-size", "tiny", "--tokenizer", task_vocab,
        "--out", out, "--epochs", 3, "--batch-size", 4, "--no-progress", *extra,
    ]  # fmt: skip
    code = main([str(arg) for arg in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize("strategy", list(STRATEGIES))
@pytest.mark.parametrize(("task", "file_name", "auto_class"), FAMILIES)
def test_each_strategy_records_itself_and_its_model_loads_in_transformers(
    tmp_path, capsys, task_vocab, strategy, task, file_name, auto_class
):
    transformers = pytest.importorskip("transformers")
    out = tmp_path / "run"
    code, _, stderr = finetune(
        capsys, task_vocab, out, task, TASK_DATA / file_name, *STRATEGIES[strategy]
    )
    assert code == 0, stderr
    recorded = json.loads((out / "result.json").read_text())["strategy"]
    flags = STRATEGIES[strategy]
    if "--layerwise-lr-decay" in flags:
        assert recorded["layerwise_lr_decay"] == float(
            flags[flags.index("--layerwise-lr-decay") + 1]
        )
        rates = list(recorded["learning_rates"].values())
        assert rates == sorted(rates) and rates[0] < rates[-1]
    assert recorded["gradual_unfreezing"] == ("--gradual-unfreezing" in flags)
    card = (out / "best" / "README.md").read_text(encoding="utf-8")
    assert f"| schedule | {recorded['schedule']} |" in card
    if strategy == "Keras staged":
        assert recorded["head_warmup_epochs"] == 1
        assert "| head warmup epochs | 1 (encoder frozen), then all |" in card

    reference, info = getattr(transformers, auto_class).from_pretrained(
        out / "best", output_loading_info=True
    )
    assert not any(info.values()), info
    ours: BertForTask = make_task(task).load_head(out / "best", None).eval()
    shape = (2, 4, 9) if task == "swag" else (2, 9)
    input_ids = torch.randint(5, ours.config.vocab_size, shape, generator=torch.Generator())
    with torch.no_grad():
        expected = reference.eval()(input_ids=input_ids)
        got = ours(input_ids=input_ids)
    names = ("start_logits", "end_logits") if task == "squad" else ("logits",)
    for name in names:
        torch.testing.assert_close(getattr(got, name), getattr(expected, name), rtol=0, atol=1e-5)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (("--freeze-encoder", "--gradual-unfreezing"), "would change nothing"),
        (("--gradual-unfreezing", "--head-warmup-epochs", "1"), "not both"),
        (("--head-warmup-epochs", "3"), "leaves none of the 3 epochs"),
        (("--cut-frac", "0.2"), "shape the slanted-triangular schedule, not 'linear'"),
        (("--layerwise-lr-decay", "2"), "layerwise_lr_decay must be in (0, 1], got 2.0"),
    ],
)
def test_impossible_strategies_are_one_line_errors(tmp_path, capsys, task_vocab, flags, message):
    out = tmp_path / "run"
    code, _, stderr = finetune(capsys, task_vocab, out, "rte", TASK_DATA / "rte_style.tsv", *flags)
    assert code == EXIT_USER_ERROR
    errors = [line for line in stderr.splitlines() if line.startswith("bertlab: error:")]
    assert len(errors) == 1 and message in errors[0], stderr
    assert "Traceback" not in stderr and not out.exists()
