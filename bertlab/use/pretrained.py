"""Pre-trained BERTs as ready objects, the Keras-Applications way: `bertlab.load(name)`.

`load` takes a model folder or a Hugging Face Hub id (`bert-base-uncased`, `bert-base-chinese`,
`google/bert_uncased_L-2_H-128_A-2`, downloaded once and cached by `bertlab.core.hub`) and returns a
`PretrainedBert`: the model and its tokenizer, ready for the three uses of a pre-trained network
(docs/models.md):

- prediction: `.predict(texts)` fills in [MASK]s with a pre-trained model's masked-LM head, or
  gives a fine-tuned model's task predictions (labels, scores, tags, answers, choices);
- feature extraction: `.embed(texts)` gives one vector per text (or per piece or word) from any
  layer;
- fine-tuning: `.fit(texts, labels)` trains, as Keras' `model.fit(x, y)`: on a pre-trained
  model it puts a new classification head on the encoder; `load(name, task="sst2")` puts any
  task's head on it first. `.freeze()` and `.unfreeze()` choose which layers train;
  `.fit(texts, labels, dev=(dev_texts, dev_labels), out=...)` keeps the best dev epoch in
  OUT/best with a model card (BERT's recipe: AdamW, warmup and linear decay; `bertlab
  finetune`'s `finetune_task`, called on the model in memory), and `.save(folder)` writes a
  folder that every `--model` reads. `fit`'s `FinetuneConfig` chooses the strategy as `bertlab
  finetune`'s flags do (layer-wise learning-rate decay, ULMFiT's slanted triangular schedule and
  gradual unfreezing, Keras' staged recipe); without one, the rate and epochs suit the model's
  size (`default_finetune_config`). `.learning_rates(config)` shows each layer group's rate.
"""

# Shapes: B batch, L sequence length, H hidden_size.

from __future__ import annotations

import dataclasses
import os
from collections.abc import Hashable, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

from bertlab.core import hub
from bertlab.core.atomic import atomic_directory
from bertlab.core.finetune_config import FinetuneConfig, TaskDataConfig
from bertlab.core.lstm_config import LM_ARCHITECTURE_NAMES
from bertlab.core.runtime import resolve_precision
from bertlab.data.tasks.classification import ColumnSpec
from bertlab.network import checkpoint
from bertlab.network.architectures import (
    BERT,
    MLM_HEAD_KEY,
    folder_architecture,
    folder_finetune_defaults,
)
from bertlab.network.bert import BertForPreTraining, BertModel
from bertlab.network.heads import BertForTask
from bertlab.task_families import Task, make_task, read_task_file, run_task
from bertlab.tokenizer.wordpiece import Tokenizer
from bertlab.training.finetuning.finetune import default_finetune_config, write_task_model
from bertlab.training.finetuning.loop import FinetuneResult
from bertlab.training.optim import layer_learning_rates
from bertlab.use.features import PER_TEXT, extract_features
from bertlab.use.fitting import MEMORY_COLUMNS, FitRun, as_examples, fit_head
from bertlab.use.inspection import MaskPrediction, fill_mask
from bertlab.use.lstm_models import PretrainedLanguageModel

LABEL_FAMILIES = ("classification", "tagging")  # heads with named labels


