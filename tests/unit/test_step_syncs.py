"""A pre-training step on a GPU does not wait for the device: the statistics are summed there
(`batch_stats`, `detection_stats`) and read at the logs, the model reads no input values off the
CPU (`validate_inputs`), and the loop reads nothing of the device between logs. On the CPU the
statistics are the same numbers as before, read every step."""

from __future__ import annotations

import linecache
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from bertlab.core.config import BertConfig, PretrainConfig, PretrainDataConfig
from bertlab.core.runtime import set_seed
from bertlab.network.bert import IGNORE_INDEX, BertForPreTraining, validate_inputs
from bertlab.training.pretraining import loop as pretrain_loop
from bertlab.training.pretraining.stats import STAT_TOKENS, STATS, batch_stats, detection_stats

READS = ("__float__", "__int__", "__bool__", "__index__", "item", "tolist", "cpu", "numpy")


def _old_batch_stats(output, batch, count) -> torch.Tensor:
    """`batch_stats` as it was, reading every figure on the host."""
    stats = torch.zeros(len(STATS) + 1, dtype=torch.float64)
    labels = batch["labels"]
    if count:
        predicted = output.mlm_logits.argmax(dim=-1)
        stats[0] = float(output.mlm_loss) * count
        stats[1] = float(((predicted == labels) & (labels != IGNORE_INDEX)).sum())
        stats[2] = count
    if output.nsp_loss is not None:
        nsp_labels = batch["next_sentence_label"]
        stats[3] = float(output.nsp_loss) * len(nsp_labels)
        stats[4] = float((output.nsp_logits.argmax(dim=-1) == nsp_labels).sum())
        stats[5] = len(nsp_labels)
    stats[STAT_TOKENS] = float(batch["attention_mask"].sum())
    return stats


def _old_detection_stats(output) -> torch.Tensor:
    stats = torch.zeros(len(STATS) + 1, dtype=torch.float64)
    real = output.rtd_labels != IGNORE_INDEX
    predicted = (output.rtd_logits > 0).long()
    positions = int(real.sum())
    stats[6] = float(output.rtd_loss) * positions
    stats[7] = float(((predicted == output.rtd_labels) & real).sum())
    stats[8] = positions
    stats[9] = output.rtd_weight * float(output.rtd_loss) * positions
    return stats


def _made_up(device: str = "cpu") -> tuple[SimpleNamespace, dict[str, torch.Tensor], int]:
    generator = torch.Generator().manual_seed(0)
    labels = torch.randint(0, 11, (3, 4), generator=generator)
    labels[0, 2:] = IGNORE_INDEX
    rtd_labels = torch.randint(0, 2, (3, 6), generator=generator)
    rtd_labels[2, 4:] = IGNORE_INDEX
    output = SimpleNamespace(
        mlm_logits=torch.randn(3, 4, 11, generator=generator),
        mlm_loss=torch.tensor(2.3456789, dtype=torch.float32),
        nsp_logits=torch.randn(3, 2, generator=generator),
        nsp_loss=torch.tensor(0.6931234, dtype=torch.float32),
        rtd_logits=torch.randn(3, 6, generator=generator),
        rtd_labels=rtd_labels,
        rtd_loss=torch.tensor(0.7123457, dtype=torch.float32),
        rtd_weight=50.0,
    )
    batch = {
        "labels": labels,
        "next_sentence_label": torch.tensor([0, 1, 1]),
        "attention_mask": torch.tensor([[1] * 6, [1] * 6, [1] * 4 + [0] * 2]),
    }
    count = int((labels != IGNORE_INDEX).sum())
    move = lambda tensor: tensor.to(device) if isinstance(tensor, torch.Tensor) else tensor  # noqa: E731
    return (
        SimpleNamespace(**{key: move(value) for key, value in vars(output).items()}),
        {key: move(value) for key, value in batch.items()},
        count,
    )


def test_the_statistics_are_the_numbers_they_were() -> None:
    output, batch, count = _made_up()
    for nsp in (True, False):
        if not nsp:
            output.nsp_loss = None
        for masked in (count, 0):
            expected = _old_batch_stats(output, batch, masked)
            assert torch.equal(batch_stats(output, batch, masked), expected)
    assert torch.equal(detection_stats(output), _old_detection_stats(output))
    assert batch_stats(output, batch, count).dtype == torch.float64


def test_the_statistics_are_computed_on_the_device_without_a_read() -> None:
    # Reading a meta tensor raises: the sums are built there and stay there.
    output, batch, count = _made_up("meta")
    for stats in (batch_stats(output, batch, count), detection_stats(output)):
        assert stats.device.type == "meta" and stats.shape == (len(STATS) + 1,)


def test_the_model_reads_input_values_only_on_the_cpu() -> None:
    config = BertConfig(vocab_size=10, hidden_size=8, num_attention_heads=2)
    ids = torch.full((2, 3), 12)
    with pytest.raises(ValueError, match="input_ids must lie in"):
        validate_inputs(config, ids, None, None)
    with pytest.raises(ValueError, match="token_type_ids values"):
        validate_inputs(config, torch.ones(2, 3, dtype=torch.long), None, ids)
    # Off the CPU the shapes and dtypes are checked, the values are not read.
    on_device = ids.to("meta")
    validate_inputs(config, on_device, torch.ones(2, 3, device="meta").long(), on_device)
    with pytest.raises(ValueError, match="differs from"):
        validate_inputs(config, on_device, None, torch.ones(2, 4, device="meta").long())


def test_a_step_between_logs_reads_only_the_host_batch(
    tiny_pretraining, pretraining_step, tmp_path, monkeypatch
):
    """With the device's reads made costly (as on CUDA), every read that the training code makes
    in a step that is not a log, evaluation or checkpoint step is of the batch on the host."""
    tokenizer, corpus, config = tiny_pretraining
    set_seed(0)
    model = BertForPreTraining(config)
    settings = PretrainConfig(
        batch_size=4,
        max_steps=8,
        log_every_steps=4,
        eval_examples=0,
        warmup_proportion=0.0,
        num_workers=0,
    )
    monkeypatch.setattr(pretrain_loop, "host_reads_are_free", lambda device: False)
    training = str(Path(pretrain_loop.__file__).parent)
    reads: list[tuple[int, str]] = []

    def recording(name):
        original = getattr(torch.Tensor, name)

        def read(self, *args, **kwargs):
            frame = sys._getframe(1)
            if frame.f_code.co_filename.startswith(training):
                line = linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip()
                reads.append((pretraining_step(), line))
            return original(self, *args, **kwargs)

        return read

    for name in READS:
        monkeypatch.setattr(torch.Tensor, name, recording(name))
    result = pretrain_loop.pretrain(
        model, tokenizer, corpus, PretrainDataConfig(max_seq_length=32), settings, tmp_path / "run"
    )
    assert result.progress.step == 8
    host = ('batch["labels"]', 'batch["attention_mask"]', "totals[")
    between_logs = [(at, line) for at, line in reads if at not in (4, 8)]
    assert between_logs, "the host batch is read every step"
    assert [line for _, line in between_logs if not any(name in line for name in host)] == []
    assert any("_check_steps" in line or "first_bad_step" in line for at, line in reads if at == 4)
