"""Shared fixtures. The tiny test model follows STYLE.md: vocab 99, hidden 32, 2 layers, 4 heads."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import torch

from bertlab.config import BertConfig

REPO_ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"
TEST_DATA = Path(__file__).resolve().parent / "data"


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


@pytest.fixture(scope="session")
def task_vocab(tmp_path_factory) -> Path:
    """A vocab.txt with every lower-cased word, punctuation mark and character of the task
    fixtures in tests/data/tasks, so tiny fine-tuning runs see few [UNK]s."""
    import re

    from bertlab.tokenization import SPECIAL_TOKENS

    text = " ".join(path.read_text(encoding="utf-8") for path in (TEST_DATA / "tasks").iterdir())
    words = set(re.findall(r"\w+|[^\w\s]", text.lower())) | set(text.lower()) - set(" \t\r\n")
    path = tmp_path_factory.mktemp("task_vocab") / "vocab.txt"
    path.write_text("\n".join([*SPECIAL_TOKENS, *sorted(words)]) + "\n", encoding="utf-8")
    return path
