"""Looking inside a model: fill-mask predictions and attention maps.

Both work on any bertlab or Hugging Face-layout directory that holds `config.json`, the weights
and `vocab.txt`. Fill-mask needs the masked-LM head, which pre-trained checkpoints have and
fine-tuned ones usually do not, and a model that reads both sides (a left-to-right model
predicts the next token instead: `bertlab.use.language_model`); attention maps need only the
encoder. Figures with Chinese text find a CJK font (`cjk_fonts`) or say in the figure that
there is none.
"""

# Shapes: B batch, L sequence length, N attention heads, V vocab, P masks per text.

from __future__ import annotations

import importlib.util
import logging
import math
import os
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from bertlab.core.atomic import atomic_file
from bertlab.core.config import BertConfig
from bertlab.core.model_card import card_setting
from bertlab.core.runtime import model_device
from bertlab.core.wording import quoted
from bertlab.network import checkpoint
from bertlab.network.architectures import folder_architecture
from bertlab.network.bert import BertForPreTraining, BertModel
from bertlab.tokenizer.basic import is_cjk_ideograph
from bertlab.tokenizer.wordpiece import (
    MASK_TOKEN,
    NUM_SPECIAL_TOKENS_PAIR,
    NUM_SPECIAL_TOKENS_SINGLE,
    Tokenizer,
)
from bertlab.training.pretraining.checkpointing import saved_objective

logger = logging.getLogger(__name__)

NSP_HEAD_KEY = "cls.seq_relationship.weight"
# Objectives (a bertlab card's "objective" row) whose runs trained the next-sentence head; the
# others save it as initialised, so its answers would be noise.
NSP_OBJECTIVES = ("mlm+nsp",)
IS_NEXT = 0  # the NSP head's class for "B follows A" (`BertForPreTraining`'s labels)
ATTENTION_COLUMNS = 4  # heads per row of the attention figure
HEATMAP_INCHES = 3.2
FIGURE_DPI = 110
MAX_TITLE_CHARACTERS = 70
LAYER_GRID_INCHES = 1.6  # a heatmap of the every-layer grid
LINE_VIEW_INCHES_PER_PIECE = 0.22
MIN_LINE_WEIGHT = 0.02  # lighter lines of the line view are not drawn: they would be invisible
# Fonts with CJK glyphs, tried in order for Chinese labels (matplotlib's DejaVu Sans has none).
CJK_FONTS = (
    "Noto Sans CJK SC",
    "Noto Sans CJK JP",
    "Source Han Sans SC",
    "WenQuanYi Zen Hei",
    "WenQuanYi Micro Hei",
    "SimHei",
    "Microsoft YaHei",
    "PingFang SC",
    "Heiti SC",
)
# The Noto Sans CJK collection (SIL Open Font License 1.1) as a Python package, a dependency of
# bertlab: used when the machine has none of CJK_FONTS.
CJK_FONT_PACKAGE = "noto_cjk_sans_otc"
CJK_FONT_FILE = "NotoSansCJK-Regular.ttc"
PACKAGED_CJK_FONT = "Noto Sans CJK SC"
NO_CJK_FONT_NOTE = (
    "no CJK font found (install fonts-noto-cjk, or `pip install noto-cjk-sans-otc`): "
    "Chinese characters show as boxes"
)


@dataclass(frozen=True)
class MaskPrediction:
    """The top-k tokens at one [MASK], most probable first."""

    position: int  # index of the [MASK] among the input pieces
    tokens: list[str]
    probabilities: list[float]


def load_for_fill_mask(directory: str | os.PathLike) -> tuple[BertForPreTraining, Tokenizer]:
    """The model with its masked-LM head, and its tokenizer.

    Raises:
        ValueError: the checkpoint has no masked-LM head (a fine-tuned model, for instance).
    """
    model, tokenizer = load_with_lm_head(directory)
    check_reads_both_sides(model.config, directory)
    return model, tokenizer


