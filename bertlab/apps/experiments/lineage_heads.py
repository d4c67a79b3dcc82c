"""The lineage experiment's task models that read an arm's layers, and how they are trained.

- `MixedLayers`: ELMo's scalar mix (Peters et al. 2018, eq. 1) over an arm's frozen layers.
  Layers of different widths (NNLM's vectors and tanh layer, AWD-LSTM's embedding and LSTMs)
  are padded with zeros to the widest first, so that one mix reads every arm.
- `LayerTagger`: the same BiLSTM tagger for every arm (two layers, TAGGER_HIDDEN units each
  way, a linear layer per piece) over the mix: the NER column.
- `LayerClassifier`: ELMo's way with a sentence task: the frozen biLM, the mix, the task's
  BiLSTM (its forward state at the last piece and its backward state at the first), a linear
  layer.
- `UlmfitHead`: ULMFiT's classifier (`network.ulmfit`) as a task head, with its layer groups.

`train_head` trains any of them on a task's encoded examples (the task family's own encoding,
[CLS] and [SEP] included, and its own decoding and metrics): AdamW, per layer group a rate
(ULMFiT's discriminative rates, each group `group_decay` times the one above), BERT's linear or
ULMFiT's slanted triangular schedule, gradual unfreezing, the best epoch on the dev part kept
and scored once on the test part; like bertlab's fine-tuning, a run records in result.json
whether its best dev predictions were all one class, so that the report marks it.
`linear_probe` is the shared frozen-features probe: the mean of each layer over a text's pieces,
all layers side by side, standardized, and a logistic regression whose L2 strength is chosen on
the dev part (its run records a one-class collapse too).
"""

# Shapes: B batch, L sequence length, J layers, H the widest layer, C labels, D probe features.

from __future__ import annotations

import copy
import logging
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import StandardScaler
from torch import nn

from bertlab.apps.experiments.lineage_models import LayerReader
from bertlab.apps.flows import TEST_FILE, read_test
from bertlab.core.atomic import write_json
from bertlab.core.finetune_config import STLR_CUT_FRAC, STLR_RATIO
from bertlab.core.run_folder import RESULT_FILE
from bertlab.core.runtime import set_seed
from bertlab.data.collate import collate_task_batch, feature_lengths, length_grouped_batches
from bertlab.network.feature_heads import BiLSTM, ScalarMix, gather_rows, last_real_positions
from bertlab.network.heads import TaskOutput
from bertlab.network.ulmfit import UlmfitForSequenceClassification
from bertlab.task_families import Task, predict_rows
from bertlab.tokenizer.wordpiece import Tokenizer
from bertlab.training.finetuning.finetune import TaskData
from bertlab.training.finetuning.one_class import OneClassCollapse, one_class_collapse
from bertlab.training.optim import linear_warmup_decay, slanted_triangular

logger = logging.getLogger(__name__)

TAGGER_HIDDEN = 128  # units per direction of every arm's BiLSTM (BERT-Tiny's width)
TAGGER_LAYERS = 2  # BERT Sec. 5.3 and ELMo's taggers: a two-layer BiLSTM
IGNORE_INDEX = -100
EVAL_BATCH_SIZE = 64
HEAD_LOG_FILE = "head.json"  # per epoch: the dev metrics of a run trained by `train_head`
PROBE_C_VALUES = (0.01, 0.1, 1.0, 10.0)  # the probe's inverse L2 strengths, one chosen on dev
PROBE_MAX_ITERATIONS = 1000
MIN_BATCH = 2  # a training batch of one example is skipped (batch normalization cannot use it)


@dataclass(frozen=True)
class _Config:
    """What `predict_rows` reads of a model: its padding id."""

    pad_token_id: int


class MixedLayers(nn.Module):
    """ELMo eq. 1, gamma * sum_j s_j h_j, over frozen layers zero-padded to the widest."""

    def __init__(self, reader: LayerReader) -> None:
        super().__init__()
        self.reader = reader
        self.width = max(reader.widths)
        self.scalar_mix = ScalarMix(len(reader.widths))

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """(B, L) ids and mask -> (B, L, H)."""
        with torch.no_grad():
            layers = self.reader(input_ids, attention_mask)
            padded = [F.pad(layer.float(), (0, self.width - layer.shape[-1])) for layer in layers]
        return self.scalar_mix(torch.stack(padded))  # (J, B, L, H) -> (B, L, H)


