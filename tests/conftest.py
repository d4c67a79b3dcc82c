"""Shared fixtures. The tiny test model follows STYLE.md: vocab 99, hidden 32, 2 layers, 4 heads."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import gzip
import hashlib
import os
import random
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch

from bertlab.core.config import BertConfig
from bertlab.corpus.build import build_corpus
from bertlab.tokenizer.wordpiece import Tokenizer
from bertlab.training.pretraining import loop as pretrain_loop

REPO_ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"
TEST_DATA = Path(__file__).resolve().parent / "data"


@pytest.fixture
def one_thread() -> Iterator[None]:
    """Torch on one thread for a test: tiny models spend their time in thread hand-offs, and on a
    busy 2-core machine two threads make a step up to 20x slower than one. A module opts in with
    `pytestmark = pytest.mark.usefixtures("one_thread")`."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def tiny_config() -> BertConfig:
    return BertConfig(
        vocab_size=99,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=37,
        max_position_embeddings=64,
        type_vocab_size=2,
    )


@pytest.fixture
def odd_config() -> BertConfig:
    """Every size different, so that a swapped dimension cannot go unnoticed."""
    return BertConfig(
        vocab_size=101,
        hidden_size=48,
        num_hidden_layers=3,
        num_attention_heads=6,
        intermediate_size=70,
        max_position_embeddings=40,
        type_vocab_size=3,
    )


@pytest.fixture
def batch() -> dict[str, torch.Tensor]:
    """Two sequences, the second padded, with A/B segments."""
    generator = torch.Generator().manual_seed(0)
    input_ids = torch.randint(5, 99, (2, 11), generator=generator)
    attention_mask = torch.ones(2, 11, dtype=torch.int64)
    attention_mask[1, 7:] = 0
    input_ids[1, 7:] = 0
    token_type_ids = torch.zeros(2, 11, dtype=torch.int64)
    token_type_ids[0, 6:] = 1
    token_type_ids[1, 4:7] = 1
    return {
        "input_ids": input_ids,
        "attention_mask": attention_mask,
        "token_type_ids": token_type_ids,
    }


@pytest.fixture
def shared_data() -> Path:
    """The shared public datasets beside the checkout; tests using it skip when it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared data not found at {SHARED_DATA}")
    return SHARED_DATA


# --- a synthetic corpus for fast pre-training tests (no shared data needed) ---------------------

PRETRAIN_SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
PRETRAIN_NUM_WORDS = 120


def write_pretrain_vocab(directory: Path) -> Path:
    words = [f"w{index}" for index in range(PRETRAIN_NUM_WORDS)]
    path = directory / "vocab.txt"
    path.write_text("\n".join(PRETRAIN_SPECIAL_TOKENS + words + ["."]) + "\n", encoding="utf-8")
    return path


def write_pretrain_corpus(path: Path, num_documents: int = 30, seed: int = 0) -> Path:
    """Documents of 4-12 sentences, each of 3-15 words drawn with a skewed distribution."""
    rng = random.Random(seed)
    documents = []
    for _ in range(num_documents):
        sentences = []
        for _ in range(rng.randint(4, 12)):
            length = rng.randint(3, 15)
            words = [
                f"w{min(int(rng.expovariate(0.08)), PRETRAIN_NUM_WORDS - 1)}" for _ in range(length)
            ]
            sentences.append(" ".join(words) + " .")
        documents.append("\n".join(sentences))
    path.write_text("\n\n".join(documents) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def pretrain_files(tmp_path_factory) -> tuple[Path, Path]:
    """(vocab.txt, corpus.txt) of the synthetic word-level corpus: 30 documents."""
    directory = tmp_path_factory.mktemp("pretrain_files")
    return write_pretrain_vocab(directory), write_pretrain_corpus(directory / "corpus.txt")


@pytest.fixture
def tiny_pretraining(pretrain_files, tmp_path, tiny_config):
    """What an in-process `training.pretrain_loop.pretrain` run needs besides its model and
    settings: the tokenizer of `pretrain_files`, its corpus built under tmp_path, and
    `tiny_config` at that vocabulary's size."""
    vocab, corpus_file = pretrain_files
    tokenizer = Tokenizer.from_pretrained(vocab)
    corpus = build_corpus([corpus_file], tokenizer, tmp_path / "corpus", show_progress=False)
    return tokenizer, corpus, dataclasses.replace(tiny_config, vocab_size=tokenizer.vocab_size)