def load_with_lm_head(directory: str | os.PathLike) -> tuple[nn.Module, Tokenizer]:
    """The model with its language-model head, as its architecture's entry loads it
    (`network.architectures`): a BERT's masked or left-to-right head (`BertForPreTraining`), an
    LSTM-era model's left-to-right LM (`lm_views.LeftToRightLanguageModel`); and its tokenizer.

    Raises:
        ValueError: the folder has no LM head (a fine-tuned model, for instance), saying why.
    """
    model = folder_architecture(directory).load_language_model(directory)
    return model, Tokenizer.from_pretrained(directory)


def load_for_next_sentence(directory: str | os.PathLike) -> tuple[BertForPreTraining, Tokenizer]:
    """The model with its next-sentence head (BERT Sec. 3.1, Task #2), and its tokenizer.

    Raises:
        ValueError: the checkpoint has no next-sentence head, or its card (or, for a
            checkpoint of a pre-training run, its training state) says that its pre-training
            never trained one (`--objective mlm` saves the head as initialised).
    """
    config_values, weights = checkpoint.read_model(directory)
    keys = checkpoint.normalize_keys(weights, BertForPreTraining.base_prefix)
    # final/ says it in its card; a checkpoint (no card) in the settings it was saved with
    objective = card_setting(directory, "objective") or saved_objective(directory)
    if NSP_HEAD_KEY not in keys or (objective is not None and objective not in NSP_OBJECTIVES):
        trained = f"was pre-trained with {objective} only" if objective else "has no such head"
        raise ValueError(
            f"{directory} {trained}: its next-sentence head is untrained, so it cannot say "
            "whether B follows A; this needs a model pre-trained with next-sentence prediction "
            "(`bertlab pretrain --objective mlm+nsp`, or Google's BERT checkpoints)"
        )
    model = BertForPreTraining.from_pretrained(directory).eval()
    check_reads_both_sides(model.config, directory)
    return model, Tokenizer.from_pretrained(directory)


@torch.no_grad()
def next_sentence_probabilities(
    model: BertForPreTraining, tokenizer: Tokenizer, first: str, seconds: Sequence[str]
) -> list[float]:
    """The probability that each of `seconds` is the sentence after `first`, as the
    next-sentence head says it: softmax over its two classes of [CLS] A [SEP] B [SEP], IsNext.

    Raises:
        ValueError: no second sentence, a sentence without pieces (empty or blank: the head
            would judge a pair that lacks it), or a pair longer than the model's positions (it
            would be cut, and the head judge a pair it was not given).
    """
    if not seconds:
        raise ValueError("give at least one second sentence")
    for name, sentence in (("A", first), *(("B", second) for second in seconds)):
        if not tokenizer.tokenize(sentence):
            raise ValueError(f"sentence {name} {quoted(sentence)} has no pieces: nothing to judge")
    for second in seconds:
        check_pair_fits(tokenizer, first, second, model.config.max_position_embeddings)
    encoding = tokenizer([(first, second) for second in seconds], padding=True)
    device = model_device(model)
    logits = model(
        torch.tensor(encoding["input_ids"], device=device),
        torch.tensor(encoding["attention_mask"], device=device),
        torch.tensor(encoding["token_type_ids"], device=device),
        masked_positions=torch.zeros(len(seconds), 1, dtype=torch.long, device=device),  # unused
    ).nsp_logits  # (B, 2)
    return logits.float().softmax(dim=-1)[:, IS_NEXT].tolist()


def check_pair_fits(tokenizer: Tokenizer, first: str, second: str, limit: int) -> None:
    """Refuse a pair longer than the model's `limit` positions: cut, it would not be the pair
    the caller gave.

    Raises:
        ValueError: [CLS] first [SEP] second [SEP] has more than `limit` pieces.
    """
    pieces = len(tokenizer.tokenize(first)) + len(tokenizer.tokenize(second))
    length = pieces + NUM_SPECIAL_TOKENS_PAIR
    if length > limit:
        raise ValueError(
            f"the pair with {quoted(second)} is {length} pieces, more than the model's {limit} "
            "positions"
        )


