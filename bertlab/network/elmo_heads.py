"""ELMo used as its paper uses it (Peters et al. 2018, Sec. 3.3): the pre-trained biLM frozen,
a learned scalar mix of its layers (eq. 1: ELMo_k = gamma * sum_j s_j h_k,j, s = softmax(w)) as
the input of the task's own model, and the task's layer:

    pieces -> frozen biLM -> [x; x], [fwd_1; bwd_1], [fwd_2; bwd_2] -> scalar mix -> BiLSTM
           -> the task layer (a sentence: the BiLSTM's forward state at the last piece and its
              backward state at the first; tagging: every piece, a word by its first piece)

The mix and the BiLSTM are bertlab's feature-based head (`feature_heads.LayerFeatures`, BERT
Sec. 5.3's use of ELMo's recipe), here over the biLM's layers instead of BERT's; its
`FeatureHeadConfig` may read the layers otherwise (one layer, the sum, ...), with or without the
BiLSTM, and may fine-tune the biLM under it (`do_freeze_encoder` False). The biLM's softmax is
kept (the folder stays a language model too) but never trained.

A head saves as its language model does (`lm_base.LanguageModel`: config.json with the
`architecture` key, model.safetensors), its labels and its `FeatureHeadConfig` (under
`bertlab_features`, as BERT's feature-based heads) added to config.json.
"""

# Shapes: B batch, L sequence length, C labels, F features per piece.

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import torch
from torch import nn

from bertlab.core.lstm_config import ElmoConfig, pieces_from_character_ids
from bertlab.network import checkpoint
from bertlab.network.elmo import ElmoForLanguageModeling
from bertlab.network.feature_head_config import FeatureHeadConfig
from bertlab.network.feature_heads import LayerFeatures
from bertlab.network.heads import (
    FEATURES_KEY,
    SEQUENCE_LOSSES,
    NamedLabels,
    TaskOutput,
    label_names,
    labels_config,
    labels_from_config,
    sequence_problem_type,
    single_label_loss,
)
from bertlab.network.layer_groups import HEAD, INPUT, OTHER, LayerGroup
from bertlab.network.lm_base import LanguageModel, load_weights

# ELMo Sec. 3.3: the biLM frozen, the mix of every layer learned with the task, and the task's
# own recurrent model above it (here bertlab's two-layer BiLSTM).
ELMO_FEATURES = FeatureHeadConfig(layers="scalar-mix", use_bilstm=True, do_freeze_encoder=True)
CHARACTERS_KEY = "token_embedder.char_cnn.piece_characters"  # the char CNN's table (elmo.py)
LANGUAGE_MODEL_PREFIX = "elmo."


