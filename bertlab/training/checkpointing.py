"""Training checkpoints: the model in the Hugging Face layout plus everything needed to go on.

`OUT/checkpoints/step-000120/` holds `config.json` + `model.safetensors` (loadable like any
model directory) and `training_state.pt`: optimizer, schedule, RNG states of every process, data
position, counters. Each checkpoint is written into a hidden temporary directory and renamed into
place when complete (`replace_directory`), so a kill during the write leaves the previous
checkpoints intact; the oldest complete ones beyond `keep` are then removed.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

CHECKPOINTS_DIR = "checkpoints"
STATE_FILE = "training_state.pt"
_NAME = re.compile(r"^step-(\d+)$")
STEP_DIGITS = 6
DIRECTORY_MODE = 0o755  # tempfile.mkdtemp makes 0o700 directories; a saved model is for sharing


def checkpoint_name(step: int) -> str:
    return f"step-{step:0{STEP_DIGITS}d}"


def list_checkpoints(out_dir: str | os.PathLike) -> list[Path]:
    """Complete checkpoints under `out_dir`, oldest first."""
    root = Path(out_dir) / CHECKPOINTS_DIR
    if not root.is_dir():
        return []
    found = []
    for path in root.iterdir():
        match = _NAME.match(path.name)
        if match and (path / STATE_FILE).is_file():
            found.append((int(match.group(1)), path))
    return [path for _, path in sorted(found)]


def latest_checkpoint(out_dir: str | os.PathLike) -> Path | None:
    checkpoints = list_checkpoints(out_dir)
    return checkpoints[-1] if checkpoints else None


def save_checkpoint(
    out_dir: str | os.PathLike, step: int, model: Any, state: dict[str, Any], keep: int
) -> Path:
    """Write checkpoint `step` atomically; keep the `keep` most recent (all when `keep` is 0).

    Args:
        out_dir: the run's directory.
        step: optimizer steps done.
        model: has `save_pretrained(directory)`.
        state: picklable with `torch.save` and loadable with `weights_only=True` (tensors,
            numbers, strings, lists, dicts, tuples); see `portable_rng_state`.
        keep: complete checkpoints kept after this one is written.
    """
    final = Path(out_dir) / CHECKPOINTS_DIR / checkpoint_name(step)

    def write(directory: Path) -> None:
        model.save_pretrained(directory)
        torch.save(state, directory / STATE_FILE)

    replace_directory(final, write)
    checkpoints = list_checkpoints(out_dir)
    if keep:
        for old in checkpoints[:-keep]:
            shutil.rmtree(old, ignore_errors=True)
    return final


def replace_directory(directory: Path, write: Callable[[Path], None]) -> None:
    """Fill a temporary directory beside `directory` with `write`, then rename it into place.

    A crash while writing leaves the previous `directory` whole; only the two renames at the end
    touch it.
    """
    directory.parent.mkdir(parents=True, exist_ok=True)
    temporary = Path(tempfile.mkdtemp(dir=directory.parent, prefix=f".{directory.name}.tmp-"))
    os.chmod(temporary, DIRECTORY_MODE)
    try:
        write(temporary)
        old = None
        if directory.exists():
            old = directory.with_name(f"{temporary.name}.old")
            os.rename(directory, old)
        os.rename(temporary, directory)
        if old is not None:
            shutil.rmtree(old)
    finally:
        if temporary.exists():
            shutil.rmtree(temporary)


def load_state(checkpoint_dir: str | os.PathLike) -> dict[str, Any]:
    """The training state of a checkpoint (tensors on the CPU)."""
    path = Path(checkpoint_dir) / STATE_FILE
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except (RuntimeError, EOFError, ValueError) as error:
        raise ValueError(f"checkpoint {checkpoint_dir} is damaged ({error})") from error


def portable_rng_state(state: dict[str, Any]) -> dict[str, Any]:
    """`runtime.rng_state()` with numpy's array as a tensor, so `weights_only` loading works."""
    name, keys, position, has_gauss, cached = state["numpy"]
    numpy_state = (name, torch.from_numpy(np.asarray(keys).copy()), position, has_gauss, cached)
    return state | {"numpy": numpy_state}


def restore_rng_state(state: dict[str, Any]) -> dict[str, Any]:
    """The inverse of `portable_rng_state`."""
    name, keys, position, has_gauss, cached = state["numpy"]
    numpy_state = (name, keys.numpy().astype(np.uint32), position, has_gauss, cached)
    return state | {"numpy": numpy_state}
