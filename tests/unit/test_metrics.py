"""Each metric equals its reference: scikit-learn, scipy, seqeval, the official SQuAD v1.1 rules."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
import scipy.stats
import sklearn.metrics

from bertlab.core import metrics
from bertlab.data.tasks.scoring import compute_metrics

TASK_DATA = Path(__file__).resolve().parent.parent / "data" / "tasks"
ENTITY_TYPES = ("PER", "LOC", "ORG")
# Entity-level scores need seqeval, an optional package (bertlab.core.optional); the rest run
# without.
needs_seqeval = pytest.mark.skipif(
    importlib.util.find_spec("seqeval") is None, reason="seqeval is not installed"
)


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(0)


def random_iob2(rng: np.random.Generator, length: int) -> list[str]:
    """A well-formed IOB2 sequence of random entities."""
    tags = []
    while len(tags) < length:
        if rng.random() < 0.5:
            tags.append("O")
            continue
        entity_type = ENTITY_TYPES[rng.integers(len(ENTITY_TYPES))]
        span = int(rng.integers(1, 4))
        tags.extend([f"B-{entity_type}"] + [f"I-{entity_type}"] * (span - 1))
    return tags[:length]


def iob2_to_bmes(tags: list[str]) -> list[str]:
    """The same entities written in BMES (Resume NER's scheme)."""
    converted = []
    for index, tag in enumerate(tags):
        following = tags[index + 1] if index + 1 < len(tags) else "O"
        ends = not following.startswith("I-")
        if tag == "O":
            converted.append(tag)
        elif tag.startswith("B-"):
            converted.append(("S-" if ends else "B-") + tag[2:])
        else:
            converted.append(("E-" if ends else "M-") + tag[2:])
    return converted


def test_classification_metrics_equal_sklearn(rng):
    references = rng.integers(0, 2, 200).tolist()
    predictions = rng.integers(0, 2, 200).tolist()
    assert metrics.accuracy(predictions, references) == sklearn.metrics.accuracy_score(
        references, predictions
    )
    assert metrics.f1(predictions, references) == sklearn.metrics.f1_score(references, predictions)
    assert metrics.matthews_corrcoef(predictions, references) == pytest.approx(
        sklearn.metrics.matthews_corrcoef(references, predictions), abs=1e-12
    )


def test_accuracy_by_hand():
    assert metrics.accuracy(["a", "b", "b", "a"], ["a", "b", "a", "a"]) == 0.75


def test_pearson_spearman_equal_scipy(rng):
    references = rng.uniform(0, 5, 100)
    predictions = references + rng.normal(0, 1, 100)
    result = metrics.pearson_spearman(predictions.tolist(), references.tolist())
    assert result["pearson"] == pytest.approx(scipy.stats.pearsonr(predictions, references)[0])
    assert result["spearman"] == pytest.approx(scipy.stats.spearmanr(predictions, references)[0])


def test_entity_f1_equals_seqeval_default_mode(rng):
    seqeval_metrics = pytest.importorskip("seqeval.metrics")
    references = [random_iob2(rng, int(rng.integers(1, 15))) for _ in range(60)]
    predictions = [random_iob2(rng, len(sentence)) for sentence in references]
    result = metrics.entity_f1(predictions, references)
    assert result["f1"] == pytest.approx(seqeval_metrics.f1_score(references, predictions))
    assert result["precision"] == pytest.approx(
        seqeval_metrics.precision_score(references, predictions)
    )
    assert result["recall"] == pytest.approx(seqeval_metrics.recall_score(references, predictions))


@needs_seqeval
def test_entity_f1_counts_whole_entities_by_hand():
    references = [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG", "O"]]
    predictions = [["B-PER", "I-PER", "O", "B-ORG"], ["B-ORG", "B-ORG"]]
    # Gold PER, LOC, ORG; predicted PER (right), ORG (wrong type), ORG (right), ORG (spurious).
    assert metrics.entity_f1(predictions, references) == pytest.approx(
        {"precision": 2 / 4, "recall": 2 / 3, "f1": 2 * (1 / 2) * (2 / 3) / (1 / 2 + 2 / 3)}
    )


def test_entity_f1_on_bmes_equals_seqeval_strict_iobes(rng):
    seqeval_metrics = pytest.importorskip("seqeval.metrics")
    iobes_scheme = pytest.importorskip("seqeval.scheme").IOBES
    references = [random_iob2(rng, int(rng.integers(1, 15))) for _ in range(60)]
    predictions = [random_iob2(rng, len(sentence)) for sentence in references]
    bmes_references = [iob2_to_bmes(sentence) for sentence in references]
    bmes_predictions = [iob2_to_bmes(sentence) for sentence in predictions]

    def iobes(sentences):
        return [[tag.replace("M-", "I-") for tag in sentence] for sentence in sentences]

    expected = seqeval_metrics.f1_score(
        iobes(bmes_references), iobes(bmes_predictions), mode="strict", scheme=iobes_scheme
    )
    assert metrics.entity_f1(bmes_predictions, bmes_references)["f1"] == pytest.approx(expected)


def test_bio_tags_maps_bmes_prefixes():
    assert metrics.bio_tags(["B-ORG", "M-ORG", "E-ORG", "S-PER", "O"]) == [
        "B-ORG",
        "I-ORG",
        "I-ORG",
        "B-PER",
        "O",
    ]
    with pytest.raises(ValueError, match="X-ORG"):
        metrics.bio_tags(["X-ORG"])


def squad_cases() -> list[dict]:
    return json.loads((TASK_DATA / "squad_metric_cases.json").read_text())["cases"]


@pytest.mark.parametrize("case", squad_cases(), ids=lambda case: case["prediction"])
def test_squad_em_f1_matches_hand_computed_case(case):
    result = metrics.squad_em_f1({"q": case["prediction"]}, {"q": case["golds"]})
    assert result["exact_match"] == pytest.approx(100 * case["em"])
    assert result["f1"] == pytest.approx(100 * case["f1"])


def test_squad_em_f1_averages_over_gold_questions_and_scores_missing_as_zero():
    cases = squad_cases()
    references = {str(index): case["golds"] for index, case in enumerate(cases)}
    predictions = {str(index): case["prediction"] for index, case in enumerate(cases)}
    result = metrics.squad_em_f1(predictions, references)
    assert result["exact_match"] == pytest.approx(100 * np.mean([case["em"] for case in cases]))
    assert result["f1"] == pytest.approx(100 * np.mean([case["f1"] for case in cases]))
    del predictions["0"]  # an exact match, now unanswered
    partial = metrics.squad_em_f1(predictions, references)
    assert partial["exact_match"] == pytest.approx(result["exact_match"] - 100 / len(cases))


def test_squad_unanswerable_question_wants_empty_prediction():
    references = {"a": [], "b": []}
    assert metrics.squad_em_f1({"a": "", "b": "Coldplay"}, references) == {
        "exact_match": 50.0,
        "f1": 50.0,
    }


@pytest.mark.parametrize(
    ("task", "keys"),
    [
        ("cola", {"mcc"}),
        ("sst2", {"accuracy"}),
        ("mrpc", {"accuracy", "f1"}),
        ("qqp", {"accuracy", "f1"}),
        ("mnli", {"accuracy"}),
        ("rte", {"accuracy"}),
        ("swag", {"accuracy"}),
    ],
)
def test_compute_metrics_returns_the_glue_standard_set(task, keys, rng):
    references = rng.integers(0, 2, 50).tolist()
    predictions = rng.integers(0, 2, 50).tolist()
    result = compute_metrics(task, predictions, references)
    assert set(result) == keys
    if "f1" in result:
        string_result = compute_metrics(
            task, [str(label) for label in predictions], [str(label) for label in references]
        )
        assert string_result == result
        assert result["f1"] == sklearn.metrics.f1_score(references, predictions)


@needs_seqeval
def test_compute_metrics_other_families():
    assert set(compute_metrics("stsb", [1.0, 2.0, 3.5], [1.2, 2.5, 3.0])) == {
        "pearson",
        "spearman",
    }
    tags = [["B-PER", "O"]]
    assert compute_metrics("conll2003", tags, tags) == {
        "precision": 1.0,
        "recall": 1.0,
        "f1": 1.0,
    }
    assert compute_metrics("squad", {"q": "x"}, {"q": ["x"]}) == {
        "exact_match": 100.0,
        "f1": 100.0,
    }


def test_metric_inputs_that_do_not_pair_up_are_rejected():
    with pytest.raises(ValueError, match="2 predictions but 3 references"):
        metrics.accuracy([0, 1], [0, 1, 1])
    with pytest.raises(ValueError, match="sentence 0"):
        metrics.entity_f1([["O"]], [["O", "O"]])
    with pytest.raises(ValueError, match="unknown task"):
        compute_metrics("glue", [0], [0])
