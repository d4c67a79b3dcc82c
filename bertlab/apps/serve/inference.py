"""What the server computes: each task on a batch of raw inputs, as JSON-ready records.

Every function takes a `ServedModel` and a list of inputs (the texts of one request, or of
several requests batched together) and returns one record per input, in order. Each is a
composition of library calls, the same ones `bertlab predict`, `fill-mask` and `attention` make,
so the server's answers equal the Python API's (tests/unit/test_serve_api.py checks it).
Inputs are assumed checked (non-empty, within the limits); a text the model cannot take raises
ValueError with the reason.
"""

# Shapes: B batch, L sequence length, H hidden_size, N attention heads, C labels.

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bertlab.apps.serve.models import ServedModel
from bertlab.core.metrics import OUTSIDE_TAG
from bertlab.data.tasks.classification import Example
from bertlab.data.tasks.encoding import split_words
from bertlab.data.tasks.ner import TaggedSentence, entity_spans
from bertlab.data.tasks.squad import SquadExample
from bertlab.data.tasks.squad_encoding import best_spans
from bertlab.task_families import predict_rows
from bertlab.use.features import PER_TEXT, check_pooling, extract_features
from bertlab.use.inspection import all_attention_maps, fill_masks

BATCH_SIZE = 32  # sequences per forward pass; a batch of requests is cut into such passes

Record = dict[str, Any]


def fill_mask(model: ServedModel, texts: Sequence[str], top_k: int) -> list[Record]:
    """The top-k pieces at every [MASK] of each text (`inspection.fill_masks`).

    Returns:
        Per text: `{"masks": [{"position", "tokens", "probabilities"}, ...]}`.
    """
    predictions = fill_masks(model.mlm, model.tokenizer, texts, top_k)
    return [
        {
            "masks": [
                {
                    "position": mask.position,
                    "tokens": mask.tokens,
                    "probabilities": mask.probabilities,
                }
                for mask in masks
            ]
        }
        for masks in predictions
    ]


def classify(model: ServedModel, inputs: Sequence[tuple[str, str | None]]) -> list[Record]:
    """Each text (or pair): its label and every label's probability, or a regression score.

    Probabilities are the softmax of the head's logits; the label is their argmax, as
    `bertlab predict` gives it.

    Args:
        model: a model with a sequence classification head.
        inputs: (text, second text or None) per input.

    Returns:
        Per input: `{"label", "name", "score", "probabilities": [{"label", "name",
        "probability"}, ...]}`, most probable first; `name` is the label's name where the task
        names its labels (SST-2: "1" is "positive"), else None; for regression the label is
        None and the score is the model's output.
    """
    examples = [Example(text, pair) for text, pair in inputs]
    task = model.task
    features = task.encode(examples, model.tokenizer, None, with_labels=False)
    # (C,) each
    rows = predict_rows(model.head, features, BATCH_SIZE, model.precision, task.reduce)
    if model.is_regression:
        return [
            {"label": None, "name": None, "score": float(row[0]), "probabilities": []}
            for row in rows
        ]
    records = []
    for probabilities in task.probabilities(rows, model.head.id2label):
        ranked = sorted(probabilities.items(), key=lambda item: -item[1])
        shown = [
            {"label": label, "name": task.label_name(label), "probability": probability}
            for label, probability in ranked
        ]
        top = shown[0]
        records.append(
            {"label": top["label"], "name": top["name"], "score": top["probability"]}
            | {"probabilities": shown}
        )
    return records


def tag(model: ServedModel, texts: Sequence[str]) -> list[Record]:
    """Each text's words (as BERT splits them) with their tags, and its entities as spans.

    A word takes its first piece's tag (BERT Sec. 4.3); entities are read from the tags as
    conlleval reads them (`ner.entity_spans`); offsets are characters of the input text.

    Returns:
        Per text: `{"words": [{"text", "start", "end", "tag"}], "entities": [{"type", "text",
        "start", "end"}]}`.
    """
    task = model.task
    word_spans = [split_words(text, model.tokenizer) for text in texts]
    sentences = [
        TaggedSentence(tuple(text[s:e] for s, e in spans), (OUTSIDE_TAG,) * len(spans))
        for text, spans in zip(texts, word_spans, strict=True)
    ]
    features = task.encode(sentences, model.tokenizer, None, with_labels=False)
    rows = predict_rows(model.head, features, BATCH_SIZE, model.precision, task.reduce)
    tags = task.decode(features, rows, sentences, model.head.id2label)
    records = []
    for text, spans, sentence_tags in zip(texts, word_spans, tags, strict=True):
        words = [
            {"text": text[start:end], "start": start, "end": end, "tag": word_tag}
            for (start, end), word_tag in zip(spans, sentence_tags, strict=True)
        ]
        entities = []
        for entity_type, first, last in entity_spans(sentence_tags):
            start, end = spans[first][0], spans[last - 1][1]
            entities.append(
                {"type": entity_type, "text": text[start:end], "start": start, "end": end}
            )
        records.append({"words": words, "entities": entities})
    return records


