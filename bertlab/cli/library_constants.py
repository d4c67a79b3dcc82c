"""Library constants that `--help` shows, as literals, so that building the parser imports no torch.

The modules that declare them (`bertlab.features`, `bertlab.neighbours`, ...) import torch or
gensim, which takes seconds on a busy machine; `bertlab --help` and `bertlab COMMAND --help` must
not wait for that. Each literal names its declaration, and tests/unit/test_cli_light_help.py
checks that the two agree, so they cannot drift apart.
"""

from __future__ import annotations

# bertlab.training.pretrain_run
CORPUS_CACHE_DIR = "corpus"
DEFAULT_MODEL_SIZE = "mini"
LANGS = ("auto", "en", "zh")
# bertlab.feature_heads
LAYER_COMBINATIONS = (
    "embeddings",
    "second-to-last",
    "last",
    "sum-last-four",
    "concat-last-four",
    "sum-all",
    "scalar-mix",
)
# bertlab.runtime
PRECISIONS = ("auto", "fp32", "bf16")
# bertlab.features
POOLINGS = ("pieces", "first", "mean-pieces", "cls", "mean", "last")
FORMATS = ("npy", "safetensors")
PAIR_SEPARATOR = " ||| "
# bertlab.neighbours: DEFAULT_TOP_K, DEFAULT_LAYER, MAX_OCCURRENCES
NEIGHBOURS_TOP_K = 10
NEIGHBOURS_LAYER = -1
MAX_OCCURRENCES = 2000
# bertlab.training.word_vectors: the keys of METHODS, WORD_LANGS, WORD_MIN_COUNT
WORD_METHODS = ("skip-gram", "cbow")
WORD_LANGS = ("en", "zh")
WORD_MIN_COUNT = 5
# bertlab.language_model: DEFAULT_TOP_K, DEFAULT_MAX_NEW_TOKENS
GENERATE_TOP_K = 50
DEFAULT_MAX_NEW_TOKENS = 40

# (literal here, module, name there): what tests/unit/test_cli_light_help.py compares.
DECLARED_IN = (
    ("CORPUS_CACHE_DIR", "bertlab.training.pretrain_run", "CORPUS_CACHE_DIR"),
    ("DEFAULT_MODEL_SIZE", "bertlab.training.pretrain_run", "DEFAULT_MODEL_SIZE"),
    ("LANGS", "bertlab.training.pretrain_run", "LANGS"),
    ("LAYER_COMBINATIONS", "bertlab.feature_heads", "LAYER_COMBINATIONS"),
    ("PRECISIONS", "bertlab.runtime", "PRECISIONS"),
    ("POOLINGS", "bertlab.features", "POOLINGS"),
    ("FORMATS", "bertlab.features", "FORMATS"),
    ("PAIR_SEPARATOR", "bertlab.features", "PAIR_SEPARATOR"),
    ("NEIGHBOURS_TOP_K", "bertlab.neighbours", "DEFAULT_TOP_K"),
    ("NEIGHBOURS_LAYER", "bertlab.neighbours", "DEFAULT_LAYER"),
    ("MAX_OCCURRENCES", "bertlab.neighbours", "MAX_OCCURRENCES"),
    ("WORD_METHODS", "bertlab.training.word_vectors", "METHODS"),
    ("WORD_LANGS", "bertlab.training.word_vectors", "WORD_LANGS"),
    ("WORD_MIN_COUNT", "bertlab.training.word_vectors", "WORD_MIN_COUNT"),
    ("GENERATE_TOP_K", "bertlab.language_model", "DEFAULT_TOP_K"),
    ("DEFAULT_MAX_NEW_TOKENS", "bertlab.language_model", "DEFAULT_MAX_NEW_TOKENS"),
)
