"""bertlab: pre-train, fine-tune and inspect BERT-style models on the hardware you have."""

from bertlab.applications import PretrainedBert, load
from bertlab.config import BertConfig
from bertlab.heads import (
    BertForMultipleChoice,
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
)
from bertlab.modeling import BertForPreTraining, BertModel
from bertlab.tokenization import Tokenizer
from bertlab.training.loop import PretrainResult
from bertlab.training.pretrain_run import PretrainRun, run_pretraining

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
]
__version__ = "0.1.0"
