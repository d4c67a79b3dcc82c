"""Released models by name: a Hugging Face Hub repository id resolved to a local folder.

`google-bert/bert-base-uncased`, the short legacy names such as `bert-base-uncased` and the small
BERTs such as `google/bert_uncased_L-2_H-128_A-2` name model repositories on the Hugging Face Hub.
`resolve` hands such a name to `huggingface_hub`, the Hub's own client, which downloads the files
bertlab reads into its cache once (`~/.cache/huggingface/hub`, or `HF_HUB_CACHE` / `HF_HOME`: the
layout `models--org--name/snapshots/<commit>/`) and returns the snapshot folder. The client also
brings revisions (branches, tags, commits), resumable downloads, `HF_HUB_OFFLINE=1` (the cache
only, no network) and access tokens from `hf auth login` or `HF_TOKEN`.

Weights: `model.safetensors` (or its shards) when the repository has it; otherwise
`pytorch_model.bin`, which `bertlab.network.checkpoint` reads with
`torch.load(weights_only=True)` only.

Models pre-trained by bertlab itself ship inside the package and load by a short name in every
`--model`: `bertlab:mini-reviews-en` is the folder `bertlab/models/mini-reviews-en` (a plain
Hugging Face folder that `transformers` loads too). `tools/ship_model.py` (`make models`) makes
them.

A name that is an existing file or folder is used as it is, and nothing is downloaded. Every
failure (offline and not cached, an unknown or private id, a missing revision) is one line that
says what happened and suggests passing a local folder.
"""

from __future__ import annotations

import fnmatch
import logging
import os
import re
from pathlib import Path