class PretrainedBert:
    """A model and its tokenizer, loaded by `load`.

    Attributes:
        model: `BertForPreTraining` (with the masked-LM head), `BertModel` (an encoder without
            it), or a task head (`BertForSequenceClassification`, ...).
        tokenizer: the model's tokenizer.
        task: the task of a task head, else None.
        source: the folder or Hub id it was loaded from.
    """

    def __init__(
        self,
        model: BertForPreTraining | BertModel | BertForTask,
        tokenizer: Tokenizer,
        task: Task | None,
        source: str,
    ) -> None:
        self.model, self.tokenizer, self.task, self.source = model.eval(), tokenizer, task, source

    def __repr__(self) -> str:
        config = self.model.config
        return (
            f"PretrainedBert({self.source!r}: {type(self.model).__name__}, "
            f"{config.num_hidden_layers} layers, hidden {config.hidden_size}, "
            f"{self.trainable_parameters:,} of {self.num_parameters:,} parameters trainable)"
        )

    # --- the encoder and its layers ---------------------------------------------------------

    @property
    def encoder(self) -> BertModel:
        """The BERT encoder (embeddings, layers, pooler) under any head."""
        return self.model if isinstance(self.model, BertModel) else self.model.bert

    @property
    def num_parameters(self) -> int:
        return sum(parameter.numel() for parameter in self.model.parameters())

    @property
    def trainable_parameters(self) -> int:
        return sum(p.numel() for p in self.model.parameters() if p.requires_grad)

    def freeze(self, num_layers: int | None = None) -> PretrainedBert:
        """Stop training the encoder, as Keras' `layer.trainable = False`.

        Args:
            num_layers: None freezes the whole encoder (only the task layer trains: the
                feature-based approach, BERT Sec. 5.3); K freezes the embeddings and the first
                K layers (as `bertlab finetune --freeze-layers K`).

        Returns:
            self, for chaining.
        """
        self._check_layers(num_layers)
        layers = self.encoder.encoder.layer
        frozen = (
            [self.encoder]
            if num_layers is None
            else [self.encoder.embeddings, *layers[:num_layers]]
        )
        for module in frozen:
            module.requires_grad_(False)
        return self

    def unfreeze(self, num_layers: int | None = None) -> PretrainedBert:
        """Train again: everything (None), or the top `num_layers` layers and the pooler, the
        second step of Keras' fine-tuning recipe.

        Returns:
            self, for chaining.
        """
        self._check_layers(num_layers)
        if num_layers is None:
            self.model.requires_grad_(True)
            return self
        layers = self.encoder.encoder.layer
        for module in [*layers[len(layers) - num_layers :], self.encoder.pooler]:
            if module is not None:
                module.requires_grad_(True)
        return self

    def learning_rates(self, config: FinetuneConfig | None = None) -> list[tuple[str, float]]:
        """Each layer group's peak learning rate under `config`, as `fit` would train it.

        The groups, bottom-up: "embeddings", "layer 1" ... "layer L", "pooler" (when the head
        uses one), "head"; those frozen now (`.freeze()`) are left out. With
        `FinetuneConfig(learning_rate=1e-3, layerwise_lr_decay=0.5)` a 4-layer model gives
        embeddings 6.25e-05, layer 1 1.25e-04, ..., layer 4, pooler and head 1e-03.

        Args:
            config: the fine-tuning settings; None: `fit`'s, `default_finetune_config`.

        Returns:
            (group name, rate) per trainable group.
        """
        config = config or default_finetune_config(self.model.config)
        return layer_learning_rates(self.model, config.learning_rate, config.layerwise_lr_decay)

    def _check_layers(self, num_layers: int | None) -> None:
        total = self.model.config.num_hidden_layers
        if num_layers is not None and not 0 <= num_layers <= total:
            raise ValueError(f"num_layers must be in 0..{total}, got {num_layers}")

    # --- the three uses ---------------------------------------------------------------------

    def predict(
        self, inputs: str | Sequence[Any], top_k: int = 5, batch_size: int = 32
    ) -> list[Any]:
        """Predictions for `inputs`.

        Args:
            inputs: texts with [MASK] for a model with its masked-LM head; for a task head, the
                task's examples: texts or (text, pair) tuples for classification, otherwise the
                family's examples (`TaggedSentence`, `SquadExample`, `MultipleChoiceExample`).
                A single string is one input.
            top_k: fill-mask: tokens kept per [MASK].
            batch_size: task heads: examples per forward pass.

        Returns:
            Per input: a list of `MaskPrediction` (one per [MASK]), or the task's prediction
            (a label, a score, tags, an answer, a choice index). A label is the head's label
            name, a string: for a head that `fit(x, y)` made, `str` of the label it was given
            (`fit(texts, [0, 1, ...])` predicts "0", "1", ...).

        Raises:
            ValueError: the model has neither a masked-LM head nor a task head, or bad inputs.
        """
        inputs = [inputs] if isinstance(inputs, str) else list(inputs)
        if isinstance(self.model, BertForPreTraining):
            return [self._fill_mask(text, top_k) for text in inputs]
        if self.task is None:
            raise ValueError(
                f"{self.source} has no masked-LM head and no task head: use .embed(), or load "
                "it with task=... and fine-tune it"
            )
        examples = as_examples(self.task, inputs, with_labels=False)
        precision = resolve_precision("auto", next(self.model.parameters()).device)
        return run_task(self.task, self.model, self.tokenizer, examples, batch_size, precision)

    def _fill_mask(self, text: str, top_k: int) -> list[MaskPrediction]:
        with torch.inference_mode():
            return fill_mask(self.model, self.tokenizer, text, top_k)

    def embed(
        self,
        texts: str | Sequence[str],
        pooling: str | None = None,
        layer: int = -1,
        batch_size: int = 32,
    ) -> torch.Tensor | list[torch.Tensor]:
        """Features of each text: its hidden states at one layer, pooled, as `bertlab embed`
        computes them (`features.extract_features`, with its vocabulary `feature_options.POOLINGS`).

        Args:
            texts: the texts (one string is one text).
            pooling: one vector per text: "cls" the [CLS] vector, "mean" the mean over the
                text's pieces, "last" the last real piece's vector (the one a left-to-right model
                has read the whole text into), "pooler" the pooler's tanh output (BERT's sentence
                vector for classification; the last layer only); or vectors per text: "pieces"
                (also "tokens", its old name here) every piece's vector, "first" and
                "mean-pieces" each word's first piece or the mean of its pieces. None: "cls", or
                "last" for a left-to-right (causal) model, whose "cls" and "pooler" are refused.
            layer: which hidden states: -1 the last layer, 0 the embeddings, k layer k.
            batch_size: texts per forward pass.

        Returns:
            (number of texts, H) float32 on the CPU; for "pieces", one (L, H) tensor per text
            ([CLS] and [SEP] included), for "first" and "mean-pieces" one (words, H).

        Raises:
            ValueError: an unknown pooling or layer; "cls" or "pooler" for a causal model; a
                text with nothing to embed.
        """
        texts = [texts] if isinstance(texts, str) else list(texts)
        encoder = self.encoder.eval()
        features = extract_features(encoder, self.tokenizer, texts, (layer,), pooling, batch_size)
        vectors = torch.from_numpy(features.vectors)[:, 0]  # (rows, H)
        if features.pooling in PER_TEXT:
            return vectors.contiguous()
        return [vectors[record["start"] : record["end"]] for record in features.records]

    def fit(
        self,
        x: Sequence[Any],
        y: Sequence[Hashable] | None = None,
        *,
        dev: Sequence[Any] | tuple[Sequence[Any], Sequence[Hashable]] | None = None,
        out: str | os.PathLike | None = None,
        config: FinetuneConfig | None = None,
        show_progress: bool = False,
    ) -> FinetuneResult:
        """Fine-tune the task head and the unfrozen layers on `x` (BERT Sec. 4), as Keras'
        `model.fit(x, y)`: `bertlab finetune`'s `finetune_task` on the model in memory.

        A model without a task head gets a new `classification` head, as `load(name,
        task="classification", labels=...)` builds it, but on the encoder as it is now: its
        weights, and the layers `.freeze()` froze stay frozen. `self.model` and `self.task` become
        the head's (a masked-LM head is dropped). A model with a task head keeps it; the labels
        must be among its labels.

        Args:
            x: texts or (text, pair) tuples, labelled by `y`; or, with `y` None, labelled
                examples: (text, label) or (text, pair, label) tuples for classification, else
                the family's examples with their labels.
            y: the label of each text of `x`, of any hashable type (ints, strings, bools). A new
                head's label names are `str(label)`, sorted when the labels sort (numerically for
                integers and integer strings), else in the order first seen; `predict` returns
                these names (`fit(texts, [0, 1, ...])`: "0", "1").
            dev: labelled examples as `x` with `y` None, or an `(x, y)` pair (a tuple whose
                first item is a list of texts), scored after every epoch. The best epoch is
                kept in `out/best`, and dev predictions all of one class are warned about.
            out: the run folder: metrics.jsonl, curves.png, result.json and best/ (the best
                epoch's model, its tokenizer and its model card: `bertlab.load(out + "/best")`
                or `--model OUT/best`). None: a temporary folder, removed before `fit` returns.
            config: learning rate, batch size, epochs, seed, ... and the strategy:
                `layerwise_lr_decay`, `schedule`, `do_gradual_unfreezing`, `head_warmup_epochs`
                (docs/finetuning.md#fine-tuning-strategies). Layers frozen with `.freeze()` stay
                frozen throughout; the strategy works on the others. None:
                `default_finetune_config`, the rate and epochs chosen by the model's width
                (BERT-Tiny 1e-3 for 4 epochs, BERT-mini 3e-4 for 4, BERT-base 2e-5 for 3).
            show_progress: a progress bar.

        Returns:
            The best epoch, its dev metrics and `one_class` (not None when the best epoch
            predicted one class for the whole dev set), as `OUT/result.json` records them. With
            `out` None, `best_dir` is None: nothing is left on disk. The object keeps the last
            epoch's weights (the best epoch's are in `out/best`).

        Raises:
            ValueError: `fit(train, dev)` (`dev` goes by keyword), no examples, `x` and `y` of
                different lengths, a label that is None or NaN, labels the head does not have,
                `y` for a task other than classification, or bad examples. Labels all of one
                class and texts without a word are trained, with a warning.
        """
        config = config or default_finetune_config(self.model.config)
        result, self.model, self.task = fit_head(
            FitRun(self.task, self.model, self.tokenizer, Path(self.source), self._new_head),
            x,
            y,
            dev,
            out,
            config,
            show_progress,
        )
        return result

    def _new_head(self, task: Task, label_names: tuple[str, ...]) -> BertForTask:
        """`task`'s new head on the encoder as it is now: its weights and what trains."""
        head = task.new_head(self.encoder.config, label_names)
        missing, unexpected = head.bert.load_state_dict(self.encoder.state_dict(), strict=False)
        # An encoder saved without a pooler gets a new one, as `load` gives it.
        if unexpected or any(not key.startswith("pooler.") for key in missing):
            raise ValueError(f"the encoder does not fit the head: {missing + unexpected}")
        trains = {name: param.requires_grad for name, param in self.encoder.named_parameters()}
        for name, parameter in head.bert.named_parameters():
            parameter.requires_grad_(trains.get(name, True))
        task.check_fits(head.config)
        return head

    def save(self, directory: str | os.PathLike) -> Path:
        """Write the model and its tokenizer (and a task head's task settings) into `directory`,
        whole or not at all; `load(directory)` and every `--model` read it. An earlier model
        there is replaced; a folder holding anything else is refused.

        Raises:
            ValueError: `directory` holds files that are no model's (the user's own).
        """
        others = hub.not_model_files(directory) if Path(directory).is_dir() else []
        if others:
            raise ValueError(
                f"{directory} holds {', '.join(others)}, which no model folder has: save() "
                "replaces the folder whole; choose another folder"
            )
        with atomic_directory(directory) as temporary:
            if self.task is not None:
                write_task_model(temporary, self.model, self.tokenizer, self.task)
            else:
                self.model.save_pretrained(temporary)
                self.tokenizer.save_pretrained(temporary)
        return Path(directory)


