"""Google's original BERT checkpoints (TensorFlow), converted once into the Hugging Face layout.

A folder of google-research/bert's releases (`uncased_L-12_H-768_A-12/`, the 24 small BERTs such
as `uncased_L-2_H-128_A-2/`, `chinese_L-12_H-768_A-12/`) holds `bert_config.json` (already in
`config.json`'s field names), `vocab.txt` and a TensorFlow checkpoint, `bert_model.ckpt.index`
plus `bert_model.ckpt.data-00000-of-00001`.

The checkpoint is TensorFlow's tensor-bundle format (a LevelDB-style table of protocol buffers
beside the raw tensor bytes). No well-kept, light reader of it exists on PyPI: the only pure-Python
one, `tensorflow-checkpoint-reader`, is a single-author package whose README calls it "in
development" (last release February 2023). So reading it takes TensorFlow itself, as the optional
extra `pip install 'bertlab[tf]'`, and only once: `bertlab convert FOLDER --out DIR` writes
`config.json`, `model.safetensors` and the tokenizer files, which load everywhere without
TensorFlow (docs/models.md#googles-original-checkpoints).

Variable names follow google-research/bert `modeling.py`: `bert/encoder/layer_3/attention/self/
query/kernel` is `bert.encoder.layer.3.attention.self.query.weight`, transposed (TensorFlow's
dense kernels are (in, out), torch's Linear weights (out, in)); `gamma`/`beta` are LayerNorm's
`weight`/`bias`; `cls/predictions/output_bias` is the MLM bias; `cls/seq_relationship/
output_weights` is already (2, H).
"""

# Shapes: V vocab, H hidden_size, I intermediate_size; a TensorFlow dense kernel is (in, out),
#         a torch Linear weight (out, in).

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import torch

from bertlab.core.atomic import atomic_directory
from bertlab.core.config import BertConfig, read_json_object
from bertlab.network.checkpoint import CONFIG_NAME, GOOGLE_CONFIG_NAME, save_model
from bertlab.tokenizer.wordpiece import Tokenizer, TokenizerOptions, read_vocab_file

logger = logging.getLogger(__name__)

GOOGLE_CHECKPOINT_PREFIX = "bert_model.ckpt"
GOOGLE_VOCAB_NAME = "vocab.txt"
INSTALL_HINT = "pip install 'bertlab[tf]'"

# Variables a training run leaves beside the weights: Adam's moments (as google-research/bert's
# optimization.py names them, or as TensorFlow's slot names for AdamWeightDecayOptimizer), the
# step counter and fp16 loss-scaling state.
TRAINING_STATE = re.compile(
    r"(^|/)(adam_m|adam_v|AdamWeightDecayOptimizer(_1)?|global_step|good_steps|bad_steps|"
    r"loss_scale)$"
)
LAYER_SCOPE = re.compile(r"^layer_(\d+)$")
# Last name component -> torch parameter name. `kernel` is transposed on the way.
LEAF_NAMES = {
    "kernel": "weight",
    "bias": "bias",
    "gamma": "weight",
    "beta": "bias",
    "output_weights": "weight",
    "output_bias": "bias",
}
# A cased vocabulary has thousands of pieces with capitals (bert-base-cased: 8,179 of 28,996); an
# uncased one has none beyond markers such as [CLS] or the Chinese vocabulary's <S> and <T>.
CASED_SHARE = 0.01
MARKER = re.compile(r"^(\[[^\]]*\]|<[^>]*>)$")

_LAYER_KEYS = (
    "attention.self.query.weight",
    "attention.self.query.bias",
    "attention.self.key.weight",
    "attention.self.key.bias",
    "attention.self.value.weight",
    "attention.self.value.bias",
    "attention.output.dense.weight",
    "attention.output.dense.bias",
    "attention.output.LayerNorm.weight",
    "attention.output.LayerNorm.bias",
    "intermediate.dense.weight",
    "intermediate.dense.bias",
    "output.dense.weight",
    "output.dense.bias",
    "output.LayerNorm.weight",
    "output.LayerNorm.bias",
)
_EMBEDDING_KEYS = ("word_embeddings", "position_embeddings", "token_type_embeddings")
_HEAD_KEYS = (
    "cls.predictions.bias",
    "cls.predictions.transform.dense.weight",
    "cls.predictions.transform.dense.bias",
    "cls.predictions.transform.LayerNorm.weight",
    "cls.predictions.transform.LayerNorm.bias",
    "cls.seq_relationship.weight",
    "cls.seq_relationship.bias",
)


