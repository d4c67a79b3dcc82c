"""`bertlab demo` end to end with a tiny recipe and a stand-in shipped model (the real ones take
minutes)."""

from __future__ import annotations

import importlib
import json
import statistics
from pathlib import Path
from types import SimpleNamespace

import pytest

from bertlab.apps.demo import runner as demo
from bertlab.apps.demo.config import SHIPPED, SHIPPED_SCRATCH, WORD_VECTORS
from bertlab.apps.demo.runner import run_demo
from bertlab.apps.flows import compare, sign_test
from bertlab.cli import main
from bertlab.core import optional

MODELS = ("pre-trained", "word vectors", "from scratch", SHIPPED, SHIPPED_SCRATCH)
SEEDS = (1,)  # one seed of five rows: the pairing of seeds is tested in tests/unit/test_flows.py


@pytest.mark.parametrize("lang", ["en", pytest.param("zh", marks=pytest.mark.slow)])
def test_demo_tells_the_whole_story(tmp_path, lang, shipped_models, tiny_demo_recipe) -> None:
    lines: list[str] = []
    recipe = tiny_demo_recipe(lang)
    tmp_path = tmp_path / "demo"
    result = run_demo(tmp_path, 0.05, lang, SEEDS, False, lines.append, recipe)
    text = "\n".join(lines)
    twin = recipe.twin_seeds > 0  # Chinese runs no twin of the shipped model (time)
    models = MODELS if twin else tuple(name for name in MODELS if name != SHIPPED_SCRATCH)
    for step in ("== 1.", "== 2.", "== 3.", "== 4.", "== 5.", "== 6.", "== 7."):
        assert step in text
    assert result.pretrain["steps"] > 0 and result.pretrain["tokens"] > 0
    assert len(result.fill_mask) == len(recipe.fill_mask_sentences)
    assert set(result.scores) == set(models)
    assert all(
        len(scores) == len(SEEDS) and all(0 <= s <= 1 for s in scores)
        for scores in result.scores.values()
    )
    # The printed table and results.json agree with each run's own test.json.
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["shipped"]["name"] == recipe.shipped_model
    assert not results["shipped"]["same_start"]  # another shape: its own twin, if any, was run
    rate, batch = recipe.shipped_learning_rate, recipe.shipped_batch_size  # its own settings
    assert results["shipped"]["learning_rate"] == rate != recipe.finetune_learning_rate
    assert results["shipped"]["batch_size"] == batch
    assert f"at learning rate {rate:g}, batch {batch}: " in text
    assert 0.5 <= results["majority"] < 1  # the commonest label's share of the test slice
    for name in models:
        run_dir = tmp_path / "finetune" / name.replace(" ", "-")
        accuracies = [
            json.loads((run_dir / f"seed-{s}" / "test.json").read_text())["accuracy"] for s in SEEDS
        ]
        assert results["scores"][name] == accuracies == result.scores[name]
        row = next(line for line in lines if line.startswith(f"| {name} |"))
        assert row.split("|")[2].strip() == f"{statistics.median(accuracies):.1%}"
    # Each row's verdict against its scratch rows is computed from those scores.
    pairs = [(found["model"], found["baseline"]) for found in results["comparisons"]]
    assert pairs == [
        ("pre-trained", "from scratch"),
        ("word vectors", "from scratch"),
        *([(SHIPPED, SHIPPED_SCRATCH)] if twin else []),
        (SHIPPED, "from scratch"),
    ]
    for found in results["comparisons"]:
        scratch, scores = results["scores"][found["baseline"]], results["scores"][found["model"]]
        expected = compare(scratch, scores)
        assert (found["margin"], found["spread"]) == (expected.margin, expected.spread)
        assert (found["paired_wins"], found["paired_losses"], found["sign_test_p"]) == (
            sign_test(scratch, scores)
        )
    # The pre-training figures were drawn from metrics.jsonl, which holds this run's steps.
    records = [json.loads(line) for line in (tmp_path / "pretrain" / "metrics.jsonl").open()]
    assert max(r["step"] for r in records) == results["pretrain"]["steps"]
    last_eval = [r for r in records if r["kind"] == "eval"][-1]
    assert last_eval["mlm_accuracy"] == results["pretrain"]["eval"]["mlm_accuracy"]
    assert results["pretrain"]["device"] == "CPU"
    assert results["word_vectors"]["pieces"] > 0
    report = (tmp_path / "report.md").read_text()
    for name in models:
        assert f"| {name} |" in report
        assert f"- **{name}**: " in report  # what the row shows, in words
    # Fill-mask: both models' answers, side by side, for every sentence.
    assert f"| this demo's model (0.05 min) | `{recipe.shipped_model}` |" in report
    for item in results["fill_mask"]:
        first, shipped_first = item["predictions"][0][0], item["shipped"][0][0]
        assert f"| `{item['sentence']}` | `{first}` " in report
        assert f"| `{shipped_first}` " in report.split(item["sentence"])[1].splitlines()[0]
    for word, near in results["word_vectors"]["neighbours"].items():
        assert f"- `{word}`: `{near[0][0]}`" in report
    for explanation in (
        "unigram plateau",
        "on the CPU",
        "README.md#does-pre-training-pay-off-on-a-laptop",
        "docs/budget.md",
        "word meanings",
        "what its pre-training gave" if twin else "is not run here, for time",
    ):
        assert explanation in report
    if any(results["one_class"][recipe.task].values()):
        assert "- **one class**: " in report and "Seeds that predicted one class" in report
    # One verdict per comparison: "- **shipped model** beats ...", "... does not beat ...".
    for name, count in (("pre-trained", 1), ("word vectors", 1), (SHIPPED, 1 + twin)):
        assert report.count(f"- **{name}** ") == count
    for figure in ("pretraining.png", "finetuning.png", "comparison.png", "attention.png"):
        assert (tmp_path / figure).read_bytes()[:4] == b"\x89PNG"
        assert f"({figure})" in report
    _an_interrupted_demo_keeps_the_earlier_one(tmp_path, lang, recipe)