def check_reads_both_sides(config: BertConfig, name: str | os.PathLike = "the model") -> None:
    """Refuse a left-to-right model where a [MASK] is to be filled from both sides.

    Raises:
        ValueError: `config.is_causal`.
    """
    if config.is_causal:
        raise ValueError(
            f"{name} is a left-to-right (causal) model: it predicts the next token from the "
            "words before it and never saw a [MASK] filled from both sides; use `bertlab "
            "generate` to continue a text or `bertlab score-text` to score one"
        )


def fill_mask(
    model: BertForPreTraining, tokenizer: Tokenizer, text: str, top_k: int = 5
) -> list[MaskPrediction]:
    """Predict every [MASK] in `text` (each independently, in one forward pass).

    Example:
        >>> fill_mask(model, tokenizer, "paris is the [MASK] of france.")  # doctest: +SKIP
        [MaskPrediction(position=4, tokens=['capital', ...], probabilities=[0.93, ...])]

    Raises:
        ValueError: `text` has no [MASK], or `top_k` < 1.
    """
    return fill_masks(model, tokenizer, [text], top_k)[0]


@torch.no_grad()
def fill_masks(
    model: BertForPreTraining, tokenizer: Tokenizer, texts: Sequence[str], top_k: int = 5
) -> list[list[MaskPrediction]]:
    """`fill_mask` for many texts in one padded forward pass, the MLM head run only at the
    [MASK] positions (sparse prediction). Equal to `fill_mask` text by text up to float rounding.

    Args:
        model: a pre-trained model with its masked-LM head, in eval mode.
        tokenizer: its tokenizer.
        texts: B texts, each with at least one [MASK].
        top_k: candidates per [MASK].

    Returns:
        Per text, in order, one `MaskPrediction` per [MASK].

    Raises:
        ValueError: a text has no [MASK] (or every [MASK] was cut off), `top_k` < 1, or the
            model is a left-to-right one.
    """
    if top_k < 1:
        raise ValueError(f"top_k must be at least 1, got {top_k}")
    check_reads_both_sides(model.config)
    for text in texts:
        if MASK_TOKEN not in text:
            raise ValueError(f"the text has no {MASK_TOKEN} to fill: {text!r}")
    if not texts:
        return []
    encoding = tokenizer(list(texts), max_length=model.config.max_position_embeddings, padding=True)
    input_ids = torch.tensor(encoding["input_ids"])  # (B, L)
    positions = [(row == tokenizer.mask_token_id).nonzero().flatten() for row in input_ids]
    if any(len(row) == 0 for row in positions):
        raise ValueError(f"every {MASK_TOKEN} was cut off by the model's maximum length")
    masked_positions = torch.nn.utils.rnn.pad_sequence(positions, batch_first=True)  # (B, P)
    device = model_device(model)
    logits = model(
        input_ids.to(device),
        torch.tensor(encoding["attention_mask"], device=device),
        torch.tensor(encoding["token_type_ids"], device=device),
        masked_positions=masked_positions.to(device),
    ).mlm_logits  # (B, P, V)
    top = logits.float().softmax(dim=-1).topk(min(top_k, logits.shape[-1]))  # (B, P, k)
    values, indices = top.values.cpu(), top.indices.cpu()
    predictions = []
    for row, row_positions in enumerate(positions):
        masks = []
        for slot, position in enumerate(row_positions.tolist()):
            tokens = tokenizer.convert_ids_to_tokens(indices[row, slot].tolist())
            masks.append(MaskPrediction(position, tokens, values[row, slot].tolist()))
        predictions.append(masks)
    return predictions


def load_encoder(directory: str | os.PathLike) -> tuple[nn.Module, Tokenizer]:
    """The encoder of any model folder (pre-trained or fine-tuned), as its architecture's entry
    loads it (`network.architectures`: a `BertModel`, or an LSTM-era model's
    `lm_views.LanguageModelEncoder`), in eval mode, and its tokenizer: what `embed` and
    `neighbours` read."""
    model = folder_architecture(directory).load_encoder(directory)
    return model, Tokenizer.from_pretrained(directory)


