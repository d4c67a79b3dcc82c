"""bertlab: pre-train, fine-tune and inspect BERT-style models on the hardware you have."""

from bertlab.config import BertConfig
from bertlab.heads import (
    BertForMultipleChoice,
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
)
from bertlab.modeling import BertForPreTraining, BertModel
from bertlab.tokenization import Tokenizer

__all__ = [
    "BertConfig",
    "BertModel",
    "BertForPreTraining",
    "BertForSequenceClassification",
    "BertForTokenClassification",
    "BertForQuestionAnswering",
    "BertForMultipleChoice",
    "Tokenizer",
]
__version__ = "0.1.0"
