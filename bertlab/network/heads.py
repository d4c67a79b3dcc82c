"""Fine-tuning heads (BERT Sec. 4, Figure 4): the encoder plus one linear layer per task.

Each class has the Hugging Face name and attribute layout (`bert`, `dropout`, then `classifier` or
`qa_outputs`), so its `state_dict` and `config.json` load into and out of `transformers` unchanged.
What they share (running the encoder, dropout, the losses, label names in config.json) lives in
`BertForTask`, `BertForLabels` and the loss helpers; a head only says which representation it reads
and how it reshapes.

Two ways of reading the encoder beyond BERT's own:

- A left-to-right model (`BertConfig.is_causal`, BERT Table 5's "LTR") has no sentence vector at
  [CLS]: under causal attention position 0 sees only itself, so its vector is the same for every
  input. Sentence heads of a causal model read the last real token instead, which has seen the
  whole input, as GPT's classifier reads its final token (Radford et al. 2018, Sec. 3.3).
- A `FeatureHeadConfig` (`bertlab.network.feature_heads`: BERT Sec. 5.3, Table 7) puts a combination
  of the encoder's layers and optionally a BiLSTM between the encoder and the task layer, with the
  encoder frozen or fine-tuned; its settings travel in config.json under `bertlab_features`.
"""

# Shapes: B batch, L sequence length, H hidden_size, N attention heads, D = H // N head size,
#         I intermediate_size, V vocab, C labels, K choices, P masked positions per sequence.

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from bertlab.core.config import BertConfig
from bertlab.network.bert import IGNORE_INDEX, BertModel, BertPreTrainedModel
from bertlab.network.feature_head_config import FeatureHeadConfig
from bertlab.network.feature_heads import (
    LayerFeatures,
    gather_rows,
    last_real_positions,
)

NUM_SPAN_ENDS = 2  # BERT Sec. 4.2 (SQuAD): a start vector S and an end vector E
FEATURES_KEY = "bertlab_features"  # config.json: the FeatureHeadConfig of a feature-based head


@dataclass
class TaskOutput:
    """What every head returns.

    logits: (B, C) sequence classification, (B, L, C) token classification, (B, K) multiple
    choice, (B, L, 2) question answering, whose start_logits and end_logits are (B, L) each.
    loss: float32 scalar when labels were given.
    """

    logits: torch.Tensor
    loss: torch.Tensor | None = None
    start_logits: torch.Tensor | None = None
    end_logits: torch.Tensor | None = None


# --- losses ---------------------------------------------------------------------------------------


def _check_labels(name: str, labels: torch.Tensor, expected: tuple[int, ...], what: str) -> None:
    if not isinstance(labels, torch.Tensor) or tuple(labels.shape) != expected:
        shape = tuple(labels.shape) if isinstance(labels, torch.Tensor) else type(labels).__name__
        raise ValueError(f"{name} must be {what} of shape {expected}, got {shape}")


def _check_class_ids(name: str, labels: torch.Tensor) -> None:
    if labels.dtype.is_floating_point or labels.dtype.is_complex or labels.dtype == torch.bool:
        raise ValueError(f"{name} must hold integer class ids, got dtype {labels.dtype}")


def single_label_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Cross-entropy over the last dimension; labels equal to -100 are skipped.

    Args:
        logits: (..., C) float, e.g. (B, C), (B, L, C) or (B, K).
        labels: (...) int64 class ids, the shape of `logits` without its last dimension.

    Returns:
        float32 scalar, the mean over labels that are not -100.
    """
    _check_labels("labels", labels, tuple(logits.shape[:-1]), "class ids")
    _check_class_ids("labels", labels)
    return F.cross_entropy(
        logits.flatten(0, -2).float(), labels.flatten().long(), ignore_index=IGNORE_INDEX
    )


def regression_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean squared error. logits: (B, C) float; labels: (B, C), or (B,) when C == 1."""
    batch, num_labels = logits.shape
    expected = (batch,) if num_labels == 1 else (batch, num_labels)
    _check_labels("labels", labels, expected, "regression targets")
    return F.mse_loss(logits.float(), labels.float().view(batch, num_labels))


