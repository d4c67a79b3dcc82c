"""What `bertlab experiment lineage` may choose and its defaults, declared without torch so that
its `--help` lists them fast: the arms (`ARMS`, one row each), the tasks of each language and
how each is measured (`TASKS`), the probe words (`PROBES`) and the papers' own figures
(`PAPER_FIGURES`). `lineage_config.LineageConfig` reads them; the run (`lineage`) looks each
arm's pre-training, reading and fine-tuning up by the keys its row holds, and never compares an
arm's name.
"""

from __future__ import annotations

from dataclasses import dataclass

from bertlab.apps.experiments.grid import GridTask

DEFAULT_LANG = "en"
DEFAULT_BUDGET_MINUTES = 20.0  # per pre-trained arm
DEFAULT_SEEDS = (1, 2, 3)

# How an arm is pre-trained (`lineage.PRETRAININGS`): `bertlab pretrain --architecture`,
# word2vec for the budget's minutes, or not at all.
NETWORK, WORD2VEC, NO_PRETRAINING = "network", "word2vec", "none"
# How its layers are read (`lineage_models.READERS`): a BERT's hidden states, an LSTM-era
# language model's `layers`, one static vector per piece, a random BERT of the recipe's shape.
BERT_LAYERS, LM_LAYERS, VECTOR_LAYERS, RANDOM_BERT_LAYERS = "bert", "lm", "vectors", "random"
# How it is fine-tuned in its paper's way (`lineage_finetune.PAPER_WAYS`): BERT's and GPT's
# (the whole network, a task layer on top), ULMFiT's (Howard & Ruder 2018 Sec. 3.3), ELMo's
# (Peters et al. 2018 Sec. 3.3: frozen biLM, learned scalar mix, the task's BiLSTM) and the
# static vectors' (frozen, as the input of a task model trained from random weights).
WHOLE_NETWORK, ULMFIT, ELMO_FEATURES, FROZEN_VECTORS = "whole", "ulmfit", "elmo", "vectors"


@dataclass(frozen=True)
class Arm:
    """One row of the table: a model of the lineage, pre-trained (or not) on the experiment's
    corpus with its vocabulary for the budget's minutes.

    Attributes:
        name: what `--arms` takes and results.json keys it by.
        label: the row's label.
        paper: where the model comes from.
        pretraining: NETWORK, WORD2VEC or NO_PRETRAINING.
        architecture: `bertlab pretrain --architecture` (NETWORK arms).
        objective: `bertlab pretrain --objective`; None: the recipe's or the network's own.
        reading: how the probes, the linear probe and the tagger read its layers.
        way: how it fine-tunes in its paper's way.
        is_control: a static arm, the probes' control (one vector per piece, whatever the
            sentence; NNLM's is its table C, layer 0).
        is_baseline: the arm every other is judged against (no pre-training).
        skips: the methods it has no cell of: all but BERT skip the whole network's tagger
            (BERT's Sec. 5.3 sets it against the features).
    """

    name: str
    label: str
    paper: str
    pretraining: str
    reading: str
    way: str
    architecture: str | None = None
    objective: str | None = None
    is_control: bool = False
    is_baseline: bool = False
    skips: tuple[str, ...] = ("whole",)


ARMS = (
    Arm(
        "nnlm",
        "NNLM",
        "Bengio et al. 2003",
        NETWORK,
        LM_LAYERS,
        FROZEN_VECTORS,
        architecture="nnlm",
        is_control=True,
    ),
    Arm(
        "word2vec",
        "word2vec (skip-gram)",
        "Mikolov et al. 2013",
        WORD2VEC,
        VECTOR_LAYERS,
        FROZEN_VECTORS,
        is_control=True,
    ),
    Arm("elmo", "ELMo's biLM", "Peters et al. 2018", NETWORK, LM_LAYERS, ELMO_FEATURES, "elmo"),
    Arm(
        "awd-lstm",
        "AWD-LSTM, ULMFiT's classifier",
        "Merity et al. 2017; Howard & Ruder 2018",
        NETWORK,
        LM_LAYERS,
        ULMFIT,
        "awd-lstm",
    ),
    Arm(
        "gpt",
        "GPT (a left-to-right BERT)",
        "Radford et al. 2018",
        NETWORK,
        BERT_LAYERS,
        WHOLE_NETWORK,
        "bert",
        objective="clm",
    ),
    Arm(
        "bert",
        "BERT (the budget recipe)",
        "Devlin et al. 2019",
        NETWORK,
        BERT_LAYERS,
        WHOLE_NETWORK,
        "bert",
        skips=(),
    ),
    Arm(
        "scratch",
        "no pre-training",
        "",
        NO_PRETRAINING,
        RANDOM_BERT_LAYERS,
        WHOLE_NETWORK,
        is_baseline=True,
    ),
)
ARM_NAMES = tuple(arm.name for arm in ARMS)

