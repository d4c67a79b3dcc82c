"""Fine-tuning strategies: layer-wise learning rates, ULMFiT's slanted triangular schedule and
gradual unfreezing, Keras' staged recipe (bertlab.training.optim,
bertlab.training.finetuning.loop)."""

from __future__ import annotations

import math
import random
from dataclasses import replace

import pytest
import torch

from bertlab.core.finetune_config import FinetuneConfig
from bertlab.network.bert import BertForPreTraining
from bertlab.network.heads import BertForSequenceClassification, BertForTokenClassification
from bertlab.training.finetuning.loop import (
    FinetuneLoop,
    apply_freezing,
    train_task_model,
    training_phases,
    unfreezing_order,
)
from bertlab.training.metrics_log import MetricsLog, read_metrics
from bertlab.training.optim import (
    build_optimizer,
    constant_after_warmup,
    finetune_schedule,
    layer_groups,
    layer_learning_rates,
    parameter_groups,
    slanted_triangular,
)

PEAK = 1e-3


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture
def model(tiny_config):
    torch.manual_seed(0)
    return BertForSequenceClassification(tiny_config, id2label={0: "neg", 1: "pos"})


def toy_features(num: int, seed: int = 0) -> list[dict]:
    """[CLS] word ... [SEP], both segments used: label 1 when the first word id is even."""
    rng = random.Random(seed)
    features = []
    for _ in range(num):
        first = rng.randrange(10, 60)
        ids = [2, first, *(rng.randrange(10, 60) for _ in range(rng.randrange(2, 6))), 3]
        types = [0] * (len(ids) // 2) + [1] * (len(ids) - len(ids) // 2)
        features.append({"input_ids": ids, "token_type_ids": types, "labels": first % 2})
    return features


def _single_parameter_optimizer(learning_rate: float = 1.0) -> torch.optim.Optimizer:
    return torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=learning_rate)


def _rates(scheduler, optimizer, num_steps: int) -> list[float]:
    """The learning rate of optimizer steps 0..num_steps."""
    rates = [optimizer.param_groups[0]["lr"]]
    for _ in range(num_steps):
        optimizer.step()
        scheduler.step()
        rates.append(optimizer.param_groups[0]["lr"])
    return rates


# --- layer-wise learning rates --------------------------------------------------------------------


def test_layer_rates_are_the_top_rate_times_decay_to_the_distance_from_the_top(odd_config):
    model = BertForSequenceClassification(odd_config, num_labels=2)  # 3 layers
    decay = 0.6
    assert layer_learning_rates(model, PEAK, decay) == [
        ("embeddings", PEAK * decay**3),
        ("layer 1", PEAK * decay**2),
        ("layer 2", PEAK * decay**1),
        ("layer 3", PEAK),
        ("pooler", PEAK),
        ("head", PEAK),
    ]
    assert {rate for _, rate in layer_learning_rates(model, PEAK)} == {PEAK}


def test_optimizer_groups_put_each_parameter_in_its_layer_at_its_rate(odd_config):
    model = BertForSequenceClassification(odd_config, num_labels=2)
    rates = dict(layer_learning_rates(model, PEAK, 0.5))
    optimizer = build_optimizer(model, PEAK, layerwise_lr_decay=0.5)
    group_of = {
        id(param): group["name"] for group in optimizer.param_groups for param in group["params"]
    }
    assert len(group_of) == sum(len(group["params"]) for group in optimizer.param_groups)
    expected = {"embeddings": "embeddings", "encoder": None, "pooler": "pooler"}
    for name, param in model.named_parameters():
        parts = name.split(".")
        if parts[0] != "bert":
            assert group_of[id(param)] == "head", name
        elif parts[1] == "encoder":
            assert group_of[id(param)] == f"layer {int(parts[3]) + 1}", name
        else:
            assert group_of[id(param)] == expected[parts[1]], name
    for group in optimizer.param_groups:
        assert group["lr"] == rates[group["name"]]
    # The weight-decay split is Google's, as without layer-wise rates.
    plain_decay = {id(param) for param in parameter_groups(model, 0.01)[0]["params"]}
    decayed = {id(p) for g in optimizer.param_groups if g["weight_decay"] > 0 for p in g["params"]}
    assert decayed == plain_decay