@pytest.fixture
def pretraining_step(monkeypatch) -> Callable[[], int]:
    """The number of the pre-training loop's step running now (1 in the first `_step`, 0
    before it), counted by wrapping `training.pretrain_loop._Run._step`."""
    count = 0
    original = pretrain_loop._Run._step

    def counted(self, *args, **kwargs):
        nonlocal count
        count += 1
        return original(self, *args, **kwargs)

    monkeypatch.setattr(pretrain_loop._Run, "_step", counted)
    return lambda: count


def write_repetitive_corpus(path: Path, num_documents: int = 600, seed: int = 0) -> Path:
    """Documents of two sentences that repeat one of 4 words, so that a masked word is the word
    of the rest of its sequence: a tiny model learns it far beyond the word frequencies."""
    rng = random.Random(seed)
    documents = []
    for _ in range(num_documents):
        word = f"w{rng.randrange(4)}"
        documents.append("\n".join(" ".join([word] * rng.randint(8, 14)) for _ in range(2)))
    path.write_text("\n\n".join(documents) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def repetitive_pretrain_files(tmp_path_factory) -> tuple[Path, Path]:
    """(vocab.txt, corpus.txt) of `write_repetitive_corpus`: 600 documents, 12 held out."""
    directory = tmp_path_factory.mktemp("repetitive_pretrain_files")
    return write_pretrain_vocab(directory), write_repetitive_corpus(directory / "corpus.txt")


@pytest.fixture(scope="session")
def task_vocab(tmp_path_factory) -> Path:
    """A vocab.txt with every lower-cased word, punctuation mark and character of the task
    fixtures in tests/data/tasks, so tiny fine-tuning runs see few [UNK]s."""
    import re

    from bertlab.tokenizer.wordpiece import SPECIAL_TOKENS

    text = " ".join(path.read_text(encoding="utf-8") for path in (TEST_DATA / "tasks").iterdir())
    words = set(re.findall(r"\w+|[^\w\s]", text.lower())) | set(text.lower()) - set(" \t\r\n")
    path = tmp_path_factory.mktemp("task_vocab") / "vocab.txt"
    path.write_text("\n".join([*SPECIAL_TOKENS, *sorted(words)]) + "\n", encoding="utf-8")
    return path


PRETRAIN_VOCAB_SIZE = len(PRETRAIN_SPECIAL_TOKENS) + PRETRAIN_NUM_WORDS + 1  # and "."


@pytest.fixture
def tiny_pretrain_args(pretrain_files, tmp_path) -> Callable[..., list[str]]:
    """`tiny_pretrain_args(out, *extra)`: the arguments of a `bertlab pretrain` run of a tiny
    model (hidden 32, 2 layers) on the synthetic corpus, sequences of 32, batches of 8."""
    vocab, corpus = pretrain_files
    config = tmp_path / "tiny_config.json"
    BertConfig(
        vocab_size=PRETRAIN_VOCAB_SIZE,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=64,
    ).to_json_file(config)

    def args(out: Path, *extra: str) -> list[str]:
        return [
            "pretrain",
            "--corpus", str(corpus),
            "--tokenizer", str(vocab),
            "--config", str(config),
            "--max-seq-length", "32",
            "--batch-size", "8",
            "--eval-examples", "16",
            "--corpus-cache", str(tmp_path / "tiny_corpus"),
            "--no-progress",
            "--out", str(out),
            *extra,
        ]  # fmt: skip

    return args


SST2_TRAIN_ROWS = 40  # of bertlab/demo_data/sst2_train.tsv, and the next 20 as a dev set
SST2_DEV_ROWS = 20


@pytest.fixture(scope="session")
def sst2_files(tmp_path_factory) -> tuple[Path, Path, Path]:
    """(train.tsv, dev.tsv, vocab.txt): a few rows of the demo's SST-2 file and a vocabulary of
    their words, for tiny `bertlab finetune --task sst2` runs."""
    import re

    from bertlab.tokenizer.wordpiece import SPECIAL_TOKENS

    directory = tmp_path_factory.mktemp("sst2")
    lines = (REPO_ROOT / "bertlab" / "demo_data" / "sst2_train.tsv").read_text().splitlines()
    header, rows = lines[0], lines[1 : 1 + SST2_TRAIN_ROWS + SST2_DEV_ROWS]
    train, dev = directory / "train.tsv", directory / "dev.tsv"
    train.write_text("\n".join([header, *rows[:SST2_TRAIN_ROWS]]) + "\n", encoding="utf-8")
    dev.write_text("\n".join([header, *rows[SST2_TRAIN_ROWS:]]) + "\n", encoding="utf-8")
    words = sorted(set(re.findall(r"\w+|[^\w\s]", "\n".join(rows).lower())))
    vocab = directory / "vocab.txt"
    vocab.write_text("\n".join([*SPECIAL_TOKENS, *words]) + "\n", encoding="utf-8")
    return train, dev, vocab


def cli_environment() -> dict[str, str]:
    """The environment for `python -m bertlab` in a subprocess: the repository root first on
    PYTHONPATH, so it runs where bertlab is installed and where it only sits in the checkout."""
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), path]))}


