"""Nearest neighbours of a word: one static vector per word, or one vector per use.

- `embedding_neighbours`: the rows of a model's input embedding matrix nearest a word's row (a
  word of several pieces: the mean of their rows). Like word2vec's vectors
  (`training.word_vectors.nearest_words`) it is one vector per word, whatever the sentence.
- `contextual_neighbours`: a word's vector in a given sentence (the hidden state of a chosen
  layer, averaged over its pieces) against the same word's vectors in the sentences of a
  reference corpus. "bank" beside "river" and "bank" beside "loan" get different vectors, so
  their nearest uses differ: the polysemy one vector per word cannot express (ELMo, Peters et
  al. 2018 Sec. 5.3, Table 4; BERT's features, Sec. 5.3).
- `plot_polysemy` draws a word's uses in two dimensions (principal components), each reference
  use coloured by the given sentence it is nearest to.
"""

# Shapes: L sequence length, H hidden_size, V vocab, N occurrences.

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from bertlab.corpus.text_units import split_sentences
from bertlab.tokenizer.basic import is_cjk_ideograph
from bertlab.tokenizer.wordpiece import Tokenizer
from bertlab.use.features import check_layers, has_scalar_mix, hidden_state, pad_sequences
from bertlab.use.inspection import cjk_fonts, save_figure
from bertlab.use.neighbour_options import DEFAULT_LAYER, DEFAULT_TOP_K, MAX_OCCURRENCES

FIGURE_DPI = 120
MAX_LABEL_CHARACTERS = 48
UNUSED_PIECE = re.compile(r"^\[unused\d+\]$")  # Google's reserved, never-trained rows


@dataclass(frozen=True)
class Occurrence:
    """One use of a word: the sentence, where the word is in it, and its vector (H,)."""

    sentence: str
    start: int  # character span of the word in the sentence
    end: int
    vector: np.ndarray


@dataclass(frozen=True)
class ContextNeighbours:
    """A word's use in one sentence and the reference uses nearest it (cosine, highest first)."""

    query: Occurrence
    neighbours: list[tuple[float, Occurrence]]


def embedding_neighbours(
    model: nn.Module, tokenizer: Tokenizer, word: str, top_k: int = DEFAULT_TOP_K
) -> list[tuple[str, float]]:
    """The `top_k` pieces whose static input vectors are nearest `word`'s (cosine similarity):
    the rows of a BERT's input embedding matrix, NNLM's vectors C, AWD-LSTM's embedding, ELMo's
    token layer (`model.input_vectors()`, an encoder as `network.architectures` loads it).

    Special tokens, Google's `[unused]` rows and the word's own pieces are left out.

    Raises:
        ValueError: the word has no piece, or only [UNK]s.
    """
    ids = known_pieces(tokenizer, word)
    table = model.input_vectors().float()  # (V, H)
    query = table[ids].mean(dim=0)  # (H,)
    similarity = torch.nn.functional.cosine_similarity(table, query[None], dim=-1)  # (V,)
    pieces = tokenizer.convert_ids_to_tokens(list(range(table.shape[0])))
    excluded = set(ids) | tokenizer.special_token_ids
    excluded |= {index for index, piece in enumerate(pieces) if UNUSED_PIECE.match(piece)}
    similarity[list(excluded)] = -float("inf")
    top = similarity.topk(min(top_k, table.shape[0] - len(excluded)))
    return [(pieces[index], float(score)) for score, index in zip(*top, strict=True)]


def known_pieces(tokenizer: Tokenizer, word: str) -> list[int]:
    """The ids of `word`'s pieces, refusing a word whose pieces are all [UNK]: its vector would
    be the [UNK] row's (or the vector of whatever stands in a sentence where it is), the same
    for every such word.

    Raises:
        ValueError: the word has no piece, or only [UNK]s.
    """
    ids = tokenizer(word)["input_ids"][1:-1]
    if all(index == tokenizer.unk_token_id for index in ids):
        pieces = " ".join(tokenizer.convert_ids_to_tokens(ids)) or "none"
        raise ValueError(f"{word!r} is not in the vocabulary (its pieces: {pieces})")
    return ids


def word_spans(sentence: str, word: str) -> list[tuple[int, int]]:
    """Where `word` occurs in `sentence` as a word: anywhere for Chinese (no spaces between
    words), between word boundaries and ignoring case otherwise.

    Example: word_spans("The bank, the banks", "bank") -> [(4, 8)].
    """
    if any(is_cjk_ideograph(character) for character in word):
        pattern = re.escape(word)
    else:
        pattern = rf"(?<!\w){re.escape(word)}(?!\w)"
    return [match.span() for match in re.finditer(pattern, sentence, flags=re.IGNORECASE)]