def test_frozen_layers_and_a_missing_pooler_have_no_group(tiny_config, model):
    apply_freezing(model, FinetuneConfig(freeze_layers=1))
    assert [name for name, _ in layer_learning_rates(model, PEAK, 0.5)] == [
        "layer 2",
        "pooler",
        "head",
    ]
    tagger = BertForTokenClassification(tiny_config, num_labels=3)
    names = [name for name, _ in layer_learning_rates(tagger, PEAK, 0.5)]
    assert names == ["embeddings", "layer 1", "layer 2", "head"]


def test_pretraining_heads_are_the_head_and_the_tied_decoder_weight_the_embeddings(tiny_config):
    model = BertForPreTraining(tiny_config)
    groups = dict(layer_groups(model))
    word_embeddings = model.bert.embeddings.word_embeddings.weight
    assert model.cls.predictions.decoder.weight is word_embeddings
    assert any(param is word_embeddings for param in groups["embeddings"])
    assert not any(param is word_embeddings for param in groups["head"])
    assert any(param is model.cls.predictions.bias for param in groups["head"])
    assert sum(map(len, groups.values())) == len(list(model.parameters()))


def test_layerwise_groups_without_decay_train_exactly_as_the_plain_groups(tiny_config):
    weights = []
    for layerwise_lr_decay in (None, 1.0):
        torch.manual_seed(0)
        model = BertForSequenceClassification(tiny_config, num_labels=2)
        optimizer = build_optimizer(model, PEAK, layerwise_lr_decay=layerwise_lr_decay)
        batch = {"input_ids": torch.tensor([[2, 11, 12, 3]]), "labels": torch.tensor([1])}
        for _ in range(2):
            model(**batch).loss.backward()
            optimizer.step()
            optimizer.zero_grad()
        weights.append([param.detach().clone() for param in model.parameters()])
    for before, after in zip(*weights, strict=True):
        assert torch.equal(before, after)


# --- schedules ------------------------------------------------------------------------------------


def ulmfit_eq3(t: int, total: int, cut_frac: float, ratio: float) -> float:
    """Howard & Ruder 2018, eq. 3, as printed: the learning rate over the peak at iteration t."""
    cut = math.floor(total * cut_frac)
    p = t / cut if t < cut else 1 - (t - cut) / (cut * (1 / cut_frac - 1))
    return (1 + p * (ratio - 1)) / ratio


def test_slanted_triangular_matches_ulmfit_at_the_start_the_peak_and_the_end():
    total, cut_frac, ratio = 200, 0.1, 32.0
    optimizer = _single_parameter_optimizer(PEAK)
    rates = _rates(slanted_triangular(optimizer, total, cut_frac, ratio), optimizer, total)
    assert rates[0] == pytest.approx(PEAK / 32)  # the start: the peak / ratio
    assert rates[20] == pytest.approx(PEAK)  # the peak at cut = T * cut_frac
    assert rates[total] == pytest.approx(PEAK / 32)  # the end: the peak / ratio again
    assert rates[19] < rates[20] > rates[21]
    for t in range(total + 1):
        assert rates[t] == pytest.approx(PEAK * ulmfit_eq3(t, total, cut_frac, ratio)), t


def test_slanted_triangular_follows_its_cut_frac_and_ratio_and_each_groups_peak(model):
    config = FinetuneConfig(schedule="slanted-triangular", cut_frac=0.25, stlr_ratio=8.0)
    optimizer = build_optimizer(model, PEAK, layerwise_lr_decay=0.5)
    peaks = [group["lr"] for group in optimizer.param_groups]
    scheduler = finetune_schedule(optimizer, config, total_steps=40)
    assert scheduler.get_last_lr() == pytest.approx([peak / 8 for peak in peaks])
    for _ in range(10):
        optimizer.step()
        scheduler.step()
    assert scheduler.get_last_lr() == pytest.approx(peaks)  # the peak at step 40 * 0.25