@pytest.fixture
def cli_env() -> dict[str, str]:
    """`cli_environment()`: pass as `env=` to a subprocess running `sys.executable -m bertlab`."""
    return cli_environment()


@pytest.fixture(scope="module")
def module_cli_env() -> dict[str, str]:
    """`cli_env` for a module-scoped fixture that runs the CLI."""
    return cli_environment()


# --- a local Hugging Face Hub cache (no network): models--org--name/snapshots/<commit>/ ----------

# Words of the tiny "released" test model's vocabulary: enough for the docs' examples and the
# task fixtures to tokenize into real pieces.
HUB_WORDS = (
    "the a an of to and in is was it this that film movie story good bad great dull funny "
    "long short best worst day night capital city country france paris london man woman "
    "sat on mat cat dog i you he she we they love hate not very too far gripping boring "
    "beautiful awful fun sentence pair . , ! ? ' -"
).split()


def write_hub_model(
    cache: Path,
    repo_id: str,
    folder: Path,
    files: tuple[str, ...] | None = None,
    revision: str = "main",
) -> Path:
    """Put the files of a model `folder` into `cache` as `huggingface_hub` lays out a download:
    content-addressed blobs, symlinks under `snapshots/<commit>/` and `refs/<revision>`.

    Returns:
        The snapshot folder.
    """
    names = files if files is not None else tuple(sorted(p.name for p in folder.iterdir()))
    repo = cache / ("models--" + repo_id.replace("/", "--"))
    commit = hashlib.sha1(f"{repo_id}@{revision}".encode()).hexdigest()
    snapshot = repo / "snapshots" / commit
    snapshot.mkdir(parents=True, exist_ok=True)
    (repo / "blobs").mkdir(exist_ok=True)
    for name in names:
        data = (folder / name).read_bytes()
        blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
        blob.write_bytes(data)
        (snapshot / name).symlink_to(Path("..", "..", "blobs", blob.name))
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / revision).write_text(commit)
    return snapshot


@pytest.fixture(scope="session")
def hub_model_folder(tmp_path_factory) -> Path:
    """A tiny pre-trained BERT folder (config, safetensors weights with the MLM and NSP heads,
    uncased tokenizer) standing in for a released model."""
    from bertlab.network.bert import BertForPreTraining
    from bertlab.tokenizer.wordpiece import SPECIAL_TOKENS, Tokenizer

    vocab = {token: index for index, token in enumerate([*SPECIAL_TOKENS, *HUB_WORDS])}
    config = BertConfig(
        vocab_size=len(vocab),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=37,
        max_position_embeddings=128,  # the tasks' default max_seq_length
    )
    torch.manual_seed(0)
    model = BertForPreTraining(config).eval()
    folder = tmp_path_factory.mktemp("hub_model")
    model.save_pretrained(folder)
    Tokenizer(vocab).save_pretrained(folder)
    return folder