def multi_label_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Binary cross-entropy per label. logits: (B, C) float; labels: (B, C) in [0, 1]."""
    _check_labels("labels", labels, tuple(logits.shape), "0/1 targets")
    return F.binary_cross_entropy_with_logits(logits.float(), labels.float())


def span_loss(
    start_logits: torch.Tensor,
    end_logits: torch.Tensor,
    start_positions: torch.Tensor,
    end_positions: torch.Tensor,
) -> torch.Tensor:
    """BERT Sec. 4.2: the mean of the start and end cross-entropies.

    Args:
        start_logits, end_logits: (B, L) float.
        start_positions, end_positions: (B,) int64 token positions of the answer. Positions
            outside [0, L) (an answer cut off by truncation) are ignored, as in HF.

    Returns:
        float32 scalar.
    """
    batch, seq_len = start_logits.shape
    losses = []
    for name, logits, positions in (
        ("start_positions", start_logits, start_positions),
        ("end_positions", end_logits, end_positions),
    ):
        _check_labels(name, positions, (batch,), "token positions")
        _check_class_ids(name, positions)
        # HF clamps to [0, L] and ignores L, so a position past the end adds no loss.
        positions = positions.long().clamp(0, seq_len)  # (B,)
        losses.append(F.cross_entropy(logits.float(), positions, ignore_index=seq_len))
    return (losses[0] + losses[1]) / 2


# HF's `problem_type` values (config.json) -> the loss of a sequence classifier.
SEQUENCE_LOSSES: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "regression": regression_loss,
    "single_label_classification": single_label_loss,
    "multi_label_classification": multi_label_loss,
}


# --- shared base classes --------------------------------------------------------------------------


class BertForTask(BertPreTrainedModel):
    """BERT Sec. 4: the pre-trained encoder, dropout, and a task layer that a subclass adds."""

    # Read a sentence vector (True) or every token's last hidden state (False). HF builds
    # no pooler for per-token heads, so their checkpoints have no `bert.pooler` keys.
    use_pooler = True
    # Dropout before the task layer; Google's run_squad.py and HF use none for spans.
    use_dropout = True

    def __init__(
        self,
        config: BertConfig,
        classifier_dropout: float | None = None,
        features: FeatureHeadConfig | None = None,
    ) -> None:
        super().__init__(config)
        if classifier_dropout is not None and not 0.0 <= classifier_dropout < 1.0:
            raise ValueError(f"classifier_dropout must be in [0, 1), got {classifier_dropout!r}")
        self.bert = BertModel(config, add_pooling_layer=self.use_pooler)
        self.classifier_dropout = classifier_dropout
        # As HF: `classifier_dropout` when given, else the encoder's `hidden_dropout_prob`.
        dropout_prob = (
            config.hidden_dropout_prob if classifier_dropout is None else classifier_dropout
        )
        self.dropout = nn.Dropout(dropout_prob) if self.use_dropout else nn.Identity()
        self.feature_config = features
        self.features = (
            None
            if features is None
            else LayerFeatures(config.num_hidden_layers, config.hidden_size, features)
        )
        if self.is_encoder_frozen:
            self.bert.requires_grad_(False)

    @property
    def is_encoder_frozen(self) -> bool:
        """A feature-based head: the encoder is fixed, only what reads it learns."""
        return self.feature_config is not None and self.feature_config.do_freeze_encoder

    @property
    def feature_size(self) -> int:
        """The size of what the task layer reads: H, or the features' size."""
        return self.config.hidden_size if self.features is None else self.features.output_size

    def train(self, mode: bool = True) -> BertForTask:
        """As `nn.Module.train`, but a frozen encoder stays in eval mode: fixed features are
        computed without dropout (BERT Sec. 5.3 extracts them from the pre-trained model)."""
        super().train(mode)
        if self.is_encoder_frozen:
            self.bert.eval()
        return self

    def encode(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None,
        token_type_ids: torch.Tensor | None,
    ) -> torch.Tensor:
        """(B, L) inputs as for `BertModel` -> a sentence vector (B, F) or per token (B, L, F),
        dropped out. BERT's sentence vector is the pooler over [CLS]; a causal model's is the
        pooler over its last real token (`sentence_positions`)."""
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        if self.features is None:
            body = self.bert(input_ids, attention_mask, token_type_ids)
            if not self.use_pooler:
                return self.dropout(body.last_hidden_state)
            if not self.config.is_causal:
                return self.dropout(body.pooler_output)
            last = gather_rows(body.last_hidden_state, last_real_positions(attention_mask))
            return self.dropout(self.bert.pooler(last[:, None]))  # (B, H): tanh(W h_last + b)
        with torch.set_grad_enabled(torch.is_grad_enabled() and not self.is_encoder_frozen):
            body = self.bert(input_ids, attention_mask, token_type_ids, output_hidden_states=True)
        tokens = self.features(body.hidden_states, attention_mask)  # (B, L, F)
        if not self.use_pooler:
            return self.dropout(tokens)
        return self.dropout(self.features.sentence(tokens, attention_mask, self.config.is_causal))

    def extra_config(self) -> dict[str, Any]:
        values = {"classifier_dropout": self.classifier_dropout} if self.use_dropout else {}
        if self.feature_config is not None:
            values[FEATURES_KEY] = self.feature_config.to_dict()
        return values

    @classmethod
    def init_kwargs_from_config(cls, values: dict[str, Any]) -> dict[str, Any]:
        kwargs = {}
        if cls.use_dropout and values.get("classifier_dropout") is not None:
            kwargs["classifier_dropout"] = values["classifier_dropout"]
        if values.get(FEATURES_KEY) is not None:
            kwargs["features"] = FeatureHeadConfig.from_dict(values[FEATURES_KEY])
        return kwargs