from huggingface_hub import snapshot_download
from huggingface_hub.errors import (
    GatedRepoError,
    HfHubHTTPError,
    HFValidationError,
    LocalEntryNotFoundError,
    OfflineModeIsEnabled,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from huggingface_hub.utils import validate_repo_id

from bertlab.core.replacing import restore_interrupted
from bertlab.core.run_folder import CHECKPOINTS_DIR, FINAL_DIR

logger = logging.getLogger(__name__)

# What bertlab reads from a model folder, besides the weights: the architecture, the tokenizer
# (bertlab's own files and those `transformers` writes), a fine-tuned model's task settings and
# the model card. tests/unit/test_hub.py checks that this covers every name the loaders read.
MODEL_FILES = (
    "config.json",
    "vocab.txt",
    "tokenizer.json",
    "tokenizer_config.json",
    "bertlab_task.json",
    "README.md",
)
TOKENIZER_ONLY_FILES = ("vocab.txt", "tokenizer.json", "tokenizer_config.json")
SAFETENSORS_FILES = (
    "model.safetensors",
    "model.safetensors.index.json",
    "model-*-of-*.safetensors",
)
LEGACY_WEIGHTS_FILES = ("pytorch_model.bin",)
# Everything a model folder may hold (glob patterns): what may be replaced when one is saved over.
MODEL_FOLDER_FILES = (
    *MODEL_FILES,
    *SAFETENSORS_FILES,
    *LEGACY_WEIGHTS_FILES,
    "special_tokens_map.json",
)


def not_model_files(folder: str | os.PathLike) -> list[str]:
    """The names in `folder` (an existing one) that no model folder holds (`MODEL_FOLDER_FILES`):
    the user's files, which saving a model over the folder would delete."""
    return sorted(
        path.name
        for path in Path(folder).iterdir()
        if not any(fnmatch.fnmatch(path.name, pattern) for pattern in MODEL_FOLDER_FILES)
    )


# The Hub moved Google's BERTs from unprefixed names to the google-bert organization; the old
# names still redirect online. Asking for the new name first shares the cache with anyone who
# downloaded it so; the old name is the fallback for caches filled under it.
LEGACY_NAMES = {
    name: f"google-bert/{name}"
    for name in (
        "bert-base-uncased",
        "bert-base-cased",
        "bert-large-uncased",
        "bert-large-cased",
        "bert-base-chinese",
        "bert-base-multilingual-uncased",
        "bert-base-multilingual-cased",
        "bert-large-uncased-whole-word-masking",
        "bert-large-cased-whole-word-masking",
    )
}
SHIPPED_PREFIX = "bertlab:"  # bertlab:NAME is a model shipped in SHIPPED_DIR/NAME
SHIPPED_DIR = Path(__file__).resolve().parents[1] / "models"
SHIPPED_NAME = re.compile(r"[a-z0-9][a-z0-9.-]*")  # a folder of SHIPPED_DIR, never a path
# Names with these endings are files someone meant to pass (a vocab.txt, a config.json, ...).
FILE_SUFFIXES = (".txt", ".json", ".bin", ".safetensors", ".ckpt", ".index", ".zip", ".gz")
LOCAL_FOLDER_HINT = "pass a local model folder instead"


def model_in_run_hint(directory: Path) -> str:
    """The end of a message ("; ...") naming the model inside `directory` when it is a
    pre-training run's folder given where a model folder belongs: its final model, else its
    latest checkpoint; "" otherwise."""
    final = directory / FINAL_DIR
    checkpoints = sorted((directory / CHECKPOINTS_DIR).glob("step-*"))
    if final.is_dir():
        return f"; {directory} is a pre-training run: its model is {final}"
    if checkpoints:
        return f"; {directory} is a pre-training run: its latest checkpoint is {checkpoints[-1]}"
    return ""


def is_repo_id(name: str | os.PathLike) -> bool:
    """Whether `name` can only be meant as a Hub repository id (`org/name` or `name`).

    Paths never are: absolute or home-relative paths, `./x`, more than one `/`, or a name ending
    like a file (`vocab.txt`).

    Example:
        >>> is_repo_id("google/bert_uncased_L-2_H-128_A-2"), is_repo_id("runs/x/final")
        (True, False)
    """
    text = os.fspath(name)
    if text.startswith(("/", ".", "~")) or text.lower().endswith(FILE_SUFFIXES):
        return False
    try:
        validate_repo_id(text)
    except HFValidationError:
        return False
    return True


def resolve(
    name_or_path: str | os.PathLike, revision: str | None = None, with_weights: bool = True
) -> Path:
    """The local file or folder that `name_or_path` names, downloading it from the Hub if needed.

    Args:
        name_or_path: an existing file or folder (returned as it is: a folder named like a
            shipped model, `bertlab:NAME`, wins over that model, with a warning), a shipped
            model's name, or a Hub repository id.
        revision: a branch, tag or commit of the repository (default: `main`).
        with_weights: also fetch the weights; False fetches the tokenizer files only.

    Returns:
        The path itself, or the cached snapshot folder of the repository.

    Raises:
        FileNotFoundError: neither a local path nor a model the Hub (or, offline, the cache) has.
        ValueError: the revision does not exist, or the Hub refused the download.
    """
    path = Path(name_or_path).expanduser()
    restore_interrupted(path)  # a model that a killed `finetune --overwrite` had moved aside
    if os.fspath(name_or_path).startswith(SHIPPED_PREFIX):
        if not path.exists():
            return shipped_model(os.fspath(name_or_path))
        logger.warning(
            "%s: using the local %s %s, not the model shipped with bertlab under that name "
            "(rename it to use the shipped one)",
            name_or_path,
            "folder" if path.is_dir() else "file",
            path.absolute(),
        )
        return path.absolute()  # absolute: read again, it is no longer taken for the name
    if path.exists() or not is_repo_id(name_or_path):
        return path
    repo_id = os.fspath(name_or_path)
    candidates = [LEGACY_NAMES[repo_id], repo_id] if repo_id in LEGACY_NAMES else [repo_id]
    for candidate in candidates[:-1]:
        try:
            return _download(candidate, revision, with_weights)
        except (LocalEntryNotFoundError, RepositoryNotFoundError):
            logger.debug("%s not found; trying %s", candidate, candidates[-1])
    try:
        folder = _download(candidates[-1], revision, with_weights)
    except (LocalEntryNotFoundError, HfHubHTTPError) as error:
        # The one line says it all; the chain (huggingface_hub's, httpx's) is for -v only.
        logger.debug("downloading %s failed", repo_id, exc_info=error)
        raise _one_line_error(repo_id, revision, error) from None
    if not folder.is_dir():  # nothing matched: not a model in the Hugging Face layout
        raise FileNotFoundError(
            f"{repo_id} on the Hugging Face Hub has none of the files bertlab reads "
            f"({', '.join(MODEL_FILES[:2])}, weights); {LOCAL_FOLDER_HINT}"
        )
    return folder


def shipped_models() -> list[str]:
    """The names of the models shipped with bertlab (`bertlab:NAME`), sorted."""
    if not SHIPPED_DIR.is_dir():
        return []
    folders = (path for path in SHIPPED_DIR.iterdir() if (path / "config.json").is_file())
    return sorted(f"{SHIPPED_PREFIX}{path.name}" for path in folders)


def shipped_model(name: str) -> Path:
    """The folder of the shipped model `name` (`bertlab:mini-reviews-en`).

    Raises:
        FileNotFoundError: no model of that name ships with this bertlab, naming those that do.
    """
    short = name.removeprefix(SHIPPED_PREFIX)
    folder = SHIPPED_DIR / short
    if SHIPPED_NAME.fullmatch(short) and (folder / "config.json").is_file():
        return folder
    shipped = ", ".join(shipped_models()) or "none"
    raise FileNotFoundError(f"no model {name} ships with bertlab (shipped: {shipped})")


def _download(repo_id: str, revision: str | None, with_weights: bool) -> Path:
    """The snapshot folder with `MODEL_FILES` (or the tokenizer's) and the preferred weights."""
    if not with_weights:
        return Path(
            snapshot_download(repo_id, revision=revision, allow_patterns=TOKENIZER_ONLY_FILES)
        )
    folder = Path(
        snapshot_download(
            repo_id, revision=revision, allow_patterns=[*MODEL_FILES, *SAFETENSORS_FILES]
        )
    )
    if not any((folder / name).is_file() for name in SAFETENSORS_FILES[:2]):
        folder = Path(
            snapshot_download(
                repo_id, revision=revision, allow_patterns=[*MODEL_FILES, *LEGACY_WEIGHTS_FILES]
            )
        )
    return folder


def _one_line_error(repo_id: str, revision: str | None, error: Exception) -> Exception:
    """The user's error for a failed download: what happened, and the local-folder hint."""
    if isinstance(error, LocalEntryNotFoundError):
        return FileNotFoundError(_not_cached_message(repo_id, error))
    if isinstance(error, GatedRepoError):
        return FileNotFoundError(
            f"{repo_id} is a gated model on the Hugging Face Hub: accept its conditions there "
            f"and log in (`hf auth login` or HF_TOKEN), or {LOCAL_FOLDER_HINT}"
        )
    if isinstance(error, RepositoryNotFoundError):
        return FileNotFoundError(
            f"{repo_id} is neither a local folder nor a model on the Hugging Face Hub (a private "
            f"one needs `hf auth login` or HF_TOKEN); {LOCAL_FOLDER_HINT}"
        )
    if isinstance(error, RevisionNotFoundError):
        return ValueError(f"{repo_id} has no revision {revision!r} on the Hugging Face Hub")
    status = error.response.status_code if getattr(error, "response", None) is not None else "?"
    return ValueError(
        f"the Hugging Face Hub refused {repo_id} (HTTP {status}); {LOCAL_FOLDER_HINT}"
    )


def _not_cached_message(repo_id: str, error: LocalEntryNotFoundError) -> str:
    if isinstance(error.__cause__, OfflineModeIsEnabled):
        reason = "HF_HUB_OFFLINE is set and it is not in the Hugging Face cache"
    else:
        cause = error.__cause__ or error
        reason = (
            f"the Hugging Face Hub cannot be reached ({type(cause).__name__}) and it is not in "
            "the cache"
        )
    return f"{repo_id} is not a local folder, and {reason}; {LOCAL_FOLDER_HINT}"