def load(
    name_or_folder: str | os.PathLike,
    task: str | None = None,
    labels: Sequence[str] | None = None,
    revision: str | None = None,
) -> PretrainedBert | PretrainedLanguageModel:
    """A model and its tokenizer by Hugging Face Hub id or folder, ready to use.

    Args:
        name_or_folder: a model folder (bertlab's, `transformers`', `bertlab convert`'s, the
            OUT/final of `bertlab pretrain --architecture nnlm|elmo|awd-lstm`) or a Hub id:
            `bert-base-uncased`, `bert-base-chinese`, `google/bert_uncased_L-4_H-256_A-4`.
        task: a task name (`sst2`, `conll2003`, `squad`, `classification`, ... as `bertlab
            finetune --task` takes) for a task head: the folder's own, when it was fine-tuned on
            that task, else a new one on the pre-trained model (as `bertlab finetune` builds it:
            an LSTM-era model's in its paper's way). None: the model as it is (a fine-tuned
            folder keeps its task; a pre-trained one its language-model head).
        labels: the label names of a new classification or tagging head whose task does not
            fix them (`classification`, `tagging`).
        revision: the Hub revision (branch, tag or commit) of an id; None: `main`.

    Returns:
        A BERT's `PretrainedBert`, or an LSTM-era model's `PretrainedLanguageModel` (NNLM, ELMo's
        biLM, AWD-LSTM; NNLM's fine-tuned task model is a BERT), in eval mode, with every
        parameter trainable that its way of fine-tuning trains.

    Raises:
        FileNotFoundError: no such folder, and no such model on the Hub (or in the cache offline).
        ValueError: an unknown task, a task the model's architecture has no head for, or a new
            label head without its labels.
    """
    folder = hub.resolve(name_or_folder, revision)
    source = os.fspath(name_or_folder)
    tokenizer = Tokenizer.from_pretrained(folder)
    head_task, model = _task_head(folder, source, task, labels)
    return READY_MODELS[folder_architecture(folder).name](
        folder, source, tokenizer, head_task, model
    )


