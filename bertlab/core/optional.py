"""Packages that only some commands need, imported where they are used.

Pre-training, fine-tuning, evaluation and prediction need torch, tokenizers, safetensors, numpy,
scipy and scikit-learn only. The packages below serve one feature each, and a machine without
them (a lent GPU machine whose image cannot be changed) still runs everything else:

    gensim   word vectors (`bertlab neighbours word2vec`, the word-vector warm start)
    jieba    Chinese word segmentation (whole-word masking of Chinese, Chinese word vectors)
    seqeval  entity-level precision, recall and F1 of tagging tasks (NER)
    fastapi, uvicorn  `bertlab serve`
    pyarrow  corpora in Parquet and folders saved by `datasets` (the `corpora` extra)

`require` imports one of them and, when it is missing, raises `MissingPackageError`: one line
naming the package, the feature and how to install it, which the CLI prints as it is.
"""

from __future__ import annotations

import importlib
from types import ModuleType


class MissingPackageError(ImportError):
    """An optional package that the requested feature needs is not installed."""


def require(module: str, feature: str, package: str | None = None) -> ModuleType:
    """Import `module`, or say in one line that `feature` needs its package.

    Example:
        >>> require("math", "arithmetic").sqrt(4.0)
        2.0

    Args:
        module: the module to import, e.g. "gensim.models".
        feature: what needs it, for the message, e.g. "word vectors".
        package: the name to `pip install` when it differs from the top-level module's.

    Returns:
        The imported module.

    Raises:
        MissingPackageError: the module's top-level package is not installed. A package that is
            installed but fails to import (a missing dependency of its own) raises that error.
    """
    top_level = module.partition(".")[0]
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as error:
        if error.name is None or error.name.partition(".")[0] != top_level:
            raise
        name = package or top_level
        raise MissingPackageError(
            f"{feature} needs the package {name!r}, which is not installed: pip install {name}"
        ) from None
