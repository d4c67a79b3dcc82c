import json
import logging
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from bertlab.network.bert import BertForPreTraining
from bertlab.network.heads import (
    BertForMultipleChoice,
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
)

TEST_DATA = Path(__file__).resolve().parent.parent / "data"

HEADS = {
    "sequence_classification": lambda config: BertForSequenceClassification(config, num_labels=3),
    "token_classification": lambda config: BertForTokenClassification(config, num_labels=5),
    "question_answering": BertForQuestionAnswering,
    "multiple_choice": BertForMultipleChoice,
}


def _head(name, config):
    torch.manual_seed(0)
    return HEADS[name](config).eval()


def choices(batch, num_choices=3):
    """The fixture batch repeated as K choices per example, each choice shifted: (B, K, L)."""
    result = {key: value[:, None].repeat(1, num_choices, 1) for key, value in batch.items()}
    for k in range(num_choices):
        real = result["attention_mask"][:, k].bool()
        result["input_ids"][:, k][real] = (result["input_ids"][:, k][real] + k) % 94 + 5
    return result


def test_output_shapes_of_every_head(tiny_config, batch):
    with torch.no_grad():
        sequence = _head("sequence_classification", tiny_config)(**batch)
        token = _head("token_classification", tiny_config)(**batch)
        span = _head("question_answering", tiny_config)(**batch)
        choice = _head("multiple_choice", tiny_config)(**choices(batch))
    assert sequence.logits.shape == (2, 3) and sequence.loss is None
    assert token.logits.shape == (2, 11, 5) and token.loss is None
    assert span.logits.shape == (2, 11, 2) and span.loss is None
    assert span.start_logits.shape == span.end_logits.shape == (2, 11)
    torch.testing.assert_close(span.start_logits, span.logits[..., 0])
    torch.testing.assert_close(span.end_logits, span.logits[..., 1])
    assert choice.logits.shape == (2, 3) and choice.loss is None


@pytest.mark.parametrize("name", list(HEADS))
def test_state_dict_keys_equal_the_hf_manifest(tiny_config, name):
    lines = (TEST_DATA / f"hf_bert_for_{name}_keys.txt").read_text().splitlines()
    manifest = [line for line in lines if line and not line.startswith("#")]
    assert list(_head(name, tiny_config).state_dict()) == manifest


def test_per_token_heads_have_no_pooler_and_span_head_no_dropout(tiny_config):
    assert _head("sequence_classification", tiny_config).bert.pooler is not None
    assert _head("multiple_choice", tiny_config).bert.pooler is not None
    assert _head("token_classification", tiny_config).bert.pooler is None
    span = _head("question_answering", tiny_config)
    assert span.bert.pooler is None and isinstance(span.dropout, nn.Identity)


def test_classifier_dropout_overrides_hidden_dropout(tiny_config):
    assert BertForSequenceClassification(tiny_config, 2).dropout.p == 0.1
    assert BertForSequenceClassification(tiny_config, 2, classifier_dropout=0.3).dropout.p == 0.3
    assert BertForMultipleChoice(tiny_config, classifier_dropout=0.0).dropout.p == 0.0


def test_sequence_classification_loss_is_cross_entropy(tiny_config, batch):
    model = _head("sequence_classification", tiny_config)
    labels = torch.tensor([2, 0])
    output = model(**batch, labels=labels)
    assert model.problem_type == "single_label_classification"
    torch.testing.assert_close(output.loss, F.cross_entropy(output.logits, labels))


def test_one_label_means_regression_with_mean_squared_error(tiny_config, batch):
    model = BertForSequenceClassification(tiny_config, num_labels=1).eval()
    assert model.problem_type == "regression"
    scores = torch.tensor([0.5, 3.25])
    output = model(**batch, labels=scores)
    assert output.logits.shape == (2, 1)
    torch.testing.assert_close(output.loss, F.mse_loss(output.logits[:, 0], scores))


def test_multi_label_loss_is_binary_cross_entropy(tiny_config, batch):
    model = BertForSequenceClassification(
        tiny_config, num_labels=3, problem_type="multi_label_classification"
    ).eval()
    targets = torch.tensor([[1.0, 0.0, 1.0], [0.0, 0.0, 1.0]])
    output = model(**batch, labels=targets)
    expected = F.binary_cross_entropy_with_logits(output.logits, targets)
    torch.testing.assert_close(output.loss, expected)


