"""Checkpoints in the Hugging Face layout: `config.json` plus `model.safetensors`.

This module knows file formats and key names, not model classes, so every model class can offer
`save_pretrained`/`from_pretrained` through it. It reads what `transformers` writes
(`model.safetensors`, sharded safetensors, or `pytorch_model.bin` through
`torch.load(weights_only=True)`), with or without the `bert.` prefix and with the legacy
TensorFlow-era `LayerNorm.gamma`/`LayerNorm.beta` names. A model is a local folder or a Hugging
Face Hub id (`bert-base-uncased`), resolved to a folder by `bertlab.core.hub`.
"""

from __future__ import annotations

import json
import logging
import pickle
import zipfile
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from torch import nn

from bertlab.core import hub
from bertlab.core.atomic import atomic_file, write_json
from bertlab.core.config import read_json_object

logger = logging.getLogger(__name__)

CONFIG_NAME = "config.json"
WEIGHTS_NAME = "model.safetensors"
WEIGHTS_INDEX_NAME = "model.safetensors.index.json"
LEGACY_WEIGHTS_NAME = "pytorch_model.bin"
GOOGLE_CONFIG_NAME = "bert_config.json"  # google-research/bert's releases (TensorFlow)

# Stored once, as transformers does: the MLM decoder is tied to the word embeddings and its bias
# is `cls.predictions.bias`.
TIED_KEYS = frozenset({"cls.predictions.decoder.weight", "cls.predictions.decoder.bias"})
# Buffers that old checkpoints carry and that bertlab computes instead.
IGNORED_KEYS = ("embeddings.position_ids", "embeddings.token_type_ids")
# Keys whose first dimension is the vocabulary, for a clear message on a vocabulary mismatch.
VOCAB_KEYS = ("embeddings.word_embeddings.weight", "cls.predictions.bias")
LEGACY_SUFFIXES = {"LayerNorm.gamma": "LayerNorm.weight", "LayerNorm.beta": "LayerNorm.bias"}


