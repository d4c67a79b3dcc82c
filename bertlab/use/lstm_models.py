"""The lectures' LSTM-era models as ready objects: what `bertlab.load` returns for a folder of
Bengio's NNLM, ELMo's biLM or an AWD-LSTM (pre-trained by `bertlab pretrain --architecture`, or
fine-tuned by `bertlab finetune`), with the uses every bertlab model has, each the function the
command line calls:

- features: `.embed(texts)`, a layer's vectors (ELMo: each layer, or the scalar mix; AWD-LSTM:
  each layer; NNLM: its vectors) per text, piece or word (`features.extract_features`);
- static vectors: `.neighbours(word)`, the pieces whose input vectors are nearest
  (`neighbours.embedding_neighbours`), and `.word_vectors(sentences, word)`, a word's
  contextual vectors (`neighbours.word_vectors_in`);
- a language model: `.score(texts)` and `.generate(prompt)` for the left-to-right models
  (NNLM, AWD-LSTM, ELMo's forward LM; `language_model`);
- a task: `.fit(x, y)` puts a new head on the model in its paper's way, as `bertlab finetune`
  does (`network.architectures`), and trains it; `.predict(inputs)` runs a task head; `.save`.

What each architecture reads, loads and fine-tunes is its entry's (`network.architectures`);
this class tests no architecture's name.
"""

# Shapes: V vocab, H the width of a hidden state.

from __future__ import annotations

import dataclasses
import os
from collections.abc import Hashable, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

from bertlab.core.atomic import atomic_directory
from bertlab.core.finetune_config import FinetuneConfig
from bertlab.core.hub import not_model_files
from bertlab.core.runtime import resolve_precision
from bertlab.network.architectures import (
    Architecture,
    folder_architecture,
    folder_finetune_defaults,
)
from bertlab.task_families import Task, run_task
from bertlab.tokenizer.wordpiece import Tokenizer
from bertlab.training.finetuning.finetune import write_task_model
from bertlab.training.finetuning.loop import FinetuneResult
from bertlab.training.optim import layer_learning_rates
from bertlab.use.features import PER_TEXT, extract_features
from bertlab.use.fitting import FitRun, as_examples, fit_head
from bertlab.use.language_model import SentenceScore, generate, score_texts
from bertlab.use.neighbour_options import DEFAULT_TOP_K
from bertlab.use.neighbours import Occurrence, embedding_neighbours, word_vectors_in


