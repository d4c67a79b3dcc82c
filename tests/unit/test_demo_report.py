"""The demo's shipped-model rows and the report's words, on made-up results (the whole demo runs
in tests/e2e/test_demo.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from bertlab.apps.demo.config import (
    PRETRAINED,
    RECIPES,
    SCRATCH,
    SHIPPED,
    SHIPPED_SCRATCH,
    WORD_VECTORS,
)
from bertlab.apps.demo.report import (
    _fill_mask_section,
    _finetuning_section,
    _rows_explained,
    _word_vectors_section,
)
from bertlab.apps.demo.rows import describe_shipped, shipped_rows
from bertlab.core.shipped import shipped_model

RECIPE = RECIPES["en"]


def test_a_shipped_model_of_the_demos_shape_has_the_demos_scratch_as_twin(
    tmp_path, hub_model_folder
) -> None:
    same = describe_shipped(RECIPE.shipped_model, hub_model_folder, RECIPE, hub_model_folder)
    assert same["same_start"] and same["about"] == shipped_model(RECIPE.shipped_model).about
    assert [row.name for row in shipped_rows(RECIPE, tmp_path, hub_model_folder, True, (1, 2))] == [
        SHIPPED
    ]
    wider = tmp_path / "wider"
    shutil.copytree(hub_model_folder, wider)
    config = json.loads((wider / "config.json").read_text())
    (wider / "config.json").write_text(json.dumps(config | {"hidden_size": 64}))
    other = describe_shipped(str(wider), wider, RECIPE, hub_model_folder)
    assert not other["same_start"] and other["about"] == "given with --model"
    assert other["shape"].startswith("2 layers of 64") and other["demo_shape"] != other["shape"]
    seeds = tuple(range(1, 11))
    rows = shipped_rows(RECIPE, tmp_path, wider, False, seeds)
    assert [(row.name, row.seeds) for row in rows] == [
        (SHIPPED, seeds[: RECIPE.shipped_seeds]),
        (SHIPPED_SCRATCH, seeds[: RECIPE.twin_seeds]),
    ]
    assert 0 < RECIPE.twin_seeds <= RECIPE.shipped_seeds
    chinese = RECIPES["zh"]  # no time for the twin: the shipped model's seeds only
    assert chinese.twin_seeds == 0
    rows = shipped_rows(chinese, tmp_path, wider, False, seeds)
    assert [(row.name, row.seeds) for row in rows] == [(SHIPPED, seeds[: chinese.shipped_seeds])]


def _result(one_class: list | None = None) -> dict:
    shipped = {
        "name": RECIPE.shipped_model,
        "shape": "4 layers of 256, 4 heads, 8,000 pieces",
        "demo_shape": "2 layers of 128, 2 heads, 8,000 pieces",
        "about": shipped_model(RECIPE.shipped_model).about,
        "same_start": False,
    }
    frequent = [["the", 0.05], [".", 0.04], [",", 0.03]]
    return {
        "recipe": {
            "task": "sst2",
            "finetune_epochs": 4,
            "finetune_batch_size": 32,
            "finetune_learning_rate": 1e-3,
        },
        "minutes": 1.0,
        "seeds": [1, 2],
        "pretrain": {
            "device": "CPU",
            "tokens": 480_000,
            "eval": {"mlm_accuracy": 0.105, "mlm_unigram_accuracy": 0.09},
        },
        "word_vectors": {"seconds": 27.0},
        "shipped": shipped,
        "fill_mask": [
            {
                "sentence": "The movie was [MASK].",
                "predictions": frequent,
                "shipped": [["great", 0.2], ["good", 0.1], ["the", 0.01]],
            },
            {
                "sentence": "A [MASK] film.",
                "predictions": frequent[::-1],
                "shipped": [["good", 0.2], ["bad", 0.1], ["|", 0.01]],
            },
        ],
        "scores": {name: [0.7, 0.71] for name in (PRETRAINED, WORD_VECTORS, SCRATCH, SHIPPED)}
        | {SHIPPED_SCRATCH: [0.7]},
        "one_class": {"sst2": {SCRATCH: one_class or []}},
    }


def test_the_report_says_what_each_row_shows(tmp_path: Path) -> None:
    lines = _rows_explained(_result(), tmp_path)
    text = "\n".join(lines)
    assert [line.split("**")[1] for line in lines] == [
        PRETRAINED,
        WORD_VECTORS,
        SCRATCH,
        SHIPPED,
        SHIPPED_SCRATCH,
    ]
    assert "1 min on the CPU" in text and "on the unigram plateau" in text
    assert "README.md#does-pre-training-pay-off-on-a-laptop" in text and "budget.md" in text
    assert "with the first 1 of the 2 seeds" in text
    assert "one class" not in text
    collapsed = _rows_explained(_result([{"seed": 2, "label": "1", "share": 0.55}]), tmp_path)
    assert collapsed[-1].startswith("- **one class**: ")


def test_fill_mask_shows_both_models_and_the_plateau(tmp_path: Path) -> None:
    lines = _fill_mask_section(_result())
    text = "\n".join(lines)
    assert f"| sentence | this demo's model (1 min) | `{RECIPE.shipped_model}` |" in text
    assert "| `The movie was [MASK].` | `the` 5%, `.` 4%, `,` 3% | `great` 20%" in text
    assert "`\\|` 1%" in text  # a piece that would end the table cell
    assert "`the`, `.`, `,` are among its top 3 for all 2 sentences" in text
    assert "have 1 piece in common across the sentences" in text


def test_the_report_gives_each_rows_learning_rate(tmp_path: Path) -> None:
    result = _result() | {"comparisons": []}
    text = "\n".join(_finetuning_section(result, tmp_path))
    assert "at learning rate 0.001. The best epoch" in text  # an older demo's: one rate
    result["shipped"]["learning_rate"] = 3e-4
    result["majority"] = 0.512
    text = "\n".join(_finetuning_section(result, tmp_path))
    assert "at learning rate 0.001 (the shipped model and its twin at 0.0003:" in text
    assert "predicts the commonest label for every sentence scores 51.2%" in text


def test_a_shipped_model_without_its_twin_says_its_own_batch_and_why_no_twin(
    tmp_path: Path,
) -> None:
    result = _result() | {"comparisons": []}
    del result["scores"][SHIPPED_SCRATCH]
    result["shipped"] |= {"learning_rate": 3e-4, "batch_size": 16}
    text = "\n".join(_finetuning_section(result, tmp_path))
    assert "at learning rate 0.001 (the shipped model at 0.0003, batch 16: the larger" in text
    lines = _rows_explained(result, tmp_path)
    assert [line.split("**")[1] for line in lines] == [PRETRAINED, WORD_VECTORS, SCRATCH, SHIPPED]
    assert "Its random twin (its shape and vocabulary from scratch) is not run here" in lines[-1]
    assert "docs/demo.md#what-the-default-measured" in lines[-1]
    result["shipped"]["learning_rate"] = 1e-3  # the batch alone differs
    text = "\n".join(_finetuning_section(result, tmp_path))
    assert "at learning rate 0.001 (the shipped model at batch 16: the larger" in text


def test_a_skipped_word_vector_row_is_said_where_it_would_stand(tmp_path: Path) -> None:
    """Without gensim the demo has no word-vector row: the report says why, not figures."""
    reason = "training word vectors needs the package 'gensim', which is not installed"
    result = _result()
    result["word_vectors"] = {"skipped": reason}
    del result["scores"][WORD_VECTORS]
    lines = _rows_explained(result, tmp_path)
    assert [line.split("**")[1] for line in lines] == [
        PRETRAINED,
        WORD_VECTORS,
        SCRATCH,
        SHIPPED,
        SHIPPED_SCRATCH,
    ]
    assert lines[1] == f"- **{WORD_VECTORS}**: not run, because {reason} (section 4)."
    section = _word_vectors_section(result)
    assert section[2] == f"Skipped, with the **{WORD_VECTORS}** row of section 5, because {reason}"
    text = "\n".join(_finetuning_section(result | {"comparisons": []}, tmp_path))
    assert "Two models of this demo's shape" in text and f"| {WORD_VECTORS} |" not in text