def label_names(num_labels: int | None, id2label: dict[int, str] | None) -> dict[int, str]:
    """The name of each label id 0..C-1; HF's default names `LABEL_i` when none are given.

    Raises:
        ValueError: neither is given, num_labels < 1, or the two disagree.
    """
    if id2label is None:
        if num_labels is None:
            raise ValueError("give num_labels or id2label")
        if isinstance(num_labels, bool) or not isinstance(num_labels, int) or num_labels < 1:
            raise ValueError(f"num_labels must be a positive integer, got {num_labels!r}")
        return {label_id: f"LABEL_{label_id}" for label_id in range(num_labels)}
    id2label = {int(label_id): str(name) for label_id, name in id2label.items()}
    if sorted(id2label) != list(range(len(id2label))) or not id2label:
        raise ValueError(f"id2label keys must be 0..C-1, got {sorted(id2label)}")
    if num_labels is not None and num_labels != len(id2label):
        raise ValueError(f"num_labels is {num_labels} but id2label names {len(id2label)} labels")
    if len(set(id2label.values())) != len(id2label):
        raise ValueError(f"id2label names must be unique, got {list(id2label.values())}")
    return id2label


class NamedLabels:
    """The label properties of a head with named labels (`self.id2label`, `label_names`'):
    BERT's, ELMo's and ULMFiT's heads alike."""

    id2label: dict[int, str]

    @property
    def num_labels(self) -> int:
        return len(self.id2label)

    @property
    def label2id(self) -> dict[str, int]:
        return {name: label_id for label_id, name in self.id2label.items()}


def labels_config(id2label: dict[int, str]) -> dict[str, Any]:
    """`id2label` and `label2id` as config.json holds them (JSON object keys are strings: HF
    writes {"0": "neg"} and reads the keys back as ints)."""
    return {
        "id2label": {str(label_id): name for label_id, name in id2label.items()},
        "label2id": {name: label_id for label_id, name in id2label.items()},
    }


def labels_from_config(values: dict[str, Any]) -> dict[str, Any]:
    """The constructor's label arguments from a config.json's values: `id2label` where it is
    stored, else `num_labels` where that is."""
    if values.get("id2label"):
        return {"id2label": {int(label_id): name for label_id, name in values["id2label"].items()}}
    if values.get("num_labels") is not None:
        return {"num_labels": values["num_labels"]}
    return {}


