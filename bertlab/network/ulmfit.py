"""ULMFiT's classifier (Howard & Ruder 2018, "Universal Language Model Fine-tuning for Text
Classification", Sec. 3.3): the pre-trained AWD-LSTM body, concat pooling of its last layer's
states, and two blocks of batch normalization, dropout and a linear layer (ReLU between them),
as fastai's `PoolingLinearClassifier`.

    pieces -> AWD-LSTM body -> h_1 .. h_T -> [h_T; maxpool(h); meanpool(h)] -> BN, dropout,
           linear (50), ReLU -> BN, dropout, linear (C)

The pooling reads the real positions only (h_T is each sequence's last real piece). The
parameter groups that discriminative fine-tuning (Sec. 3.2: eta^(l-1) = eta^l / 2.6) and
gradual unfreezing (Sec. 3.3: the last group first) act on are `parameter_groups()`, from the
embedding up to the head. Module names follow fastai's where they exist (`encoder`, `rnns`
inside the body, `layers` in the head).
"""

# Shapes: B batch, L sequence length, E embedding_size (the last layer's size), C labels.

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from bertlab.core.lstm_config import AwdLstmConfig
from bertlab.network import checkpoint
from bertlab.network.awd_lstm import AwdLstmModel
from bertlab.network.heads import (
    SEQUENCE_LOSSES,
    NamedLabels,
    label_names,
    labels_config,
    labels_from_config,
    sequence_problem_type,
)
from bertlab.network.layer_groups import HEAD, INPUT, LayerGroup
from bertlab.network.lm_base import LanguageModel, load_weights, sequence_lengths, validate_ids

HEAD_HIDDEN_SIZE = 50  # ULMFiT Sec. 3.3 / fastai's get_text_classifier: lin_ftrs = [50]
HEAD_DROPOUT_PROB = 0.1  # fastai's get_text_classifier: ps = [output_p, 0.1]
NUM_POOLS = 3  # concat pooling: the last state, the max and the mean


@dataclass
class UlmfitOutput:
    """What `UlmfitForSequenceClassification` returns.

    logits: (B, C). loss: the mean cross-entropy over the batch (float32), with labels.
    layers: the body's representations, (B, L, H_l) each (the embedded input, then each layer).
    """

    logits: torch.Tensor
    loss: torch.Tensor | None = None
    layers: tuple[torch.Tensor, ...] = ()


