"""The core commands run without the optional packages (bertlab.core.optional), as on a machine
whose image lacks them: `--help`, `pretrain`, `finetune`, `evaluate` and `predict` exit 0,
collecting the test suite does not fail, and a command that needs a missing package says which
in one line.

Each run is a fresh interpreter in which every import finder answers "not found" for the hidden
packages, as when they are not installed: `importlib.util.find_spec` gives None and `import`
raises ModuleNotFoundError.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
# What the lent GPU machine's image lacks: bertlab's optional packages, fastapi's own
# dependencies, and the test-only selenium.
HIDDEN_PACKAGES = (
    "gensim",
    "jieba",
    "seqeval",
    "fastapi",
    "uvicorn",
    "starlette",
    "pydantic",
    "noto_cjk_sans_otc",
    "selenium",
)
# python -c HIDE PACKAGES MODULE ARGS...: run MODULE as `python -m MODULE ARGS...` would, with
# the comma-separated PACKAGES hidden.
HIDE = """
import runpy, sys

hidden = set(sys.argv.pop(1).split(","))
module = sys.argv.pop(1)


class Hidden:
    def __init__(self, finder):
        self.finder = finder

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in hidden:
            return None
        return self.finder.find_spec(name, path, target)

    def __getattr__(self, attribute):
        return getattr(self.finder, attribute)


sys.meta_path[:] = [Hidden(finder) for finder in sys.meta_path]
runpy.run_module(module, run_name="__main__", alter_sys=True)
"""
TIMEOUT_SECONDS = 300


def run_without(
    cli_env, module: str, *args: object, cwd: Path | None = None
) -> subprocess.CompletedProcess:
    command = [sys.executable, "-c", HIDE, ",".join(HIDDEN_PACKAGES), module]
    return subprocess.run(
        [*command, *map(str, args)],
        capture_output=True,
        text=True,
        env=cli_env,
        cwd=cwd,
        timeout=TIMEOUT_SECONDS,
    )


def test_the_packages_are_hidden_as_if_not_installed(cli_env, tmp_path) -> None:
    probe = (
        "import importlib.util\nassert importlib.util.find_spec('seqeval') is None\nimport jieba\n"
    )
    (tmp_path / "probe_hidden.py").write_text(probe)
    result = run_without(cli_env, "probe_hidden", cwd=tmp_path)
    assert "ModuleNotFoundError: No module named 'jieba'" in result.stderr, result.stderr


def test_help_runs_without_optional_packages(cli_env, tmp_path) -> None:
    result = run_without(cli_env, "bertlab", "--help", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "pretrain" in result.stdout and "finetune" in result.stdout


def test_pretrain_finetune_evaluate_predict_run_without_optional_packages(
    cli_env, tmp_path, tiny_pretrain_args, sst2_files
) -> None:
    pretrained = tmp_path / "pretrain"
    result = run_without(cli_env, "bertlab", *tiny_pretrain_args(pretrained, "--max-steps", "2"))
    assert result.returncode == 0, result.stderr
    assert (pretrained / "final" / "model.safetensors").is_file()

    train, dev, vocab = sst2_files
    out = tmp_path / "finetune"
    result = run_without(
        cli_env, "bertlab", "finetune", "--task", "sst2", "--train", train, "--dev", dev,
        "--from-scratch", "--model-size", "tiny", "--tokenizer", vocab, "--out", out,
        "--epochs", 1, "--batch-size", 8, "--max-seq-length", 32, "--no-progress",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    dev_metrics = json.loads(result.stdout.strip().splitlines()[-1])["dev"]
    best = out / "best"

    result = run_without(cli_env, "bertlab", "evaluate", "--task", "sst2", "--model", best,
                         "--data", dev)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.strip().splitlines()[-1]) == pytest.approx(dev_metrics)

    predictions = tmp_path / "predictions.jsonl"
    result = run_without(cli_env, "bertlab", "predict", "--task", "sst2", "--model", best,
                         "--data", dev, "--output", predictions)  # fmt: skip
    assert result.returncode == 0, result.stderr
    lines = predictions.read_text().splitlines()
    assert len(lines) == 20 and all(json.loads(line)["prediction"] in "01" for line in lines)


def assert_one_line_error(result: subprocess.CompletedProcess, package: str) -> None:
    assert result.returncode == 1, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("bertlab: error:")]
    assert len(errors) == 1 and "Traceback" not in result.stderr, result.stderr
    assert f"'{package}'" in errors[0] and f"pip install {package}" in errors[0], errors[0]


def test_serve_without_fastapi_is_one_line_naming_it(cli_env, tmp_path) -> None:
    result = run_without(cli_env, "bertlab", "serve", "--model", f"m={tmp_path}")
    assert_one_line_error(result, "fastapi")


def test_chinese_whole_word_masking_without_jieba_is_one_line_naming_it(cli_env, tmp_path):
    corpus = tmp_path / "zh.txt"
    corpus.write_text("我喜欢自然语言处理。今天天气很好。\n\n他在北京工作。她喜欢读书。\n")
    vocab = tmp_path / "vocab.txt"
    characters = sorted(set(corpus.read_text()) - set("\n"))
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *characters]))
    result = run_without(
        cli_env, "bertlab", "pretrain", "--corpus", corpus, "--tokenizer", vocab,
        "--model-size", "tiny", "--lang", "zh", "--whole-word-mask", "--max-steps", 1,
        "--no-progress", "--out", tmp_path / "run",
    )  # fmt: skip
    assert_one_line_error(result, "jieba")


def test_collecting_the_tests_does_not_fail_without_optional_packages(cli_env) -> None:
    # Every test, whatever its marks (the GPU machine runs `-m gpu`); a test file that needs a
    # missing package is skipped, not an error.
    result = run_without(
        cli_env, "pytest", "--collect-only", "-q", "-o", "addopts=", "-p", "no:cacheprovider",
        REPO_ROOT / "tests", cwd=REPO_ROOT,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
