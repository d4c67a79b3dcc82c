"""What `bertlab demo` runs on and with: the data shipped for each language, the recipe, the
shipped model it sets beside its own, and the names of the report's rows."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bertlab.training.pretraining.budget import BudgetRecipe

DATA_DIR = Path(__file__).resolve().parents[2] / "demo_data"
DEFAULT_OUT = Path("runs") / "demo"
PRETRAIN_DIR = "pretrain"  # OUT/pretrain: the demo's pre-training run (`bertlab.core.run_folder`)
# Of live pre-training. It ends on the unigram plateau at 1 minute as at 3 (docs/demo.md), and
# the shipped model's fine-tuning needs the time: the whole demo stays within 8 minutes on 2 cores.
DEFAULT_MINUTES = 1.0
DEFAULT_SEEDS = (1, 2, 3, 4, 5)
DEV_FRACTION = 0.1  # of the labelled sentences, held out to pick the best epoch
EVAL_EXAMPLES = 256  # held-out sequences of pre-training
NEIGHBOURS = 5  # word-vector neighbours shown per word
TOP_K = 5  # fill-mask candidates shown per sentence

# The rows of the report, as it names them (and their folders: `run_name`).
PRETRAINED, WORD_VECTORS, SCRATCH = "pre-trained", "word vectors", "from scratch"
SHIPPED, SHIPPED_SCRATCH = "shipped model", "its shape from scratch"
MODELS = (PRETRAINED, WORD_VECTORS, SCRATCH)  # the demo's own shape
SHIPPED_MODELS = (SHIPPED, SHIPPED_SCRATCH)  # the shipped model's shape
NUMBERS = {1: "one", 2: "two", 3: "three"}  # how many of MODELS ran, in words
# Each row and the scratch rows it is judged against (SHIPPED_SCRATCH when it was run).
BASELINES = {
    PRETRAINED: (SCRATCH,),
    WORD_VECTORS: (SCRATCH,),
    SHIPPED: (SHIPPED_SCRATCH, SCRATCH),
}


@dataclass(frozen=True)
class DemoRecipe:
    """What the demo runs on and with, for one language.

    Pre-training follows the budget recipe for the demo's minutes (`training/pretraining/budget.py`:
    packed masked LM at its masking rate, sinusoidal positions, no dropout, one-cycle at its peak
    rate); the shape is BERT-Tiny's (Turc et al. 2019), the recipe's below half an hour.
    `shipped_model` is fine-tuned beside it unless `--model` names another.
    """

    lang: str
    corpus: str  # unlabeled in-domain text in demo_data/
    task: str
    train_file: str
    test_file: str
    example_sentence: str
    fill_mask_sentences: tuple[str, ...]
    neighbour_words: tuple[str, ...]
    finetune_max_seq_length: int
    shipped_model: str  # `bertlab:NAME`, a row of bertlab.core.shipped.SHIPPED_MODELS
    vocab_size: int = BudgetRecipe.vocab_size
    num_hidden_layers: int = 2
    hidden_size: int = 128
    num_attention_heads: int = 2
    intermediate_size: int = 512
    max_seq_length: int = BudgetRecipe.max_seq_length
    finetune_learning_rate: float = 1e-3  # measured: 2e-4 x 3 epochs stayed at the majority
    # The shipped model and its twin (BERT-mini) fine-tune at their own rate, measured on SST-2:
    # at 1e-3 and 5e-4 one of 3 seeds of the twin learned one class; at 3e-4 neither row did in
    # 5 seeds, and the shipped model scored its best median.
    shipped_learning_rate: float = 3e-4
    # Their batch. Chinese has half English's labelled sentences (28 steps an epoch at 32): the
    # hour's Chinese model (fp32 weights) scored 80.0% (78.8-81.0) at 16 against 77.2%
    # (73.8-79.6) at 32, and the demo's BERT-Tiny scratch row did not gain from 16.
    shipped_batch_size: int = 32
    finetune_epochs: int = 4
    finetune_batch_size: int = 32
    # The shipped model is fine-tuned with the first `shipped_seeds` of the seeds and its random
    # twin with the first `twin_seeds` (at most the model's; 0: the twin is not run): a BERT-mini
    # fine-tuning costs 3.4 (English) to 4.7 (Chinese) of BERT-Tiny's, measured
    # (docs/demo.md#how-long-it-takes).
    shipped_seeds: int = 5
    twin_seeds: int = 3


RECIPES = {
    "en": DemoRecipe(
        lang="en",
        corpus="imdb_reviews_slice.txt.gz",
        task="sst2",
        train_file="sst2_train.tsv",
        test_file="sst2_test.tsv",
        example_sentence="The unbelievably charming film was shot in Kathmandu.",
        fill_mask_sentences=(
            "The movie was [MASK].",
            "I have never seen such a [MASK] film.",
            "The acting was [MASK] and the plot made no sense.",
            "This is one of the best [MASK] I have ever seen.",
            "The music was beautiful and the [MASK] was great.",
        ),
        neighbour_words=("great", "terrible", "boring", "actor", "funny"),
        finetune_max_seq_length=64,
        shipped_model="bertlab:mini-reviews-en",
    ),
    "zh": DemoRecipe(
        lang="zh",
        corpus="chnsenticorp_unlabeled.txt.gz",
        task="chnsenticorp",
        train_file="chnsenticorp_train.tsv",
        test_file="chnsenticorp_test.tsv",
        example_sentence="这家酒店的服务非常周到，房间也很干净。",
        fill_mask_sentences=(
            "这家酒店的服务很[MASK]。",
            "房间很干净，价格也很便[MASK]。",
            "这本书写得太[MASK]了。",
            "电脑的[MASK]量很好，运行速度也快。",
            "我再也不会住这家[MASK]店了。",
        ),
        neighbour_words=("好", "差", "脏", "书", "贵"),
        # Reviews of 75 characters (median), a quarter over 156: 96 keeps most of them whole
        # and the fine-tuning runs within the demo's 8 minutes.
        finetune_max_seq_length=96,
        shipped_model="bertlab:mini-reviews-zh",
        shipped_batch_size=16,
        # The reviews are longer: 43 s a BERT-mini run at batch 16 against 29 s in English. The
        # shipped model's 5 seeds fit the 8 minutes, its twin's do not: with 3 + 3 runs the demo
        # took 7 min 58 s (docs/demo.md), so the twin is not run (the lab measures it).
        shipped_seeds=5,
        twin_seeds=0,
    ),
}