@pytest.fixture
def hub_cache(tmp_path, monkeypatch, hub_model_folder) -> Path:
    """An offline Hugging Face cache (HF_HUB_OFFLINE) holding the tiny model as
    `google-bert/bert-base-uncased`; `write_hub_model` adds more."""
    from huggingface_hub import constants

    cache = tmp_path / "hf-cache"
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    write_hub_model(cache, "google-bert/bert-base-uncased", hub_model_folder)
    return cache


@pytest.fixture
def add_to_hub_cache(hub_cache):
    """`write_hub_model` into the offline cache: (repo_id, folder, files=..., revision=...)."""
    return functools.partial(write_hub_model, hub_cache)


# --- Google's original checkpoints: variable names of google-research/bert modeling.py ----------


def google_variables(model) -> dict:
    """The model's weights under google-research/bert modeling.py's variable names, written out
    one by one (not with the mapping under test); kernels as TensorFlow stores them, (in, out)."""
    weights = {key: value.detach().numpy() for key, value in model.state_dict().items()}
    variables = {
        "bert/embeddings/word_embeddings": weights["bert.embeddings.word_embeddings.weight"],
        "bert/embeddings/position_embeddings": weights[
            "bert.embeddings.position_embeddings.weight"
        ],
        "bert/embeddings/token_type_embeddings": weights[
            "bert.embeddings.token_type_embeddings.weight"
        ],
        "bert/embeddings/LayerNorm/gamma": weights["bert.embeddings.LayerNorm.weight"],
        "bert/embeddings/LayerNorm/beta": weights["bert.embeddings.LayerNorm.bias"],
        "bert/pooler/dense/kernel": weights["bert.pooler.dense.weight"].T,
        "bert/pooler/dense/bias": weights["bert.pooler.dense.bias"],
        "cls/predictions/transform/dense/kernel": weights[
            "cls.predictions.transform.dense.weight"
        ].T,
        "cls/predictions/transform/dense/bias": weights["cls.predictions.transform.dense.bias"],
        "cls/predictions/transform/LayerNorm/gamma": weights[
            "cls.predictions.transform.LayerNorm.weight"
        ],
        "cls/predictions/transform/LayerNorm/beta": weights[
            "cls.predictions.transform.LayerNorm.bias"
        ],
        "cls/predictions/output_bias": weights["cls.predictions.bias"],
        "cls/seq_relationship/output_weights": weights["cls.seq_relationship.weight"],
        "cls/seq_relationship/output_bias": weights["cls.seq_relationship.bias"],
    }
    modules = {
        "attention/self/query": "attention.self.query",
        "attention/self/key": "attention.self.key",
        "attention/self/value": "attention.self.value",
        "attention/output/dense": "attention.output.dense",
        "intermediate/dense": "intermediate.dense",
        "output/dense": "output.dense",
    }
    norms = {
        "attention/output/LayerNorm": "attention.output.LayerNorm",
        "output/LayerNorm": ("output.LayerNorm"),
    }
    for index in range(model.config.num_hidden_layers):
        tf_layer, hf_layer = f"bert/encoder/layer_{index}", f"bert.encoder.layer.{index}"
        for tf_name, hf_name in modules.items():
            variables[f"{tf_layer}/{tf_name}/kernel"] = weights[f"{hf_layer}.{hf_name}.weight"].T
            variables[f"{tf_layer}/{tf_name}/bias"] = weights[f"{hf_layer}.{hf_name}.bias"]
        for tf_name, hf_name in norms.items():
            variables[f"{tf_layer}/{tf_name}/gamma"] = weights[f"{hf_layer}.{hf_name}.weight"]
            variables[f"{tf_layer}/{tf_name}/beta"] = weights[f"{hf_layer}.{hf_name}.bias"]
    return variables


@pytest.fixture
def to_google_variables():
    """`google_variables`: a BertForPreTraining's weights under Google's TensorFlow names."""
    return google_variables


# --- `bertlab serve`: tiny models of every kind it serves, and live servers ----------------------

SERVE_SENTIMENT_LABELS = ("negative", "neutral", "positive")  # tests/data/tasks/reviews.csv
SERVE_NER_TAGS = ("O", "B-LOC", "I-LOC", "B-ORG", "I-ORG", "B-PER", "I-PER")  # CoNLL-2003's


