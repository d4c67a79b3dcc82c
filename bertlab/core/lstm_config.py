"""The architectures of the lectures' LSTM era, torch-free: Bengio's neural language model
(`NnlmConfig`), ELMo's bidirectional LSTM language model (`ElmoConfig`) and the AWD-LSTM that
ULMFiT fine-tunes (`AwdLstmConfig`).

Each config round-trips its `config.json` through `to_dict`/`from_dict`, with an `architecture`
key naming it (`LM_ARCHITECTURE_NAMES`); `lstm_config_from_dict` reads any of them. Presets are
class methods named after the papers' sizes, plus `cpu()` (a size that trains on a laptop CPU;
`benchmarks/bench_lstm_era.py` measures it) and `tiny()` for tests. The vocabulary is the shared
WordPiece vocabulary's: `vocab_size` defaults to BERT's uncased WordPiece vocabulary (as
`BertConfig`), and a run sets it to its own tokenizer's size. `bertlab.network.lm_architectures`
maps each name to its model class.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from bertlab.core.atomic import write_json
from bertlab.core.config import read_json_object

logger = logging.getLogger(__name__)

NNLM, ELMO, AWD_LSTM = "nnlm", "elmo", "awd-lstm"
# BERT's name among them: `--architecture`'s default, and the architecture of a model folder whose
# config.json names none (Hugging Face's BERT layout has no `architecture` key).
BERT = "bert"
LM_ARCHITECTURE_NAMES = (NNLM, ELMO, AWD_LSTM)  # what `--architecture` may name besides "bert"

BERT_VOCAB_SIZE = 30522  # BERT's uncased WordPiece vocabulary (HF config.json's default)
PAD_TOKEN_ID = 0  # [PAD], the first piece of every bertlab WordPiece vocabulary

# The markers a piece's character sequence is written with (ELMo's char CNN, Peters et al. 2018
# Sec. 3.1; bilm-tf writes a word as <bow> chars <eow>, padded). They are character ids 0-3; the
# characters of the WordPiece vocabulary follow. No byte ids: a Chinese character is one character.
CHARACTER_PADDING = 0  # after the end of the piece
BEGIN_OF_WORD = 1  # a piece that begins a word ("un" of "un ##aff ##able")
BEGIN_OF_CONTINUATION = 2  # a piece inside a word ("##aff"): its "##" is this marker, not '#', '#'
END_OF_PIECE = 3
NUM_CHARACTER_MARKERS = 4
CONTINUATION_PREFIX = "##"  # WordPiece's prefix of a piece inside a word


def _check_positive_ints(config: object, names: Sequence[str]) -> None:
    for name in names:
        value = getattr(config, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(
                f"{type(config).__name__}.{name} must be a positive integer, got {value!r}"
            )


def _check_probabilities(config: object, names: Sequence[str]) -> None:
    for name in names:
        value = getattr(config, name)
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < 1:
            raise ValueError(f"{type(config).__name__}.{name} must be in [0, 1), got {value!r}")


def _check_pad(config: Any) -> None:
    if isinstance(config.pad_token_id, bool) or not 0 <= config.pad_token_id < config.vocab_size:
        raise ValueError(
            f"pad_token_id {config.pad_token_id!r} outside the vocabulary "
            f"(size {config.vocab_size})"
        )


class _LanguageModelConfig:
    """`config.json` round trips shared by the three configs (each a frozen dataclass whose last
    field is `extra`, the unknown keys kept so that a round trip loses nothing)."""

    architecture: ClassVar[str]

    def replace(self, **changes: Any) -> Any:
        """A copy with some fields changed (configs are immutable)."""
        return dataclasses.replace(self, **changes)  # type: ignore[type-var]

    def to_dict(self) -> dict[str, Any]:
        """The fields (tuples as lists), unknown keys read earlier and `architecture`."""
        values = {
            f.name: _to_json(getattr(self, f.name))
            for f in dataclasses.fields(self)  # type: ignore[arg-type]
            if f.name != "extra"
        }
        values.update(self.extra)  # type: ignore[attr-defined]
        values["architecture"] = self.architecture
        return values

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> Any:
        """Build from a `config.json` dict. Unknown keys are logged and kept in `extra`.

        Raises:
            ValueError: the dict names another architecture, or a field's value is invalid.
        """
        if values.get("architecture", cls.architecture) != cls.architecture:
            raise ValueError(
                f"not a {cls.architecture} config: architecture is {values['architecture']!r}"
            )
        known = {f.name for f in dataclasses.fields(cls)} - {"extra"}  # type: ignore[arg-type]
        extra = {k: v for k, v in values.items() if k not in known and k != "architecture"}
        if extra:
            logger.info(
                "config.json keys unknown to %s kept as-is: %s", cls.__name__, sorted(extra)
            )
        return cls(**{k: v for k, v in values.items() if k in known}, extra=extra)

    def to_json_file(self, path: str | Path) -> None:
        write_json(path, self.to_dict(), sort_keys=True)

    @classmethod
    def from_json_file(cls, path: str | Path) -> Any:
        return cls.from_dict(read_json_object(path))


def _to_json(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_to_json(item) for item in value]
    return value


# --- Bengio et al. 2003 ---------------------------------------------------------------------------


@dataclass(frozen=True)
class NnlmConfig(_LanguageModelConfig):
    """Bengio, Ducharme, Vincent & Jauvin 2003, "A Neural Probabilistic Language Model" (JMLR 3),
    Sec. 2: y = b + W x + U tanh(d + H x), x the concatenated feature vectors C(w) of the n - 1
    previous words. The names of the paper are in the comments."""

    architecture: ClassVar[str] = NNLM

    vocab_size: int = BERT_VOCAB_SIZE  # |V|
    ngram_order: int = 5  # n: each prediction reads the n - 1 pieces before it
    embedding_size: int = 30  # m: the size of a piece's feature vector C(w)
    hidden_size: int = 50  # h: the tanh hidden units
    use_direct_connections: bool = True  # W != 0: the feature vectors also reach the output
    pad_token_id: int = PAD_TOKEN_ID  # also the context before a sequence's first piece
    extra: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        _check_positive_ints(self, ("vocab_size", "ngram_order", "embedding_size", "hidden_size"))
        if self.ngram_order < 2:
            raise ValueError(f"NnlmConfig.ngram_order must be at least 2, got {self.ngram_order}")
        _check_pad(self)

    @property
    def context_size(self) -> int:
        """n - 1, the pieces one prediction reads."""
        return self.ngram_order - 1

    @classmethod
    def brown(cls, **overrides: Any) -> NnlmConfig:
        """Bengio et al. 2003 Table 1, the Brown corpus network MLP5: n = 5, h = 50, m = 30, with
        direct connections (|V| there was 16,383 words; here the WordPiece vocabulary)."""
        return cls(**({"ngram_order": 5, "hidden_size": 50, "embedding_size": 30} | overrides))

    @classmethod
    def ap_news(cls, **overrides: Any) -> NnlmConfig:
        """Bengio et al. 2003 Table 2, the AP News network: n = 6, h = 60, m = 100, with direct
        connections (|V| there was 17,964 words)."""
        return cls(**({"ngram_order": 6, "hidden_size": 60, "embedding_size": 100} | overrides))

    @classmethod
    def cpu(cls, **overrides: Any) -> NnlmConfig:
        """bertlab's CPU size: n = 5, m = 128, h = 256, no direct connections. The direct
        connections would add a |V| x (n - 1) m product to the softmax's |V| x h at every
        position; without them the step costs about what the softmax costs
        (`benchmarks/bench_lstm_era.py`)."""
        values = {
            "ngram_order": 5,
            "embedding_size": 128,
            "hidden_size": 256,
            "use_direct_connections": False,
        }
        return cls(**(values | overrides))

    @classmethod
    def tiny(cls, **overrides: Any) -> NnlmConfig:
        """For tests: vocabulary 99, n = 4, m = 8, h = 16."""
        values = {"vocab_size": 99, "ngram_order": 4, "embedding_size": 8, "hidden_size": 16}
        return cls(**(values | overrides))


# --- Peters et al. 2018 ---------------------------------------------------------------------------

# AllenNLP's released ELMo models (allennlp.org/elmo, their options files; the same options in
# bilm-tf): the character CNN's filters (width, count), 2,048 in all, in every size.
ELMO_CHAR_FILTERS = ((1, 32), (2, 32), (3, 64), (4, 128), (5, 256), (6, 512), (7, 1024))


@dataclass(frozen=True)
class ElmoConfig(_LanguageModelConfig):
    """ELMo's biLM (Peters et al. 2018 Sec. 3.1 and 3.4; Jozefowicz et al. 2016 for the LSTM
    with projection): a token representation, L forward and L backward LSTM layers with
    projection and a residual connection between them, one softmax shared by both directions.

    The token representation is a WordPiece embedding (`use_char_cnn` False, the default) or
    ELMo's character CNN with highway layers and a projection over each piece's characters
    (`characters`, built from the WordPiece vocabulary by `with_characters`).
    """

    architecture: ClassVar[str] = ELMO

    vocab_size: int = BERT_VOCAB_SIZE
    lstm_hidden_size: int = 1024  # ELMo small: 1024 LSTM cells ("dim" in its options file)
    projection_size: int = 128  # ELMo small: each layer's output projected to 128
    num_hidden_layers: int = 2  # ELMo: L = 2 layers in each direction
    # ELMo Sec. 3.4: "a residual connection from the first to second LSTM layer"
    use_residual: bool = True
    dropout_prob: float = 0.1  # bilm-tf's training dropout, on each LSTM input and the output
    use_char_cnn: bool = False
    char_embedding_size: int = 16  # ELMo options: char_cnn.embedding.dim
    char_filters: tuple[tuple[int, int], ...] = ELMO_CHAR_FILTERS  # (width, count)
    num_highway_layers: int = 1  # ELMo small: 1 highway layer (the original model: 2)
    max_characters_per_token: int = 50  # ELMo options: max_characters_per_token
    # The characters of the WordPiece vocabulary, ids NUM_CHARACTER_MARKERS onwards, in order.
    characters: tuple[str, ...] = ()
    pad_token_id: int = PAD_TOKEN_ID
    extra: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        # config.json holds lists; the config keeps tuples (frozen, comparable).
        filters = tuple(tuple(pair) for pair in self.char_filters)
        object.__setattr__(self, "char_filters", filters)
        object.__setattr__(self, "characters", tuple(self.characters))
        _check_positive_ints(
            self,
            (
                "vocab_size",
                "lstm_hidden_size",
                "projection_size",
                "num_hidden_layers",
                "char_embedding_size",
                "max_characters_per_token",
            ),
        )
        if self.projection_size > self.lstm_hidden_size:  # nn.LSTM's rule for proj_size
            raise ValueError(
                f"projection_size {self.projection_size} must not exceed lstm_hidden_size "
                f"{self.lstm_hidden_size}"
            )
        _check_probabilities(self, ("dropout_prob",))
        if isinstance(self.num_highway_layers, bool) or self.num_highway_layers < 0:
            raise ValueError(f"num_highway_layers must be >= 0, got {self.num_highway_layers!r}")
        for pair in filters:
            if len(pair) != 2 or any(isinstance(v, bool) or int(v) != v or v < 1 for v in pair):
                raise ValueError(f"char_filters must be (width, count) pairs, got {pair!r}")
            if pair[0] > self.max_characters_per_token:
                raise ValueError(
                    f"char filter width {pair[0]} exceeds max_characters_per_token "
                    f"{self.max_characters_per_token}"
                )
        if not filters:
            raise ValueError("char_filters must not be empty")
        if self.use_char_cnn and not self.characters:
            raise ValueError(
                "use_char_cnn needs the character vocabulary: build the config with "
                "ElmoConfig.with_characters(pieces)"
            )
        if len(set(self.characters)) != len(self.characters):
            raise ValueError("ElmoConfig.characters holds a character twice")
        _check_pad(self)

    @property
    def num_characters(self) -> int:
        """Rows of the character embedding: the markers, then the characters."""
        return NUM_CHARACTER_MARKERS + len(self.characters)

    @property
    def num_char_filters(self) -> int:
        """The char CNN's output size: the sum of its filter counts."""
        return sum(count for _, count in self.char_filters)

    @property
    def layer_size(self) -> int:
        """The size of every representation ELMo returns: 2 x projection_size."""
        return 2 * self.projection_size

    def with_characters(self, pieces: Sequence[str]) -> ElmoConfig:
        """This config with the char CNN over the characters of `pieces`, the WordPiece
        vocabulary in id order (its size becomes `vocab_size`). Pieces longer than
        `max_characters_per_token` - 2 characters are cut; the width shrinks to the longest
        piece + 2 markers when that is shorter (and stays at least the widest filter)."""
        characters = character_vocabulary(pieces)
        longest = max((len(_characters(piece)) for piece in pieces), default=1)
        widest = max(width for width, _ in self.char_filters)
        width = max(widest, min(self.max_characters_per_token, longest + 2))
        return self.replace(
            use_char_cnn=True,
            characters=characters,
            vocab_size=len(pieces),
            max_characters_per_token=width,
        )

    @classmethod
    def small(cls, **overrides: Any) -> ElmoConfig:
        """AllenNLP's "small" ELMo (elmo_2x1024_128_2048cnn_1xhighway): 2 layers of 1024 cells
        projected to 128 in each direction; its char CNN has 2,048 filters and 1 highway layer."""
        values = {"lstm_hidden_size": 1024, "projection_size": 128, "num_highway_layers": 1}
        return cls(**(values | overrides))

    @classmethod
    def original(cls, **overrides: Any) -> ElmoConfig:
        """The original ELMo of Peters et al. 2018 (elmo_2x4096_512_2048cnn_2xhighway): 4096
        cells projected to 512, 2 highway layers."""
        values = {"lstm_hidden_size": 4096, "projection_size": 512, "num_highway_layers": 2}
        return cls(**(values | overrides))

    @classmethod
    def cpu(cls, **overrides: Any) -> ElmoConfig:
        """bertlab's CPU size: ELMo small's shape at half the cells (512, projected to 128); the
        char CNN, when chosen, with a quarter of small's filters.

        `benchmarks/bench_lstm_era.py` measures its step against BERT-mini's."""
        values = {
            "lstm_hidden_size": 512,
            "projection_size": 128,
            "char_filters": tuple(
                (width, max(8, count // 4)) for width, count in ELMO_CHAR_FILTERS
            ),
        }
        return cls(**(values | overrides))

    @classmethod
    def tiny(cls, **overrides: Any) -> ElmoConfig:
        """For tests: vocabulary 99, 2 layers of 24 cells projected to 8, a small char CNN."""
        values = {
            "vocab_size": 99,
            "lstm_hidden_size": 24,
            "projection_size": 8,
            "char_embedding_size": 4,
            "char_filters": ((1, 4), (2, 4), (3, 8)),
            "max_characters_per_token": 12,
        }
        return cls(**(values | overrides))


def piece_characters(piece: str) -> str:
    """The characters of a WordPiece piece, its "##" removed: "##able" -> "able", "中" -> "中"."""
    return piece.removeprefix(CONTINUATION_PREFIX) or piece


def character_vocabulary(pieces: Sequence[str]) -> tuple[str, ...]:
    """Every character of the pieces, in order of first appearance; a special piece ("[CLS]",
    any piece in brackets) is one character of its own.

    Example: `character_vocabulary(["[PAD]", "un", "##aff", "中"])` ->
    ("[PAD]", "u", "n", "a", "f", "中").
    """
    seen: dict[str, None] = {}
    for piece in pieces:
        for character in _characters(piece):
            seen.setdefault(character, None)
    return tuple(seen)


def _characters(piece: str) -> list[str]:
    if len(piece) > 2 and piece.startswith("[") and piece.endswith("]"):
        return [piece]  # [PAD], [CLS], [SEP], [MASK], [UNK], [unused0]: one symbol each
    return list(piece_characters(piece))


def piece_character_ids(
    pieces: Sequence[str], characters: Sequence[str], width: int
) -> list[list[int]]:
    """Each piece as `width` character ids: a begin marker (BEGIN_OF_CONTINUATION for "##"
    pieces, else BEGIN_OF_WORD), its characters (cut to width - 2), END_OF_PIECE, then
    CHARACTER_PADDING. A character missing from `characters` raises `ValueError`.

    Example (characters ("u", "n", "a", "f"), width 6): "un" -> [1, 4, 5, 3, 0, 0],
    "##aff" -> [2, 6, 7, 7, 3, 0].
    """
    index = {character: i + NUM_CHARACTER_MARKERS for i, character in enumerate(characters)}
    rows = []
    for piece in pieces:
        begin = BEGIN_OF_CONTINUATION if piece.startswith(CONTINUATION_PREFIX) else BEGIN_OF_WORD
        try:
            ids = [index[character] for character in _characters(piece)][: width - 2]
        except KeyError as error:
            raise ValueError(f"piece {piece!r} has a character outside the vocabulary") from error
        row = [begin, *ids, END_OF_PIECE]
        rows.append(row + [CHARACTER_PADDING] * (width - len(row)))
    return rows


def pieces_from_character_ids(
    rows: Sequence[Sequence[int]], characters: Sequence[str]
) -> list[str]:
    """The pieces `piece_character_ids` wrote, read back (a piece cut to the width comes back
    cut, and writes the same row again).

    Example (characters ("u", "n", "a", "f")): [[1, 4, 5, 3, 0, 0], [2, 6, 7, 7, 3, 0]] ->
    ["un", "##aff"].
    """
    pieces = []
    for row in rows:
        ids = list(row[1:])
        ids = ids[: ids.index(END_OF_PIECE)] if END_OF_PIECE in ids else ids
        text = "".join(characters[i - NUM_CHARACTER_MARKERS] for i in ids)
        prefix = CONTINUATION_PREFIX if row[0] == BEGIN_OF_CONTINUATION else ""
        pieces.append(prefix + text)
    return pieces


# --- Merity et al. 2017 ---------------------------------------------------------------------------


@dataclass(frozen=True)
class AwdLstmConfig(_LanguageModelConfig):
    """AWD-LSTM (Merity, Keskar & Socher 2017, "Regularizing and Optimizing LSTM Language
    Models"), the language model ULMFiT fine-tunes (Howard & Ruder 2018 Sec. 3). The dropouts
    are fastai's `awd_lstm_lm_config`, with which ULMFiT pre-trained (fastai's names in the
    comments); `with_classifier_dropouts` gives its classifier's."""

    architecture: ClassVar[str] = AWD_LSTM

    vocab_size: int = BERT_VOCAB_SIZE
    embedding_size: int = 400  # Merity Sec. 5: 400-dimensional embeddings (emb_sz)
    hidden_size: int = 1150  # Merity Sec. 5: 1150 hidden units in the middle layers (n_hid)
    num_hidden_layers: int = 3  # Merity Sec. 5: a 3-layer LSTM (n_layers)
    output_dropout_prob: float = 0.1  # output_p: locked dropout on the last layer's output
    hidden_dropout_prob: float = 0.15  # hidden_p: locked dropout between LSTM layers
    input_dropout_prob: float = 0.25  # input_p: locked dropout on the embedded input
    embedding_dropout_prob: float = 0.02  # embed_p: whole rows of the embedding (Merity Sec. 4.3)
    weight_dropout_prob: float = 0.2  # weight_p: DropConnect on hidden-to-hidden (Sec. 2)
    ar_alpha: float = 2.0  # Merity Sec. 4.6 (and fastai's RNNRegularizer): AR's alpha
    tar_beta: float = 1.0  # Merity Sec. 4.6: TAR's beta
    pad_token_id: int = PAD_TOKEN_ID
    extra: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        _check_positive_ints(
            self, ("vocab_size", "embedding_size", "hidden_size", "num_hidden_layers")
        )
        _check_probabilities(
            self,
            (
                "output_dropout_prob",
                "hidden_dropout_prob",
                "input_dropout_prob",
                "embedding_dropout_prob",
                "weight_dropout_prob",
            ),
        )
        for name in ("ar_alpha", "tar_beta"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise ValueError(f"AwdLstmConfig.{name} must be >= 0, got {value!r}")
        _check_pad(self)

    def layer_sizes(self) -> list[tuple[int, int]]:
        """(input, output) of each LSTM layer: emb -> hidden -> ... -> hidden -> emb, so that
        the last layer's output meets the tied output embedding (Merity Sec. 4.5)."""
        sizes = [self.embedding_size] + [self.hidden_size] * (self.num_hidden_layers - 1)
        return list(zip(sizes, sizes[1:] + [self.embedding_size], strict=True))

    def with_classifier_dropouts(self) -> AwdLstmConfig:
        """fastai's `awd_lstm_clas_config` dropouts, with which ULMFiT fine-tunes its
        classifier: output_p 0.4, hidden_p 0.3, input_p 0.4, embed_p 0.05, weight_p 0.5."""
        return self.replace(
            output_dropout_prob=0.4,
            hidden_dropout_prob=0.3,
            input_dropout_prob=0.4,
            embedding_dropout_prob=0.05,
            weight_dropout_prob=0.5,
        )

    @classmethod
    def paper(cls, **overrides: Any) -> AwdLstmConfig:
        """Merity et al. 2017 Sec. 5 and ULMFiT Sec. 4: 400 embedding, 1150 hidden, 3 layers
        (fastai rounds the hidden size to 1152)."""
        values = {"embedding_size": 400, "hidden_size": 1150, "num_hidden_layers": 3}
        return cls(**(values | overrides))

    @classmethod
    def cpu(cls, **overrides: Any) -> AwdLstmConfig:
        """bertlab's CPU size: 3 layers, 256 embedding, 512 hidden.

        `benchmarks/bench_lstm_era.py` measures its step against BERT-mini's."""
        values = {"embedding_size": 256, "hidden_size": 512, "num_hidden_layers": 3}
        return cls(**(values | overrides))

    @classmethod
    def tiny(cls, **overrides: Any) -> AwdLstmConfig:
        """For tests: vocabulary 99, 3 layers, 8 embedding, 16 hidden."""
        values = {"vocab_size": 99, "embedding_size": 8, "hidden_size": 16}
        return cls(**(values | overrides))


# The configs by architecture name: the torch-free half of `network.lm_architectures`.
LM_CONFIGS: dict[str, type[_LanguageModelConfig]] = {
    NNLM: NnlmConfig,
    ELMO: ElmoConfig,
    AWD_LSTM: AwdLstmConfig,
}


def lstm_config_from_dict(values: dict[str, Any]) -> NnlmConfig | ElmoConfig | AwdLstmConfig:
    """The config a `config.json` dict describes, by its `architecture` key.

    Raises:
        ValueError: no `architecture` key, or an unknown one (the known ones are named).
    """
    name = values.get("architecture")
    if name not in LM_CONFIGS:
        raise ValueError(
            f"config.json names architecture {name!r}; expected one of {LM_ARCHITECTURE_NAMES}"
        )
    return LM_CONFIGS[name].from_dict(values)


# The presets `--model-size` names for each architecture, smallest-purpose first: the papers'
# sizes, bertlab's CPU size (the default) and the tests' tiny one.
LM_PRESETS: dict[str, dict[str, Any]] = {
    NNLM: {
        "brown": NnlmConfig.brown,
        "ap-news": NnlmConfig.ap_news,
        "cpu": NnlmConfig.cpu,
        "tiny": NnlmConfig.tiny,
    },
    ELMO: {
        "small": ElmoConfig.small,
        "original": ElmoConfig.original,
        "cpu": ElmoConfig.cpu,
        "tiny": ElmoConfig.tiny,
    },
    AWD_LSTM: {"paper": AwdLstmConfig.paper, "cpu": AwdLstmConfig.cpu, "tiny": AwdLstmConfig.tiny},
}
DEFAULT_LM_PRESET = "cpu"  # the size each architecture trains on a laptop CPU by default


def lm_preset(architecture: str, name: str, **overrides: Any) -> Any:
    """The config of preset `name` of `architecture`, with `overrides` (e.g. the vocabulary).

    Raises:
        ValueError: an unknown architecture or preset, naming the known ones.
    """
    if architecture not in LM_PRESETS:
        raise ValueError(
            f"unknown architecture {architecture!r}; choose one of {LM_ARCHITECTURE_NAMES}"
        )
    presets = LM_PRESETS[architecture]
    if name not in presets:
        raise ValueError(
            f"unknown model size {name!r} for {architecture}; choose one of {', '.join(presets)}"
        )
    return presets[name](**overrides)


@dataclass(frozen=True)
class ElmoSettings:
    """ELMo's own pre-training settings (`bertlab pretrain --architecture elmo`), one
    `PretrainRun` field each."""

    # The character CNN over each piece's characters instead of a WordPiece embedding (Peters
    # et al. 2018 Sec. 3.4), its characters those of the WordPiece vocabulary (no byte ids).
    use_char_cnn: bool = False
