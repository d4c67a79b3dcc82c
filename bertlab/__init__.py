"""bertlab: pre-train, fine-tune and inspect BERT-style models on the hardware you have."""

# Before anything imports torch: OpenMP reads its wait policy once, when torch loads it, and
# threads that spin make training fall off a cliff on a machine doing something else
# (bertlab.threads explains; a policy set in the environment wins).
from bertlab.threads import use_passive_waiting

use_passive_waiting()

from bertlab.applications import PretrainedBert, load  # noqa: E402 (after the wait policy)
from bertlab.config import BertConfig  # noqa: E402
from bertlab.heads import (  # noqa: E402
    BertForMultipleChoice,
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
)
from bertlab.modeling import BertForPreTraining, BertModel  # noqa: E402
from bertlab.tokenization import Tokenizer  # noqa: E402
from bertlab.training.loop import PretrainResult  # noqa: E402
from bertlab.training.pretrain_run import PretrainRun, run_pretraining  # noqa: E402

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