def _an_interrupted_demo_keeps_the_earlier_one(out: Path, lang: str, recipe) -> None:
    """A second demo into the same folder deleted the first one's pretrain/ and finetune/ before
    its own existed: interrupted (Ctrl-C), it left neither. (The first one is taken for a demo
    by its results.json too, as one written before demos said whose folder they were.)"""
    (out / ".bertlab-run").unlink()
    before = {str(path): path.read_bytes() for path in out.rglob("*") if path.is_file()}

    def interrupted(*args, **kwargs):
        assert not (out / "pretrain").exists()  # moved aside
        raise KeyboardInterrupt

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(demo, "run_pretraining", interrupted)  # step 2, its vocabulary trained
        with pytest.raises(KeyboardInterrupt):
            run_demo(out, 0.05, lang, SEEDS, False, lambda line: None, recipe)
    assert (out / ".bertlab-run").read_text() == "demo\n"
    (out / ".bertlab-run").unlink()
    assert {str(path): path.read_bytes() for path in out.rglob("*") if path.is_file()} == before


def test_demo_command_rejects_bad_flags(capsys, tmp_path, shipped_models) -> None:
    out = tmp_path / "demo"
    assert main(["demo", "--seeds", "1,x"]) == 1
    assert main(["demo", "--minutes", "0"]) == 1
    assert main(["demo", "--model", "bertlab:no-such-model", "--out", str(out)]) == 1
    assert main(["demo", "--model", str(tmp_path / "no-such-folder"), "--out", str(out)]) == 1
    errors = capsys.readouterr().err.strip().splitlines()
    assert len(errors) == 4 and all(e.startswith("bertlab: error:") for e in errors)
    assert "no model bertlab:no-such-model ships with bertlab" in errors[2]
    assert "bertlab:mini-reviews-en" in errors[2]  # the models that do ship
    assert "no-such-folder" in errors[3]
    assert not out.exists()  # refused before anything ran


def test_demo_refuses_minutes_that_would_never_end(capsys, tmp_path, shipped_models) -> None:
    """`--minutes inf` ran until killed (and then ended in an OverflowError)."""
    out = tmp_path / "demo"
    for minutes, got in (("inf", "inf h"), ("6e5", "1e+04 h")):
        assert main(["demo", "--minutes", minutes, "--out", str(out)]) == 1
        assert capsys.readouterr().err == (
            f"bertlab: error: minutes must be at most a year (8,760 h), got {got}: a run that "
            "long would never finish\n"
        )
    assert not out.exists()


def test_demo_without_gensim_skips_the_word_vectors_and_runs_the_rest(
    tmp_path, monkeypatch, shipped_models, tiny_demo_recipe
) -> None:
    """As on a machine without gensim (bertlab.core.optional): importing it fails as when it is not
    installed, the word-vector step and its row are skipped in one line, the rest runs."""

    def import_module(name: str, package: str | None = None):
        if name.partition(".")[0] == "gensim":
            raise ModuleNotFoundError(f"No module named {name!r}", name="gensim")
        return importlib.import_module(name, package)

    monkeypatch.setattr(optional, "importlib", SimpleNamespace(import_module=import_module))
    lines: list[str] = []
    recipe = tiny_demo_recipe("en")
    out = tmp_path / "demo"
    result = run_demo(out, 0.05, "en", SEEDS, False, lines.append, recipe)
    text = "\n".join(lines).replace(str(tmp_path), "TMP")  # the test's name says gensim
    said = [line for line in text.splitlines() if "gensim" in line]
    reason = (
        "training word vectors needs the package 'gensim', which is not installed: "
        "pip install gensim"
    )
    assert said == [f"  skipped, with the 'word vectors' row of step 5: {reason}"]
    assert "== 5. Fine-tuning on sst2: two models of one shape" in text
    ran = tuple(name for name in MODELS if name != WORD_VECTORS)
    assert tuple(result.scores) == ran
    results = json.loads((out / "results.json").read_text())
    assert results["word_vectors"] == {"skipped": reason}
    assert "word vectors" not in results["timings"]
    assert [(found["model"], found["baseline"]) for found in results["comparisons"]] == [
        ("pre-trained", "from scratch"),
        (SHIPPED, SHIPPED_SCRATCH),
        (SHIPPED, "from scratch"),
    ]
    report = (out / "report.md").read_text()
    assert f"Skipped, with the **word vectors** row of section 5, because {reason}" in report
    assert f"- **word vectors**: not run, because {reason} (section 4)." in report
    assert "| word vectors |" not in report and "- **word vectors** " not in report
    assert "Two models of this demo's shape" in report
    for name in ran:
        assert f"| {name} |" in report and f"- **{name}**: " in report
    for name, count in (("pre-trained", 1), (SHIPPED, 2)):
        assert report.count(f"- **{name}** ") == count  # the verdicts
    for figure in ("pretraining.png", "finetuning.png", "comparison.png", "attention.png"):
        assert (out / figure).read_bytes()[:4] == b"\x89PNG"
