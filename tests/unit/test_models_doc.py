"""The Python examples of docs/models.md run as written, offline, against a tiny model that a
local Hugging Face cache holds under the name `google-bert/bert-base-uncased`."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "models.md"
PYTHON_BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)


pytestmark = pytest.mark.usefixtures("one_thread")


def test_the_docs_have_python_examples():
    assert len(PYTHON_BLOCK.findall(DOC.read_text(encoding="utf-8"))) >= 3


def test_the_python_examples_of_docs_models_run(hub_cache, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    for block in PYTHON_BLOCK.findall(DOC.read_text(encoding="utf-8")):
        exec(compile(block, str(DOC), "exec"), namespace)  # noqa: S102 - our own docs
    hidden = namespace["bert"].model.config.hidden_size
    assert namespace["features"].shape == (2, hidden)
    assert namespace["means"].shape == (2, hidden)
    assert namespace["pieces"][0].shape[1] == hidden
    assert namespace["words"][0].shape == (6, hidden)  # A gripping , funny film .
    assert (tmp_path / "runs" / "sst2" / "best" / "README.md").is_file()
    assert namespace["best"].task.name == "sst2"
    assert "PretrainedBert('bert-base-uncased'" in capsys.readouterr().out


def test_the_fine_tuning_defaults_table_is_the_codes():
    from bertlab.core.finetune_config import BERT_BASE_DEFAULTS, FINETUNE_DEFAULTS_BY_WIDTH

    text = DOC.read_text(encoding="utf-8")
    table = text[text.index("| model (hidden size) | learning rate | epochs | from |") :]
    rows = [line.split("|")[2:4] for line in table.splitlines()[2:] if line.startswith("|")]
    documented = [(float(rate), epochs.strip().split()[0]) for rate, epochs in rows]
    declared = [
        (row.learning_rate, str(row.num_train_epochs or 3))
        for row in (*FINETUNE_DEFAULTS_BY_WIDTH, BERT_BASE_DEFAULTS)
    ]
    assert documented == declared
