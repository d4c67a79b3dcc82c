"""The models that ship with bertlab (`bertlab:NAME`): one row each, the one place their facts live.

`make models` (`tools/ship_model.py`) pre-trains each row on its corpus for its budget and writes
its description, command and license into the card in `bertlab/models/NAME/README.md`; the demo
says what the shipped model beside its own is in the row's `about`. A test ties the rows to the
cards: the figures a card states are the row's.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePosixPath

from bertlab.core.hub import SHIPPED_PREFIX

SHARED_DATA = "../shared/data"  # where `make models` reads the shared data, beside the checkout
CHECKPOINT_MINUTES = 10  # `make models` checkpoints, so that an interrupted run resumes


@dataclass(frozen=True)
class ShippedModel:
    """One shipped model: what it is pre-trained on, for how long, and what is said of it."""

    name: str
    lang: str
    shape: str  # a PRESETS name: the budget recipe's for `budget_minutes`
    corpus: tuple[str, ...]  # relative to the shared data; "bertlab/..." to the repository
    budget_minutes: float
    documents: int  # in the corpus, as pre-training counts them (the card's Training data)
    description: str  # the card's words
    about: str  # the demo report's words: how it was made
    license: str

    def command(self) -> str:
        """The `bertlab pretrain` command that makes it, as its card gives it."""
        corpus = " ".join(
            path if path.startswith("bertlab/") else str(PurePosixPath(SHARED_DATA) / path)
            for path in self.corpus
        )
        return (
            f"bertlab pretrain --corpus {corpus} --budget {self.budget_minutes:g}m "
            f"--checkpoint-minutes {CHECKPOINT_MINUTES} --out runs/models/{self.name}"
        )


SHIPPED_MODELS = (
    ShippedModel(
        name="mini-reviews-en",
        lang="en",
        shape="mini",
        corpus=("corpus_reviews_en/imdb_reviews.txt.gz",),
        budget_minutes=60,
        documents=100_000,
        description="BERT-mini (4 layers of 256) pre-trained for an hour on 2 CPU cores on the "
        "100,000 IMDB movie reviews, with the recipe of the README's hour (whose run fine-tuned "
        "SST-2 3.6 points above the same model from scratch)",
        about="pre-trained with the budget recipe for an hour on 2 CPU cores on all "
        "100,000 IMDB movie reviews (the demo's slice is 4,571 of them)",
        license="The IMDB Large Movie Review Dataset (Maas et al. 2011, 'Learning Word Vectors "
        "for Sentiment Analysis', ACL) states no license; its README asks users to cite the "
        "paper; research use. The model's weights are released under bertlab's Apache-2.0.",
    ),
    ShippedModel(
        name="mini-reviews-zh",
        lang="zh",
        shape="mini",
        corpus=(
            "corpus_zh/zhwiki_bert_sampled.txt",
            "corpus_zh/CLUECorpusSmall_bert_sampled.txt",
            "bertlab/demo_data/chnsenticorp_unlabeled.txt.gz",
        ),
        budget_minutes=60,
        documents=13_100,
        description="BERT-mini (4 layers of 256) pre-trained for an hour on 2 CPU cores on "
        "the shared Chinese corpus (Wikipedia and CLUECorpusSmall samples) and 8,100 ChnSentiCorp "
        "reviews (text only; none of the demo's labelled reviews)",
        about="pre-trained with the budget recipe for an hour on 2 CPU cores on "
        "samples of Chinese Wikipedia and CLUECorpusSmall and the 8,100 unlabeled ChnSentiCorp "
        "reviews the demo pre-trains on",
        license="Chinese Wikipedia: CC BY-SA 3.0; CLUECorpusSmall and ChnSentiCorp: research use, "
        "no explicit license found (cite the CLUE benchmark and Tan Songbo's ChnSentiCorp). The "
        "model's weights are released under bertlab's Apache-2.0; the Wikipedia part of its "
        "training text is CC BY-SA.",
    ),
)


def shipped_model(name: str) -> ShippedModel:
    """The row of `NAME` or `bertlab:NAME`.

    Raises:
        KeyError: no shipped model of that name (naming the ones there are).
    """
    bare = name.removeprefix(SHIPPED_PREFIX)
    for model in SHIPPED_MODELS:
        if model.name == bare:
            return model
    known = ", ".join(model.name for model in SHIPPED_MODELS)
    raise KeyError(f"no shipped model {name!r}; bertlab ships {known}")