class _LayerHead(nn.Module):
    """What the taggers and classifiers over an arm's frozen layers share: the mix, the BiLSTM,
    the label names, a frozen reader that stays in eval mode, one trainable layer group."""

    def __init__(self, reader: LayerReader, label_names: Sequence[str]) -> None:
        super().__init__()
        self.mix = MixedLayers(reader)
        self.lstm = BiLSTM(self.mix.width, TAGGER_HIDDEN, TAGGER_LAYERS)
        self.classifier = nn.Linear(2 * TAGGER_HIDDEN, len(label_names))
        self.id2label = dict(enumerate(label_names))
        self.config = _Config(reader.pad_token_id)

    def train(self, mode: bool = True) -> _LayerHead:
        super().train(mode)
        self.mix.reader.eval()  # frozen: no dropout
        return self

    def parameter_groups(self) -> list[list[nn.Parameter]]:
        return [[p for p in self.parameters() if p.requires_grad]]

    def features(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """(B, L) -> the BiLSTM's states (B, L, 2 * TAGGER_HIDDEN), zeros at the padding."""
        lengths = attention_mask.long().sum(dim=1).clamp(min=1)  # (B,)
        return self.lstm(self.mix(input_ids, attention_mask), lengths)


class LayerTagger(_LayerHead):
    """A BiLSTM tagger over the mix of an arm's frozen layers: a label per piece."""

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
    ) -> TaskOutput:
        """(B, L) ids, mask, labels (B, L) with -100 where none -> logits (B, L, C)."""
        logits = self.classifier(self.features(input_ids, attention_mask))  # (B, L, C)
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=-100)
        return TaskOutput(logits=logits, loss=loss)


class LayerClassifier(_LayerHead):
    """ELMo's way for a sentence (Peters et al. 2018 Sec. 3.3): the frozen biLM's mix, the task's
    BiLSTM, its forward state at the last piece and backward state at the first, a linear layer."""

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
    ) -> TaskOutput:
        """(B, L) ids and mask, labels (B,) -> logits (B, C)."""
        states = self.features(input_ids, attention_mask)  # (B, L, 2 * TAGGER_HIDDEN)
        forward = gather_rows(states[..., :TAGGER_HIDDEN], last_real_positions(attention_mask))
        sentence = torch.cat([forward, states[:, 0, TAGGER_HIDDEN:]], dim=-1)  # (B, 2 * hidden)
        logits = self.classifier(sentence)  # (B, C)
        loss = None if labels is None else F.cross_entropy(logits, labels.view(-1))
        return TaskOutput(logits=logits, loss=loss)


class UlmfitHead(nn.Module):
    """ULMFiT's classifier (Howard & Ruder 2018 Sec. 3.3) on a pre-trained AWD-LSTM, as a task
    head: `parameter_groups` from the embedding up to the classifier."""

    def __init__(self, model_dir: Path, label_names: Sequence[str]) -> None:
        super().__init__()
        self.model = UlmfitForSequenceClassification.from_language_model(
            model_dir, len(label_names)
        )
        self.id2label = dict(enumerate(label_names))
        self.config = _Config(self.model.config.pad_token_id)

    def parameter_groups(self) -> list[list[nn.Parameter]]:
        return self.model.parameter_groups()

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
    ) -> TaskOutput:
        output = self.model(input_ids, attention_mask, labels=labels)
        return TaskOutput(logits=output.logits, loss=output.loss)


# --- training -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class HeadTraining:
    """How `train_head` trains.

    Attributes:
        learning_rate: the top layer group's peak rate.
        epochs: passes over the training part.
        group_decay: each layer group's rate over the one above it (ULMFiT: 1 / 2.6).
        is_slanted: ULMFiT's slanted triangular rates; else BERT's linear warmup and decay.
        gradual_unfreezing: ULMFiT Sec. 3.3: the top group alone first, then one more group per
            epoch (per equal share of the steps when the epochs are fewer than the groups).
    """

    learning_rate: float
    epochs: int
    batch_size: int = 32
    weight_decay: float = 0.01
    warmup_proportion: float = 0.1
    max_grad_norm: float = 1.0
    group_decay: float = 1.0
    is_slanted: bool = False
    gradual_unfreezing: bool = False


