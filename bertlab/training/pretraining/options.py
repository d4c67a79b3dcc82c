"""What `bertlab pretrain` may choose and the folders a run writes, declared without torch so
that its `--help` shows them fast; `bertlab.training.pretraining.run` reads them.
"""

CORPUS_CACHE_DIR = "corpus"  # OUT/corpus: the tokenized corpus, unless `corpus_cache` says
TOKENIZER_DIR = "tokenizer"  # OUT/tokenizer: a vocabulary trained on the corpus
DEFAULT_MODEL_SIZE = "mini"
LANGS = ("auto", "en", "zh")
