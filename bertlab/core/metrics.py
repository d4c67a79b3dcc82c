"""Evaluation metrics as the benchmarks define them.

GLUE metrics come from scikit-learn and scipy, entity-level F1 from seqeval (CoNLL `conlleval`
semantics), and SQuAD EM/F1 is written out from the official v1.1 evaluation script, because it
is this toolkit's own scoring of its answers. No torch here: everything takes plain Python
sequences.

Scales: every metric is a fraction in [0, 1] (correlations in [-1, 1]) except SQuAD EM and F1,
which are percentages in [0, 100] exactly as the official script prints them.
"""

from __future__ import annotations

import collections
import re
import string
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from bertlab.core.optional import require

# The positive class of the binary GLUE tasks MRPC and QQP ("1" = paraphrase / duplicate).
POSITIVE_LABEL = 1

# BMES (and BIOES) prefixes mapped onto BIO, so that one conlleval-style scorer covers every scheme:
# a single-token entity S- and a beginning B- both open a chunk; M-, E- and I- continue one.
BIO_PREFIX = {"B": "B", "I": "I", "M": "I", "E": "I", "S": "B"}
OUTSIDE_TAG = "O"


def _check_pair(predictions: Sequence, references: Sequence) -> None:
    if len(predictions) != len(references):
        raise ValueError(
            f"{len(predictions)} predictions but {len(references)} references; they must pair up"
        )
    if not references:
        raise ValueError("no references to score")


def accuracy(predictions: Sequence, references: Sequence) -> float:
    """Fraction of predictions equal to their reference (GLUE accuracy, SWAG accuracy)."""
    _check_pair(predictions, references)
    import sklearn.metrics  # imported when used: `bertlab --help` stays fast

    return float(sklearn.metrics.accuracy_score(list(references), list(predictions)))


def f1(predictions: Sequence, references: Sequence, positive: int | str = POSITIVE_LABEL) -> float:
    """Binary F1 of the `positive` class, as GLUE scores MRPC and QQP."""
    _check_pair(predictions, references)
    import sklearn.metrics

    return float(
        sklearn.metrics.f1_score(
            list(references), list(predictions), pos_label=positive, average="binary"
        )
    )


def matthews_corrcoef(predictions: Sequence, references: Sequence) -> float:
    """Matthews correlation coefficient (CoLA)."""
    _check_pair(predictions, references)
    import sklearn.metrics

    return float(sklearn.metrics.matthews_corrcoef(list(references), list(predictions)))


def pearson_spearman(predictions: Sequence[float], references: Sequence[float]) -> dict[str, float]:
    """Pearson and Spearman correlation of real-valued scores (STS-B)."""
    _check_pair(predictions, references)
    predicted = np.asarray(predictions, dtype=np.float64)
    gold = np.asarray(references, dtype=np.float64)
    import scipy.stats

    return {
        "pearson": float(scipy.stats.pearsonr(predicted, gold)[0]),
        "spearman": float(scipy.stats.spearmanr(predicted, gold)[0]),
    }


def roc_auc(scores: Sequence[float], labels: Sequence[int]) -> float:
    """Area under the ROC curve of `scores` for binary `labels` (1 positive); NaN when only one
    class occurs (ELECTRA's replaced-token detection, held out)."""
    _check_pair(scores, labels)
    import sklearn.metrics

    if len(set(labels)) < 2:
        return float("nan")
    return float(sklearn.metrics.roc_auc_score(list(labels), list(scores)))


def bio_tags(tags: Sequence[str]) -> list[str]:
    """Rewrite BMES/BIOES tags with BIO prefixes; BIO and IOB1 tags pass through unchanged.

    Example: `["B-ORG", "M-ORG", "E-ORG", "S-PER", "O"]` -> `["B-ORG", "I-ORG", "I-ORG", "B-PER",
    "O"]`.

    Raises:
        ValueError: a tag that is neither `O` nor `<prefix>-<type>` with a known prefix.
    """
    converted = []
    for tag in tags:
        if tag == OUTSIDE_TAG:
            converted.append(tag)
            continue
        prefix, separator, entity_type = tag.partition("-")
        if not separator or not entity_type or prefix not in BIO_PREFIX:
            raise ValueError(f"tag {tag!r} is not O or B-/I-/M-/E-/S- followed by a type")
        converted.append(f"{BIO_PREFIX[prefix]}-{entity_type}")
    return converted