def is_google_folder(path: str | os.PathLike) -> bool:
    """Whether `path` is a folder in Google's original layout (and not already converted)."""
    path = Path(path)
    return (path / GOOGLE_CONFIG_NAME).is_file() and not (path / CONFIG_NAME).is_file()


def pretraining_keys(num_hidden_layers: int) -> list[str]:
    """The `BertForPreTraining` state-dict keys a converted checkpoint must have, in the
    Hugging Face order, without the MLM decoder (tied to the word embeddings)."""
    embeddings = [f"bert.embeddings.{name}.weight" for name in _EMBEDDING_KEYS]
    embeddings += ["bert.embeddings.LayerNorm.weight", "bert.embeddings.LayerNorm.bias"]
    layers = [
        f"bert.encoder.layer.{index}.{key}"
        for index in range(num_hidden_layers)
        for key in _LAYER_KEYS
    ]
    pooler = ["bert.pooler.dense.weight", "bert.pooler.dense.bias"]
    return [*embeddings, *layers, *pooler, *_HEAD_KEYS]


def hf_key(tf_name: str) -> tuple[str, bool] | None:
    """The Hugging Face key of a Google variable, and whether it is a kernel to transpose; None
    for training state (Adam moments, the step counter).

    Example:
        >>> hf_key("bert/encoder/layer_3/attention/self/query/kernel")
        ('bert.encoder.layer.3.attention.self.query.weight', True)
        >>> hf_key("bert/embeddings/LayerNorm/gamma")
        ('bert.embeddings.LayerNorm.weight', False)
    """
    if TRAINING_STATE.search(tf_name):
        return None
    *scopes, leaf = tf_name.split("/")
    parts = [LAYER_SCOPE.sub(r"layer.\1", scope) for scope in scopes]
    if leaf in LEAF_NAMES:
        parts.append(LEAF_NAMES[leaf])
    else:  # an embedding table: bert/embeddings/word_embeddings
        parts += [leaf, "weight"]
    return ".".join(parts), leaf == "kernel"


def state_dict_from_tf(
    variables: Mapping[str, np.ndarray], num_hidden_layers: int
) -> dict[str, torch.Tensor]:
    """Rename and transpose a Google checkpoint's variables into a Hugging Face state dict.

    Args:
        variables: TensorFlow variable name -> value, as `read_tf_checkpoint` returns them.
        num_hidden_layers: from `bert_config.json`, to check that every layer is there.

    Returns:
        `BertForPreTraining` keys -> float32 tensors (the decoder tied, so not stored).

    Raises:
        ValueError: an encoder weight is missing.
    """
    state_dict: dict[str, torch.Tensor] = {}
    unknown = []
    expected = pretraining_keys(num_hidden_layers)
    for name, value in variables.items():
        mapped = hf_key(name)
        if mapped is None:
            continue
        key, is_kernel = mapped
        if key not in expected:
            unknown.append(name)
            continue
        array = np.asarray(value, dtype=np.float32)
        array = array.T if is_kernel else array  # kernels (in, out) -> weights (out, in)
        state_dict[key] = torch.from_numpy(np.ascontiguousarray(array))
    missing = [key for key in expected if key not in state_dict]
    missing_body = [key for key in missing if key.startswith("bert.")]
    if missing_body:
        raise ValueError(
            f"the checkpoint lacks {len(missing_body)} encoder weights, e.g. {missing_body[0]}; "
            "is it a BERT checkpoint of this bert_config.json?"
        )
    if missing:
        logger.warning("no pre-training head weights for %s", ", ".join(missing))
    if unknown:
        logger.warning("not converted (not BERT pre-training weights): %s", ", ".join(unknown))
    return state_dict