# How a task is measured, each a row of results.json's scores (`<task>:<method>`):
PAPER_WAY = "paper"  # fine-tuned in the arm's paper's way
LINEAR_PROBE = "probe"  # one linear layer on the frozen mean-pooled layers, the same for all
MIX_TAGGER = "mix"  # a BiLSTM tagger over the learned scalar mix of the frozen layers
FINE_TUNED_WHOLE = "whole"  # the whole network fine-tuned as a tagger (see `Arm.skips`)
METHOD_LABELS = {
    PAPER_WAY: "fine-tuned, its paper's way",
    LINEAR_PROBE: "linear probe on frozen features",
    MIX_TAGGER: "BiLSTM over the scalar mix",
    FINE_TUNED_WHOLE: "fine-tuned whole",
}


@dataclass(frozen=True)
class LineageTask:
    """A task of the table: a registered task with its fine-tuning budget, measured by each of
    `methods`."""

    name: str
    task: GridTask
    methods: tuple[str, ...]


# SST-2 reads one epoch of its carved phrases, or ten of 1,000 sentences (as `experiment
# transfer`); CoNLL-2003 three epochs of 5,000 sentences (as `experiment ablation`).
TASKS = {
    "en": (
        LineageTask(
            "sst2-1k",
            GridTask("sst2-1k", "sst2", epochs=10, max_seq_length=64, max_train_examples=1000),
            (PAPER_WAY, LINEAR_PROBE),
        ),
        LineageTask(
            "sst2",
            GridTask("sst2", "sst2", epochs=1, max_seq_length=64),
            (PAPER_WAY, LINEAR_PROBE),
        ),
        LineageTask(
            "conll2003",
            GridTask("conll2003", "conll2003", epochs=3, max_train_examples=5000),
            (MIX_TAGGER, FINE_TUNED_WHOLE),
        ),
    ),
    "zh": (
        LineageTask(
            "chnsenticorp-1k",
            GridTask("chnsenticorp-1k", "chnsenticorp", epochs=10, max_train_examples=1000),
            (PAPER_WAY, LINEAR_PROBE),
        ),
        LineageTask(
            "chnsenticorp", GridTask("chnsenticorp", "chnsenticorp"), (PAPER_WAY, LINEAR_PROBE)
        ),
        LineageTask(
            "resume-ner",
            GridTask("resume-ner", "resume-ner", epochs=3),
            (MIX_TAGGER, FINE_TUNED_WHOLE),
        ),
    ),
}
# The pre-training corpus of each language, relative to the data directory: the shared corpora
# (the IMDB reviews, in SST-2's domain, for English).
CORPORA = {
    "en": ("corpus_reviews_en/imdb_reviews.txt.gz",),
    "zh": (
        "corpus_zh/zhwiki_bert_sampled.txt",
        "corpus_zh/CLUECorpusSmall_bert_sampled.txt",
        "corpus_zh/zhwiki_AA_wiki_00.txt",
    ),
}


@dataclass(frozen=True)
class Probe:
    """A probe word and its sense-labelled sentences: `senses/<word>.tsv` in this package,
    built from the shared corpora by `tools/make_sense_sentences.py`'s rules."""

    word: str
    lang: str
    corpus: str  # where its sentences come from, in words


PROBES = {
    "play": Probe("play", "en", "the IMDB movie reviews"),
    "bank": Probe("bank", "en", "the 2014 English Wikipedia sample"),
}
DEFAULT_PROBES = {"en": ("play", "bank"), "zh": ()}

# The papers' own figures, printed in brackets beside ours (their data, splits and sizes, not
# ours): (task, method) -> arm -> (value in %, where it is from).
PAPER_FIGURES: dict[tuple[str, str], dict[str, tuple[float, str]]] = {
    ("sst2", PAPER_WAY): {
        "elmo": (90.4, "GLUE test, BiLSTM+ELMo+Attn: BERT paper Table 1"),
        "gpt": (91.3, "GLUE test, OpenAI GPT: BERT paper Table 1"),
        "bert": (93.5, "GLUE test, BERT-base: BERT paper Table 1"),
    },
    ("conll2003", MIX_TAGGER): {
        "elmo": (92.22, "test F1, ELMo + baseline: ELMo paper Table 1"),
        "bert": (95.5, "dev F1, BERT-base weighted sum of all layers: BERT paper Table 7"),
    },
    ("conll2003", FINE_TUNED_WHOLE): {
        "bert": (96.4, "dev F1, BERT-base fine-tuned: BERT paper Table 7"),
    },
}
