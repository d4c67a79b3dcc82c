"""The transfer experiment's rows and corpora, declared without torch: the tasks of its table
(`ROWS`, per language), the corpora each language pre-trains on, how each row's training file is
split and how its cells are fine-tuned.

`bertlab experiment transfer|strategies --help` lists them fast; `transfer_data` carves the
splits, `transfer_config` and `strategies_config` read the rows.
"""

from __future__ import annotations

from bertlab.apps.experiments.grid import GridTask

TEST_FRACTION = 0.2  # of each task's training file, held out as its test split
DEV_FRACTION = 0.1  # of the rest, held out to pick the best epoch
FINETUNE_LEARNING_RATE = 5e-4  # measured for this model size: docs/budget.md#why-each-choice
FINETUNE_BATCH_SIZE = 32


# The table's rows. SST-2 reads one epoch of its 67k phrases, or ten of 1,000 sentences; SST-2
# and CoLA sentences fit in 64 pieces.
ROWS = {
    "en": (
        GridTask("sst2", "sst2", epochs=1, max_seq_length=64),
        GridTask("sst2-1k", "sst2", epochs=10, max_seq_length=64, max_train_examples=1000),
        GridTask("mrpc", "mrpc"),
        GridTask("stsb", "stsb"),
        GridTask("rte", "rte"),
        GridTask("cola", "cola", max_seq_length=64),
        GridTask("conll2003", "conll2003"),
    ),
    "zh": (
        GridTask("chnsenticorp", "chnsenticorp"),
        GridTask("resume-ner", "resume-ner"),
    ),
}
# Text of the tasks' own kind (the in-domain arms), relative to the data directory: the IMDB
# movie reviews for SST-2's movie-review sentences (another site than SST-2's Rotten Tomatoes).
IN_DOMAIN_CORPORA = {"en": ("corpus_reviews_en/imdb_reviews.txt.gz",), "zh": ()}
# The pre-training corpora of each language, relative to the data directory.
CORPORA = {
    "en": ("corpus_en/enwiki_sample_2014.txt.gz", "corpus_en/enwiki_sample_2021.txt.gz"),
    "zh": (
        "corpus_zh/zhwiki_bert_sampled.txt",
        "corpus_zh/CLUECorpusSmall_bert_sampled.txt",
    ),
}