def test_slanted_triangular_without_room_to_rise_falls_from_the_peak():
    optimizer = _single_parameter_optimizer()
    rates = _rates(slanted_triangular(optimizer, 5, 0.1, 32.0), optimizer, 5)
    assert rates[0] == 1.0 and rates[5] == pytest.approx(1 / 32)
    assert rates == sorted(rates, reverse=True)


def test_constant_schedule_warms_up_then_holds_the_peak():
    optimizer = _single_parameter_optimizer()
    assert _rates(constant_after_warmup(optimizer, 2), optimizer, 5) == pytest.approx(
        [0.0, 0.5, 1.0, 1.0, 1.0, 1.0]
    )


# --- what trains in which epoch -------------------------------------------------------------------


def _snapshot(model) -> dict[str, torch.Tensor]:
    return {name: param.detach().clone() for name, param in model.named_parameters()}


def _changed(model, before: dict[str, torch.Tensor], prefix: str) -> bool:
    """Whether any parameter under `prefix` differs from `before`."""
    return any(
        not torch.equal(before[name], param)
        for name, param in model.named_parameters()
        if name.startswith(prefix)
    )


def _loop(model, tmp_path, **strategy) -> FinetuneLoop:
    config = FinetuneConfig(batch_size=4, learning_rate=1e-2, warmup_proportion=0.0, **strategy)
    return FinetuneLoop(model, toy_features(8), config, MetricsLog(tmp_path / "m.jsonl"), False)


def test_gradual_unfreezing_trains_a_layer_from_its_epoch_on_and_not_before(model, tmp_path):
    # Groups from the top: the classifier; layer 2 with the pooler; layer 1; the embeddings.
    starts = {
        "classifier.": 1,
        "bert.pooler.": 2,
        "bert.encoder.layer.1.": 2,
        "bert.encoder.layer.0.": 3,
        "bert.embeddings.": 4,
    }
    loop = _loop(model, tmp_path, do_gradual_unfreezing=True, num_train_epochs=4)
    assert len(unfreezing_order(model)) == 4
    for epoch in range(1, 5):
        before = _snapshot(model)
        loop.run_epoch(epoch)
        for prefix, start in starts.items():
            assert _changed(model, before, prefix) == (epoch >= start), (epoch, prefix)
    loop.close()
    assert all(param.requires_grad for param in model.parameters())


def test_gradual_unfreezing_skips_the_layers_frozen_for_the_whole_run(model, tmp_path):
    apply_freezing(model, FinetuneConfig(freeze_layers=1))
    order = unfreezing_order(model)
    assert order[-1] == [model.bert.encoder.layer[1], model.bert.pooler] and len(order) == 2
    loop = _loop(model, tmp_path, do_gradual_unfreezing=True, num_train_epochs=3, freeze_layers=1)
    for epoch in (1, 2, 3):
        before = _snapshot(model)
        loop.run_epoch(epoch)
        assert _changed(model, before, "bert.encoder.layer.1.") == (epoch >= 2)
        assert not _changed(model, before, "bert.encoder.layer.0.")
        assert not _changed(model, before, "bert.embeddings.")


def test_staged_recipe_trains_only_the_head_first_then_everything_afresh(model, tmp_path):
    loop = _loop(model, tmp_path, head_warmup_epochs=1, num_train_epochs=3)
    first_optimizer = loop.optimizer
    before = _snapshot(model)
    loop.run_epoch(1)
    assert _changed(model, before, "classifier.")
    assert not _changed(model, before, "bert.")  # the pooler included
    before = _snapshot(model)
    loop.run_epoch(2)
    assert loop.optimizer is not first_optimizer  # Keras compiles anew: fresh Adam moments
    assert loop.scheduler.last_epoch == loop.steps_per_epoch  # the second phase's own schedule
    for prefix in ("classifier.", "bert.pooler.", "bert.encoder.layer.0.", "bert.embeddings."):
        assert _changed(model, before, prefix), prefix