def _optimizer(head: nn.Module, training: HeadTraining) -> torch.optim.AdamW:
    groups = head.parameter_groups()
    rates = [
        training.learning_rate * training.group_decay ** (len(groups) - 1 - i)
        for i in range(len(groups))
    ]
    return torch.optim.AdamW(
        [
            {"params": params, "lr": rate}
            for params, rate in zip(groups, rates, strict=True)
            if params
        ],
        weight_decay=training.weight_decay,
    )


def _unfrozen_groups(training: HeadTraining, groups: int, epoch: int, step: int, steps: int) -> int:
    """How many layer groups, from the top, train at `step` (0-based) of `epoch` (1-based)."""
    if not training.gradual_unfreezing:
        return groups
    if training.epochs >= groups:
        return min(groups, epoch)
    return min(groups, 1 + step * groups // max(steps, 1))


def evaluate_head(
    head: nn.Module, task: Task, features: list, examples: Sequence
) -> tuple[dict[str, float], OneClassCollapse | None]:
    """The task's metrics of `head` on encoded `examples`, and whether its predictions were all
    one class (`one_class.one_class_collapse`, the check bertlab's fine-tuning makes)."""
    rows = predict_rows(head, features, EVAL_BATCH_SIZE, "fp32", task.reduce)
    predictions = task.decode(features, rows, examples, head.id2label)
    return task.score(predictions, examples), _collapse(task, predictions, examples)


def _collapse(task: Task, predictions: Any, examples: Sequence) -> OneClassCollapse | None:
    classes = task.classes(predictions, examples)
    return None if classes is None else one_class_collapse(*classes)


def _write_run(
    run_dir: Path, log: dict[str, Any], scores: dict[str, float], collapse: OneClassCollapse | None
) -> None:
    """A head's run folder: its log, its test scores and, as bertlab's fine-tuning records it in
    result.json, whether the best dev predictions were one class (`flows.read_one_class`)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    write_json(run_dir / HEAD_LOG_FILE, log)
    one_class = None if collapse is None else collapse.to_json()
    write_json(run_dir / RESULT_FILE, {"one_class": one_class})
    write_json(run_dir / TEST_FILE, scores)


def train_head(
    head: nn.Module,
    task: Task,
    data: TaskData,
    test: Sequence,
    tokenizer: Tokenizer,
    training: HeadTraining,
    seed: int,
    run_dir: Path,
) -> dict[str, float]:
    """Train `head` on `data.train`, keep its best epoch on `data.dev`, score it once on `test`
    and write the scores to RUN_DIR/test.json (read back when there already).

    The seed is set before the caller builds the head; here it draws the batches and dropout.
    """
    if (run_dir / TEST_FILE).is_file():
        return read_test(run_dir)
    label2id = {name: i for i, name in enumerate(data.label_names or ())}
    features = task.encode(data.train, tokenizer, label2id, with_labels=True)
    dev = task.encode(data.dev, tokenizer, None, with_labels=False)
    groups = head.parameter_groups()
    optimizer = _optimizer(head, training)
    rng = random.Random(seed)
    lengths = feature_lengths(features)
    steps_per_epoch = math.ceil(len(features) / training.batch_size)
    total = steps_per_epoch * training.epochs
    schedule = (
        slanted_triangular(optimizer, total, STLR_CUT_FRAC, STLR_RATIO)
        if training.is_slanted
        else linear_warmup_decay(optimizer, round(training.warmup_proportion * total), total)
    )
    log, best, best_state, best_collapse, step = [], None, None, None, 0
    for epoch in range(1, training.epochs + 1):
        head.train()
        losses = []
        for batch_indices in length_grouped_batches(lengths, training.batch_size, rng):
            if len(batch_indices) < MIN_BATCH:  # ULMFiT's batch normalization needs two
                continue
            unfrozen = _unfrozen_groups(training, len(groups), epoch, step, total)
            for index, params in enumerate(groups):
                for param in params:
                    param.requires_grad_(index >= len(groups) - unfrozen)
            batch = collate_task_batch(
                [features[i] for i in batch_indices], head.config.pad_token_id
            )
            loss = head(**batch).loss
            loss.backward()
            losses.append(loss.item())
            torch.nn.utils.clip_grad_norm_(head.parameters(), training.max_grad_norm)
            optimizer.step()
            schedule.step()
            optimizer.zero_grad(set_to_none=True)
            step += 1
        metrics, collapse = evaluate_head(head, task, dev, data.dev)
        train_loss = float(np.mean(losses)) if losses else None
        log.append({"epoch": epoch, "train_loss": train_loss, "dev": metrics})
        if best is None or metrics[task.primary_metric] > best[task.primary_metric]:
            best, best_state, best_collapse = metrics, copy.deepcopy(head.state_dict()), collapse
    for params in groups:
        for param in params:
            param.requires_grad_(True)
    head.load_state_dict(best_state)
    scores, _ = evaluate_head(head, task, task.encode(test, tokenizer, None, False), test)
    if best_collapse is not None:
        logger.warning(best_collapse.warning(seed))
    _write_run(run_dir, {"epochs": log, "best_dev": best}, scores, best_collapse)
    return scores


# --- the linear probe -----------------------------------------------------------------------------


def pooled_layers(
    reader: LayerReader, features: Sequence[dict[str, Any]], batch_size: int = EVAL_BATCH_SIZE
) -> np.ndarray:
    """Each feature's mean over its pieces of every layer, the layers side by side:
    (N, D) float32 with D = sum of the layers' widths."""
    rows = []
    reader.eval()
    for start in range(0, len(features), batch_size):
        batch = collate_task_batch(features[start : start + batch_size], reader.pad_token_id)
        mask = batch["attention_mask"]
        with torch.inference_mode():
            layers = reader(batch["input_ids"], mask)
        weights = (mask / mask.sum(dim=1, keepdim=True)).unsqueeze(-1)  # (B, L, 1)
        rows.append(torch.cat([(layer.float() * weights).sum(1) for layer in layers], dim=-1))
    return torch.cat(rows).numpy()


def linear_probe(
    reader: LayerReader,
    task: Task,
    data: TaskData,
    test: Sequence,
    tokenizer: Tokenizer,
    seed: int,
    run_dir: Path,
) -> dict[str, float]:
    """The shared probe: logistic regression on the standardized `pooled_layers` of a frozen
    arm, its inverse L2 strength C chosen among PROBE_C_VALUES on the dev part, scored once on
    the test part; RUN_DIR/test.json (read back when there already)."""
    if (run_dir / TEST_FILE).is_file():
        return read_test(run_dir)
    set_seed(seed)
    label2id = {name: i for i, name in enumerate(data.label_names)}
    parts = {"train": data.train, "dev": data.dev, "test": list(test)}
    encoded = {
        name: task.encode(examples, tokenizer, label2id, with_labels=name == "train")
        for name, examples in parts.items()
    }
    pooled = {name: pooled_layers(reader, features) for name, features in encoded.items()}
    scaler = StandardScaler().fit(pooled["train"])
    inputs = {name: scaler.transform(values) for name, values in pooled.items()}
    targets = [feature["labels"] for feature in encoded["train"]]
    names = list(data.label_names)
    best = None
    for c_value in PROBE_C_VALUES:
        model = LogisticRegression(C=c_value, max_iter=PROBE_MAX_ITERATIONS, random_state=seed)
        model.fit(inputs["train"], targets)
        predictions = [names[i] for i in model.predict(inputs["dev"])]
        dev = task.score(predictions, data.dev)
        if best is None or dev[task.primary_metric] > best[1][task.primary_metric]:
            best = (model, dev, c_value, _collapse(task, predictions, data.dev))
    model, dev, c_value, collapse = best
    scores = task.score([names[i] for i in model.predict(inputs["test"])], parts["test"])
    record = {"c": c_value, "dev": dev, "features": int(inputs["train"].shape[1])}
    _write_run(run_dir, record, scores, collapse)
    return scores
