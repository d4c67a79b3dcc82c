"""Pre-trained BERTs as ready objects, the Keras-Applications way: `bertlab.load(name)`.

`load` takes a model folder or a Hugging Face Hub id (`bert-base-uncased`, `bert-base-chinese`,
`google/bert_uncased_L-2_H-128_A-2`, downloaded once and cached by `bertlab.hub`) and returns a
`PretrainedBert`: the model and its tokenizer, ready for the three uses of a pre-trained network
(docs/models.md):

- prediction: `.predict(texts)` fills in [MASK]s with a pre-trained model's masked-LM head, or
  gives a fine-tuned model's task predictions (labels, scores, tags, answers, choices);
- feature extraction: `.embed(texts)` gives one vector per text (or per piece or word) from any
  layer;
- fine-tuning: `load(name, task="sst2")` puts a new task head on the pre-trained encoder;
  `.freeze()` and `.unfreeze()` choose which layers train, `.fit(train, dev, out=...)` trains
  (BERT's recipe: AdamW, warmup and linear decay, the best dev epoch kept in OUT/best with a
  model card), and `.save(folder)` writes a folder that every `--model` reads. `fit`'s
  `FinetuneConfig` chooses the strategy as `bertlab finetune`'s flags do (layer-wise learning-rate
  decay, ULMFiT's slanted triangular schedule and gradual unfreezing, Keras' staged recipe);
  `.learning_rates(config)` shows each layer group's rate under it.
"""

# Shapes: B batch, L sequence length, H hidden_size.

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from bertlab import checkpoint, hub
from bertlab.atomic import atomic_directory
from bertlab.config import FinetuneConfig, TaskDataConfig
from bertlab.data.tasks.classification import ColumnSpec, Example
from bertlab.features import PER_TEXT, extract_features
from bertlab.heads import BertForLabels, BertForTask
from bertlab.inspection import MLM_HEAD_KEY, MaskPrediction, fill_mask
from bertlab.model_card import write_model_card
from bertlab.modeling import BertForPreTraining, BertModel
from bertlab.runtime import default_device, resolve_precision, set_seed
from bertlab.task_families import Task, make_task, read_task_file, run_task
from bertlab.tokenization import Tokenizer
from bertlab.training.finetune import ModelSource, TaskData, finetuning_card, write_task_model
from bertlab.training.finetune_loop import FinetuneResult, apply_freezing, train_task_model
from bertlab.training.optim import layer_learning_rates

