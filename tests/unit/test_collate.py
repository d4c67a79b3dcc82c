"""Collation of pre-training examples into padded batches for `BertForPreTraining`."""

from __future__ import annotations

import random

import pytest
import torch

from bertlab.core.config import PretrainDataConfig
from bertlab.data.collate import IGNORE_INDEX, collate_pretraining
from bertlab.data.masking import make_example
from bertlab.data.pretraining import Instance, SpecialIds
from bertlab.network.bert import BertForPreTraining

SPECIAL = SpecialIds(pad=0, unk=1, cls=2, sep=3, mask=4)


def _examples(config: PretrainDataConfig, vocab_size: int = 99) -> list:
    rng = random.Random(0)
    if config.objective == "mlm+nsp":
        instances = [Instance(list(range(10, 20)), [30, 31], False), Instance([40, 41], [50], True)]
    else:
        instances = [Instance(list(range(10, 22)), [], None), Instance([40, 41, 42], [], None)]
    return [make_example(instance, config, SPECIAL, vocab_size, rng) for instance in instances]


def test_pretraining_batch_is_padded_with_model_keyword_names() -> None:
    examples = _examples(PretrainDataConfig())
    batch = collate_pretraining(examples, SPECIAL.pad)
    assert set(batch) == {
        "input_ids",
        "attention_mask",
        "token_type_ids",
        "masked_positions",
        "labels",
        "next_sentence_label",
    }
    assert batch["input_ids"].shape == (2, 15) and batch["input_ids"].dtype == torch.int64
    assert batch["attention_mask"].sum(1).tolist() == [15, 6]
    assert batch["input_ids"][1, 6:].eq(SPECIAL.pad).all()
    assert batch["token_type_ids"][1].tolist() == [0, 0, 0, 0, 1, 1] + [0] * 9
    num_predictions = [len(example.masked_positions) for example in examples]
    assert batch["masked_positions"].shape == (2, max(num_predictions))
    short = num_predictions.index(min(num_predictions))
    assert batch["masked_positions"][short, min(num_predictions) :].eq(0).all()
    assert batch["labels"][short, min(num_predictions) :].eq(IGNORE_INDEX).all()
    assert batch["next_sentence_label"].tolist() == [0, 1]


def test_fixed_shapes_on_request() -> None:
    batch = collate_pretraining(
        _examples(PretrainDataConfig()), SPECIAL.pad, pad_to_length=32, pad_to_predictions=20
    )
    assert batch["input_ids"].shape == (2, 32) and batch["labels"].shape == (2, 20)
    with pytest.raises(ValueError, match="pad_to_length"):
        collate_pretraining(_examples(PretrainDataConfig()), SPECIAL.pad, pad_to_length=4)


def test_mlm_only_batch_has_no_nsp_label() -> None:
    batch = collate_pretraining(_examples(PretrainDataConfig(objective="mlm")), SPECIAL.pad)
    assert "next_sentence_label" not in batch and batch["masked_positions"].shape[0] == 2
    assert batch["token_type_ids"].eq(0).all()


def test_clm_batch_labels_are_the_next_tokens_with_padding_ignored() -> None:
    batch = collate_pretraining(_examples(PretrainDataConfig(objective="clm")), SPECIAL.pad)
    assert "masked_positions" not in batch and "next_sentence_label" not in batch
    assert batch["labels"].shape == batch["input_ids"].shape == (2, 14)
    assert batch["labels"][0, :-1].tolist() == batch["input_ids"][0, 1:].tolist()
    assert batch["labels"][0, -1] == IGNORE_INDEX
    length = int(batch["attention_mask"][1].sum())
    assert length < 14
    assert batch["labels"][1, : length - 1].tolist() == batch["input_ids"][1, 1:length].tolist()
    assert batch["labels"][1, length - 1 :].eq(IGNORE_INDEX).all()


def test_mixed_objectives_are_rejected() -> None:
    mixed = _examples(PretrainDataConfig())[:1] + _examples(PretrainDataConfig(objective="mlm"))
    with pytest.raises(ValueError, match="next_sentence_label"):
        collate_pretraining(mixed, SPECIAL.pad)
    with pytest.raises(ValueError, match="empty"):
        collate_pretraining([], SPECIAL.pad)


def test_batch_runs_through_bert_for_pretraining(tiny_config) -> None:
    torch.manual_seed(0)
    model = BertForPreTraining(tiny_config).eval()
    batch = collate_pretraining(_examples(PretrainDataConfig()), SPECIAL.pad)
    output = model(**batch)
    assert output.mlm_logits.shape == (*batch["labels"].shape, tiny_config.vocab_size)
    assert torch.isfinite(output.loss) and output.nsp_loss is not None