def test_staged_recipe_with_frozen_layers_unfreezes_only_the_top_ones(model, tmp_path):
    apply_freezing(model, FinetuneConfig(freeze_layers=1))
    loop = _loop(model, tmp_path, head_warmup_epochs=1, num_train_epochs=2, freeze_layers=1)
    loop.run_epoch(1)
    before = _snapshot(model)
    loop.run_epoch(2)
    assert _changed(model, before, "bert.encoder.layer.1.")
    assert not _changed(model, before, "bert.encoder.layer.0.")
    assert not _changed(model, before, "bert.embeddings.")


def test_training_phases_split_the_epochs_at_the_head_warmup():
    assert training_phases(FinetuneConfig(num_train_epochs=3)) == [range(1, 4)]
    phases = training_phases(FinetuneConfig(num_train_epochs=5, head_warmup_epochs=2))
    assert phases == [range(1, 3), range(3, 6)]


def test_the_strategy_is_recorded_and_the_top_rate_logged(model, tmp_path):
    config = FinetuneConfig(
        batch_size=4,
        num_train_epochs=2,
        learning_rate=PEAK,
        layerwise_lr_decay=0.5,
        schedule="slanted-triangular",
        do_gradual_unfreezing=True,
        log_every_steps=1,
    )
    result = train_task_model(
        model, toy_features(8), config, tmp_path, None, "accuracy",
        lambda directory, model: None, show_progress=False,
    )  # fmt: skip
    strategy = result.to_json()["strategy"]
    assert strategy["schedule"] == "slanted-triangular" and strategy["cut_frac"] == 0.1
    assert strategy["gradual_unfreezing"] and strategy["layerwise_lr_decay"] == 0.5
    assert strategy["learning_rates"]["embeddings"] == PEAK * 0.5**2
    assert strategy["learning_rates"]["head"] == PEAK
    # The logged rate is the top one (the head's), not the embeddings' quarter of it: 4 steps
    # leave no room to rise (cut = 0), so after step s it is PEAK * (1 + (1 - s/4) * 31) / 32.
    records = [r for r in read_metrics(tmp_path / "metrics.jsonl") if r["kind"] == "train"]
    assert [r["step"] for r in records] == [1, 2, 3, 4]
    for record in records:
        expected = PEAK * (1 + (1 - record["step"] / 4) * 31) / 32
        assert record["learning_rate"] == pytest.approx(expected)


# --- impossible combinations ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"layerwise_lr_decay": 0.0}, r"layerwise_lr_decay must be in \(0, 1\], got 0.0"),
        ({"layerwise_lr_decay": 1.5}, r"layerwise_lr_decay must be in \(0, 1\], got 1.5"),
        ({"schedule": "cosine"}, "unknown schedule 'cosine'"),
        ({"schedule": "slanted-triangular", "cut_frac": 1.0}, "cut_frac must be in"),
        ({"schedule": "slanted-triangular", "stlr_ratio": 0.5}, "stlr_ratio must be at least 1"),
        ({"cut_frac": 0.2}, "shape the slanted-triangular schedule, not 'linear'"),
        (
            {"schedule": "slanted-triangular", "warmup_proportion": 0.06},
            "rises over cut_frac, not over warmup_proportion",
        ),
        ({"head_warmup_epochs": -1}, "head_warmup_epochs must be a non-negative integer"),
        ({"head_warmup_epochs": 3}, "head_warmup_epochs 3 leaves none of the 3 epochs"),
        ({"head_warmup_epochs": 1, "do_gradual_unfreezing": True}, "not both"),
        ({"do_freeze_encoder": True, "do_gradual_unfreezing": True}, "would change nothing"),
        ({"do_freeze_encoder": True, "head_warmup_epochs": 1}, "head_warmup_epochs would"),
        ({"do_freeze_encoder": True, "layerwise_lr_decay": 0.8}, "layerwise_lr_decay would"),
    ],
)
def test_impossible_strategies_are_refused(settings, message):
    with pytest.raises(ValueError, match=message):
        FinetuneConfig(**settings)


def test_strategies_combine_with_each_other_and_with_frozen_layers():
    config = FinetuneConfig(
        layerwise_lr_decay=1 / 2.6,
        schedule="slanted-triangular",
        do_gradual_unfreezing=True,
        freeze_layers=2,
    )
    assert replace(config, do_gradual_unfreezing=False, head_warmup_epochs=1).head_warmup_epochs
