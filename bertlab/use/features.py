"""Feature extraction: run a frozen encoder over many sequences, fast.

The fast inference path groups sequences of similar length into a batch (so a batch is padded
only to its own longest sequence, and little compute goes to padding), runs under
`torch.inference_mode`, optionally in bf16 autocast, and returns results in the input order.

`extract_features` is `bertlab embed` (the counterpart of Google's `extract_features.py`), and
what `PretrainedBert.embed` and the server's embed call: the hidden states of chosen layers for
texts or text pairs, per piece, per word (its first piece or the mean of its pieces) or pooled
per text ([CLS], the mean, a left-to-right model's last token, or the pooler's output), as one
float32 array with an index of what each row is. POOLINGS (`feature_options`, torch-free) is the
one vocabulary of the three.
`save_features` writes them as `features.npy` or `features.safetensors` plus `index.jsonl` and
`features.json`; `load_features` reads them back.
"""

# Shapes: B batch, L sequence length, H hidden_size, N attention heads, D = H // N head size,
#         I intermediate_size, V vocab, C labels, K choices, P masked positions per sequence.

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.numpy import load_file, save_file
from torch import nn

from bertlab.core.atomic import atomic_file, write_json, write_text
from bertlab.core.runtime import model_device
from bertlab.data.collate import pad_rows, sorted_length_batches
from bertlab.network.bert import BertModel
from bertlab.network.feature_head_config import SCALAR_MIX_LAYER
from bertlab.network.feature_heads import last_real_positions
from bertlab.tokenizer.wordpiece import Tokenizer, longest_first_lengths
from bertlab.use.feature_options import (
    CAUSAL_REFUSED_POOLINGS,
    FORMATS,
    PER_TEXT,
    POOLINGS,
)

logger = logging.getLogger(__name__)


