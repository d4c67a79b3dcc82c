"""Each fine-tuning head against its `transformers` class: outputs, losses and checkpoints both ways
(random weights, fp32, eval mode, padding in the batch)."""

import json

import pytest
import torch

from bertlab.core.config import BertConfig
from bertlab.network.heads import (
    BertForMultipleChoice,
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
)

transformers = pytest.importorskip("transformers")
pytestmark = pytest.mark.golden

ATOL = 1e-5
ID2LABEL = {0: "O", 1: "B-PER", 2: "I-PER", 3: "B-LOC", 4: "I-LOC"}


def hf_config(config: BertConfig, **task):
    return transformers.BertConfig(**config.to_dict(), **task)


def padded_inputs(config: BertConfig, shape: tuple[int, ...], seed: int = 3):
    """Random inputs of `shape` ((B, L) or (B, K, L)) whose rows have different lengths."""
    generator = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(1, config.vocab_size, shape, generator=generator)
    lengths = torch.randint(2, shape[-1] + 1, shape[:-1], generator=generator)
    lengths.view(-1)[0] = shape[-1]  # one row without padding
    attention_mask = (torch.arange(shape[-1]) < lengths[..., None]).long()
    input_ids[attention_mask == 0] = config.pad_token_id
    token_type_ids = torch.randint(0, config.type_vocab_size, shape, generator=generator)
    return {
        "input_ids": input_ids,
        "attention_mask": attention_mask,
        "token_type_ids": token_type_ids,
    }


def labels_for(name: str, inputs):
    """Labels of each head for `inputs`, with the ignored cases each loss must skip."""
    shape = inputs["input_ids"].shape
    generator = torch.Generator().manual_seed(4)
    if name == "sequence_classification":
        return {"labels": torch.randint(0, len(ID2LABEL), shape[:1], generator=generator)}
    if name == "token_classification":
        labels = torch.randint(0, len(ID2LABEL), shape, generator=generator)
        labels[inputs["attention_mask"] == 0] = -100
        labels[:, 0] = -100
        return {"labels": labels}
    if name == "question_answering":
        starts = torch.randint(0, shape[1], shape[:1], generator=generator)
        ends = torch.randint(0, shape[1], shape[:1], generator=generator)
        starts[-1] = ends[-1] = shape[1] + 7  # answer cut off by truncation: ignored
        return {"start_positions": starts, "end_positions": ends}
    return {"labels": torch.randint(0, shape[1], shape[:1], generator=generator)}


# name -> (build ours, HF class name, HF task config, input shape)
HEADS = {
    "sequence_classification": (
        lambda config: BertForSequenceClassification(config, id2label=ID2LABEL),
        "BertForSequenceClassification",
        {"id2label": ID2LABEL},
        (4, 13),
    ),
    "token_classification": (
        lambda config: BertForTokenClassification(config, id2label=ID2LABEL),
        "BertForTokenClassification",
        {"id2label": ID2LABEL},
        (4, 13),
    ),
    "question_answering": (BertForQuestionAnswering, "BertForQuestionAnswering", {}, (4, 13)),
    "multiple_choice": (BertForMultipleChoice, "BertForMultipleChoice", {}, (3, 4, 13)),
}


def outputs(model, inputs, labels):
    with torch.no_grad():
        result = model(**inputs, **labels)
    if hasattr(result, "start_logits") and result.start_logits is not None:
        return [result.start_logits, result.end_logits, result.loss]
    return [result.logits, result.loss]


def assert_same(ours, theirs, inputs, labels):
    for mine, reference in zip(
        outputs(ours, inputs, labels), outputs(theirs, inputs, labels), strict=True
    ):
        assert mine is not None and reference is not None
        torch.testing.assert_close(mine, reference, rtol=0, atol=ATOL)