def save_model(
    directory: str | Path, config_values: dict[str, Any], state_dict: dict[str, torch.Tensor]
) -> None:
    """Write `config.json` and `model.safetensors` (tied weights stored once). Each file is
    replaced atomically, so an interrupted save never leaves a half-written file."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    tensors = {
        key: value.detach().to("cpu").contiguous()
        for key, value in state_dict.items()
        if key not in TIED_KEYS
    }
    with atomic_file(directory / WEIGHTS_NAME) as temporary:
        save_file(tensors, str(temporary), metadata={"format": "pt"})
    write_json(directory / CONFIG_NAME, config_values, sort_keys=True)


def read_model(
    name_or_path: str | Path, revision: str | None = None
) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    """Read `config.json` and the weights of a model folder or Hub model.

    Args:
        name_or_path: a model folder, or a Hugging Face Hub id such as `bert-base-uncased`.
        revision: the Hub revision (branch, tag or commit); None: `main`.

    Raises:
        FileNotFoundError: the folder (or Hub model), its config.json or its weights are missing.
        ValueError: a file is corrupt.
    """
    directory = hub.resolve(name_or_path, revision)
    if not directory.is_dir():
        raise FileNotFoundError(f"model directory not found: {directory}")
    if not (directory / CONFIG_NAME).is_file():
        if (directory / GOOGLE_CONFIG_NAME).is_file():
            raise FileNotFoundError(
                f"{directory} is Google's original TensorFlow checkpoint; convert it once with "
                f"`bertlab convert {directory} --out DIR` (needs pip install 'bertlab[tf]')"
            )
        raise FileNotFoundError(
            f"no {CONFIG_NAME} in {directory}{hub.model_in_run_hint(directory)}"
        )
    return read_json_object(directory / CONFIG_NAME), read_weights(directory)


def read_weights(directory: Path) -> dict[str, torch.Tensor]:
    """The state dict stored in `directory`, from whichever weights file it holds."""
    if (directory / WEIGHTS_NAME).is_file():
        return _load_safetensors(directory / WEIGHTS_NAME)
    if (directory / WEIGHTS_INDEX_NAME).is_file():
        index = json.loads((directory / WEIGHTS_INDEX_NAME).read_text(encoding="utf-8"))
        state_dict: dict[str, torch.Tensor] = {}
        for shard in sorted(set(index["weight_map"].values())):
            state_dict.update(_load_safetensors(directory / shard))
        return state_dict
    if (directory / LEGACY_WEIGHTS_NAME).is_file():
        path = directory / LEGACY_WEIGHTS_NAME
        loaded = load_tensors(path)
        if not isinstance(loaded, dict):
            raise ValueError(f"{path} does not hold a state dict")
        return loaded
    raise FileNotFoundError(
        f"no {WEIGHTS_NAME}, {WEIGHTS_INDEX_NAME} or {LEGACY_WEIGHTS_NAME} in {directory}"
    )


def load_tensors(path: Path) -> Any:
    """`torch.load(path, weights_only=True)`: tensors and plain containers only, never code.

    Raises:
        ValueError: the file holds other Python objects (refused: unpickling them could run
            code; torch's own message would advise turning the check off), or it is corrupt or
            not a file `torch.save` wrote.
    """
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError:
        raise ValueError(
            f"{path} holds Python objects besides tensors; bertlab reads weights only, since "
            "loading other objects could run code"
        ) from None
    except (RuntimeError, EOFError, OSError, zipfile.BadZipFile, ValueError) as error:
        raise ValueError(f"cannot read {path} (corrupt or not a weights file): {error}") from error


def _load_safetensors(path: Path) -> dict[str, torch.Tensor]:
    if not path.is_file():
        raise FileNotFoundError(f"weights file not found: {path}")
    try:
        return load_file(str(path), device="cpu")
    except (SafetensorError, OSError) as error:
        raise ValueError(f"cannot read {path} (corrupt or truncated?): {error}") from error


def normalize_keys(
    state_dict: dict[str, torch.Tensor], base_prefix: str
) -> dict[str, torch.Tensor]:
    """Rename checkpoint keys to what a model with encoder prefix `base_prefix` expects.

    `base_prefix` is "bert." for models with heads and "" for a bare `BertModel`. A body-only
    checkpoint gains the prefix; a checkpoint with heads loses it (its head keys are then left
    over and reported as unused).
    """
    renamed = {}
    for key, value in state_dict.items():
        for old, new in LEGACY_SUFFIXES.items():
            if key.endswith(old):
                key = key[: -len(old)] + new
        renamed[key] = value
    has_prefixed_body = any(key.startswith("bert.") for key in renamed)
    if base_prefix and not has_prefixed_body:
        renamed = {
            (base_prefix + key if key.split(".")[0] in _BODY_MODULES else key): value
            for key, value in renamed.items()
        }
    elif not base_prefix and has_prefixed_body:
        renamed = {key.removeprefix("bert."): value for key, value in renamed.items()}
    return {
        key: value
        for key, value in renamed.items()
        if key not in TIED_KEYS and not key.endswith(IGNORED_KEYS)
    }


_BODY_MODULES = frozenset({"embeddings", "encoder", "pooler"})
# The task heads' own modules (heads.py's BertForTask): new whenever a pre-trained model is
# fine-tuned, so their initialization is the expected case, logged at INFO, not a warning.
TASK_HEAD_MODULES = frozenset({"classifier", "qa_outputs", "features"})


def load_into(
    model: nn.Module, state_dict: dict[str, torch.Tensor], base_prefix: str, source: str
) -> tuple[list[str], list[str]]:
    """Copy a checkpoint's weights into `model`.

    Returns:
        (missing, unexpected): keys the checkpoint lacked (left as initialized, logged) and keys it
        had that the model does not use (logged).

    Raises:
        ValueError: a weight has the wrong shape (the vocabulary size named when that is why).
    """
    incoming = normalize_keys(state_dict, base_prefix)
    expected = {k: v for k, v in model.state_dict().items() if k not in TIED_KEYS}
    for key, value in incoming.items():
        if key in expected and tuple(value.shape) != tuple(expected[key].shape):
            if key.endswith(VOCAB_KEYS):
                raise ValueError(
                    f"vocabulary size mismatch in {source}: the weights have {value.shape[0]} "
                    f"tokens but the config says {expected[key].shape[0]} ({key})"
                )
            raise ValueError(
                f"shape mismatch in {source} for {key}: checkpoint {tuple(value.shape)}, "
                f"model {tuple(expected[key].shape)}"
            )
    missing = sorted(set(expected) - set(incoming))
    unexpected = sorted(set(incoming) - set(expected))
    if len(missing) == len(expected):
        raise ValueError(f"{source} holds no weights of this model (is it a BERT checkpoint?)")
    model.load_state_dict({k: v for k, v in incoming.items() if k in expected}, strict=False)
    if missing:
        is_head_only = all(key.split(".")[0] in TASK_HEAD_MODULES for key in missing)
        log = logger.info if is_head_only else logger.warning
        log("newly initialized (not in %s): %s", source, ", ".join(missing))
    if unexpected:
        logger.debug("not used from %s: %s", source, ", ".join(unexpected))
    return missing, unexpected