@pytest.fixture(scope="session")
def serve_models(tmp_path_factory, task_vocab) -> dict[str, Path]:
    """Random tiny models written as `bertlab pretrain` and `finetune` write them: `mlm` (with
    the masked-LM head), `clm` (left-to-right, as `--objective clm` makes it), `sentiment` (3
    labels), `stsb` (pair regression), `ner` (CoNLL tags) and `qa` (SQuAD)."""
    from bertlab.core.finetune_config import TaskDataConfig
    from bertlab.data.tasks.classification import ColumnSpec
    from bertlab.network.bert import BertForPreTraining
    from bertlab.task_families import make_task
    from bertlab.tokenizer.wordpiece import Tokenizer
    from bertlab.training.finetuning.finetune import write_task_model

    root = tmp_path_factory.mktemp("serve_models")
    tokenizer = Tokenizer.from_pretrained(task_vocab)
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=37,
        max_position_embeddings=128,  # the tasks' default max_seq_length
    )
    torch.manual_seed(0)
    BertForPreTraining(config).save_pretrained(root / "mlm")
    tokenizer.save_pretrained(root / "mlm")
    reviews = ColumnSpec("review", label="sentiment")
    heads = {
        "sentiment": (make_task("classification", reviews), SERVE_SENTIMENT_LABELS),
        "stsb": (make_task("stsb"), None),
        "ner": (make_task("conll2003"), SERVE_NER_TAGS),
        "qa": (make_task("squad", data=TaskDataConfig(squad_max_seq_length=64)), None),
    }
    for name, (task, labels) in heads.items():
        write_task_model(root / name, task.new_head(config, labels), tokenizer, task)
    # last, so that the heads above keep the random weights their tests were written against
    BertForPreTraining(config.replace(is_causal=True)).save_pretrained(root / "clm")
    tokenizer.save_pretrained(root / "clm")
    return {name: root / name for name in ("mlm", "clm", *heads)}


@pytest.fixture(scope="session")
def start_server():
    """`start_server(app)` serves an ASGI app on a free loopback port in a background thread
    and returns its base URL; every server stops when the session ends."""
    import threading
    import time

    import uvicorn

    from bertlab.apps.serve.server import bind

    servers = []

    def start(app) -> str:
        sock = bind("127.0.0.1", 0)
        server = uvicorn.Server(uvicorn.Config(app, log_config=None, access_log=False))
        thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
        thread.start()
        servers.append((server, thread))
        deadline = time.monotonic() + 30
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the test server did not start")
            time.sleep(0.01)
        return f"http://127.0.0.1:{sock.getsockname()[1]}"

    yield start
    for server, thread in servers:
        server.should_exit = True
        thread.join(timeout=10)


# --- another process writing a run directory ----------------------------------------------------

HOLD_LOCK = """
import sys, time
from bertlab.core.atomic import run_lock
with run_lock(sys.argv[1]):
    print("held", flush=True)
    time.sleep(60)
"""


@contextlib.contextmanager
def _held_by_another_process(out: Path) -> Iterator[int]:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(out)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        yield holder.pid
    finally:
        holder.kill()
        holder.wait()


@pytest.fixture
def another_writer() -> Callable[[Path], contextlib.AbstractContextManager[int]]:
    """`with another_writer(out) as pid:` OUT is locked by another process (`run_lock`) while
    the block runs; its pid is what a refused command must name."""
    return _held_by_another_process


# --- the demo with a tiny recipe and a stand-in shipped model (the real ones take minutes) -------

TINY_DEMO = {
    "vocab_size": 2000,
    "num_hidden_layers": 1,
    "hidden_size": 32,
    "num_attention_heads": 2,
    "intermediate_size": 64,
    "max_seq_length": 64,
    "finetune_epochs": 1,
}
TINY_DEMO_TRAIN, TINY_DEMO_TEST = 300, 100  # labelled rows: enough for a run, fast to fine-tune
TINY_DEMO_REVIEWS = 400  # unlabelled reviews: enough for a tiny run, fast to tokenize