@torch.inference_mode()
def word_vectors_in(
    model: nn.Module,
    tokenizer: Tokenizer,
    sentences: Sequence[str],
    word: str,
    layer: int | str = DEFAULT_LAYER,
    batch_size: int = 32,
) -> list[Occurrence]:
    """Every use of `word` in `sentences`, each with its contextual vector: the hidden state of
    `layer` (0 the embeddings, -1 the last, "mix" ELMo's scalar mix) averaged over the word's
    pieces.

    Args:
        model: an encoder, as `network.architectures` loads it (a BERT's, an LSTM-era model's).

    Raises:
        ValueError: a layer the model does not have, or a word whose pieces are all [UNK].
    """
    (layer,) = check_layers([layer], model.config.num_hidden_layers, has_scalar_mix(model))
    known_pieces(tokenizer, word)
    found = [(sentence, span) for sentence in sentences for span in word_spans(sentence, word)]
    occurrences = []
    limit = model.config.max_position_embeddings  # None: the tokenizer's longest input
    for start in range(0, len(found), batch_size):
        chunk = found[start : start + batch_size]
        encoding = tokenizer([s for s, _ in chunk], max_length=limit, return_offsets=True)
        ids, mask = pad_sequences(encoding["input_ids"], model.config.pad_token_id)  # (B, L)
        output = model(ids, mask, output_hidden_states=True)
        hidden = hidden_state(output, layer).float()  # (B, L, H)
        for row, (sentence, (begin, end)) in enumerate(chunk):
            offsets = encoding["offset_mapping"][row]
            pieces = [
                index
                for index, (first, last) in enumerate(offsets)
                if last > first and first < end and last > begin
            ]
            if pieces:  # not cut off by the model's maximum length
                vector = hidden[row, pieces].mean(dim=0).numpy()  # (H,)
                occurrences.append(Occurrence(sentence, begin, end, vector))
    return occurrences


def reference_sentences(
    lines: Iterable[str], word: str, lang: str, limit: int = MAX_OCCURRENCES
) -> list[str]:
    """Sentences of `lines` (paragraphs, split by `split_sentences`) that use `word`, at most
    `limit`, in order."""
    found = []
    for line in lines:
        if word.lower() not in line.lower():
            continue
        for sentence in split_sentences(line, lang):
            if word_spans(sentence, word):
                found.append(sentence)
                if len(found) >= limit:
                    return found
    return found


def contextual_neighbours(
    queries: Sequence[Occurrence], references: Sequence[Occurrence], top_k: int = DEFAULT_TOP_K
) -> list[ContextNeighbours]:
    """For each query use, the `top_k` reference uses of highest cosine similarity.

    A reference use in the very sentence of the query is left out.
    """
    if not references:
        return [ContextNeighbours(query, []) for query in queries]
    table = _unit_rows([occurrence.vector for occurrence in references])  # (N, H)
    results = []
    for query in queries:
        similarity = table @ _unit_rows([query.vector])[0]  # (N,)
        order = np.argsort(-similarity)
        kept = [
            (float(similarity[index]), references[index])
            for index in order
            if references[index].sentence != query.sentence
        ]
        results.append(ContextNeighbours(query, kept[:top_k]))
    return results


def _unit_rows(vectors: Sequence[np.ndarray]) -> np.ndarray:
    table = np.stack(vectors).astype(np.float64)  # (N, H)
    return table / np.maximum(np.linalg.norm(table, axis=1, keepdims=True), 1e-12)


def nearest_query(queries: Sequence[Occurrence], references: Sequence[Occurrence]) -> list[int]:
    """For each reference use, the index of the query use it is most similar to (its sense,
    as the given sentences tell the senses apart)."""
    if not references:
        return []
    similarity = (
        _unit_rows([r.vector for r in references]) @ _unit_rows([q.vector for q in queries]).T
    )  # (N, queries)
    return similarity.argmax(axis=1).tolist()


def plot_polysemy(
    word: str,
    queries: Sequence[Occurrence],
    references: Sequence[Occurrence],
    out_path: str | Path,
    layer: int,
) -> Path:
    """The uses of `word` in two dimensions (the first two principal components of all its
    vectors): each given sentence a star, each reference use a dot in the colour of the given
    sentence it is nearest to. Written atomically as a PNG.

    Raises:
        ValueError: fewer than two uses in all.
    """
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    vectors = np.stack([o.vector for o in [*queries, *references]]).astype(np.float64)
    if len(vectors) < 2:
        raise ValueError("a projection needs at least two uses of the word")
    centred = vectors - vectors.mean(axis=0)
    _, _, components = np.linalg.svd(centred, full_matrices=False)
    points = centred @ components[:2].T  # (N, 2)
    senses = nearest_query(queries, references)
    labels = [_shown(query) for query in queries]
    families, note = cjk_fonts([word, *labels])
    figure, axis = plt.subplots(figsize=(7.5, 6.0))
    colours = plt.get_cmap("tab10")
    reference_points = points[len(queries) :]
    for index, label in enumerate(labels):
        mine = [row for row, sense in enumerate(senses) if sense == index]
        if mine:
            axis.scatter(*reference_points[mine].T, s=12, alpha=0.5, color=colours(index))
        axis.scatter(*points[index], s=220, marker="*", color=colours(index), edgecolor="black")
        axis.annotate(label, points[index], fontsize=8, xytext=(6, 6), textcoords="offset points")
    axis.set_xlabel("first principal component")
    axis.set_ylabel("second principal component")
    title = (
        f"{word!r}: its vector in each sentence (stars) and in {len(references)} reference "
        f"sentences (dots, coloured by the nearest star), layer {layer}"
    )
    axis.set_title(title + (f"\n{note}" if note else ""), fontsize=9)
    axis.grid(alpha=0.3)
    return save_figure(figure, families, out_path, FIGURE_DPI)


def _shown(occurrence: Occurrence) -> str:
    """The sentence around the word, cut to MAX_LABEL_CHARACTERS."""
    text = occurrence.sentence
    if len(text) <= MAX_LABEL_CHARACTERS:
        return text
    half = MAX_LABEL_CHARACTERS // 2
    start = max(0, occurrence.start - half)
    return "…" + text[start : start + MAX_LABEL_CHARACTERS] + "…"
