"""Task adapters shared by fine-tuning, evaluate and predict: labels, inputs, rows, metrics."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bertlab.core.metrics import METRIC_SETS
from bertlab.data.tasks.ner import TaggedSentence
from bertlab.network.heads import BertForSequenceClassification
from bertlab.task_families import (
    PRIMARY_METRIC,
    make_task,
    predict_rows,
    read_token_lines,
)


def test_every_metric_set_has_a_primary_metric():
    assert set(PRIMARY_METRIC) == set(METRIC_SETS)


def test_tagging_labels_put_o_first_and_group_entity_types():
    sentences = [TaggedSentence(("a", "b", "c"), ("I-PER", "B-PER", "O")),
                 TaggedSentence(("d", "e"), ("S-LOC", "B-LOC"))]  # fmt: skip
    names = make_task("tagging").label_names(sentences)
    assert names == ("O", "B-LOC", "S-LOC", "B-PER", "I-PER")


def test_glue_labels_come_from_the_registry_and_generic_ones_from_the_data():
    assert make_task("mnli").label_names([]) == ("contradiction", "entailment", "neutral")
    assert make_task("stsb").label_names([]) is None
    with pytest.raises(ValueError, match="needs the columns"):
        make_task("classification")
    with pytest.raises(ValueError, match="unknown task"):
        make_task("imdb")


def test_read_token_lines_takes_the_first_column_and_skips_document_markers(tmp_path):
    path = tmp_path / "input.txt"
    path.write_text("-DOCSTART- -X- O\n\nEU NNP B-ORG\nrejects\n\n\nGerman JJ\n")
    sentences = read_token_lines(path)
    assert [s.tokens for s in sentences] == [("EU", "rejects"), ("German",)]
    assert [s.line for s in sentences] == [3, 7]
    empty = tmp_path / "empty.txt"
    empty.write_text("-DOCSTART-\n\n")
    with pytest.raises(ValueError, match="no examples"):
        read_token_lines(empty)


def test_predict_rows_returns_rows_in_input_order(tiny_config):
    torch.manual_seed(0)
    model = BertForSequenceClassification(tiny_config, num_labels=3)
    features = [{"input_ids": [2, *range(10, 10 + n), 3]} for n in (1, 7, 3, 5)]
    rows = predict_rows(model, features, 2, "fp32", lambda output: output.logits)
    for feature, row in zip(features, rows, strict=True):
        with torch.no_grad():
            alone = model(torch.tensor([feature["input_ids"]])).logits[0].numpy()
        np.testing.assert_allclose(row, alone, atol=1e-5)
