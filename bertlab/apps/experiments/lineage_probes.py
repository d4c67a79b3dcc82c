"""The sense probes of `bertlab experiment lineage`: does a word's vector tell its senses apart,
layer by layer?

For a probe word ("play" in movie reviews, "bank" in Wikipedia) the package ships sentences
labelled with a sense by rules over the shared corpora (`senses/<word>.tsv`, built by
`tools/make_sense_sentences.py`; `senses/README.md` gives the rules, sources and licenses). Each
sentence is read by an arm's frozen layers (`lineage_models.LayerReader`), and the word's vector
in each layer is the mean over its pieces. Per layer:

- within minus across: the mean cosine between two uses of the same sense, minus the mean
  cosine between uses of two different senses (every pair of sentences once). Above 0: the
  senses sit apart. Its 95% interval is a bootstrap over the sentences (BOOTSTRAP_SAMPLES
  resamples within each sense, the pairs of a sentence with its own copy left out), sentences
  being the unit that was sampled;
- nearest-neighbour sense accuracy: each sentence's nearest other sentence by cosine, left
  one out, has its sense or not; a tie between several nearest counts as the share of them
  that has it (a static vector, the same in every sentence, ties everywhere: chance). Chance
  is the accuracy of a neighbour drawn at random.
"""

# Shapes: N sentences, H a layer's width, R bootstrap resamples.

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from bertlab.apps.experiments.lineage_models import LayerReader
from bertlab.tokenizer.wordpiece import Tokenizer
from bertlab.use.features import pad_sequences
from bertlab.use.neighbours import word_spans

SENSES_DIR = Path(__file__).resolve().parent / "senses"
BOOTSTRAP_SAMPLES = 1000
BOOTSTRAP_SEED = 0  # the resamples are the same for every arm and layer
INTERVAL = 0.95
TIE_TOLERANCE = 1e-6  # cosines this close to the nearest count as tied with it
BATCH_SIZE = 32


@dataclass(frozen=True)
class SenseSentence:
    """A sentence with the probe word in one sense, and where it comes from (file:line)."""

    sense: str
    text: str
    source: str


def read_senses(word: str, directory: Path = SENSES_DIR) -> list[SenseSentence]:
    """The shipped sentences of a probe word.

    Raises:
        FileNotFoundError: no list for the word.
        ValueError: a line that is not `sense<TAB>sentence<TAB>source`, or fewer than two senses.
    """
    path = directory / f"{word}.tsv"
    sentences = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        fields = line.split("\t")
        if len(fields) != 3 or not all(fields):
            raise ValueError(f"{path}:{number}: expected sense, sentence and source, tab-separated")
        sentences.append(SenseSentence(*fields))
    if len({sentence.sense for sentence in sentences}) < 2:
        raise ValueError(f"{path}: a probe needs sentences of at least two senses")
    return sentences


@torch.inference_mode()
def word_vectors(
    reader: LayerReader, tokenizer: Tokenizer, texts: Sequence[str], word: str
) -> list[np.ndarray]:
    """The word's vector in every text, per layer: its first use's pieces, averaged.
    -> one (N, H_l) float32 array per layer.

    Raises:
        ValueError: a text without the word as a whole word.
    """
    rows: list[list[np.ndarray]] = []
    for start in range(0, len(texts), BATCH_SIZE):
        chunk = list(texts[start : start + BATCH_SIZE])
        encoding = tokenizer(chunk, return_offsets=True)
        ids, mask = pad_sequences(encoding["input_ids"], reader.pad_token_id)  # (B, L)
        layers = reader(ids, mask)
        for row, text in enumerate(chunk):
            spans = word_spans(text, word)
            if not spans:
                raise ValueError(f"{word!r} is not a word of {text!r}")
            begin, end = spans[0]
            pieces = [
                index
                for index, (first, last) in enumerate(encoding["offset_mapping"][row])
                if last > first and first < end and last > begin
            ]
            rows.append([layer[row, pieces].float().mean(dim=0).numpy() for layer in layers])
    return [np.stack([row[layer] for row in rows]) for layer in range(len(rows[0]))]


def _cosines(vectors: np.ndarray) -> np.ndarray:
    """(N, H) -> (N, N) cosine of every pair (a zero vector: cosine 0 with everything)."""
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    unit = vectors / np.where(norms > 0, norms, 1.0)
    return unit @ unit.T


def within_minus_across(cosines: np.ndarray, senses: np.ndarray, rows: np.ndarray) -> float:
    """The mean cosine of same-sense pairs minus that of different-sense pairs, over the
    sentences `rows` (indices, repeats allowed): every pair of positions once, a sentence
    paired with its own copy left out."""
    picked = cosines[np.ix_(rows, rows)]  # (n, n)
    labels = senses[rows]
    same = labels[:, None] == labels[None, :]
    distinct = rows[:, None] != rows[None, :]
    upper = np.triu(np.ones_like(same), k=1)
    within = picked[same & distinct & upper]
    across = picked[~same & upper]
    return float(within.mean() - across.mean())


def nearest_neighbour_accuracy(cosines: np.ndarray, senses: np.ndarray) -> float:
    """Leave-one-out: the share of sentences whose nearest other sentence has their sense (a
    tie counts as the share of the tied that has it)."""
    scores = cosines.copy()
    np.fill_diagonal(scores, -np.inf)
    correct = []
    for index in range(len(scores)):
        nearest = scores[index] >= scores[index].max() - TIE_TOLERANCE
        correct.append(float(np.mean(senses[nearest] == senses[index])))
    return float(np.mean(correct))


def chance_accuracy(senses: np.ndarray) -> float:
    """The nearest-neighbour accuracy of a neighbour drawn at random among the others."""
    total = len(senses)
    counts = np.unique(senses, return_counts=True)[1]
    return float((counts * (counts - 1)).sum() / (total * (total - 1)))


def separation(vectors: np.ndarray, senses: np.ndarray) -> dict[str, float]:
    """One layer's figures: within minus across with its bootstrap interval, and the
    nearest-neighbour accuracy."""
    cosines = _cosines(vectors.astype(np.float64))
    everyone = np.arange(len(senses))
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    groups = [np.flatnonzero(senses == sense) for sense in np.unique(senses)]
    resampled = [
        within_minus_across(
            cosines, senses, np.concatenate([rng.choice(group, len(group)) for group in groups])
        )
        for _ in range(BOOTSTRAP_SAMPLES)
    ]
    tail = (1 - INTERVAL) / 2
    low, high = np.quantile(resampled, [tail, 1 - tail])
    return {
        "within_minus_across": within_minus_across(cosines, senses, everyone),
        "low": float(low),
        "high": float(high),
        "nearest_neighbour_accuracy": nearest_neighbour_accuracy(cosines, senses),
    }


def probe_word(reader: LayerReader, tokenizer: Tokenizer, word: str) -> dict[str, Any]:
    """Every layer's `separation` of the word's senses, with the sentences' counts and the
    chance nearest-neighbour accuracy."""
    sentences = read_senses(word)
    senses = np.array([sentence.sense for sentence in sentences])
    layers = word_vectors(reader, tokenizer, [sentence.text for sentence in sentences], word)
    counts = dict(zip(*np.unique(senses, return_counts=True), strict=True))
    return {
        "sentences": len(sentences),
        "senses": {str(sense): int(count) for sense, count in counts.items()},
        "chance": chance_accuracy(senses),
        "layers": [separation(vectors, senses) for vectors in layers],
    }