def load_for_attention(directory: str | os.PathLike) -> tuple[BertModel, Tokenizer]:
    """The encoder of a BERT folder, whose attention maps `attention_maps` draws, and its
    tokenizer.

    Raises:
        ValueError: the folder holds an LSTM-era model, which has no attention.
    """
    architecture = folder_architecture(directory)
    if not architecture.has_attention:
        raise ValueError(
            f"{directory} holds {architecture.title}, which has no attention to draw; `bertlab "
            "embed` and `bertlab neighbours contextual` read its layers"
        )
    return architecture.load_encoder(directory), Tokenizer.from_pretrained(directory)


def attention_maps(
    model: BertModel, tokenizer: Tokenizer, text: str, layer: int, text_pair: str | None = None
) -> tuple[list[str], torch.Tensor]:
    """The pieces of `[CLS] text [SEP]` (or `[CLS] text [SEP] text_pair [SEP]`) and layer
    `layer`'s attention (N, L, L), query by key.

    Args:
        layer: 1-based, as in "layer 1 of 12"; negative counts from the last (-1 = last).

    Raises:
        ValueError: a layer the model does not have, or an empty text.
    """
    num_layers = model.config.num_hidden_layers
    if not (1 <= layer <= num_layers or -num_layers <= layer <= -1):
        raise ValueError(f"the model has layers 1..{num_layers}, not {layer}")
    pieces, attentions = all_attention_maps(model, tokenizer, text, text_pair)
    index = layer - 1 if layer > 0 else num_layers + layer
    return pieces, attentions[index]  # (N, L, L)


@torch.no_grad()
def all_attention_maps(
    model: BertModel, tokenizer: Tokenizer, text: str, text_pair: str | None = None
) -> tuple[list[str], torch.Tensor]:
    """Every layer's attention over the pieces of `[CLS] text [SEP]`, or of the pair
    `[CLS] text [SEP] text_pair [SEP]` (B's pieces with segment 1), from one forward pass. A
    text longer than the model's positions is cut to them, with a warning.

    Returns:
        (the L pieces, attention (layers, N, L, L) float32: first layer first, query by key).

    Raises:
        ValueError: an empty text or sentence B, or a pair longer than the model's positions.
    """
    limit = model.config.max_position_embeddings
    num_pieces = len(tokenizer.tokenize(text))
    if not num_pieces:
        raise ValueError("the text has no tokens to show")
    if text_pair is not None:
        if not tokenizer.tokenize(text_pair):
            raise ValueError("sentence B has no tokens to show")
        check_pair_fits(tokenizer, text, text_pair, limit)
    elif num_pieces > limit - NUM_SPECIAL_TOKENS_SINGLE:
        logger.warning(
            "the text has %d pieces, more than the %d that the model reads with [CLS] and [SEP]: "
            "only its first %d are read",
            num_pieces,
            limit - NUM_SPECIAL_TOKENS_SINGLE,
            limit - NUM_SPECIAL_TOKENS_SINGLE,
        )
    encoding = tokenizer(text, text_pair, max_length=limit)
    device = model_device(model)
    output = model(
        torch.tensor([encoding["input_ids"]], device=device),
        token_type_ids=torch.tensor([encoding["token_type_ids"]], device=device),
        output_attentions=True,
    )
    pieces = tokenizer.convert_ids_to_tokens(encoding["input_ids"])
    return pieces, torch.stack([layer[0] for layer in output.attentions]).float().cpu()


def cjk_fonts(texts: Sequence[str]) -> tuple[list[str], str]:
    """Font families for a figure's text, and a note to show when Chinese cannot be drawn.

    Text without CJK ideographs needs only matplotlib's DejaVu Sans. Otherwise the first installed
    font of CJK_FONTS comes first, else the Noto Sans CJK package bertlab depends on; when neither
    is there, the note says so (and a warning is logged): the figure must not show silent boxes.

    Returns:
        (font families, first choice first; "" or the note).
    """
    if not any(is_cjk_ideograph(character) for text in texts for character in text):
        return ["DejaVu Sans"], ""
    font = _cjk_font()
    if font is None:
        logger.warning(NO_CJK_FONT_NOTE)
        return ["DejaVu Sans"], NO_CJK_FONT_NOTE
    return [font, "DejaVu Sans"], ""