def sequence_problem_type(problem_type: str | None, num_labels: int) -> str:
    """A sequence head's loss (`SEQUENCE_LOSSES`' names); None as Hugging Face decides it: one
    output is a score (e.g. STS-B), more are classes.

    Raises:
        ValueError: an unknown name.
    """
    if problem_type is None:
        problem_type = "regression" if num_labels == 1 else "single_label_classification"
    if problem_type not in SEQUENCE_LOSSES:
        raise ValueError(f"problem_type {problem_type!r} is not one of {list(SEQUENCE_LOSSES)}")
    return problem_type


class BertForLabels(NamedLabels, BertForTask):
    """A head with C named labels; `id2label`/`label2id` go to config.json as HF writes them."""

    def __init__(
        self,
        config: BertConfig,
        num_labels: int | None = None,
        id2label: dict[int, str] | None = None,
        classifier_dropout: float | None = None,
        features: FeatureHeadConfig | None = None,
    ) -> None:
        super().__init__(config, classifier_dropout, features)
        self.id2label = label_names(num_labels, id2label)
        self.classifier = nn.Linear(self.feature_size, self.num_labels)

    def extra_config(self) -> dict[str, Any]:
        return super().extra_config() | labels_config(self.id2label)

    @classmethod
    def init_kwargs_from_config(cls, values: dict[str, Any]) -> dict[str, Any]:
        return super().init_kwargs_from_config(values) | labels_from_config(values)


# --- the heads ------------------------------------------------------------------------------------


class BertForSequenceClassification(BertForLabels):
    """BERT Sec. 4.1 (GLUE): classify or score the whole input from the pooled [CLS] vector
    (a causal model's: its last real token)."""

    architecture = "BertForSequenceClassification"

    def __init__(
        self,
        config: BertConfig,
        num_labels: int | None = None,
        problem_type: str | None = None,
        id2label: dict[int, str] | None = None,
        classifier_dropout: float | None = None,
        features: FeatureHeadConfig | None = None,
    ) -> None:
        super().__init__(config, num_labels, id2label, classifier_dropout, features)
        self.problem_type = sequence_problem_type(problem_type, self.num_labels)
        self.init_weights()

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
    ) -> TaskOutput:
        """Classify (or score) each sequence.

        Args:
            input_ids, attention_mask, token_type_ids: (B, L), as for `BertModel`.
            labels: (B,) int64 class ids; (B,) float scores for regression; (B, C) 0/1 floats
                for multi-label.

        Returns:
            TaskOutput: logits (B, C) and, with labels, the float32 loss of `problem_type`.
        """
        logits = self.classifier(self.encode(input_ids, attention_mask, token_type_ids))  # (B, C)
        loss = None if labels is None else SEQUENCE_LOSSES[self.problem_type](logits, labels)
        return TaskOutput(logits=logits, loss=loss)

    def extra_config(self) -> dict[str, Any]:
        return super().extra_config() | {"problem_type": self.problem_type}

    @classmethod
    def init_kwargs_from_config(cls, values: dict[str, Any]) -> dict[str, Any]:
        kwargs = super().init_kwargs_from_config(values)
        if values.get("problem_type"):
            kwargs["problem_type"] = values["problem_type"]
        return kwargs


class BertForTokenClassification(BertForLabels):
    """BERT Sec. 4.3 (NER): a label for every token; words are labelled by their first piece."""

    architecture = "BertForTokenClassification"
    use_pooler = False

    def __init__(
        self,
        config: BertConfig,
        num_labels: int | None = None,
        id2label: dict[int, str] | None = None,
        classifier_dropout: float | None = None,
        features: FeatureHeadConfig | None = None,
    ) -> None:
        super().__init__(config, num_labels, id2label, classifier_dropout, features)
        self.init_weights()

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
    ) -> TaskOutput:
        """Label every token.

        Args:
            input_ids, attention_mask, token_type_ids: (B, L), as for `BertModel`.
            labels: (B, L) int64; -100 where nothing is predicted (padding, special tokens,
                later pieces of a word).

        Returns:
            TaskOutput: logits (B, L, C) and, with labels, the float32 cross-entropy.
        """
        features = self.encode(input_ids, attention_mask, token_type_ids)  # (B, L, H)
        logits = self.classifier(features)  # (B, L, C)
        loss = None if labels is None else single_label_loss(logits, labels)
        return TaskOutput(logits=logits, loss=loss)


