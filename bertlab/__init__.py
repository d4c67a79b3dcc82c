"""bertlab: pre-train, fine-tune and inspect BERT-style models on the hardware you have."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Before anything imports torch: OpenMP reads its wait policy once, when torch loads it, and
# threads that spin make training fall off a cliff on a machine doing something else
# (bertlab.core.threads explains; a policy set in the environment wins).
from bertlab.core.threads import use_passive_waiting

use_passive_waiting()

# The public names, each with the module it lives in. They load on first use (PEP 562), so that
# `import bertlab.cli` for `bertlab --help` does not import torch (a few seconds on a busy machine).
# Every type that their signatures name is one of them (a test checks): `fit(config=...)` takes
# a `bertlab.FinetuneConfig`, not a class found through a module path.
_PUBLIC = {
    "BertConfig": "bertlab.core.config",
    "BertModel": "bertlab.network.bert",
    "BertForPreTraining": "bertlab.network.bert",
    "BertForSequenceClassification": "bertlab.network.heads",
    "BertForTokenClassification": "bertlab.network.heads",
    "BertForQuestionAnswering": "bertlab.network.heads",
    "BertForMultipleChoice": "bertlab.network.heads",
    "Tokenizer": "bertlab.tokenizer.wordpiece",
    "PretrainRun": "bertlab.training.pretraining.run",
    "PretrainResult": "bertlab.training.pretraining.loop",
    "run_pretraining": "bertlab.training.pretraining.runner",
    "load": "bertlab.use.pretrained",
    "PretrainedBert": "bertlab.use.pretrained",
    "PretrainedLanguageModel": "bertlab.use.lstm_models",
    # named by the signatures above: arguments, results and their fields
    "FinetuneConfig": "bertlab.core.finetune_config",
    "FinetuneResult": "bertlab.training.finetuning.loop",
    "DistributedContext": "bertlab.core.runtime",
    "PrecisionChoice": "bertlab.core.runtime",
    "Progress": "bertlab.training.pretraining.loop",
    "StreamPosition": "bertlab.data.stream",
    "OneClassCollapse": "bertlab.training.finetuning.one_class",
    "TokenizerOptions": "bertlab.tokenizer.wordpiece",
    "FeatureHeadConfig": "bertlab.network.feature_head_config",
    "ModelOutput": "bertlab.network.bert",
    "PreTrainingOutput": "bertlab.network.bert",
    "TaskOutput": "bertlab.network.heads",
    "Occurrence": "bertlab.use.neighbours",
    "SentenceScore": "bertlab.use.language_model",
}

if TYPE_CHECKING:  # what type checkers and editors see; at run time __getattr__ loads them
    from bertlab.core.config import BertConfig
    from bertlab.core.finetune_config import FinetuneConfig
    from bertlab.core.runtime import DistributedContext, PrecisionChoice
    from bertlab.data.stream import StreamPosition
    from bertlab.network.bert import BertForPreTraining, BertModel, ModelOutput, PreTrainingOutput
    from bertlab.network.feature_head_config import FeatureHeadConfig
    from bertlab.network.heads import (
        BertForMultipleChoice,
        BertForQuestionAnswering,
        BertForSequenceClassification,
        BertForTokenClassification,
        TaskOutput,
    )
    from bertlab.tokenizer.wordpiece import Tokenizer, TokenizerOptions
    from bertlab.training.finetuning.loop import FinetuneResult
    from bertlab.training.finetuning.one_class import OneClassCollapse
    from bertlab.training.pretraining.loop import PretrainResult, Progress
    from bertlab.training.pretraining.run import PretrainRun
    from bertlab.training.pretraining.runner import run_pretraining
    from bertlab.use.language_model import SentenceScore
    from bertlab.use.lstm_models import PretrainedLanguageModel
    from bertlab.use.neighbours import Occurrence
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
    "PretrainedLanguageModel",
    "FinetuneConfig",
    "FinetuneResult",
    "DistributedContext",
    "PrecisionChoice",
    "Progress",
    "StreamPosition",
    "OneClassCollapse",
    "TokenizerOptions",
    "FeatureHeadConfig",
    "ModelOutput",
    "PreTrainingOutput",
    "TaskOutput",
    "Occurrence",
    "SentenceScore",
]  # the keys of _PUBLIC, spelled out for tools that read __all__
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    """`bertlab.load`, `bertlab.BertModel`, ...: import the module that holds `name` once."""
    if name not in _PUBLIC:
        raise AttributeError(f"module 'bertlab' has no attribute {name!r}")
    value = getattr(importlib.import_module(_PUBLIC[name]), name)
    globals()[name] = value  # later lookups find it without this function
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_PUBLIC])