class ElmoForTask(LanguageModel):
    """ELMo Sec. 3.3: the biLM (`elmo`), the features a task reads from its layers
    (`features`), dropout, and a task layer that a subclass adds."""

    config_class = ElmoConfig
    extra_config_keys: ClassVar[tuple[str, ...]] = (FEATURES_KEY,)

    def __init__(
        self,
        config: ElmoConfig,
        features: FeatureHeadConfig | None = None,
        pieces: list[str] | None = None,
    ) -> None:
        """Args:
        config: the biLM's architecture.
        features: what the task reads of its layers; None: ELMo's way (`ELMO_FEATURES`).
        pieces: the WordPiece vocabulary in id order, for a biLM with the char CNN.
        """
        super().__init__(config)
        self.feature_config = features or ELMO_FEATURES
        self.elmo = ElmoForLanguageModeling(config, pieces)
        self.elmo.softmax.requires_grad_(False)  # a task never reads the language model's softmax
        self.features = LayerFeatures(
            config.num_hidden_layers, config.layer_size, self.feature_config
        )
        # As bertlab's BERT heads use the encoder's dropout before the task layer.
        self.dropout = nn.Dropout(config.dropout_prob)
        if self.is_encoder_frozen:
            self.elmo.requires_grad_(False)

    @property
    def is_encoder_frozen(self) -> bool:
        return self.feature_config.do_freeze_encoder

    @property
    def feature_size(self) -> int:
        return self.features.output_size

    def train(self, mode: bool = True) -> ElmoForTask:
        """As `nn.Module.train`, but a frozen biLM stays in eval mode (ELMo's representations
        are computed without dropout, from the pre-trained weights)."""
        super().train(mode)
        if self.is_encoder_frozen:
            self.elmo.eval()
        return self

    def layer_groups(self) -> list[LayerGroup]:
        """The token layer, LSTM layer j of both directions at depth j, the unused softmax beside
        the top layer, and the task's part (the mix, the BiLSTM, the task layer) at the top."""
        elmo = self.elmo
        top = self.config.num_hidden_layers
        groups = [LayerGroup("embeddings", (elmo.token_embedder,), 0, INPUT)]
        pairs = zip(elmo.forward_lstm.layers, elmo.backward_lstm.layers, strict=True)
        groups += [LayerGroup(f"layer {j}", pair, j) for j, pair in enumerate(pairs, 1)]
        groups.append(LayerGroup("softmax", (elmo.softmax,), top, OTHER))
        groups.append(
            LayerGroup("head", (self.features, self.dropout, self.task_layer()), top, HEAD)
        )
        return groups

    def task_layer(self) -> nn.Module:
        raise NotImplementedError

    def encode(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
        """(B, L) -> the features of every piece (B, L, F): the biLM's layers as
        `feature_config` reads them."""
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        with torch.set_grad_enabled(torch.is_grad_enabled() and not self.is_encoder_frozen):
            layers = self.elmo(input_ids, attention_mask, output_logits=False).layers
        return self.features(layers, attention_mask)  # (B, L, F)

    def extra_config(self) -> dict[str, Any]:
        return {FEATURES_KEY: self.feature_config.to_dict()}

    @classmethod
    def init_kwargs_from_config(cls, values: dict[str, Any]) -> dict[str, Any]:
        if values.get(FEATURES_KEY) is None:
            return {}
        return {"features": FeatureHeadConfig.from_dict(values[FEATURES_KEY])}

    @classmethod
    def build_for_checkpoint(
        cls, config: Any, state_dict: dict[str, torch.Tensor], kwargs: dict[str, Any]
    ) -> ElmoForTask:
        """With the char CNN, the pieces come from the checkpoint's own character table."""
        key = LANGUAGE_MODEL_PREFIX + CHARACTERS_KEY
        if config.use_char_cnn and "pieces" not in kwargs and key in state_dict:
            pieces = pieces_from_character_ids(state_dict[key].tolist(), config.characters)
            kwargs = kwargs | {"pieces": pieces}
        return cls(config, **kwargs)

    @classmethod
    def from_language_model(
        cls, directory: str | Path, *, revision: str | None = None, **kwargs: Any
    ) -> ElmoForTask:
        """A new task head on the pre-trained biLM of an `ElmoForLanguageModeling` folder: every
        weight of the biLM loaded, the features and the task layer new.

        Args:
            kwargs: the head's constructor arguments (labels, `features`).

        Raises:
            ValueError: the folder holds no ELMo biLM, or weights that do not fit it.
        """
        values, state_dict = checkpoint.read_model(directory, revision)
        config = ElmoConfig.from_dict({k: v for k, v in values.items() if k != "architectures"})
        weights = {LANGUAGE_MODEL_PREFIX + key: value for key, value in state_dict.items()}
        model = cls.build_for_checkpoint(config, weights, kwargs)
        load_weights(
            model, weights, source=str(directory), allowed_missing=("features.", "classifier.")
        )
        return model


class ElmoForLabels(NamedLabels, ElmoForTask):
    """A head with C named labels, written to config.json as `heads.BertForLabels` writes them."""

    extra_config_keys = (FEATURES_KEY, "num_labels", "id2label", "label2id")

    def __init__(
        self,
        config: ElmoConfig,
        num_labels: int | None = None,
        id2label: dict[int, str] | None = None,
        features: FeatureHeadConfig | None = None,
        pieces: list[str] | None = None,
    ) -> None:
        super().__init__(config, features, pieces)
        self.id2label = label_names(num_labels, id2label)
        self.classifier = nn.Linear(self.feature_size, self.num_labels)

    def task_layer(self) -> nn.Module:
        return self.classifier

    def extra_config(self) -> dict[str, Any]:
        labels = {"num_labels": self.num_labels} | labels_config(self.id2label)
        return super().extra_config() | labels

    @classmethod
    def init_kwargs_from_config(cls, values: dict[str, Any]) -> dict[str, Any]:
        return super().init_kwargs_from_config(values) | labels_from_config(values)


class ElmoForSequenceClassification(ElmoForLabels):
    """ELMo Sec. 4 (SST-5, SNLI): classify or score the whole input from the task model's
    sentence vector (with the BiLSTM: its forward state at the last piece, its backward state
    at the first)."""

    extra_config_keys = (*ElmoForLabels.extra_config_keys, "problem_type")

    def __init__(
        self,
        config: ElmoConfig,
        num_labels: int | None = None,
        id2label: dict[int, str] | None = None,
        problem_type: str | None = None,
        features: FeatureHeadConfig | None = None,
        pieces: list[str] | None = None,
    ) -> None:
        super().__init__(config, num_labels, id2label, features, pieces)
        self.problem_type = sequence_problem_type(problem_type, self.num_labels)

    def extra_config(self) -> dict[str, Any]:
        return super().extra_config() | {"problem_type": self.problem_type}

    @classmethod
    def init_kwargs_from_config(cls, values: dict[str, Any]) -> dict[str, Any]:
        kwargs = super().init_kwargs_from_config(values)
        if values.get("problem_type"):
            kwargs["problem_type"] = values["problem_type"]
        return kwargs

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
    ) -> TaskOutput:
        """Classify (or score) each sequence.

        Args:
            input_ids, attention_mask: (B, L), padding on the right.
            token_type_ids: (B, L), taken as BERT's heads take it and not read: the biLM reads
                a pair as one sequence, [SEP] between its texts.
            labels: (B,) int64 class ids; (B,) float scores for regression.

        Returns:
            TaskOutput: logits (B, C) and, with labels, the float32 loss of `problem_type`.
        """
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        tokens = self.encode(input_ids, attention_mask)  # (B, L, F)
        sentence = self.features.sentence(tokens, attention_mask, is_causal=False)  # (B, F)
        logits = self.classifier(self.dropout(sentence))  # (B, C)
        loss = None if labels is None else SEQUENCE_LOSSES[self.problem_type](logits, labels)
        return TaskOutput(logits=logits, loss=loss)


class ElmoForTokenClassification(ElmoForLabels):
    """ELMo Sec. 4 (CoNLL-2003 NER): a label for every piece; words are labelled by their first
    piece, as bertlab's BERT tagger labels them."""

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
    ) -> TaskOutput:
        """Label every piece.

        Args:
            input_ids, attention_mask: (B, L), padding on the right.
            token_type_ids: (B, L), not read (as `ElmoForSequenceClassification`).
            labels: (B, L) int64; -100 where nothing is predicted.

        Returns:
            TaskOutput: logits (B, L, C) and, with labels, the float32 cross-entropy.
        """
        tokens = self.encode(input_ids, attention_mask)  # (B, L, F)
        logits = self.classifier(self.dropout(tokens))  # (B, L, C)
        loss = None if labels is None else single_label_loss(logits, labels)
        return TaskOutput(logits=logits, loss=loss)