def save_figure(figure, families: Sequence[str], out_path: str | os.PathLike, dpi: int) -> Path:
    """Write a matplotlib figure as a PNG, atomically, every text in `families` (`cjk_fonts`),
    and close it. Glyph warnings are silenced: `cjk_fonts`' note already says what is missing."""
    import matplotlib.pyplot as plt
    from matplotlib.text import Text

    for text_item in figure.findobj(Text):
        text_item.set_fontfamily(list(families))
    out_path = Path(out_path)
    with warnings.catch_warnings(), atomic_file(out_path) as temporary:
        warnings.filterwarnings("ignore", message="Glyph .* missing from font")
        figure.savefig(temporary, dpi=dpi, bbox_inches="tight")
    plt.close(figure)
    return out_path


def _cjk_font() -> str | None:
    """The first installed font of `CJK_FONTS`, else the packaged Noto Sans CJK, or None."""
    from matplotlib import font_manager

    installed = {font.name for font in font_manager.fontManager.ttflist}
    found = next((name for name in CJK_FONTS if name in installed), None)
    if found is not None:
        return found
    path = packaged_cjk_font_file()
    if path is None:
        return None
    font_manager.fontManager.addfont(str(path))
    return PACKAGED_CJK_FONT


def packaged_cjk_font_file() -> Path | None:
    """The Noto Sans CJK collection of the package bertlab depends on (`CJK_FONT_PACKAGE`,
    faces JP, KR, SC, TC, HK and their Mono twins, `PACKAGED_CJK_FONT` among them), or None
    when the package or its file is missing."""
    spec = importlib.util.find_spec(CJK_FONT_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / CJK_FONT_FILE
    return path if path.is_file() else None


def plot_attention(
    pieces: list[str], attentions: torch.Tensor, layer: int, text: str, out_path: str | Path
) -> Path:
    """One heatmap per head (query rows, key columns), written atomically as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    families, note = cjk_fonts(pieces)
    note = f" ({note})" if note else ""
    num_heads = attentions.shape[0]
    columns = min(ATTENTION_COLUMNS, num_heads)
    rows = math.ceil(num_heads / columns)
    scale = max(1.0, len(pieces) / 12)
    size = (HEATMAP_INCHES * columns * scale, HEATMAP_INCHES * rows * scale)
    # Constrained layout makes room for each heatmap's turned labels before the next row's title.
    figure, axes = plt.subplots(rows, columns, figsize=size, squeeze=False, layout="constrained")
    top = float(attentions.max())  # one color scale for every head
    for head, axis in enumerate(axes.flat):
        if head >= num_heads:
            axis.set_visible(False)
            continue
        image = axis.imshow(attentions[head].numpy(), vmin=0.0, vmax=top, cmap="viridis")
        axis.set_title(f"head {head + 1}")
        # Every head has the same pieces: they are named on the outer edges only, so that no
        # head's labels run into its neighbour's map.
        is_bottom = head // columns == rows - 1 or head + columns >= num_heads
        is_left = head % columns == 0
        axis.set_xticks(range(len(pieces)), pieces if is_bottom else [], rotation=90, fontsize=7)
        axis.set_yticks(range(len(pieces)), pieces if is_left else [], fontsize=7)
        if is_bottom:
            axis.set_xlabel("attended-to token (key)")
        if is_left:
            axis.set_ylabel("attending token (query)")
    figure.colorbar(image, ax=axes, shrink=0.6, label="attention weight (probability)")
    shown = text if len(text) <= MAX_TITLE_CHARACTERS else text[:MAX_TITLE_CHARACTERS] + "..."
    figure.suptitle(f"Attention of layer {layer}, every head: {shown!r}{note}")
    return save_figure(figure, families, out_path, FIGURE_DPI)


def plot_attention_layers(
    pieces: list[str], attentions: torch.Tensor, text: str, out_path: str | Path
) -> Path:
    """Every layer and head at once: a grid of heatmaps, a row per layer (first at the top), a
    column per head, pieces named on the outer edges; written atomically as a PNG.

    Args:
        attentions: (layers, N, L, L), as `all_attention_maps` returns it.
    """
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    families, note = cjk_fonts(pieces)
    note = f" ({note})" if note else ""
    num_layers, num_heads = attentions.shape[:2]
    inches = LAYER_GRID_INCHES * max(1.0, len(pieces) / 16)
    figure, axes = plt.subplots(
        num_layers,
        num_heads,
        figsize=(inches * num_heads, inches * num_layers),
        squeeze=False,
        layout="constrained",
    )
    for layer in range(num_layers):
        for head in range(num_heads):
            axis = axes[layer, head]
            axis.imshow(attentions[layer, head].numpy(), vmin=0.0, vmax=1.0, cmap="viridis")
            is_bottom, is_left = layer == num_layers - 1, head == 0
            positions = range(len(pieces))
            axis.set_xticks(positions, pieces if is_bottom else [], rotation=90, fontsize=6)
            axis.set_yticks(positions, pieces if is_left else [], fontsize=6)
            if layer == 0:
                axis.set_title(f"head {head + 1}", fontsize=9)
            if is_left:
                axis.set_ylabel(f"layer {layer + 1}", fontsize=9)
    shown = text if len(text) <= MAX_TITLE_CHARACTERS else text[:MAX_TITLE_CHARACTERS] + "..."
    figure.suptitle(
        f"Attention of every layer and head (rows: attending token; columns: attended-to; "
        f"0 to 1): {shown!r}{note}"
    )
    return save_figure(figure, families, out_path, FIGURE_DPI)


def plot_attention_lines(
    pieces: list[str],
    attentions: torch.Tensor,
    layer: int,
    text: str,
    out_path: str | Path,
    focus: int | None = None,
) -> Path:
    """The line view of one layer (the lectures' "it" picture): per head, the pieces twice, as
    attending tokens on the left and attended-to tokens on the right, joined by lines whose
    opacity is the attention weight; with `focus` (a piece's index), only that piece's lines.

    Args:
        attentions: (N, L, L), as `attention_maps` returns it.
    """
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    families, note = cjk_fonts(pieces)
    note = f" ({note})" if note else ""
    num_heads, length = attentions.shape[0], len(pieces)
    columns = min(ATTENTION_COLUMNS, num_heads)
    rows = math.ceil(num_heads / columns)
    height = max(3.0, length * LINE_VIEW_INCHES_PER_PIECE)
    figure, axes = plt.subplots(
        rows, columns, figsize=(2.6 * columns, height * rows), squeeze=False, layout="constrained"
    )
    queries = range(length) if focus is None else [focus]
    for head, axis in enumerate(axes.flat):
        axis.axis("off")
        if head >= num_heads:
            continue
        axis.set_xlim(-0.9, 1.9)
        axis.set_ylim(length - 0.5, -0.5)
        for position, piece in enumerate(pieces):
            weight = "bold" if position == focus else "normal"
            axis.text(0, position, piece, ha="right", va="center", fontsize=7, fontweight=weight)
            axis.text(1, position, piece, ha="left", va="center", fontsize=7)
        for query in queries:
            for key in range(length):
                alpha = float(attentions[head, query, key])
                if alpha >= MIN_LINE_WEIGHT:
                    axis.plot([0.05, 0.95], [query, key], color="tab:blue", alpha=alpha, lw=1.5)
        axis.set_title(f"head {head + 1}", fontsize=9)
    shown = text if len(text) <= MAX_TITLE_CHARACTERS else text[:MAX_TITLE_CHARACTERS] + "..."
    of = "" if focus is None else f" from {pieces[focus]!r}"
    figure.suptitle(
        f"Attention of layer {layer}{of} (left: attending token; right: attended-to; opacity: "
        f"weight): {shown!r}{note}"
    )
    return save_figure(figure, families, out_path, FIGURE_DPI)
