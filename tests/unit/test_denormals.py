"""Both training loops flush denormal floats to zero while they train, and only then
(`bertlab.core.runtime.denormals_flushed`): values below ~1.2e-38 take a slow path on x86."""

from __future__ import annotations

import pytest
import torch
from torch.optim.optimizer import register_optimizer_step_pre_hook

from bertlab.core.config import PretrainConfig, PretrainDataConfig
from bertlab.core.finetune_config import FinetuneConfig
from bertlab.core.runtime import set_seed
from bertlab.network.bert import BertForPreTraining
from bertlab.network.heads import BertForSequenceClassification
from bertlab.training.finetuning.loop import train_task_model
from bertlab.training.pretraining import loop as pretrain_loop

pytestmark = pytest.mark.usefixtures("one_thread")

DENORMAL = 1e-39  # a float32 below the smallest normal number, 1.18e-38


def flushed() -> bool:
    return (torch.tensor([DENORMAL]) * 1.0).item() == 0.0


@pytest.fixture
def flushed_at_each_step():
    """Whether denormals were flushed at each optimizer step of the block."""
    seen: list[bool] = []
    handle = register_optimizer_step_pre_hook(lambda *_: seen.append(flushed()))
    yield seen
    handle.remove()


def test_pretraining_flushes_denormals_at_every_step_and_restores_them(
    tiny_pretraining, flushed_at_each_step, tmp_path
):
    tokenizer, corpus, config = tiny_pretraining
    set_seed(0)
    settings = PretrainConfig(batch_size=4, max_steps=3, eval_examples=0, num_workers=0)
    result = pretrain_loop.pretrain(
        BertForPreTraining(config), tokenizer, corpus, PretrainDataConfig(max_seq_length=32),
        settings, tmp_path / "run", show_progress=False,
    )  # fmt: skip
    assert result.progress.step == 3
    assert flushed_at_each_step == [True, True, True]
    assert not flushed()  # IEEE arithmetic again after the run


def test_fine_tuning_flushes_denormals_at_every_step_and_restores_them(
    tiny_config, flushed_at_each_step, tmp_path
):
    model = BertForSequenceClassification(tiny_config, id2label={0: "neg", 1: "pos"})
    features = [
        {"input_ids": [2, 10 + i, 11, 3], "token_type_ids": [0] * 4, "labels": i % 2}
        for i in range(8)
    ]
    config = FinetuneConfig(batch_size=4, num_train_epochs=1)
    train_task_model(
        model, features, config, tmp_path, None, "accuracy", lambda *_: None, show_progress=False
    )
    assert flushed_at_each_step == [True, True]
    assert not flushed()