def read_tf_checkpoint(prefix: str | os.PathLike) -> dict[str, np.ndarray]:
    """Every variable of a TensorFlow checkpoint (`prefix` = the path before `.index`).

    Raises:
        ImportError: TensorFlow is not installed (the `bertlab[tf]` extra).
        FileNotFoundError: no `PREFIX.index`.
    """
    prefix = Path(prefix)
    if not prefix.with_name(prefix.name + ".index").is_file():
        raise FileNotFoundError(f"no TensorFlow checkpoint {prefix}.index")
    try:
        import tensorflow as tf  # optional: only this one-off conversion needs it
    except ImportError as error:
        raise ImportError(
            f"reading Google's TensorFlow checkpoints needs TensorFlow: {INSTALL_HINT}"
        ) from error
    reader = tf.train.load_checkpoint(str(prefix))
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


def infer_lowercase(vocab: Mapping[str, int]) -> bool:
    """Whether a Google vocabulary is uncased: almost none of its pieces has a capital letter.

    Google's own list (google-research/bert tokenization.py `validate_case_matches_checkpoint`)
    agrees: uncased_*, multilingual_* and chinese_* lowercase, cased_* and multi_cased_* do not.
    """
    cased = sum(1 for piece in vocab if not MARKER.match(piece) and piece != piece.lower())
    return cased < CASED_SHARE * len(vocab)


def convert_google_folder(
    folder: str | os.PathLike, out: str | os.PathLike, lowercase: bool | None = None
) -> Path:
    """Convert a Google BERT folder into a Hugging Face folder `out` (written whole or not at all).

    Args:
        folder: holds bert_config.json, vocab.txt and bert_model.ckpt.{index,data-*}.
        out: the folder to write: config.json, model.safetensors, vocab.txt, tokenizer.json,
            tokenizer_config.json.
        lowercase: the tokenizer's casing; None infers it from the vocabulary (`infer_lowercase`).

    Returns:
        `out`.

    Raises:
        FileNotFoundError: a file of the layout is missing.
        ImportError: TensorFlow is not installed.
        ValueError: a bad config, vocabulary or checkpoint.
    """
    folder, out = Path(folder), Path(out)
    config_path = folder / GOOGLE_CONFIG_NAME
    if not config_path.is_file():
        raise FileNotFoundError(f"no {GOOGLE_CONFIG_NAME} in {folder} (not a Google BERT folder)")
    config = BertConfig.from_dict(read_json_object(config_path))
    vocab = read_vocab_file(folder / GOOGLE_VOCAB_NAME)
    if len(vocab) != config.vocab_size:
        raise ValueError(
            f"{folder / GOOGLE_VOCAB_NAME} has {len(vocab)} pieces but {GOOGLE_CONFIG_NAME} "
            f"says vocab_size {config.vocab_size}"
        )
    variables = read_tf_checkpoint(folder / GOOGLE_CHECKPOINT_PREFIX)
    state_dict = state_dict_from_tf(variables, config.num_hidden_layers)
    word_embeddings = state_dict["bert.embeddings.word_embeddings.weight"]
    if tuple(word_embeddings.shape) != (config.vocab_size, config.hidden_size):
        raise ValueError(
            f"the checkpoint's word embeddings are {tuple(word_embeddings.shape)}, but "
            f"{GOOGLE_CONFIG_NAME} says ({config.vocab_size}, {config.hidden_size})"
        )
    options = TokenizerOptions(lowercase=infer_lowercase(vocab) if lowercase is None else lowercase)
    tokenizer = Tokenizer(vocab, options)
    with atomic_directory(out) as temporary:
        save_model(
            temporary, config.to_dict() | {"architectures": ["BertForPreTraining"]}, state_dict
        )
        tokenizer.save_pretrained(temporary)
    logger.info(
        "converted %s: %d layers, hidden %d, %s vocabulary of %d pieces",
        folder,
        config.num_hidden_layers,
        config.hidden_size,
        "uncased" if options.lowercase else "cased",
        len(vocab),
    )
    return out