def pad_sequences(
    sequences: Sequence[Sequence[int]], pad_value: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Pad to the longest sequence: -> values (B, L) int64 and attention_mask (B, L) int64."""
    longest = max(len(sequence) for sequence in sequences)
    values = pad_rows(sequences, longest, pad_value)  # (B, L)
    attention_mask = pad_rows([[1] * len(sequence) for sequence in sequences], longest, 0)
    return values, attention_mask


def iterate_encoded(
    model: BertModel,
    input_ids: Sequence[Sequence[int]],
    token_type_ids: Sequence[Sequence[int]] | None = None,
    batch_size: int = 32,
    use_bf16: bool = False,
) -> Iterator[tuple[list[int], torch.Tensor, torch.Tensor, torch.Tensor]]:
    """Encode sequences in length-grouped batches.

    Args:
        model: a `BertModel` (put it in eval mode first).
        input_ids: token ids per sequence, of different lengths.
        token_type_ids: segment ids per sequence, or None for all 0.
        batch_size: sequences per batch.
        use_bf16: run under bf16 autocast (faster on CPUs and GPUs with bf16 units).

    Yields:
        (indices into `input_ids`, last_hidden_state (B, L, H) float32,
        pooler_output (B, H) float32 or empty, attention_mask (B, L)).
    """
    if not input_ids:
        return
    if any(len(sequence) == 0 for sequence in input_ids):
        raise ValueError("every sequence needs at least one token")
    device = model_device(model)
    pad_id = model.config.pad_token_id
    lengths = [len(sequence) for sequence in input_ids]
    for indices in sorted_length_batches(lengths, batch_size):
        ids, mask = pad_sequences([input_ids[i] for i in indices], pad_id)
        types = None
        if token_type_ids is not None:
            types, _ = pad_sequences([token_type_ids[i] for i in indices], 0)
            types = types.to(device)
        with (
            torch.inference_mode(),
            torch.autocast(device.type, dtype=torch.bfloat16, enabled=use_bf16),
        ):
            output = model(ids.to(device), mask.to(device), types)
        pooled = output.pooler_output
        pooled = pooled.float() if pooled is not None else torch.empty(0)
        yield indices, output.last_hidden_state.float(), pooled, mask


def pooled_features(
    model: BertModel,
    input_ids: Sequence[Sequence[int]],
    token_type_ids: Sequence[Sequence[int]] | None = None,
    batch_size: int = 32,
    use_bf16: bool = False,
) -> torch.Tensor:
    """The pooled `[CLS]` vector of each sequence, in input order: (number of sequences, H)."""
    if model.pooler is None:
        raise ValueError("this model has no pooler; use iterate_encoded for token features")
    features = torch.empty(len(input_ids), model.config.hidden_size)
    for indices, _, pooled, _ in iterate_encoded(
        model, input_ids, token_type_ids, batch_size, use_bf16
    ):
        features[indices] = pooled.cpu()
    return features


# --- `bertlab embed`: the hidden states of chosen layers ------------------------------------------

FEATURES_NAME = "features"  # features.npy / features.safetensors, and the tensor's name
NO_LENGTH_LIMIT = 1_000_000  # pieces: a model without a position table reads texts whole
INDEX_FILE = "index.jsonl"  # one line per input text: what its rows are
META_FILE = "features.json"  # the model, layers, pooling and shape


@dataclass
class Features:
    """Hidden states of chosen layers, as `extract_features` returns and `load_features` reads.

    Attributes:
        vectors: (rows, J, H) float32: J layers in the order asked for; the rows of text i are
            `records[i]["start"]` to `records[i]["end"]`.
        layers: the layers asked for (0 the embeddings, k layer k, -1 the last, "mix" ELMo's
            scalar mix).
        pooling: one of POOLINGS.
        records: per text: `text` (and `text_b`), `units` (the piece or word of each row, or
            the pooling's name), `segments` (0 for A, 1 for B, per row), `start`, `end`.
    """

    vectors: np.ndarray
    layers: tuple[int | str, ...]
    pooling: str
    records: list[dict[str, Any]]

    def rows(self, index: int) -> np.ndarray:
        """Text `index`'s rows: (units, J, H)."""
        record = self.records[index]
        return self.vectors[record["start"] : record["end"]]


@dataclass(frozen=True)
class _Encoded:
    """One text (or pair) as model input, with the words of its pieces."""

    input_ids: list[int]
    token_type_ids: list[int]
    pieces: list[str]
    word_of_piece: list[int | None]  # a word index per piece; None for [CLS] and [SEP]
    words: list[str]
    word_segments: list[int]
    is_cut: bool = False  # longer than max_length: only its first pieces are kept


def encode_for_features(
    tokenizer: Tokenizer, text: str, text_b: str | None, max_length: int
) -> _Encoded:
    """`[CLS] A [SEP] (B [SEP])` cut to `max_length` (longest side first, as the tokenizer
    cuts), with each piece's word: the words are the basic tokenizer's (whitespace, punctuation
    and each CJK character apart), their text taken from the input."""
    sides = [text] if text_b is None else [text, text_b]
    encodings = [tokenizer.backend.encode(side, add_special_tokens=False) for side in sides]
    budget = max_length - (len(sides) + 1)
    if budget < 1:
        raise ValueError(f"max_length {max_length} leaves no room for a piece")
    if text_b is None:
        lengths = [min(len(encodings[0].ids), budget)]
    else:
        lengths = list(longest_first_lengths(len(encodings[0].ids), len(encodings[1].ids), budget))
    input_ids, types, word_of_piece = [tokenizer.cls_token_id], [0], [None]
    words: list[str] = []
    segments: list[int] = []
    for segment, (side, encoding, length) in enumerate(zip(sides, encodings, lengths, strict=True)):
        spans: dict[int, list[int]] = {}  # the basic tokenizer's word -> its characters
        number: dict[int, int] = {}  # that word -> its index among the text's words
        word_ids, offsets = encoding.word_ids[:length], encoding.offsets[:length]
        for word, (start, end) in zip(word_ids, offsets, strict=True):
            spans.setdefault(word, [start, end])[1] = end
            word_of_piece.append(number.setdefault(word, len(words) + len(number)))
        words += [side[start:end] for start, end in spans.values()]
        segments += [segment] * len(spans)
        input_ids += [*encoding.ids[:length], tokenizer.sep_token_id]
        types += [segment] * (length + 1)
        word_of_piece.append(None)
    pieces = tokenizer.convert_ids_to_tokens(input_ids)
    is_cut = sum(lengths) < sum(len(encoding.ids) for encoding in encodings)
    return _Encoded(input_ids, types, pieces, word_of_piece, words, segments, is_cut)


def check_pooling(pooling: str | None, is_causal: bool) -> str:
    """The pooling as named in POOLINGS, checked for the model: what every embedder calls.

    Args:
        pooling: a name of POOLINGS; None: one vector per text, "cls", or "last" for a
            left-to-right model.
        is_causal: the model is left-to-right (`BertConfig.is_causal`).

    Raises:
        ValueError: an unknown pooling; "cls" or "pooler" for a left-to-right model.
    """
    if pooling is None:
        return "last" if is_causal else "cls"
    if pooling not in POOLINGS:
        raise ValueError(f"unknown pooling {pooling!r}; choose one of {', '.join(POOLINGS)}")
    if is_causal and pooling in CAUSAL_REFUSED_POOLINGS:
        raise ValueError(
            f"pooling={pooling!r} gives a left-to-right model the same vector for every "
            "text (its first token sees only itself); use pooling='last' or 'mean'"
        )
    return pooling


def check_layers(
    layers: Sequence[int | str], num_layers: int, has_scalar_mix: bool = False
) -> tuple[int | str, ...]:
    """The layers as asked, checked: 0 the embeddings, 1..N the layers, -1..-(N+1) from the top,
    and `SCALAR_MIX_LAYER` ("mix") for a model with ELMo's scalar mix.

    Raises:
        ValueError: no layer, or one the model does not have.
    """
    if not layers:
        raise ValueError("choose at least one layer")
    for layer in layers:
        if layer == SCALAR_MIX_LAYER and has_scalar_mix:
            continue
        if isinstance(layer, str) or not -num_layers - 1 <= layer <= num_layers:
            mix = f" or {SCALAR_MIX_LAYER!r} (the scalar mix)" if has_scalar_mix else ""
            raise ValueError(f"the model has hidden states 0..{num_layers}{mix}, not {layer!r}")
    return tuple(layers)


def has_scalar_mix(model: nn.Module) -> bool:
    """The model offers ELMo's scalar mix of its hidden states (`lm_views.LanguageModelEncoder`
    of ELMo's biLM); BERT's encoder has none."""
    return getattr(model, "scalar_mix", None) is not None


def hidden_state(output: Any, layer: int | str) -> torch.Tensor:
    """Hidden state `layer` of an encoder's output (with `output_hidden_states`): (B, L, H_l)."""
    if layer == SCALAR_MIX_LAYER:
        return output.scalar_mix
    return output.hidden_states[layer]


def chosen_states(output: Any, layers: Sequence[int | str]) -> torch.Tensor:
    """The hidden states of `layers`, stacked: (B, L, J, H).

    Raises:
        ValueError: the layers differ in width (AWD-LSTM's embedding and its LSTMs, NNLM's
            vectors and its tanh layer): they cannot share one array.
    """
    states = [hidden_state(output, layer) for layer in layers]
    widths = {state.shape[-1] for state in states}
    if len(widths) > 1:
        shown = ", ".join(
            f"{layer}: {state.shape[-1]}" for layer, state in zip(layers, states, strict=True)
        )
        raise ValueError(
            f"the layers asked for differ in width ({shown}): embed layers of different widths "
            "one call each"
        )
    return torch.stack(states, dim=2)


@torch.inference_mode()
def extract_features(
    model: nn.Module,
    tokenizer: Tokenizer,
    texts: Sequence[str | tuple[str, str]],
    layers: Sequence[int] = (-1,),
    pooling: str | None = "pieces",
    batch_size: int = 32,
    max_length: int | None = None,
) -> Features:
    """The hidden states of `layers` for each text or (text, pair), one row per `pooling` unit.

    The one embedder: `bertlab embed`, `PretrainedBert.embed` and the server's embed call it.
    Equal to `transformers.BertModel(output_hidden_states=True)`'s `hidden_states[layer]` at the
    same pieces (tests/golden/test_features_parity.py): batches group texts of similar length,
    and padding does not change a real piece's vector.

    Args:
        model: an encoder in eval mode: `BertModel`, or an LSTM-era model's
            (`network.lm_views.LanguageModelEncoder`, `network.architectures`' `load_encoder`).
        tokenizer: its tokenizer.
        texts: strings, or (A, B) pairs.
        layers: hidden states to keep: 0 the embeddings, k layer k, negative from the top;
            "mix": ELMo's scalar mix (a model that has one). Layers of one call share a width.
        pooling: one of POOLINGS; None: one vector per text, "cls", or "last" for a
            left-to-right model (`check_pooling`). "pooler" reads the
            last layer only.
        batch_size: texts per forward pass.
        max_length: pieces per input at most, [CLS] and [SEP] included; None: the model's
            max_position_embeddings (an LSTM-era model: no limit). Longer inputs are cut (the
            longer side of a pair first), and a warning says how many.

    Returns:
        `Features` with vectors (rows, len(layers), H) and the pooling's name in POOLINGS.

    Raises:
        ValueError: an unknown pooling, "cls" or "pooler" for a left-to-right model, "pooler"
            for a model without one or for a layer below the last, a layer the model lacks,
            an empty text.
    """
    pooling = check_pooling(pooling, model.config.is_causal)
    layers = check_layers(layers, model.config.num_hidden_layers, has_scalar_mix(model))
    if pooling == "pooler":
        _check_pooler(model, layers)
    limit = max_length or model.config.max_position_embeddings or NO_LENGTH_LIMIT
    encoded = []
    for item in texts:
        text, text_b = (item, None) if isinstance(item, str) else item
        encoded.append(encode_for_features(tokenizer, text, text_b, limit))
        if not encoded[-1].words:
            raise ValueError(f"nothing to embed in {item!r}")
    num_cut = sum(item.is_cut for item in encoded)
    if num_cut:  # as fine-tuning's encoding says it (data/tasks/encoding.py)
        logger.warning(
            "%d of %d texts were longer than %d pieces ([CLS] and [SEP] included) and were cut",
            num_cut,
            len(encoded),
            limit,
        )
    per_text: list[np.ndarray | None] = [None] * len(encoded)
    device = model_device(model)
    lengths = [len(item.input_ids) for item in encoded]
    for indices in sorted_length_batches(lengths, batch_size):
        ids, mask = pad_sequences(
            [encoded[i].input_ids for i in indices], model.config.pad_token_id
        )
        types, _ = pad_sequences([encoded[i].token_type_ids for i in indices], 0)
        output = model(ids.to(device), mask.to(device), types.to(device), output_hidden_states=True)
        chosen = chosen_states(output, layers).float().cpu()  # (B, L, J, H)
        if pooling == "pooler":  # its output, once for each (last) layer asked for
            pooled = output.pooler_output.float().cpu()  # (B, H)
            chosen = pooled[:, None, None].repeat(1, 1, len(layers), 1)  # (B, 1, J, H)
        for row, index in enumerate(indices):
            per_text[index] = _pool(chosen[row], mask[row], encoded[index], pooling)
    records, start = [], 0
    for item, rows, encoding in zip(texts, per_text, encoded, strict=True):
        record = _record(item, encoding, pooling, start, start + len(rows))
        records.append(record)
        start += len(rows)
    hidden = model.config.hidden_size
    vectors = np.concatenate(per_text) if per_text else np.zeros((0, len(layers), hidden))
    return Features(vectors.astype(np.float32), layers, pooling, records)


def _check_pooler(model: nn.Module, layers: tuple[int | str, ...]) -> None:
    """The pooling "pooler" needs a pooler, and reads the last layer's [CLS] only."""
    if model.pooler is None:
        raise ValueError("this model has no pooler; use pooling='cls' or 'mean'")
    num_layers = model.config.num_hidden_layers
    for layer in layers:
        if layer not in (-1, num_layers):
            raise ValueError(f"pooling 'pooler' reads the last layer only, not layer {layer}")


def _pool(hidden: torch.Tensor, mask: torch.Tensor, encoded: _Encoded, pooling: str) -> np.ndarray:
    """One text's rows: hidden (L, J, H) with its padding, mask (L,) -> (units, J, H). For
    "pooler", hidden is the pooler's output (1, J, H)."""
    real = hidden[: len(encoded.input_ids)]  # (l, J, H)
    if pooling == "pieces":
        return real.numpy()
    if pooling in PER_TEXT:
        if pooling in ("cls", "pooler"):
            return real[:1].numpy()  # (1, J, H)
        if pooling == "last":
            return real[int(last_real_positions(mask[None])[0])][None].numpy()
        return real.mean(dim=0, keepdim=True).numpy()
    words = torch.tensor([-1 if w is None else w for w in encoded.word_of_piece])  # (l,)
    rows = []
    for word in range(len(encoded.words)):
        pieces = (words == word).nonzero().flatten()
        chosen = real[pieces[:1]] if pooling == "first" else real[pieces]  # (k, J, H)
        rows.append(chosen.mean(dim=0))
    return torch.stack(rows).numpy() if rows else np.zeros((0, *real.shape[1:]), np.float32)


def _record(
    item: str | tuple[str, str], encoded: _Encoded, pooling: str, start: int, end: int
) -> dict[str, Any]:
    text, text_b = (item, None) if isinstance(item, str) else item
    record: dict[str, Any] = {"text": text}
    if text_b is not None:
        record["text_b"] = text_b
    if pooling == "pieces":
        record["units"] = encoded.pieces
        record["segments"] = encoded.token_type_ids
    elif pooling in PER_TEXT:
        record["units"] = [pooling]
        record["segments"] = [0]
    else:
        record["units"] = encoded.words
        record["segments"] = encoded.word_segments
    return record | {"start": start, "end": end}


def save_features(
    features: Features,
    directory: str | os.PathLike,
    file_format: str = "npy",
    metadata: dict[str, Any] | None = None,
) -> Path:
    """Write DIRECTORY/features.npy (or .safetensors, tensor `features`), index.jsonl (one
    record per text, in order) and features.json (layers, pooling, shape and `metadata`).

    Raises:
        ValueError: an unknown format.
    """
    if file_format not in FORMATS:
        raise ValueError(f"unknown format {file_format!r}; choose one of {', '.join(FORMATS)}")
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{FEATURES_NAME}.{file_format}"
    with atomic_file(path) as temporary:
        if file_format == "npy":
            with open(temporary, "wb") as file:
                np.save(file, features.vectors)
        else:
            save_file({FEATURES_NAME: np.ascontiguousarray(features.vectors)}, str(temporary))
    lines = [json.dumps(record, ensure_ascii=False) for record in features.records]
    write_text(directory / INDEX_FILE, "".join(line + "\n" for line in lines))
    meta = {
        "file": path.name,
        "shape": list(features.vectors.shape),
        "dtype": "float32",
        "axes": ["row", "layer", "hidden"],
        "layers": list(features.layers),
        "pooling": features.pooling,
    }
    write_json(directory / META_FILE, meta | (metadata or {}))
    return path


def load_features(directory: str | os.PathLike) -> Features:
    """Features written by `save_features` (or `bertlab embed --out DIRECTORY`).

    Raises:
        FileNotFoundError: a file of the layout is missing.
    """
    directory = Path(directory)
    meta = json.loads((directory / META_FILE).read_text(encoding="utf-8"))
    path = directory / meta["file"]
    if path.suffix == ".npy":
        vectors = np.load(path)
    else:
        vectors = load_file(str(path))[FEATURES_NAME]
    lines = (directory / INDEX_FILE).read_text(encoding="utf-8").splitlines()
    records = [json.loads(line) for line in lines if line.strip()]
    return Features(vectors, tuple(meta["layers"]), meta["pooling"], records)
