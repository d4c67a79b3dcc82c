"""The served models: each directory loaded once, with what its head can do.

A directory is served by what it holds (its `config.json` `architectures` and its weights'
keys):

| the directory holds | it can |
|---|---|
| a sequence classification head | `classify` (labels and probabilities, or a regression score) |
| a token classification head | `tag` (one tag per word, entities as character spans) |
| a question answering head | `answer` (the best span of the context) |
| the language-model head of a masked model (`bertlab pretrain`) | `fill-mask` and `score` |
| the language-model head of a left-to-right model (`--objective clm`) | `generate` and `score` |
| any BERT encoder | `attention` and `embed` |
| an LSTM-era model (NNLM, ELMo, AWD-LSTM, a head on one) | `embed`; no `attention` |

What a language-model head predicts is declared once, with the model cards' list of uses (each
objective's `uses` in `training/pretraining/objectives.py`, read through
`objectives.language_model_uses`); how each architecture is loaded and read (its heads' task
families, its language model, its encoder, whether it has attention) is its entry's
(`network.architectures`); this module keeps no list of its own but the capability of each
served task family.

Weights are read only from safetensors files, which hold tensors and nothing that runs.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError, safe_open
from torch import nn

from bertlab.core.config import read_json_object
from bertlab.core.finetune_config import TaskDataConfig
from bertlab.core.runtime import default_device, model_device, resolve_precision
from bertlab.data.tasks.classification import ColumnSpec
from bertlab.network.architectures import architecture_of
from bertlab.network.checkpoint import CONFIG_NAME, WEIGHTS_INDEX_NAME, WEIGHTS_NAME, normalize_keys
from bertlab.task_families import ClassificationTask, Task, make_task, read_task_file
from bertlab.tokenizer.wordpiece import Tokenizer
from bertlab.training.pretraining.objectives import language_model_uses

logger = logging.getLogger(__name__)

FILL_MASK, GENERATE, SCORE, CLASSIFY, TAG, ANSWER, ATTENTION, EMBED = (
    "fill-mask",
    "generate",
    "score",
    "classify",
    "tag",
    "answer",
    "attention",
    "embed",
)
CAPABILITIES = (FILL_MASK, GENERATE, SCORE, CLASSIFY, TAG, ANSWER, ATTENTION, EMBED)  # page order
# The task families served, and the capability of each; a head's family is its architecture's
# to say (`Architecture.head_family`), and a model fine-tuned by bertlab names its own task in
# `bertlab_task.json` (else it is served as its family's generic task).
FAMILY_CAPABILITIES = {"classification": CLASSIFY, "tagging": TAG, "qa": ANSWER}
POOLER_KEY = "pooler.dense.weight"
# What each capability needs, for the message when a model lacks it.
NEEDS = {
    FILL_MASK: "the masked-LM head of a pre-trained model that reads both sides of a [MASK]",
    GENERATE: "a left-to-right model's language-model head (bertlab pretrain --objective clm)",
    SCORE: "the language-model head of a pre-trained model",
    CLASSIFY: "a sequence classification head (bertlab finetune on a classification task)",
    TAG: "a token classification head (bertlab finetune on a tagging task)",
    ANSWER: "a question answering head (bertlab finetune on a SQuAD-style task)",
}


class CapabilityError(LookupError):
    """A model was asked for something its head cannot do."""


@dataclass(frozen=True)
class ServedModel:
    """One loaded model: its encoder, tokenizer, and the head that gives it its tasks.

    Attributes:
        name: the name it is served under.
        architecture: from its config.json, e.g. `BertForSequenceClassification`.
        encoder: the body, for attention and embeddings (shared with the head, not a copy): a
            `BertModel`, or an LSTM-era model's `lm_views.LanguageModelEncoder`.
        tokenizer: its WordPiece tokenizer.
        head: the task head, or None.
        task: the head's task (family, labels, input lengths), or None.
        lm: the model with its language-model head (masked, or left-to-right where its config
            `is_causal`), or None.
        has_pooler: its checkpoint holds trained pooler weights (for pooled embeddings), and
            its [CLS] sees the text (not so in a left-to-right model).
        has_attention: it has attention maps to show (a BERT; no LSTM-era model).
        embed_pooling: the pooling `embed` takes when asked for none (its architecture's); None:
            [CLS], or the last piece of a left-to-right model.
    """

    name: str
    architecture: str
    encoder: nn.Module
    tokenizer: Tokenizer
    head: nn.Module | None = None
    task: Task | None = None
    lm: nn.Module | None = None
    has_pooler: bool = False
    has_attention: bool = True
    embed_pooling: str | None = None

    @property
    def device(self) -> torch.device:
        """Where its weights are: the GPU when the server has one, else the CPU."""
        return model_device(self.encoder)

    @property
    def precision(self) -> str:
        """fp32 on the CPU (bf16 autocast is slower than fp32 on most laptop CPUs); on a GPU,
        bf16 where it is fast (`runtime.resolve_precision`)."""
        return "fp32" if self.device.type == "cpu" else resolve_precision("auto", self.device)

    @property
    def mlm(self) -> nn.Module | None:
        """The language model where it fills in [MASK]s (a masked one), else None."""
        return None if self.lm is None or self.lm.config.is_causal else self.lm

    @property
    def is_causal(self) -> bool:
        """A left-to-right model: each piece sees only the pieces before it."""
        return self.encoder.config.is_causal

    @property
    def capabilities(self) -> tuple[str, ...]:
        found = {EMBED} | ({ATTENTION} if self.has_attention else set())
        if self.lm is not None:
            found.update(language_model_uses(self.lm.config).head_uses)
        if self.head is not None and self.task is not None:
            found.add(FAMILY_CAPABILITIES[self.task.spec.family])
        return tuple(capability for capability in CAPABILITIES if capability in found)

    @property
    def label_names(self) -> list[str] | None:
        """The head's labels (classes or tags) in id order; None for regression or no head."""
        id2label = getattr(self.head, "id2label", None)  # a label head's; spans have none
        if id2label is not None and not self.is_regression:
            return list(id2label.values())
        return None

    @property
    def named_labels(self) -> list[str] | None:
        """The names the task gives the head's labels, in id order (SST-2: negative, positive);
        None where it names none."""
        labels = self.label_names
        if labels is None or not isinstance(self.task, ClassificationTask):
            return None
        names = [self.task.label_name(label) for label in labels]
        return None if None in names else names

    @property
    def is_regression(self) -> bool:
        return isinstance(self.task, ClassificationTask) and self.task.is_regression

    @property
    def is_pair(self) -> bool:
        """Its classification head reads text pairs (RTE, MRPC, ...)."""
        return isinstance(self.task, ClassificationTask) and self.task.spec.is_pair

    def require(self, capability: str) -> None:
        """Raise a CapabilityError that says what the model is and what it can do instead."""
        if capability not in self.capabilities:
            raise CapabilityError(
                f"model {self.name!r} cannot {capability}: that needs {NEEDS[capability]}, and "
                f"it is a {self.kind}; it can: {', '.join(self.capabilities)}"
            )

    @property
    def kind(self) -> str:
        """Its architecture, said to be left-to-right where it is."""
        return (
            f"left-to-right (causal) {self.architecture}" if self.is_causal else self.architecture
        )

    def describe(self) -> dict[str, Any]:
        """What the page and `GET /api/models` show about the model (no file paths)."""
        config = self.encoder.config
        return {
            "name": self.name,
            "architecture": self.architecture,
            "capabilities": list(self.capabilities),
            "is_causal": self.is_causal,
            "task": None if self.task is None else self.task.name,
            "labels": self.label_names,
            "label_names": self.named_labels,
            "is_regression": self.is_regression,
            "is_pair": self.is_pair,
            "has_pooler": self.has_pooler,
            "num_layers": config.num_hidden_layers,
            # an LSTM-era model has neither heads nor a position table
            "num_heads": getattr(config, "num_attention_heads", None),
            "hidden_size": config.hidden_size,
            "vocab_size": config.vocab_size,
            "max_position_embeddings": config.max_position_embeddings,
        }


def load_served_model(
    name: str, directory: str | Path, device: torch.device | None = None
) -> ServedModel:
    """Load a model directory once, in eval mode, with the head its config.json names, onto
    `device` (default: the GPU when there is one, else the CPU), as its architecture's entry
    (`network.architectures`) loads it.

    Raises:
        FileNotFoundError: no directory, config.json or vocabulary.
        ValueError: the weights are not in safetensors files, a file is corrupt, or config.json
            names an architecture bertlab does not know.
    """
    directory = Path(directory)
    device = device or default_device()
    if not (directory / CONFIG_NAME).is_file():
        raise FileNotFoundError(f"{directory}: no {CONFIG_NAME} (not a model directory)")
    keys = normalize_keys(dict.fromkeys(safetensors_keys(directory)), "")
    values = read_json_object(directory / CONFIG_NAME)
    network = architecture_of(values)
    architecture = (values.get("architectures") or ["BertModel"])[0]
    tokenizer = Tokenizer.from_pretrained(directory)
    family = network.head_family(values)
    head = task = lm = None
    if family in FAMILY_CAPABILITIES:
        task = _served_task(directory, family, values)
        head = task.load_head(directory, None).eval().to(device)
        task.check_fits(head.config)
        encoder = network.encoder_of(head)
    elif network.has_language_model(values, keys):
        lm = network.load_language_model(directory).to(device)
        encoder = network.encoder_of(lm)
    else:
        encoder = network.load_encoder(directory).to(device)
    has_pooler = POOLER_KEY in keys and encoder.pooler is not None and not encoder.config.is_causal
    served = ServedModel(
        name,
        architecture,
        encoder,
        tokenizer,
        head=head,
        task=task,
        lm=lm,
        has_pooler=has_pooler,
        has_attention=network.has_attention,
        embed_pooling=network.embed_pooling,
    )
    logger.info(
        "model %s: %s from %s on the %s (%s)",
        name,
        architecture,
        directory,
        served.device,
        ", ".join(served.capabilities),
    )
    return served


def safetensors_keys(directory: Path) -> list[str]:
    """The tensor names of a directory's safetensors weights, read without loading them.

    Raises:
        ValueError: the directory has no safetensors weights (only `pytorch_model.bin`, say), or
            they are corrupt.
    """
    if (directory / WEIGHTS_NAME).is_file():
        try:
            with safe_open(str(directory / WEIGHTS_NAME), framework="pt") as weights:
                return list(weights.keys())
        except SafetensorError as error:
            raise ValueError(
                f"cannot read {directory / WEIGHTS_NAME} (corrupt?): {error}"
            ) from None
    if (directory / WEIGHTS_INDEX_NAME).is_file():
        index = json.loads((directory / WEIGHTS_INDEX_NAME).read_text(encoding="utf-8"))
        return list(index["weight_map"])
    raise ValueError(
        f"{directory}: no {WEIGHTS_NAME}; bertlab serve loads weights only from safetensors "
        "files (load the model in Python and save_pretrained it to convert)"
    )


def _served_task(directory: Path, family: str, values: dict[str, Any]) -> Task:
    """The head's task: the one bertlab_task.json names, else the generic task of its family."""
    saved = read_task_file(directory)
    if saved is not None and saved.get("task"):
        columns = ColumnSpec(**saved["columns"]) if saved.get("columns") else None
        task = make_task(saved["task"], columns, TaskDataConfig(**(saved.get("data") or {})))
        if task.spec.family == family:
            return task
        logger.warning(
            "%s: bertlab_task.json names task %s, which is not a %s task; serving it as generic",
            directory,
            saved["task"],
            family,
        )
    if family == "classification":
        num_labels = len(values.get("id2label") or {}) or values.get("num_labels")
        is_regression = values.get("problem_type") == "regression" or num_labels == 1
        return make_task(family, ColumnSpec("text", is_regression=is_regression))
    return make_task(family)