def concat_pool(hidden: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
    """ULMFiT Sec. 3.3: [h_T; maxpool(H); meanpool(H)] over each sequence's real positions.
    (B, L, E), (B, L) or None -> (B, 3E)."""
    lengths = sequence_lengths(attention_mask, hidden[..., 0])  # (B,)
    batch_index = torch.arange(hidden.shape[0], device=hidden.device)
    last = hidden[batch_index, lengths - 1]  # (B, E)
    if attention_mask is None:
        return torch.cat([last, hidden.amax(dim=1), hidden.mean(dim=1)], dim=-1)
    real = attention_mask.bool()[:, :, None]  # (B, L, 1)
    largest = hidden.masked_fill(~real, torch.finfo(hidden.dtype).min).amax(dim=1)  # (B, E)
    mean = hidden.masked_fill(~real, 0).sum(dim=1) / lengths[:, None].to(hidden.dtype)  # (B, E)
    return torch.cat([last, largest, mean], dim=-1)  # (B, 3E)


class PoolingLinearClassifier(nn.Module):
    """ULMFiT Sec. 3.3: the concat-pooled states through blocks of BatchNorm, dropout and a
    linear layer (no bias: the BatchNorm's shift stands in), ReLU after every block but the
    last (fastai's LinBnDrop blocks)."""

    def __init__(self, sizes: list[int], dropout_probs: list[float]) -> None:
        super().__init__()
        blocks: list[nn.Module] = []
        for index, (size_in, size_out) in enumerate(zip(sizes, sizes[1:], strict=False)):
            blocks += [
                nn.BatchNorm1d(size_in),
                nn.Dropout(dropout_probs[index]),
                nn.Linear(size_in, size_out, bias=False),
            ]
            if index < len(sizes) - 2:
                blocks.append(nn.ReLU())
        self.layers = nn.Sequential(*blocks)

    def forward(self, pooled: torch.Tensor) -> torch.Tensor:
        """(B, 3E) -> (B, C). A training batch of one example (the last batch of an epoch can
        be one) is normalized by the running statistics: batch statistics of one example are
        undefined, and fastai, which drops the last incomplete batch, never meets one."""
        if self.training and pooled.shape[0] == 1:
            norms = [m for m in self.layers if isinstance(m, nn.BatchNorm1d)]
            for norm in norms:
                norm.eval()
            try:
                return self.layers(pooled)
            finally:
                for norm in norms:
                    norm.train()
        return self.layers(pooled)


class UlmfitForSequenceClassification(NamedLabels, LanguageModel):
    """ULMFiT Sec. 3.3: the AWD-LSTM body and the pooling classifier, with named labels (or one
    regression output) as bertlab's BERT heads have them."""

    config_class = AwdLstmConfig
    extra_config_keys = ("num_labels", "id2label", "label2id", "problem_type")

    def __init__(
        self,
        config: AwdLstmConfig,
        num_labels: int | None = None,
        id2label: dict[int, str] | None = None,
        problem_type: str | None = None,
    ) -> None:
        """Args:
        config: the AWD-LSTM body's architecture.
        num_labels, id2label: the labels, as `heads.BertForLabels` takes them.
        problem_type: `heads.SEQUENCE_LOSSES`' names; None: regression for one output, else
            single-label classification (as Hugging Face decides it).
        """
        super().__init__(config)
        self.id2label = label_names(num_labels, id2label)
        self.problem_type = sequence_problem_type(problem_type, self.num_labels)
        self.awd_lstm = AwdLstmModel(config)
        sizes = [NUM_POOLS * config.embedding_size, HEAD_HIDDEN_SIZE, self.num_labels]
        # fastai: the first block's dropout is the config's output_p, the next ones 0.1.
        self.classifier = PoolingLinearClassifier(
            sizes, [config.output_dropout_prob, HEAD_DROPOUT_PROB]
        )

    def extra_config(self) -> dict[str, Any]:
        labels = labels_config(self.id2label)
        return {"num_labels": self.num_labels} | labels | {"problem_type": self.problem_type}

    @classmethod
    def init_kwargs_from_config(cls, values: dict[str, Any]) -> dict[str, Any]:
        kwargs = labels_from_config(values)
        if values.get("problem_type"):
            kwargs["problem_type"] = values["problem_type"]
        return kwargs

    @classmethod
    def from_language_model(
        cls,
        directory: str | Path,
        num_labels: int | None = None,
        *,
        id2label: dict[int, str] | None = None,
        problem_type: str | None = None,
        use_classifier_dropouts: bool = True,
        revision: str | None = None,
    ) -> UlmfitForSequenceClassification:
        """A new classifier on a pre-trained `AwdLstmForLanguageModeling` folder's body (ULMFiT
        Sec. 3.3: the head is new, the language model's decoder is left out).

        Args:
            num_labels, id2label, problem_type: the new head's labels (the constructor's).
            use_classifier_dropouts: fastai's classifier dropouts
                (`AwdLstmConfig.with_classifier_dropouts`) instead of the language model's.
        """
        values, state_dict = checkpoint.read_model(directory, revision)
        config = AwdLstmConfig.from_dict({k: v for k, v in values.items() if k != "architectures"})
        if use_classifier_dropouts:
            config = config.with_classifier_dropouts()
        model = cls(config, num_labels, id2label, problem_type)
        load_weights(
            model,
            state_dict,
            source=str(directory),
            allowed_missing=("classifier.",),
            allowed_unexpected=("decoder.",),
        )
        return model

    def parameter_groups(self) -> list[list[nn.Parameter]]:
        """The layer groups of discriminative fine-tuning and gradual unfreezing, from the
        embedding up to the head: [embedding], [LSTM 1], ..., [LSTM n], [classifier]
        (fastai's awd_lstm_clas_split)."""
        return [group.parameters() for group in self.layer_groups()]

    def layer_groups(self) -> list[LayerGroup]:
        """`parameter_groups` as fine-tuning's strategies read them (`network.layer_groups`):
        the embedding at depth 0, LSTM k at depth k, the classifier one above the last LSTM, so
        that under ULMFiT's decay of 1/2.6 each group trains 2.6 times slower than the one
        above it (fastai's `slice(lr / 2.6**4, lr)` over its five groups)."""
        body = self.awd_lstm
        groups = [LayerGroup("embeddings", (body.encoder,), 0, INPUT)]
        groups += [LayerGroup(f"LSTM {k}", (rnn,), k) for k, rnn in enumerate(body.rnns, 1)]
        groups.append(LayerGroup("head", (self.classifier,), len(body.rnns) + 1, HEAD))
        return groups

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
    ) -> UlmfitOutput:
        """Classify a batch.

        Args:
            input_ids: (B, L) int64 piece ids, padding on the right.
            attention_mask: (B, L), 1 for pieces and 0 for padding; None means no padding.
            token_type_ids: (B, L), taken as BERT's heads take it and not read: the LSTM reads
                a pair as one sequence, [SEP] between its texts.
            labels: (B,) int64 class ids; (B,) float scores for regression.

        Returns:
            UlmfitOutput: logits (B, C), loss with labels, the body's layers.
        """
        if not torch.compiler.is_compiling():
            validate_ids(input_ids, attention_mask, None, self.config.vocab_size)
        layers = self.awd_lstm(input_ids)
        logits = self.classifier(concat_pool(layers[-1], attention_mask))  # (B, C)
        loss = None if labels is None else SEQUENCE_LOSSES[self.problem_type](logits, labels)
        return UlmfitOutput(logits=logits, loss=loss, layers=layers)
