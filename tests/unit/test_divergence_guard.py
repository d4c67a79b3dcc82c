"""The divergence guard when the finite check waits for the device (CUDA): the fused AdamW skips
every update from the first non-finite step on, and the run stops at the next log, evaluation or
checkpoint, naming that step, with the weights of the last finite step. On the CPU the check is
free and immediate; here the deferred path runs on the CPU too, where the fused AdamW also skips."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from bertlab.core.config import PretrainConfig, PretrainDataConfig
from bertlab.core.runtime import set_seed
from bertlab.network.bert import BertForPreTraining
from bertlab.training.optim import DivergedError
from bertlab.training.pretraining import loop as pretrain_loop

pytestmark = pytest.mark.usefixtures("one_thread")

BAD_STEP = 6  # its gradient is made infinite; its loss stays finite


def _run_into_a_bad_gradient(tiny_pretraining, out: Path) -> tuple[str, BertForPreTraining, int]:
    """A run whose step BAD_STEP has an infinite gradient: (the error, the model after it, the
    steps it ran)."""
    tokenizer, corpus, config = tiny_pretraining
    set_seed(0)
    model = BertForPreTraining(config)
    backward_passes = 0

    def poison(grad: torch.Tensor) -> torch.Tensor:
        nonlocal backward_passes
        backward_passes += 1
        return grad * float("inf") if backward_passes == BAD_STEP else grad

    model.bert.embeddings.word_embeddings.weight.register_hook(poison)
    settings = PretrainConfig(
        batch_size=4,
        max_steps=20,
        log_every_steps=10,
        eval_examples=0,
        checkpoint_every_steps=4,
        warmup_proportion=0.0,
        num_workers=0,
    )
    data = PretrainDataConfig(max_seq_length=32)
    with pytest.raises(DivergedError) as error:
        pretrain_loop.pretrain(model, tokenizer, corpus, data, settings, out, show_progress=False)
    return str(error.value), model, backward_passes


def test_a_deferred_check_names_the_first_bad_step_and_keeps_its_weights(
    tiny_pretraining, tmp_path, monkeypatch
) -> None:
    now, stopped_at_once, steps = _run_into_a_bad_gradient(tiny_pretraining, tmp_path / "now")
    assert steps == BAD_STEP
    monkeypatch.setattr(pretrain_loop, "host_reads_are_free", lambda device: False)
    later, stopped_later, steps = _run_into_a_bad_gradient(tiny_pretraining, tmp_path / "later")
    assert steps == 8  # read at the step-8 checkpoint
    for error in (now, later):
        assert error.startswith(f"training diverged at step {BAD_STEP}: ")
        assert "the gradient norm is not finite" in error and "step-000004, is kept" in error
        assert "\n" not in error
    # Steps 6 to 8 ran on the device but stepped nothing into the weights or the optimizer.
    for name, expected in stopped_at_once.state_dict().items():
        assert torch.equal(stopped_later.state_dict()[name], expected), name
    checkpoints = sorted(path.name for path in (tmp_path / "later" / "checkpoints").iterdir())
    assert checkpoints == ["step-000004"]  # the step-8 checkpoint checked first and stopped