LABEL_FAMILIES = ("classification", "tagging")  # heads with named labels
# Generic classification in memory: the fields of `Example`, named as `bertlab finetune` does.
MEMORY_COLUMNS = ColumnSpec(text_a="text", label="label")


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
            config: the fine-tuning settings (BERT's defaults when None).

        Returns:
            (group name, rate) per trainable group.
        """
        config = config or FinetuneConfig()
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
            (a label, a score, tags, an answer, a choice index).

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
        examples = self._examples(inputs, with_labels=False)
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
        computes them (`features.extract_features`, with its vocabulary `features.POOLINGS`).

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
        train: Sequence[Any],
        dev: Sequence[Any] | None = None,
        *,
        out: str | os.PathLike,
        config: FinetuneConfig | None = None,
        show_progress: bool = False,
    ) -> FinetuneResult:
        """Fine-tune the task head and the unfrozen layers on `train` (BERT Sec. 4).

        Args:
            train: labelled examples: (text, label) or (text, pair, label) tuples for
                classification, else the family's examples with their labels.
            dev: labelled examples scored after every epoch; the best epoch's model is kept.
            out: the run folder: metrics.jsonl, curves.png and best/ (the model, its tokenizer
                and its model card: `bertlab.load(out + "/best")` or `--model OUT/best`).
            config: learning rate, batch size, epochs, seed, ... (BERT's defaults when None),
                and the strategy: `layerwise_lr_decay`, `schedule`, `do_gradual_unfreezing`,
                `head_warmup_epochs` (docs/finetuning.md#fine-tuning-strategies). Layers frozen
                with `.freeze()` stay frozen throughout; the strategy works on the others.
            show_progress: a progress bar.

        Returns:
            The best epoch and its dev metrics. The object keeps the last epoch's weights.

        Raises:
            ValueError: no task head (load with `task=...`), or bad examples.
        """
        if self.task is None:
            raise ValueError(f"{self.source} has no task head; load it with task=... to fine-tune")
        config = config or FinetuneConfig()
        task, out = self.task, Path(out)
        train_examples = self._examples(train, with_labels=True)
        dev_examples = None if dev is None else self._examples(dev, with_labels=True)
        set_seed(config.seed)
        apply_freezing(self.model, config)
        label2id = self.model.label2id if isinstance(self.model, BertForLabels) else None
        features = task.encode(train_examples, self.tokenizer, label2id, with_labels=True)
        self.model.to(default_device())
        evaluate = None
        if dev_examples is not None:
            precision = resolve_precision(config.precision, default_device())

            def evaluate(model: BertForTask) -> dict[str, float]:
                predictions = run_task(
                    task, model, self.tokenizer, dev_examples, config.eval_batch_size, precision
                )
                return task.score(predictions, dev_examples)

        def save(directory: Path, model: BertForTask) -> None:
            write_task_model(directory, model, self.tokenizer, task)

        result = train_task_model(
            self.model, features, config, out, evaluate, task.primary_metric, save, show_progress
        )
        label_names = tuple(self.model.id2label.values()) if label2id is not None else None
        data = TaskData(train_examples, dev_examples, label_names)
        source = ModelSource(directory=Path(self.source))
        card = finetuning_card(task, data, source, replace(config, seed=result.seed), result)
        write_model_card(result.best_dir, card)
        self.model.eval()
        return result

    def save(self, directory: str | os.PathLike) -> Path:
        """Write the model and its tokenizer (and a task head's task settings) into `directory`,
        whole or not at all; `load(directory)` and every `--model` read it."""
        with atomic_directory(directory) as temporary:
            if self.task is not None:
                write_task_model(temporary, self.model, self.tokenizer, self.task)
            else:
                self.model.save_pretrained(temporary)
                self.tokenizer.save_pretrained(temporary)
        return Path(directory)

    def _examples(self, items: Sequence[Any], with_labels: bool) -> list:
        """Classification tuples and strings as `Example`s; other families' examples as given."""
        if self.task is None or self.task.spec.family != "classification":
            return list(items)
        return [_example(item, with_labels) for item in items]


def _example(item: Any, with_labels: bool) -> Example:
    if isinstance(item, Example):
        return item
    if isinstance(item, str):
        item = (item,)
    if not isinstance(item, tuple) or not 1 <= len(item) <= 3:
        raise ValueError(f"expected a text or a (text[, pair][, label]) tuple, got {item!r}")
    if with_labels:
        if len(item) < 2:
            raise ValueError(f"a training example needs a label: {item!r}")
        *texts, label = item
    else:
        texts, label = list(item), None
    return Example(texts[0], texts[1] if len(texts) > 1 else None, label)


def load(
    name_or_folder: str | os.PathLike,
    task: str | None = None,
    labels: Sequence[str] | None = None,
    revision: str | None = None,
) -> PretrainedBert:
    """A model and its tokenizer by Hugging Face Hub id or folder, ready to use.

    Args:
        name_or_folder: a model folder (bertlab's, `transformers`', `bertlab convert`'s) or a
            Hub id: `bert-base-uncased`, `bert-base-chinese`, `google/bert_uncased_L-4_H-256_A-4`.
        task: a task name (`sst2`, `conll2003`, `squad`, `classification`, ... as `bertlab
            finetune --task` takes) for a task head: the folder's own, when it was fine-tuned on
            that task, else a new one on the pre-trained encoder. None: the model as it is (a
            fine-tuned folder keeps its task; a pre-trained one its masked-LM head).
        labels: the label names of a new classification or tagging head whose task does not
            fix them (`classification`, `tagging`).
        revision: the Hub revision (branch, tag or commit) of an id; None: `main`.

    Returns:
        The `PretrainedBert`, in eval mode, with every parameter trainable.

    Raises:
        FileNotFoundError: no such folder, and no such model on the Hub (or in the cache offline).
        ValueError: an unknown task, or a new label head without its labels.
    """
    folder = hub.resolve(name_or_folder, revision)
    source = os.fspath(name_or_folder)
    tokenizer = Tokenizer.from_pretrained(folder)
    saved = read_task_file(folder) if folder.is_dir() else None
    task_name = task or (saved or {}).get("task")
    if task_name is None:
        return PretrainedBert(_pretrained_model(folder), tokenizer, None, source)
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
    model = head_task.load_head(folder, label_names)
    head_task.check_fits(model.config)
    return PretrainedBert(model, tokenizer, head_task, source)


def _pretrained_model(folder: Path) -> BertForPreTraining | BertModel:
    """The model with its masked-LM head when the checkpoint has one, else the encoder."""
    _, weights = checkpoint.read_model(folder)
    keys = checkpoint.normalize_keys(weights, BertForPreTraining.base_prefix)
    model_class = BertForPreTraining if MLM_HEAD_KEY in keys else BertModel
    return model_class.from_pretrained(folder)
