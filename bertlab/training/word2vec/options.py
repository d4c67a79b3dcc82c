"""What word2vec training may choose (`bertlab neighbours word2vec`), declared without torch or
gensim so that its `--help` lists them fast; `bertlab.training.word2vec.vectors` trains.
"""

from bertlab.corpus.sources import LANGS

METHODS = {"skip-gram": 1, "cbow": 0}  # gensim's `sg` flag
# How words are split: by the rules of a language (`bertlab.corpus.text_units`), never "auto".
WORD_LANGS = tuple(lang for lang in LANGS if lang != "auto")
WORD_MIN_COUNT = 5  # word2vec's (and gensim's) default: rarer words get no vector