def test_token_classification_ignores_minus_100(tiny_config, batch):
    model = _head("token_classification", tiny_config)
    labels = torch.randint(0, 5, (2, 11), generator=torch.Generator().manual_seed(1))
    labels[:, 0] = -100  # [CLS]
    labels[0, 3:5] = -100  # later word pieces
    labels[1, 7:] = -100  # padding
    output = model(**batch, labels=labels)
    kept = labels != -100
    expected = F.cross_entropy(output.logits[kept], labels[kept])
    torch.testing.assert_close(output.loss, expected)
    labels[~kept] = 4
    assert not torch.allclose(model(**batch, labels=labels).loss, expected)


def test_span_loss_is_the_mean_of_start_and_end_and_ignores_positions_past_the_end(
    tiny_config, batch
):
    model = _head("question_answering", tiny_config)
    starts, ends = torch.tensor([3, 6]), torch.tensor([4, 6])
    output = model(**batch, start_positions=starts, end_positions=ends)
    expected = (
        F.cross_entropy(output.start_logits, starts) + F.cross_entropy(output.end_logits, ends)
    ) / 2
    torch.testing.assert_close(output.loss, expected)
    # An answer cut off by truncation (position >= L) adds no loss, as in HF.
    cut = model(**batch, start_positions=torch.tensor([3, 50]), end_positions=torch.tensor([4, 50]))
    expected = (
        F.cross_entropy(output.start_logits[:1], starts[:1])
        + F.cross_entropy(output.end_logits[:1], ends[:1])
    ) / 2
    torch.testing.assert_close(cut.loss, expected)


def test_multiple_choice_scores_each_choice_like_a_single_sequence(tiny_config, batch):
    model = _head("multiple_choice", tiny_config)
    inputs = choices(batch)
    labels = torch.tensor([1, 2])
    output = model(**inputs, labels=labels)
    torch.testing.assert_close(output.loss, F.cross_entropy(output.logits, labels))
    with torch.no_grad():
        second = model.classifier(
            model.bert(**{k: v[:, 1] for k, v in inputs.items()}).pooler_output
        )
    torch.testing.assert_close(output.logits[:, 1], second[:, 0], rtol=0, atol=1e-6)


def test_padding_does_not_change_token_logits_at_real_positions(tiny_config, batch):
    model = _head("token_classification", tiny_config)
    padded = {key: F.pad(value, (0, 4)) for key, value in batch.items()}
    with torch.no_grad():
        short, long = model(**batch).logits, model(**padded).logits
    real = batch["attention_mask"].bool()
    torch.testing.assert_close(long[:, :11][real], short[real], rtol=0, atol=1e-5)


def test_label_maps_round_trip_through_save_and_load(tmp_path, tiny_config, batch):
    id2label = {0: "O", 1: "B-PER", 2: "I-PER"}
    torch.manual_seed(0)
    model = BertForTokenClassification(tiny_config, id2label=id2label, classifier_dropout=0.2)
    model.eval().save_pretrained(tmp_path)
    values = json.loads((tmp_path / "config.json").read_text())
    assert values["architectures"] == ["BertForTokenClassification"]
    assert values["id2label"] == {"0": "O", "1": "B-PER", "2": "I-PER"}
    assert values["label2id"] == {"O": 0, "B-PER": 1, "I-PER": 2}
    assert values["classifier_dropout"] == 0.2
    loaded = BertForTokenClassification.from_pretrained(tmp_path).eval()
    assert loaded.id2label == id2label and loaded.num_labels == 3
    assert loaded.label2id == {"O": 0, "B-PER": 1, "I-PER": 2}
    assert loaded.dropout.p == 0.2
    with torch.no_grad():
        assert torch.equal(loaded(**batch).logits, model(**batch).logits)


def test_problem_type_and_regression_round_trip(tmp_path, tiny_config):
    BertForSequenceClassification(tiny_config, num_labels=1).save_pretrained(tmp_path / "score")
    loaded = BertForSequenceClassification.from_pretrained(tmp_path / "score")
    assert loaded.num_labels == 1 and loaded.problem_type == "regression"
    multi = BertForSequenceClassification(
        tiny_config, id2label={0: "a", 1: "b"}, problem_type="multi_label_classification"
    )
    multi.save_pretrained(tmp_path / "multi")
    values = json.loads((tmp_path / "multi" / "config.json").read_text())
    assert values["problem_type"] == "multi_label_classification"
    loaded = BertForSequenceClassification.from_pretrained(tmp_path / "multi")
    assert loaded.problem_type == "multi_label_classification"
    assert loaded.id2label == {0: "a", 1: "b"}


