"""The command line's logs: quiet by default (bertlab's progress as plain lines, every warning),
`-v` shows INFO records, the libraries' too, and which weights a load left new (once per run),
`-vv` debug messages."""

import subprocess
import sys

import pytest

SCRIPT = """
import logging, sys
from bertlab.cli.logs import configure_logging
configure_logging(int(sys.argv[1]))
logging.getLogger("bertlab.training.finetuning.finetune").info("epoch 1: train loss 0.5")
for _ in range(3):  # each seed loads the model again
    logging.getLogger("bertlab.network.checkpoint").info(
        "newly initialized (not in m): classifier.bias"
    )
logging.getLogger("bertlab.network.checkpoint").warning("newly initialized (not in m): encoder.x")
logging.getLogger("gensim.models.word2vec").info("EPOCH 0 - PROGRESS: at 50.00% examples")
logging.getLogger("gensim.utils").info("Word2Vec lifecycle event {'msg': 'training'}")
logging.getLogger("uvicorn.error").info("Application startup complete.")
logging.getLogger("httpx").warning("a library's warning")
logging.getLogger("bertlab.data").debug("a debug message")
for _ in range(3):  # each seed encodes the same data
    logging.getLogger("bertlab.data.tasks.encoding").warning("36 of 100 examples were cut")
"""

DEMO_SCRIPT = """
import logging, sys
from bertlab.cli.logs import configure_logging, hide_run_progress
configure_logging(int(sys.argv[1]))
hide_run_progress(int(sys.argv[1]))
logging.getLogger("bertlab.training.finetuning.loop").info("epoch 1: a demo run")
logging.getLogger("bertlab.training.finetuning.finetune").warning("a run's warning")
configure_logging(int(sys.argv[1]))  # the next command in the same process
logging.getLogger("bertlab.training.finetuning.loop").info("epoch 1: a later command")
"""


def logged(verbosity: int, script: str = SCRIPT) -> str:
    result = subprocess.run(
        [sys.executable, "-c", script, str(verbosity)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return result.stderr


def test_by_default_bertlab_progress_and_warnings_show_and_the_libraries_info_does_not():
    text = logged(0)
    assert "epoch 1: train loss 0.5" in text.splitlines()  # a plain line: no INFO record shows
    assert "INFO" not in text
    assert "a library's warning" in text and "encoder.x" in text
    for quiet in ("classifier.bias", "EPOCH 0", "lifecycle", "uvicorn", "debug"):
        assert quiet not in text, quiet
    assert text.count("examples were cut") == 1


def test_the_demo_hides_each_runs_progress_but_not_its_warnings_unless_verbose():
    text = logged(0, DEMO_SCRIPT)
    assert "a demo run" not in text and "a run's warning" in text
    assert "a later command" in text
    assert "a demo run" in logged(1, DEMO_SCRIPT)


def test_one_v_adds_the_libraries_info_and_a_new_head_once():
    text = logged(1)
    assert "INFO bertlab.training.finetuning.finetune: epoch 1: train loss 0.5" in text
    assert text.count("classifier.bias") == 1
    assert "EPOCH 0 - PROGRESS" in text and "Application startup complete" in text
    assert "lifecycle" not in text and "debug message" not in text


@pytest.mark.parametrize("verbosity", [2, 3])
def test_two_vs_add_debug_messages(verbosity):
    text = logged(verbosity)
    assert "a debug message" in text and "lifecycle" in text
    assert text.count("classifier.bias") == 1
