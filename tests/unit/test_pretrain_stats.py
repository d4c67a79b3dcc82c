"""The unigram level of held-out batches and the plateau it defines (`pretrain_stats`)."""

from __future__ import annotations

import torch

from bertlab.network.bert import IGNORE_INDEX
from bertlab.training.pretraining.stats import (
    PLATEAU_MARGIN,
    plateau_warning,
    unigram_accuracy,
    unigram_plateau,
)

MASK = 4


def test_the_unigram_level_predicts_the_commonest_word_under_mask_and_copies_the_rest() -> None:
    batch = {
        "input_ids": torch.tensor([[2, MASK, 7, 9, MASK, 3]]),
        "masked_positions": torch.tensor([[1, 2, 3, 4, 0]]),
        "labels": torch.tensor([[8, 7, 5, 8, IGNORE_INDEX]]),
    }
    # [MASK] at 1 and 4: both 8, the commonest there; 7 kept (copied); 9 replaced (5): missed.
    assert unigram_accuracy([batch], MASK) == 3 / 4


def test_the_unigram_level_of_a_causal_run_is_the_commonest_next_token() -> None:
    batch = {"labels": torch.tensor([[5, 5, 6, IGNORE_INDEX]])}  # (B, L), nothing visible
    assert unigram_accuracy([batch], MASK) == 2 / 3
    assert unigram_accuracy([], MASK) is None


def test_the_plateau_needs_the_minimum_tokens_and_an_accuracy_near_the_level() -> None:
    values = {"mlm_accuracy": 0.14, "mlm_unigram_accuracy": 0.15}
    assert unigram_plateau(values, 6_000_000, 5_000_000) == (0.14, 0.15)
    assert unigram_plateau(values, 4_000_000, 5_000_000) is None  # too early to tell
    off = {"mlm_accuracy": 0.15 + PLATEAU_MARGIN + 0.01, "mlm_unigram_accuracy": 0.15}
    assert unigram_plateau(off, 6_000_000, 5_000_000) is None
    causal = {"lm_accuracy": 0.05, "lm_unigram_accuracy": 0.06}
    assert unigram_plateau(causal, 1, 0) == (0.05, 0.06)
    assert plateau_warning(None, 6_000_000, 0) is None
    warning = plateau_warning(values, 6_000_000, 5_000_000)
    assert warning.startswith("warning: still on the unigram plateau after 6,000,000 tokens")
    assert "(held-out accuracy 14.0% vs unigram 15.0%)" in warning