def answer(model: ServedModel, inputs: Sequence[tuple[str, str]]) -> list[Record]:
    """Each (question, context): the best answer span of the context, as `bertlab predict`
    chooses it over the context's windows, with its character offsets and its score (the start
    plus the end logit, BERT Sec. 4.2); an empty answer when no window has a valid span.

    Args:
        model: a model with a question answering head.
        inputs: (question, context) per input.

    Returns:
        Per input: `{"answer", "start", "end", "score"}` (offsets and score None without a span).
    """
    task = model.task
    examples = [
        SquadExample(str(index), question, context, ())
        for index, (question, context) in enumerate(inputs)
    ]
    features = task.encode(examples, model.tokenizer, None, with_labels=False)
    # (L, 2) each
    rows = predict_rows(model.head, features, BATCH_SIZE, model.precision, task.reduce)
    data = task.data
    found = best_spans(
        features,
        [row[:, 0] for row in rows],
        [row[:, 1] for row in rows],
        len(examples),
        data.n_best_size,
        data.max_answer_length,
    )
    records = []
    for example, best in zip(examples, found, strict=True):
        if best is None:
            records.append({"answer": "", "start": None, "end": None, "score": None})
            continue
        score, (start, end) = best
        records.append(
            {"answer": example.context[start:end], "start": start, "end": end, "score": score}
        )
    return records


def attention(
    model: ServedModel, text: str, layer: int | None, max_pieces: int, pair: str | None = None
) -> Record:
    """The pieces of `[CLS] text [SEP]`, or of `[CLS] text [SEP] pair [SEP]`, each piece's
    segment, and the attention of one layer (1-based, negative from the last) or of every
    layer (`layer` None), as nested lists (layers, N, L, L), from `all_attention_maps`.

    Raises:
        ValueError: a layer the model does not have, an empty text or sentence B, a pair
            longer than the model reads, or more than `max_pieces` pieces.
    """
    num_layers = model.encoder.config.num_hidden_layers
    if layer is not None and not (1 <= layer <= num_layers or -num_layers <= layer <= -1):
        raise ValueError(f"the model has layers 1..{num_layers}, not {layer}")
    num_pieces = len(model.tokenizer.tokenize(text)) + 2  # with [CLS] and [SEP]
    if pair is not None:
        num_pieces += len(model.tokenizer.tokenize(pair)) + 1  # and B's [SEP]
    if num_pieces > max_pieces:
        what = "the text has" if pair is None else "the pair has"
        raise ValueError(
            f"{what} {num_pieces} pieces with [CLS] and [SEP]; attention is shown for at "
            f"most {max_pieces}"
        )
    # (layers, N, L, L)
    pieces, maps = all_attention_maps(model.encoder, model.tokenizer, text, pair)
    limit = model.encoder.config.max_position_embeddings
    segments = model.tokenizer(text, pair, max_length=limit)["token_type_ids"]  # as it encodes
    layers = list(range(1, num_layers + 1))
    if layer is not None:
        index = layer - 1 if layer > 0 else num_layers + layer
        layers, maps = [index + 1], maps[index : index + 1]
    return {
        "tokens": pieces,
        "segments": list(segments),
        "layers": layers,
        "attentions": maps.tolist(),
    }


def embed(model: ServedModel, texts: Sequence[str], pooling: str | None) -> list[Record]:
    """Each text's pieces and its vectors at the last layer, as `bertlab embed` and
    `PretrainedBert.embed` compute them (`features.extract_features`; the names are
    `feature_options.POOLINGS`, and `tokens`, the old name of `pieces`): one `vector` per text
    (`cls`, `mean`, `last`, `pooler`: the pooled [CLS] vector, what a classification head reads), or
    `vectors`, one per piece (`pieces`) or per word (`first`, `mean-pieces`). None: the model's
    architecture's (NNLM and ELMo: `mean`), else `cls`, or `last` for a left-to-right model.

    Raises:
        ValueError: an unknown pooling; `cls` or `pooler` for a left-to-right model; `pooler`
            for a model without trained pooler weights.
    """
    name = check_pooling(pooling or model.embed_pooling, model.encoder.config.is_causal)
    if name == "pooler" and not model.has_pooler:
        raise ValueError(
            f"model {model.name!r} has no trained pooler (a {model.architecture}); "
            "ask for pooling 'mean' or 'pieces'"
        )
    max_length = model.encoder.config.max_position_embeddings
    features = extract_features(
        model.encoder, model.tokenizer, list(texts), (-1,), name, BATCH_SIZE, max_length
    )
    input_ids = model.tokenizer(list(texts), max_length=max_length)["input_ids"]
    records = []
    for ids, record in zip(input_ids, features.records, strict=True):
        vectors = features.vectors[record["start"] : record["end"], 0]  # (units, H)
        per_text = name in PER_TEXT
        records.append(
            {
                "tokens": model.tokenizer.convert_ids_to_tokens(ids),
                "vector": vectors[0].tolist() if per_text else None,
                "vectors": None if per_text else vectors.tolist(),
            }
        )
    return records