@pytest.fixture
def tiny_demo_recipe(tmp_path) -> Callable[[str], object]:
    """`tiny_demo_recipe(lang)`: the language's demo recipe with a tiny model, its first reviews
    and its first labelled rows (files under tmp_path); every field one of `DemoRecipe`'s."""
    from bertlab.apps.demo.config import DATA_DIR, RECIPES

    def head(name: str, rows: int) -> str:
        lines = (DATA_DIR / name).read_text(encoding="utf-8").splitlines()
        path = tmp_path / name
        path.write_text("\n".join(lines[: rows + 1]) + "\n", encoding="utf-8")
        return str(path)

    def recipe(lang: str):
        chosen = RECIPES[lang]
        with gzip.open(DATA_DIR / chosen.corpus, "rt", encoding="utf-8") as source:
            reviews = source.read().split("\n\n")[:TINY_DEMO_REVIEWS]
        corpus = tmp_path / "reviews.txt"
        corpus.write_text("\n\n".join(reviews) + "\n", encoding="utf-8")
        return dataclasses.replace(
            chosen,
            corpus=str(corpus),
            train_file=head(chosen.train_file, TINY_DEMO_TRAIN),
            test_file=head(chosen.test_file, TINY_DEMO_TEST),
            **TINY_DEMO,
        )

    return recipe


@pytest.fixture
def shipped_models(tmp_path, monkeypatch, hub_model_folder) -> Path:
    """bertlab.core.hub.SHIPPED_DIR holding the tiny released model as both languages' shipped
    model: another shape and vocabulary than the demo's."""
    from bertlab.apps.demo.config import RECIPES
    from bertlab.core import hub

    shipped = tmp_path / "shipped"
    for lang in RECIPES:
        name = RECIPES[lang].shipped_model.removeprefix(hub.SHIPPED_PREFIX)
        shutil.copytree(hub_model_folder, shipped / name)
    monkeypatch.setattr(hub, "SHIPPED_DIR", shipped)
    return shipped


# --- LSTM-era model folders, as `bertlab pretrain --architecture A` writes OUT/final ------------

# A learnable toy sentiment task in SST-2's layout: a review's label is the sentiment of its one
# opinion word, around it neutral words in random order.
TOY_POSITIVE = ("good", "great", "fine", "lovely", "superb", "brilliant")
TOY_NEGATIVE = ("bad", "awful", "poor", "dull", "boring", "terrible")
TOY_NEUTRAL = tuple(
    "the film was very really quite a movie story plot acting and it this one show cast "
    "music with ending scene".split()
)
# What the LSTM-era test models read in pre-training besides the reviews: fixed sentences, so
# that a trained model prefers them to their shuffled words.
LSTM_SENTENCES = (
    "the cat sat on the mat .",
    "the dog sat on the rug .",
    "a man walked to the city .",
    "a woman walked to the river .",
)


def toy_reviews(num: int, seed: int) -> list[tuple[str, str]]:
    """(sentence, label) pairs: one opinion word (label "1" for a positive one) among 3 to 8
    neutral words."""
    rng = random.Random(seed)
    rows = []
    for _ in range(num):
        label = rng.randrange(2)
        words = [rng.choice(TOY_NEUTRAL) for _ in range(rng.randrange(3, 9))]
        opinion = rng.choice((TOY_NEGATIVE, TOY_POSITIVE)[label])
        words.insert(rng.randrange(len(words) + 1), opinion)
        rows.append((" ".join(words), str(label)))
    return rows


def write_toy_sst2(path: Path, num: int, seed: int) -> Path:
    """`toy_reviews` as an SST-2 file (sentence<TAB>label, with its header)."""
    lines = ["sentence\tlabel", *(f"{text}\t{label}" for text, label in toy_reviews(num, seed))]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def lstm_vocabulary() -> list[str]:
    """The test models' pieces: the special tokens, every word of the toy reviews, of
    `LSTM_SENTENCES` and of the task fixtures (lower-cased), and their characters."""
    import re

    from bertlab.tokenizer.wordpiece import SPECIAL_TOKENS

    text = " ".join(path.read_text(encoding="utf-8") for path in (TEST_DATA / "tasks").iterdir())
    text += " " + " ".join((*TOY_POSITIVE, *TOY_NEGATIVE, *TOY_NEUTRAL, *LSTM_SENTENCES))
    words = set(re.findall(r"\w+|[^\w\s]", text.lower())) | set(text.lower()) - set(" \t\r\n")
    return [*SPECIAL_TOKENS, *sorted(words)]


