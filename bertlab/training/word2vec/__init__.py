"""word2vec: static word vectors trained with gensim on a corpus (`vectors`), and what
`bertlab neighbours word2vec` may choose, declared without torch (`options`).
"""
