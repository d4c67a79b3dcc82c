"""Training checkpoints: the model in the Hugging Face layout plus everything needed to go on.

`OUT/checkpoints/step-000120/` holds `config.json` + `model.safetensors` (loadable like any
model directory) and `training_state.pt`: optimizer, schedule, RNG states of every process, data
position, counters. Each checkpoint is written into a hidden temporary directory and renamed into
place when complete (`bertlab.core.atomic.atomic_directory`), so a kill during the write leaves the
previous checkpoints intact; the oldest complete ones beyond `keep` are then removed, each
renamed away first (`bertlab.core.atomic.remove_directory`). A full disk is a `WriteError`
naming the checkpoint. A run resumes a checkpoint only with the settings it was saved with
(`setup_key`, `check_resumable`).
"""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path
from typing import Any

import numpy as np
import torch

from bertlab.core.atomic import atomic_directory, atomic_writer, remove_directory
from bertlab.core.config import PretrainConfig, PretrainDataConfig
from bertlab.core.run_folder import CHECKPOINTS_DIR
from bertlab.core.runtime import DistributedContext
from bertlab.core.wording import Worded
from bertlab.network.checkpoint import load_tensors

STATE_FILE = "training_state.pt"
_NAME = re.compile(r"^step-(\d+)$")
STEP_DIGITS = 6


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
    out_dir: str | os.PathLike,
    step: int,
    model: Any,
    tokenizer: Any,
    state: dict[str, Any],
    keep: int,
) -> Path:
    """Write checkpoint `step` atomically; keep the `keep` most recent (all when `keep` is 0).

    The model, its tokenizer and the training state are all in place before the checkpoint is
    renamed into place: a checkpoint is complete or absent.

    Args:
        out_dir: the run's directory.
        step: optimizer steps done.
        model: has `save_pretrained(directory)`.
        tokenizer: has `save_pretrained(directory)`; a checkpoint loads like a model directory.
        state: picklable with `torch.save` and loadable with `weights_only=True` (tensors,
            numbers, strings, lists, dicts, tuples); see `portable_rng_state`.
        keep: complete checkpoints kept after this one is written.
    """
    final = Path(out_dir) / CHECKPOINTS_DIR / checkpoint_name(step)

    with atomic_directory(final) as directory:
        model.save_pretrained(directory)
        tokenizer.save_pretrained(directory)
        with atomic_writer(directory / STATE_FILE) as file:  # torch's errors name no errno
            torch.save(state, file)
    checkpoints = list_checkpoints(out_dir)
    if keep:
        for old in checkpoints[:-keep]:
            remove_directory(old)
    return final


def load_state(checkpoint_dir: str | os.PathLike) -> dict[str, Any]:
    """The training state of a checkpoint (tensors on the CPU)."""
    path = Path(checkpoint_dir) / STATE_FILE
    try:
        return load_tensors(path)
    except ValueError as error:
        raise ValueError(f"checkpoint {checkpoint_dir} is damaged or unsafe: {error}") from None


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


def setup_key(
    data_config: PretrainDataConfig,
    config: PretrainConfig,
    context: DistributedContext,
    model_key: dict[str, Any],
) -> dict[str, Any]:
    """What a resumed run must share with the run it continues; `model_key` is what of the
    model's config (its objective's `model_key`)."""
    return {
        "data_config": dataclasses.asdict(data_config),
        "seed": config.seed,
        "batch_size": config.batch_size,
        "gradient_accumulation_steps": config.gradient_accumulation_steps,
        "world_size": context.world_size,
        "budget": config.max_steps if config.max_steps is not None else config.max_time,
        **model_key,
    }


def check_resumable(out_dir: str | os.PathLike, setup: dict[str, Any]) -> None:
    """Refuse a resume before anything is built for it (a corpus cache, a model).

    Args:
        out_dir: the run directory.
        setup: `setup_key(...)` of the run that would resume.

    Raises:
        ValueError: no complete checkpoint in `out_dir`, or one from other settings.
    """
    resumable_checkpoint(Path(out_dir), setup)


def resumable_checkpoint(out_dir: Path, setup: dict[str, Any]) -> tuple[Path, dict[str, Any]]:
    """The latest checkpoint in `out_dir` and its state, if a run with `setup` may resume it."""
    checkpoint_dir = latest_checkpoint(out_dir)
    if checkpoint_dir is None:
        raise ValueError(
            Worded(
                "{resume}: no complete checkpoint in {where}; {again_without_resume} to start "
                "from the beginning",
                where=out_dir / CHECKPOINTS_DIR,
            )
        )
    state = load_state(checkpoint_dir)
    for key, value in state["setup"].items():
        if setup.get(key) != value:
            raise ValueError(
                Worded(
                    "cannot resume from {where}: {key} was {was}, now {now}; use the same "
                    "settings or a new {out}",
                    where=checkpoint_dir,
                    key=key,
                    was=repr(value),
                    now=repr(setup.get(key)),
                )
            )
    return checkpoint_dir, state