class BertForQuestionAnswering(BertForTask):
    """BERT Sec. 4.2 (SQuAD): a start and an end score per token; the answer is the best span."""

    architecture = "BertForQuestionAnswering"
    use_pooler = False
    use_dropout = False

    def __init__(self, config: BertConfig, features: FeatureHeadConfig | None = None) -> None:
        super().__init__(config, features=features)
        self.qa_outputs = nn.Linear(self.feature_size, NUM_SPAN_ENDS)
        self.init_weights()

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        start_positions: torch.Tensor | None = None,
        end_positions: torch.Tensor | None = None,
    ) -> TaskOutput:
        """Score every token as the start and as the end of the answer.

        Args:
            input_ids, attention_mask, token_type_ids: (B, L), as for `BertModel`.
            start_positions, end_positions: (B,) int64 answer token positions, both or neither.

        Returns:
            TaskOutput: logits (B, L, 2), start_logits and end_logits (B, L) and, with
            positions, the float32 `span_loss`.

        Raises:
            ValueError: only one of start_positions and end_positions is given.
        """
        if (start_positions is None) != (end_positions is None):
            raise ValueError("give both start_positions and end_positions, or neither")
        features = self.encode(input_ids, attention_mask, token_type_ids)  # (B, L, H)
        logits = self.qa_outputs(features)  # (B, L, 2)
        start_logits, end_logits = logits.unbind(-1)  # (B, L) each
        loss = None
        if start_positions is not None:
            loss = span_loss(start_logits, end_logits, start_positions, end_positions)
        return TaskOutput(
            logits=logits,
            loss=loss,
            start_logits=start_logits.contiguous(),
            end_logits=end_logits.contiguous(),
        )


class BertForMultipleChoice(BertForTask):
    """BERT Sec. 4.4 (SWAG): score each of K (context, choice) pairs by its pooled [CLS] vector."""

    architecture = "BertForMultipleChoice"

    def __init__(
        self,
        config: BertConfig,
        classifier_dropout: float | None = None,
        features: FeatureHeadConfig | None = None,
    ) -> None:
        super().__init__(config, classifier_dropout, features)
        self.classifier = nn.Linear(self.feature_size, 1)
        self.init_weights()

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
    ) -> TaskOutput:
        """Score the K choices of each example.

        Args:
            input_ids, attention_mask, token_type_ids: (B, K, L), one sequence per choice.
            labels: (B,) int64 index of the right choice.

        Returns:
            TaskOutput: logits (B, K) and, with labels, the float32 cross-entropy.

        Raises:
            ValueError: the inputs are not (B, K, L).
        """
        _check_choices(input_ids, attention_mask, token_type_ids)
        batch, num_choices, seq_len = input_ids.shape
        flat = [
            tensor if tensor is None else tensor.reshape(batch * num_choices, seq_len)
            for tensor in (input_ids, attention_mask, token_type_ids)
        ]  # (B * K, L) each
        logits = self.classifier(self.encode(*flat)).view(batch, num_choices)  # (B, K)
        loss = None if labels is None else single_label_loss(logits, labels)
        return TaskOutput(logits=logits, loss=loss)


def _check_choices(
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor | None,
    token_type_ids: torch.Tensor | None,
) -> None:
    if not isinstance(input_ids, torch.Tensor) or input_ids.dim() != 3:
        shape = tuple(input_ids.shape) if isinstance(input_ids, torch.Tensor) else type(input_ids)
        raise ValueError(f"multiple-choice input_ids must be (B, K, L), got {shape}")
    for name, tensor in (("attention_mask", attention_mask), ("token_type_ids", token_type_ids)):
        if tensor is not None and tensor.shape != input_ids.shape:
            raise ValueError(
                f"{name} shape {tuple(tensor.shape)} differs from input_ids "
                f"{tuple(input_ids.shape)}"
            )