def entity_f1(
    predictions: Sequence[Sequence[str]], references: Sequence[Sequence[str]]
) -> dict[str, float]:
    """Entity-level micro precision, recall and F1 with CoNLL `conlleval` semantics.

    Tags may use IOB1, IOB2, BIOES or BMES; BMES/BIOES are first mapped to BIO prefixes
    (`bio_tags`). seqeval's default mode reproduces conlleval: an entity is scored as correct only
    when its type and both boundaries match, and an `I-` tag that follows `O` or another type opens
    a new entity (so IOB1 and slightly ill-formed predictions are read as conlleval reads them).

    Args:
        predictions: one tag sequence per sentence.
        references: the gold tag sequences, sentence for sentence the same lengths.

    Raises:
        MissingPackageError: seqeval is not installed.
    """
    _check_pair(predictions, references)
    for index, (predicted, gold) in enumerate(zip(predictions, references, strict=True)):
        if len(predicted) != len(gold):
            raise ValueError(
                f"sentence {index}: {len(predicted)} predicted tags but {len(gold)} gold tags"
            )
    predicted = [bio_tags(sentence) for sentence in predictions]
    gold = [bio_tags(sentence) for sentence in references]
    seqeval_metrics = require("seqeval.metrics", "entity-level scores of tagging (NER)")
    return {
        "precision": float(seqeval_metrics.precision_score(gold, predicted, zero_division=0)),
        "recall": float(seqeval_metrics.recall_score(gold, predicted, zero_division=0)),
        "f1": float(seqeval_metrics.f1_score(gold, predicted, zero_division=0)),
    }


# --- SQuAD: the official v1.1 evaluation script (evaluate-v1.1.py), written out -----------------

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = frozenset(string.punctuation)


def normalize_answer(text: str) -> str:
    """Lower-case, drop ASCII punctuation, drop the articles a/an/the, collapse whitespace.

    The order of the steps is the official one: `white_space_fix(remove_articles(remove_punc(
    lower(s))))`. Example: `"The  Denver Broncos!" -> "denver broncos"`.
    """
    text = text.lower()
    text = "".join(character for character in text if character not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def squad_exact_match(prediction: str, gold: str) -> float:
    """1.0 when the normalized strings are equal, else 0.0."""
    return float(normalize_answer(prediction) == normalize_answer(gold))


def squad_token_f1(prediction: str, gold: str) -> float:
    """F1 of the bag of normalized whitespace tokens, as the official v1.1 script computes it."""
    predicted_tokens = normalize_answer(prediction).split()
    gold_tokens = normalize_answer(gold).split()
    common = collections.Counter(predicted_tokens) & collections.Counter(gold_tokens)
    num_same = sum(common.values())
    if num_same == 0:
        return 0.0
    precision = num_same / len(predicted_tokens)
    recall = num_same / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def squad_em_f1(
    predictions: Mapping[str, str], references: Mapping[str, Sequence[str]]
) -> dict[str, float]:
    """SQuAD exact match and F1 in percent, each the max over a question's gold answers.

    As in the official script, the total is the number of gold questions and a question without
    a prediction scores 0. SQuAD v2.0: a question with no gold answers is unanswerable; the
    prediction `""` scores 1 on both metrics there and any other prediction 0 (the v2.0 rule).

    Args:
        predictions: question id -> predicted answer text.
        references: question id -> gold answer texts (empty for an unanswerable question).

    Returns:
        `{"exact_match": ..., "f1": ...}` in [0, 100].
    """
    if not references:
        raise ValueError("no gold questions to score")
    exact_total = f1_total = 0.0
    for question_id, golds in references.items():
        if question_id not in predictions:
            continue
        prediction = predictions[question_id]
        if not golds:
            no_answer = float(normalize_answer(prediction) == "")
            exact_total += no_answer
            f1_total += no_answer
            continue
        exact_total += max(squad_exact_match(prediction, gold) for gold in golds)
        f1_total += max(squad_token_f1(prediction, gold) for gold in golds)
    return {
        "exact_match": 100.0 * exact_total / len(references),
        "f1": 100.0 * f1_total / len(references),
    }


# --- The standard metric set of each task -------------------------------------------------------


def _positive_like(references: Sequence) -> int | str:
    # GLUE files hold the label "1"; models predict the label id 1. Both mean the positive class.
    return str(POSITIVE_LABEL) if isinstance(references[0], str) else POSITIVE_LABEL


def _accuracy_set(predictions: Sequence, references: Sequence) -> dict[str, float]:
    return {"accuracy": accuracy(predictions, references)}


def _accuracy_f1_set(predictions: Sequence, references: Sequence) -> dict[str, float]:
    _check_pair(predictions, references)
    return {
        "accuracy": accuracy(predictions, references),
        "f1": f1(predictions, references, positive=_positive_like(references)),
    }


def _mcc_set(predictions: Sequence, references: Sequence) -> dict[str, float]:
    return {"mcc": matthews_corrcoef(predictions, references)}


METRIC_SETS: dict[str, Callable[..., dict[str, float]]] = {
    "accuracy": _accuracy_set,
    "accuracy_f1": _accuracy_f1_set,
    "mcc": _mcc_set,
    "pearson_spearman": pearson_spearman,
    "entity_f1": entity_f1,
    "squad": squad_em_f1,
}
PERCENT_SETS = frozenset({"squad"})  # metric sets whose figures are already percentages


def as_percent(metric_set: str, value: float) -> float:
    """A figure of `metric_set` as a percentage: a fraction times 100, SQuAD's as it is."""
    return value if metric_set in PERCENT_SETS else 100.0 * value