@pytest.mark.parametrize(
    ("cls", "kwargs", "new_keys"),
    [
        (BertForSequenceClassification, {"num_labels": 4}, ["classifier.weight"]),
        (BertForTokenClassification, {"id2label": {0: "O", 1: "X"}}, ["classifier.weight"]),
        (BertForQuestionAnswering, {}, ["qa_outputs.weight"]),
        (BertForMultipleChoice, {}, ["classifier.weight"]),
    ],
)
def test_pretraining_checkpoint_loads_into_a_head_and_says_what_is_new(
    tmp_path, tiny_config, batch, caplog, cls, kwargs, new_keys
):
    torch.manual_seed(0)
    pretrained = BertForPreTraining(tiny_config).eval()
    pretrained.save_pretrained(tmp_path)
    with caplog.at_level(logging.INFO, logger="bertlab.network.checkpoint"):
        head = cls.from_pretrained(tmp_path, **kwargs).eval()
    assert "newly initialized" in caplog.text
    # the head is new whenever a pre-trained model is fine-tuned: said, but not as a warning
    assert [r.levelno for r in caplog.records if "newly" in r.getMessage()] == [logging.INFO]
    assert all(key in caplog.text for key in new_keys)
    assert "bert." not in caplog.text.split("newly initialized")[1]
    with torch.no_grad():
        mine = head.bert(**batch).last_hidden_state
        theirs = pretrained.bert(**batch).last_hidden_state
    assert torch.equal(mine, theirs)


def test_label_arguments_are_checked(tiny_config):
    with pytest.raises(ValueError, match="num_labels or id2label"):
        BertForSequenceClassification(tiny_config)
    with pytest.raises(ValueError, match="positive integer"):
        BertForTokenClassification(tiny_config, num_labels=0)
    with pytest.raises(ValueError, match="num_labels is 3 but id2label names 2"):
        BertForSequenceClassification(tiny_config, 3, id2label={0: "a", 1: "b"})
    with pytest.raises(ValueError, match="0..C-1"):
        BertForSequenceClassification(tiny_config, id2label={0: "a", 2: "b"})
    with pytest.raises(ValueError, match="unique"):
        BertForSequenceClassification(tiny_config, id2label={0: "a", 1: "a"})
    with pytest.raises(ValueError, match="problem_type 'ranking'"):
        BertForSequenceClassification(tiny_config, 2, problem_type="ranking")
    with pytest.raises(ValueError, match="classifier_dropout"):
        BertForMultipleChoice(tiny_config, classifier_dropout=1.0)


def test_labels_of_the_wrong_shape_or_dtype_are_refused(tiny_config, batch):
    sequence = _head("sequence_classification", tiny_config)
    with pytest.raises(ValueError, match=r"shape \(2,\), got \(3,\)"):
        sequence(**batch, labels=torch.tensor([0, 1, 2]))
    with pytest.raises(ValueError, match="integer class ids, got dtype torch.float32"):
        sequence(**batch, labels=torch.tensor([0.0, 1.0]))
    token = _head("token_classification", tiny_config)
    with pytest.raises(ValueError, match=r"shape \(2, 11\), got \(2, 10\)"):
        token(**batch, labels=torch.zeros(2, 10, dtype=torch.int64))
    regression = BertForSequenceClassification(tiny_config, num_labels=1)
    with pytest.raises(ValueError, match=r"shape \(2,\), got \(2, 2\)"):
        regression(**batch, labels=torch.zeros(2, 2))


def test_question_answering_needs_both_positions_of_batch_size(tiny_config, batch):
    model = _head("question_answering", tiny_config)
    with pytest.raises(ValueError, match="both start_positions and end_positions"):
        model(**batch, start_positions=torch.tensor([1, 2]))
    with pytest.raises(ValueError, match=r"start_positions must be .* \(2,\), got \(2, 1\)"):
        model(**batch, start_positions=torch.ones(2, 1), end_positions=torch.ones(2, 1))


def test_multiple_choice_needs_three_dimensional_inputs(tiny_config, batch):
    model = _head("multiple_choice", tiny_config)
    with pytest.raises(ValueError, match=r"must be \(B, K, L\), got \(2, 11\)"):
        model(**batch)
    inputs = choices(batch)
    inputs["attention_mask"] = inputs["attention_mask"][:, :2]
    with pytest.raises(
        ValueError, match=r"attention_mask shape \(2, 2, 11\) differs .* \(2, 3, 11\)"
    ):
        model(**inputs)
    with pytest.raises(ValueError, match=r"shape \(2,\), got \(2, 3\)"):
        model(**choices(batch), labels=torch.zeros(2, 3, dtype=torch.int64))