def _task_head(
    folder: Path, source: str, task: str | None, labels: Sequence[str] | None
) -> tuple[Task | None, nn.Module | None]:
    """The task and head `load` asks for, built by the folder's architecture; (None, None) when
    it asks for none and the folder has no task of its own."""
    saved = read_task_file(folder) if folder.is_dir() else None
    task_name = task or (saved or {}).get("task")
    if task_name is None:
        return None, None
    is_own_task = saved is not None and saved.get("task") == task_name
    own = saved if is_own_task else None
    columns = ColumnSpec(**own["columns"]) if own and own.get("columns") else MEMORY_COLUMNS
    data = TaskDataConfig(**own["data"]) if own and own.get("data") else None
    head_task = make_task(task_name, columns, data)  # None: the task's declared input settings
    label_names: tuple[str, ...] | None = None  # the head's own (config.json), or none needed
    if labels is not None:
        label_names = tuple(labels)
    elif not is_own_task and head_task.spec.labels is not None:
        label_names = head_task.spec.labels
    elif (
        not is_own_task
        and head_task.spec.family in LABEL_FAMILIES
        and not head_task.spec.is_regression
    ):
        raise ValueError(f"give labels=[...] for a new {task_name} head on {source}")
    if not is_own_task:  # a new head reads the model its architecture's way (ELMo's mix)
        default = folder_finetune_defaults(folder).features
        head_task = dataclasses.replace(head_task, features=default)
    model = head_task.load_head(folder, label_names)
    head_task.check_fits(model.config)
    return head_task, model


def _bert(
    folder: Path, source: str, tokenizer: Tokenizer, task: Task | None, model: nn.Module | None
) -> PretrainedBert:
    return PretrainedBert(model or _pretrained_model(folder), tokenizer, task, source)


def _pretrained_model(folder: Path) -> BertForPreTraining | BertModel:
    """The model with its masked-LM head when the checkpoint has one, else the encoder."""
    _, weights = checkpoint.read_model(folder)
    keys = checkpoint.normalize_keys(weights, BertForPreTraining.base_prefix)
    model_class = BertForPreTraining if MLM_HEAD_KEY in keys else BertModel
    return model_class.from_pretrained(folder)


# The ready object of each architecture's folders (`network.architectures`): a BERT's, with its
# masked-LM head, freezing by layer and `fit` on the encoder in memory; the LSTM era's, with
# their own uses (`use.lstm_models`).
READY_MODELS = {BERT: _bert} | dict.fromkeys(LM_ARCHITECTURE_NAMES, PretrainedLanguageModel)