def write_lstm_model(
    folder: Path,
    architecture: str,
    tokenizer: Tokenizer,
    sentences: tuple[str, ...] = (),
    steps: int = 0,
    seed: int = 0,
    use_char_cnn: bool = False,
) -> Path:
    """An LSTM-era language model folder as `bertlab pretrain --architecture` writes OUT/final
    (`model.save_pretrained`, the tokenizer and a model card): the architecture's tiny preset at
    the tokenizer's vocabulary, after `steps` AdamW steps of language modelling on `sentences`
    (each `[CLS] sentence [SEP]`, every piece predicting the next; ELMo's backward LM the one
    before)."""
    from bertlab.network.lm_architectures import lm_architecture
    from bertlab.network.lm_base import next_piece_labels

    config_class, model_class = lm_architecture(architecture)
    config = config_class.tiny(vocab_size=tokenizer.vocab_size)
    torch.manual_seed(seed)
    if use_char_cnn:  # ELMo's character CNN over the pieces' characters
        pieces = tokenizer.convert_ids_to_tokens(list(range(tokenizer.vocab_size)))
        model = model_class(config.with_characters(pieces), pieces)
    else:
        model = model_class(config)
    if steps:
        encoding = tokenizer(list(sentences), padding=True)
        ids = torch.tensor(encoding["input_ids"])
        mask = torch.tensor(encoding["attention_mask"])
        labels = next_piece_labels(ids, mask)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
        # Without dropout, as the budget recipe pre-trains them (the config keeps its dropouts
        # for fine-tuning, as `restore_dropout` writes them back into OUT/final).
        model.eval()
        for _ in range(steps):
            optimizer.zero_grad()
            model(ids, mask, labels).loss.backward()
            optimizer.step()
    model.eval().save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    (folder / "README.md").write_text(
        f"# A tiny {architecture} language model for bertlab's tests\n\n"
        f"{steps} steps of language modelling on {len(sentences)} sentences.\n",
        encoding="utf-8",
    )
    return folder


@pytest.fixture(scope="session")
def lstm_tokenizer() -> Tokenizer:
    """The LSTM-era test models' WordPiece tokenizer (`lstm_vocabulary`)."""
    pieces = lstm_vocabulary()
    return Tokenizer({piece: index for index, piece in enumerate(pieces)})


LSTM_PRETRAINING_STEPS = 150


@pytest.fixture(scope="session")
def lstm_models(tmp_path_factory, lstm_tokenizer) -> dict[str, Path]:
    """A pre-trained folder of each LSTM-era architecture (nnlm, elmo, awd-lstm) that has learned
    `LSTM_SENTENCES` and toy reviews (`LSTM_PRETRAINING_STEPS` steps of language modelling)."""
    from bertlab.core.lstm_config import LM_ARCHITECTURE_NAMES

    sentences = (*LSTM_SENTENCES, *(text for text, _ in toy_reviews(60, seed=7)))
    root = tmp_path_factory.mktemp("lstm_models")
    return {
        name: write_lstm_model(root / name, name, lstm_tokenizer, sentences, LSTM_PRETRAINING_STEPS)
        for name in LM_ARCHITECTURE_NAMES
    }


@pytest.fixture(scope="session")
def lstm_sentences() -> tuple[str, ...]:
    """The sentences every `lstm_models` folder learned."""
    return LSTM_SENTENCES


@pytest.fixture(scope="session")
def lstm_model_writer() -> Callable[..., Path]:
    """`write_lstm_model`, for a test that needs a folder of its own."""
    return write_lstm_model


@pytest.fixture(scope="session")
def toy_sst2(tmp_path_factory) -> tuple[Path, Path]:
    """(train.tsv, dev.tsv) of the learnable toy sentiment task (`toy_reviews`), SST-2's layout:
    160 training and 60 dev reviews."""
    directory = tmp_path_factory.mktemp("toy_sst2")
    train = write_toy_sst2(directory / "train.tsv", 160, seed=1)
    return train, write_toy_sst2(directory / "dev.tsv", 60, seed=2)
