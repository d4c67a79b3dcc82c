"""Training checkpoints (`training.pretraining.checkpointing`): complete or absent, whatever
moment a kill comes (the end-to-end kills are in tests/e2e/test_pretrain_cli.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bertlab.core.atomic import remove_temporaries
from bertlab.core.run_folder import CHECKPOINTS_DIR
from bertlab.training.pretraining.checkpointing import (
    list_checkpoints,
    save_checkpoint,
)

CHECKPOINT_FILES = ["model.safetensors", "training_state.pt", "vocab.txt"]


class _Writes:
    """Stands for a model or tokenizer: `save_pretrained` writes one file."""

    def __init__(self, name: str) -> None:
        self.name = name

    def save_pretrained(self, directory: Path) -> None:
        (Path(directory) / self.name).write_text("x")


def _save(out: Path, step: int) -> Path:
    model, tokenizer = _Writes("model.safetensors"), _Writes("vocab.txt")
    return save_checkpoint(out, step, model, tokenizer, {"step": step}, keep=1)


def test_a_kill_while_an_old_checkpoint_is_removed_leaves_no_half_checkpoint(tmp_path, monkeypatch):
    """Old checkpoints were removed in place: a kill midway left one without its weights but
    with its training state, which still counted as a complete checkpoint."""
    _save(tmp_path, 1)
    unlink = os.unlink

    def killed_midway(name, *, dir_fd=None):
        if dir_fd is None:  # not a directory's removal
            return unlink(name)
        unlink("model.safetensors", dir_fd=dir_fd)  # the weights went first,
        raise KeyboardInterrupt  # then the kill came

    monkeypatch.setattr(os, "unlink", killed_midway)
    with pytest.raises(KeyboardInterrupt):
        _save(tmp_path, 2)
    monkeypatch.undo()
    checkpoints = list_checkpoints(tmp_path)
    assert [path.name for path in checkpoints] == ["step-000002"]
    assert sorted(path.name for path in checkpoints[0].iterdir()) == CHECKPOINT_FILES
    remove_temporaries(tmp_path / CHECKPOINTS_DIR)  # what the next start does
    assert [path.name for path in (tmp_path / CHECKPOINTS_DIR).iterdir()] == ["step-000002"]
