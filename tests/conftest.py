"""Shared fixtures. The tiny test model follows STYLE.md: vocab 99, hidden 32, 2 layers, 4 heads."""

from __future__ import annotations

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