class PretrainedLanguageModel:
    """An LSTM-era model folder and its tokenizer, loaded by `bertlab.load`.

    Attributes:
        architecture: its entry (`network.architectures.Architecture`).
        folder: where it was loaded from (the resolved folder).
        source: the name it was loaded by.
        tokenizer: its WordPiece tokenizer.
        task: the task of its head, or None.
        model: the task head (`fit` or `load(..., task=...)` made it, or the folder's own), or
            None for a pre-trained model without one.
    """

    def __init__(
        self,
        folder: Path,
        source: str,
        tokenizer: Tokenizer,
        task: Task | None,
        model: nn.Module | None,
    ) -> None:
        self.folder, self.source, self.tokenizer = Path(folder), source, tokenizer
        self.architecture: Architecture = folder_architecture(folder)
        self.task, self.model = task, None if model is None else model.eval()
        self._encoder: nn.Module | None = None
        self._language_model: nn.Module | None = None

    def __repr__(self) -> str:
        head = "no task head" if self.model is None else type(self.model).__name__
        return f"PretrainedLanguageModel({self.source!r}: {self.architecture.title}, {head})"

    # --- what it reads --------------------------------------------------------------------------

    @property
    def encoder(self) -> nn.Module:
        """What `embed` and `neighbours` read (`lm_views.LanguageModelEncoder`), in eval mode:
        the folder's, loaded once."""
        if self._encoder is None:
            self._encoder = self.architecture.load_encoder(self.folder)
        return self._encoder

    @property
    def language_model(self) -> nn.Module:
        """What `score` and `generate` read (`lm_views.LeftToRightLanguageModel`), loaded once.

        Raises:
            ValueError: the folder holds no language model (a fine-tuned head), saying why.
        """
        if self._language_model is None:
            self._language_model = self.architecture.load_language_model(self.folder)
        return self._language_model

    def embed(
        self,
        texts: str | Sequence[str],
        pooling: str | None = None,
        layer: int | str | None = None,
        batch_size: int = 32,
    ) -> torch.Tensor | list[torch.Tensor]:
        """Features of each text: one layer's hidden states, pooled, as `bertlab embed`
        computes them (`features.extract_features`, poolings `feature_options.POOLINGS`).

        Args:
            texts: the texts (one string is one text).
            pooling: "mean", "last" (what a left-to-right model has read the whole text
                into), "cls" (not for a left-to-right model), or per text "pieces", "first",
                "mean-pieces"; None: the architecture's (NNLM and ELMo "mean", AWD-LSTM "last").
            layer: 0 the input layer, k layer k, -1 the last, "mix" ELMo's scalar mix (a
                fine-tuned head's learned one, else the layers' average); None: the
                architecture's (NNLM 0, its vectors; ELMo "mix"; AWD-LSTM -1).
            batch_size: texts per forward pass.

        Returns:
            (number of texts, H) float32; per piece or word, one (rows, H) tensor per text.

        Raises:
            ValueError: an unknown pooling or layer, a pooling the model cannot give.
        """
        texts = [texts] if isinstance(texts, str) else list(texts)
        layer = self.architecture.embed_layers[0] if layer is None else layer
        pooling = pooling or self.architecture.embed_pooling
        features = extract_features(
            self.encoder, self.tokenizer, texts, (layer,), pooling, batch_size
        )
        vectors = torch.from_numpy(features.vectors)[:, 0]  # (rows, H)
        if features.pooling in PER_TEXT:
            return vectors.contiguous()
        return [vectors[record["start"] : record["end"]] for record in features.records]

    def neighbours(self, word: str, top_k: int = DEFAULT_TOP_K) -> list[tuple[str, float]]:
        """The pieces whose static input vectors are nearest `word`'s (NNLM's C, AWD-LSTM's
        embedding, ELMo's token layer), with their cosine similarity."""
        return embedding_neighbours(self.encoder, self.tokenizer, word, top_k)

    def word_vectors(
        self, sentences: Sequence[str], word: str, layer: int | str = -1
    ) -> list[Occurrence]:
        """Every use of `word` in `sentences` with its vector at `layer` (contextual
        neighbours' vectors, `neighbours.word_vectors_in`)."""
        return word_vectors_in(self.encoder, self.tokenizer, sentences, word, layer)

    def score(self, texts: str | Sequence[str]) -> list[SentenceScore]:
        """Each text's log-probability under the left-to-right LM (`bertlab score-text`)."""
        texts = [texts] if isinstance(texts, str) else list(texts)
        with torch.inference_mode():
            return score_texts(self.language_model, self.tokenizer, texts)

    def generate(self, prompt: str = "", **sampling: Any) -> str:
        """The prompt continued by the left-to-right LM (`bertlab generate`; `sampling`:
        `max_new_tokens`, `temperature`, `top_k`, `seed`)."""
        return generate(self.language_model, self.tokenizer, prompt, **sampling)

    # --- a task ---------------------------------------------------------------------------------

    def predict(self, inputs: str | Sequence[Any], batch_size: int = 32) -> list[Any]:
        """The task head's predictions for `inputs` (texts or (text, pair) tuples for
        classification, `TaggedSentence`s for tagging), as `PretrainedBert.predict` gives them.

        Raises:
            ValueError: the model has no task head.
        """
        if self.model is None or self.task is None:
            raise ValueError(
                f"{self.source} has no task head: use .embed(), .score() or .generate(), or "
                "load it with task=... (or .fit() it) for one"
            )
        inputs = [inputs] if isinstance(inputs, str) else list(inputs)
        examples = as_examples(self.task, inputs, with_labels=False)
        precision = resolve_precision("auto", next(self.model.parameters()).device)
        return run_task(self.task, self.model, self.tokenizer, examples, batch_size, precision)

    def finetune_config(self) -> FinetuneConfig:
        """The settings `fit` takes when it is given none: the architecture's way
        (`FinetuneDefaults`: ULMFiT's strategy, ELMo's rate, ...)."""
        settings = folder_finetune_defaults(self.folder).settings
        return FinetuneConfig(**{k: v for k, v in settings.items() if v is not None})

    def learning_rates(self, config: FinetuneConfig | None = None) -> list[tuple[str, float]]:
        """Each layer group's peak rate under `config` (None: `finetune_config()`), for the
        task head (`fit` trains it)."""
        if self.model is None:
            raise ValueError(f"{self.source} has no task head yet: its rates are a head's")
        config = config or self.finetune_config()
        return layer_learning_rates(self.model, config.learning_rate, config.layerwise_lr_decay)

    def fit(
        self,
        x: Sequence[Any],
        y: Sequence[Hashable] | None = None,
        *,
        dev: Any = None,
        out: str | os.PathLike | None = None,
        config: FinetuneConfig | None = None,
        show_progress: bool = False,
    ) -> FinetuneResult:
        """Fine-tune on `x` (and `y`) as `PretrainedBert.fit` does: a model without a task head
        gets a new classification head, built in its paper's way (ULMFiT's classifier; ELMo's
        frozen biLM, scalar mix and BiLSTM; NNLM's vectors starting a random encoder), and
        `config` None trains with the architecture's settings (`finetune_config()`).

        Returns:
            As `PretrainedBert.fit`.

        Raises:
            ValueError: as `PretrainedBert.fit`; a task the architecture has no head for.
        """
        result, self.model, self.task = fit_head(
            FitRun(self.task, self.model, self.tokenizer, self.folder, self._new_head),
            x,
            y,
            dev,
            out,
            config or self.finetune_config(),
            show_progress,
        )
        return result

    def _new_head(self, task: Task, label_names: tuple[str, ...]) -> nn.Module:
        features = folder_finetune_defaults(self.folder).features
        return dataclasses.replace(task, features=features).load_head(self.folder, label_names)

    def save(self, directory: str | os.PathLike) -> Path:
        """Write the task head, its tokenizer and task settings into `directory`, whole or not
        at all (`bertlab.load` and every `--model` read it).

        Raises:
            ValueError: no task head to save (the pre-trained folder is already a model
                folder), or `directory` holds files that are no model's.
        """
        if self.model is None or self.task is None:
            raise ValueError(f"{self.source} has no task head to save; its folder is the model")
        others = not_model_files(directory) if Path(directory).is_dir() else []
        if others:
            raise ValueError(
                f"{directory} holds {', '.join(others)}, which no model folder has: save() "
                "replaces the folder whole; choose another folder"
            )
        with atomic_directory(directory) as temporary:
            write_task_model(temporary, self.model, self.tokenizer, self.task)
        return Path(directory)
