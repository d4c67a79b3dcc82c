"""bertlab: pre-train, fine-tune and inspect BERT-style models on the hardware you have."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
from typing import TYPE_CHECKING, Any

# Before anything imports torch: OpenMP reads its wait policy once, when torch loads it, and
# threads that spin make training fall off a cliff on a machine doing something else
# (bertlab.core.threads explains; a policy set in the environment wins).
from bertlab.core.threads import use_passive_waiting

use_passive_waiting()

# The public names, each with the module it lives in. They load on first use (PEP 562), so that
# `import bertlab.cli` for `bertlab --help` does not import torch (a few seconds on a busy machine).
_PUBLIC = {
    "BertConfig": "bertlab.core.config",
    "BertModel": "bertlab.network.bert",
    "BertForPreTraining": "bertlab.network.bert",
    "BertForSequenceClassification": "bertlab.network.heads",
    "BertForTokenClassification": "bertlab.network.heads",
    "BertForQuestionAnswering": "bertlab.network.heads",
    "BertForMultipleChoice": "bertlab.network.heads",
    "Tokenizer": "bertlab.tokenizer.wordpiece",
    "PretrainRun": "bertlab.training.pretrain_run",
    "PretrainResult": "bertlab.training.loop",
    "run_pretraining": "bertlab.training.pretrain_run",
    "load": "bertlab.use.pretrained",
    "PretrainedBert": "bertlab.use.pretrained",
}

if TYPE_CHECKING:  # what type checkers and editors see; at run time __getattr__ loads them
    from bertlab.core.config import BertConfig
    from bertlab.network.bert import BertForPreTraining, BertModel
    from bertlab.network.heads import (
        BertForMultipleChoice,
        BertForQuestionAnswering,
        BertForSequenceClassification,
        BertForTokenClassification,
    )
    from bertlab.tokenizer.wordpiece import Tokenizer
    from bertlab.training.loop import PretrainResult
    from bertlab.training.pretrain_run import PretrainRun, run_pretraining
    from bertlab.use.pretrained import PretrainedBert, load

__all__ = [
    "BertConfig",
    "BertModel",
    "BertForPreTraining",
    "BertForSequenceClassification",
    "BertForTokenClassification",
    "BertForQuestionAnswering",
    "BertForMultipleChoice",
    "Tokenizer",
    "PretrainRun",
    "PretrainResult",
    "run_pretraining",
    "load",
    "PretrainedBert",
]  # the keys of _PUBLIC, spelled out for tools that read __all__
__version__ = "0.1.0"


# Where the modules that earlier versions kept at the package's root live now (the root is now
# one folder per layer: core, tokenizer, network, use). A script written for the old layout keeps
# working: `import bertlab.tokenization` and `from bertlab.modeling import BertModel` give the
# module at its new place, the same object under its old name. The package's own code, tests and
# docs use the new paths only (tests/unit/test_moved_modules.py checks both).
MOVED_MODULES = {
    "bertlab.atomic": "bertlab.core.atomic",
    "bertlab.text_files": "bertlab.core.text_files",
    "bertlab.optional": "bertlab.core.optional",
    "bertlab.wording": "bertlab.core.wording",
    "bertlab.config": "bertlab.core.config",
    "bertlab.metrics": "bertlab.core.metrics",
    "bertlab.runtime": "bertlab.core.runtime",
    "bertlab.threads": "bertlab.core.threads",
    "bertlab.hub": "bertlab.core.hub",
    "bertlab.model_card": "bertlab.core.model_card",
    "bertlab.tokenization_fast": "bertlab.tokenizer.fast",
    "bertlab.basic_tokenization": "bertlab.tokenizer.basic",
    "bertlab.tokenization": "bertlab.tokenizer.wordpiece",
    "bertlab.tokenizer_training": "bertlab.tokenizer.training",
    "bertlab.checkpoint": "bertlab.network.checkpoint",
    "bertlab.tf_checkpoint": "bertlab.network.tf_checkpoint",
    "bertlab.modeling": "bertlab.network.bert",
    "bertlab.heads": "bertlab.network.heads",
    "bertlab.feature_heads": "bertlab.network.feature_heads",
    "bertlab.electra": "bertlab.network.electra",
    "bertlab.features": "bertlab.use.features",
    "bertlab.inspection": "bertlab.use.inspection",
    "bertlab.pretrained": "bertlab.use.pretrained",
    "bertlab.language_model": "bertlab.use.language_model",
    "bertlab.neighbours": "bertlab.use.neighbours",
}


class _OldModulePaths(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports a module of `MOVED_MODULES` by its old name: the module itself, not a copy."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname not in MOVED_MODULES:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: Any) -> Any:
        module = importlib.import_module(MOVED_MODULES[spec.name])
        spec.loader_state = module.__spec__  # the import system sets the old name's spec on it
        return module

    def exec_module(self, module: Any) -> None:
        # The module ran at its new place: give it back its own spec (reload reads it).
        module.__spec__ = module.__spec__.loader_state


if not any(isinstance(finder, _OldModulePaths) for finder in sys.meta_path):
    sys.meta_path.insert(0, _OldModulePaths())  # before the file finders: no file has these names


def __getattr__(name: str) -> Any:
    """`bertlab.load`, `bertlab.BertModel`, ...: import the module that holds `name` once."""
    if name not in _PUBLIC:
        raise AttributeError(f"module 'bertlab' has no attribute {name!r}")
    value = getattr(importlib.import_module(_PUBLIC[name]), name)
    globals()[name] = value  # later lookups find it without this function
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_PUBLIC])