@pytest.mark.parametrize("name", list(HEADS))
def test_head_matches_transformers_with_strictly_loaded_weights(name, odd_config):
    build, hf_class, task, shape = HEADS[name]
    config = odd_config
    torch.manual_seed(0)
    ours = build(config).eval()
    theirs = getattr(transformers, hf_class)(hf_config(config, **task)).eval()
    theirs.load_state_dict(ours.state_dict(), strict=True)
    inputs = padded_inputs(config, shape)
    assert_same(ours, theirs, inputs, labels_for(name, inputs))


@pytest.mark.parametrize("name", list(HEADS))
def test_bertlab_checkpoint_loads_in_transformers_with_equal_outputs(tmp_path, tiny_config, name):
    build, hf_class, _, shape = HEADS[name]
    torch.manual_seed(1)
    ours = build(tiny_config).eval()
    ours.save_pretrained(tmp_path)
    theirs, info = getattr(transformers, hf_class).from_pretrained(
        tmp_path, output_loading_info=True
    )
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    assert not info["mismatched_keys"], info
    assert theirs.config.architectures == [hf_class]
    if hasattr(ours, "id2label"):
        assert theirs.config.id2label == ours.id2label
        assert theirs.config.label2id == ours.label2id
    inputs = padded_inputs(tiny_config, shape, seed=5)
    assert_same(ours, theirs.eval(), inputs, labels_for(name, inputs))


@pytest.mark.parametrize("name", list(HEADS))
def test_transformers_checkpoint_loads_in_bertlab_with_equal_outputs(tmp_path, name, odd_config):
    build, hf_class, task, shape = HEADS[name]
    config = odd_config
    torch.manual_seed(2)
    theirs = getattr(transformers, hf_class)(hf_config(config, **task)).eval()
    theirs.save_pretrained(tmp_path)
    ours = type(build(config)).from_pretrained(tmp_path).eval()
    assert ours.config == config
    if "id2label" in task:
        assert ours.id2label == ID2LABEL
    inputs = padded_inputs(config, shape, seed=6)
    assert_same(ours, theirs, inputs, labels_for(name, inputs))


@pytest.mark.parametrize(
    ("problem_type", "labels"),
    [
        (None, torch.tensor([0.5, -1.0, 2.0])),  # one label: regression
        ("multi_label_classification", torch.tensor([[1.0, 0.0], [0.0, 0.0], [1.0, 1.0]])),
    ],
)
def test_regression_and_multi_label_losses_match_transformers(
    tmp_path, tiny_config, problem_type, labels
):
    num_labels = 1 if labels.dim() == 1 else labels.shape[1]
    torch.manual_seed(3)
    ours = BertForSequenceClassification(tiny_config, num_labels, problem_type=problem_type)
    ours.eval().save_pretrained(tmp_path)
    assert json.loads((tmp_path / "config.json").read_text())["problem_type"] == ours.problem_type
    theirs = transformers.BertForSequenceClassification.from_pretrained(tmp_path).eval()
    assert theirs.config.problem_type == ours.problem_type
    inputs = padded_inputs(tiny_config, (3, 9), seed=7)
    assert_same(ours, theirs, inputs, {"labels": labels})


def test_training_gradients_match_transformers(tiny_config):
    """Same loss and gradients for one token-classification step (dropout off)."""
    config = tiny_config.replace(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    torch.manual_seed(4)
    ours = BertForTokenClassification(config, num_labels=5).train()
    theirs = transformers.BertForTokenClassification(hf_config(config, num_labels=5)).train()
    theirs.load_state_dict(ours.state_dict(), strict=True)
    inputs = padded_inputs(config, (3, 9), seed=8)
    labels = labels_for("token_classification", inputs)
    loss, reference = ours(**inputs, **labels).loss, theirs(**inputs, **labels).loss
    loss.backward()
    reference.backward()
    torch.testing.assert_close(loss, reference, rtol=0, atol=ATOL)
    grads = dict(theirs.named_parameters())
    for name, parameter in ours.named_parameters():
        torch.testing.assert_close(parameter.grad, grads[name].grad, rtol=1e-4, atol=1e-6, msg=name)
