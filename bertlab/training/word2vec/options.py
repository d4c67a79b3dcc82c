"""What word2vec training may choose (`bertlab neighbours word2vec`), declared without torch or
gensim so that its `--help` lists them fast; `bertlab.training.word2vec.vectors` trains.
"""

METHODS = {"skip-gram": 1, "cbow": 0}  # gensim's `sg` flag
WORD_LANGS = ("en", "zh")
WORD_MIN_COUNT = 5  # word2vec's (and gensim's) default: rarer words get no vector
