"""The apps' shared verdicts: the spread rule and the paired sign test."""

from __future__ import annotations

import json
import math

from bertlab.apps.flows import compare, sign_test, summary
from bertlab.core.atomic import json_text


def test_the_pre_trained_model_wins_only_beyond_the_larger_seed_spread() -> None:
    assert compare([0.70, 0.71, 0.72], [0.80, 0.81, 0.82]).wins
    comparison = compare([0.70, 0.75, 0.80], [0.74, 0.78, 0.79])
    assert not comparison.wins and math.isclose(comparison.margin, 0.03)
    assert math.isclose(comparison.spread, 0.10)


def test_the_sign_test_counts_paired_seeds_and_gives_the_exact_two_sided_p() -> None:
    assert sign_test([0.70, 0.71, 0.72], [0.75, 0.74, 0.70]) == (2, 1, 1.0)
    wins, losses, p_value = sign_test([0.1] * 5, [0.2] * 5)
    assert (wins, losses) == (5, 0) and math.isclose(p_value, 2 / 32)  # 0.0625
    assert sign_test([0.1] * 6, [0.2] * 6)[2] == 2 / 64  # six seeds can reach p < 0.05
    assert sign_test([0.5, 0.5], [0.5, 0.5]) == (0, 0, 1.0)  # ties carry no evidence
    assert sign_test([math.nan, 0.3], [0.1, 0.2])[:2] == (1, 1)  # NaN counts as 0


def test_an_undefined_score_read_back_from_json_counts_as_a_constant_prediction() -> None:
    # NaN is written as null (valid JSON); a resumed experiment reads null back.
    values = json.loads(json_text([math.nan, 0.25, 0.5]))
    assert values[0] is None
    assert summary(values) == summary([math.nan, 0.25, 0.5]) == "0.250 (0.000–0.500), 1 constant"
    assert compare(values, [0.3, 0.3, 0.3]).margin == compare([0.0, 0.25, 0.5], [0.3] * 3).margin


def test_runs_at_once_give_what_they_give_one_after_the_other_on_one_thread(
    sst2_files, tiny_config, tmp_path
) -> None:
    """Two fine-tunings in two worker processes (the demo's fine-tuning on a CPU of 2 cores):
    the same test scores and weights as the same runs here, one after the other, on one
    thread; an error in a run is raised here."""
    import dataclasses

    import pytest
    import torch
    from safetensors.torch import load_file

    from bertlab.apps.flows import finetune_and_test, random_twin, run_concurrently
    from bertlab.core.finetune_config import FinetuneConfig, TaskDataConfig
    from bertlab.task_families import make_task
    from bertlab.tokenizer.wordpiece import Tokenizer
    from bertlab.training.finetuning.finetune import read_task_data

    train, dev, vocab = sst2_files
    tokenizer = Tokenizer.from_pretrained(vocab)
    config = dataclasses.replace(tiny_config, vocab_size=tokenizer.vocab_size)
    task = make_task("sst2", data=TaskDataConfig(max_seq_length=config.max_position_embeddings))
    data = read_task_data(task, train, None, dev_fraction=0.25)
    test = task.read_gold(dev, data.label_names)

    def calls(folder: str) -> list[tuple]:
        start = tmp_path / "starts"
        return [
            (
                task, data, test, random_twin(config, tokenizer, seed, "normal", start / str(seed)),
                FinetuneConfig(num_train_epochs=2, learning_rate=1e-3, batch_size=8, seed=seed),
                tmp_path / folder / f"seed-{seed}", False, True,
            )
            for seed in (1, 2)
        ]  # fmt: skip

    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        alone = list(run_concurrently(finetune_and_test, calls("alone"), jobs=1))
    finally:
        torch.set_num_threads(threads)
    together = list(run_concurrently(finetune_and_test, calls("together"), jobs=2))
    assert together == alone
    for seed in (1, 2):
        one = load_file(tmp_path / "alone" / f"seed-{seed}" / "best" / "model.safetensors")
        two = load_file(tmp_path / "together" / f"seed-{seed}" / "best" / "model.safetensors")
        assert all(torch.equal(one[key], two[key]) for key in one)
    broken = calls("broken")
    broken[1] = (*broken[1][:3], tmp_path / "no-such-model", *broken[1][4:])
    with pytest.raises(FileNotFoundError):
        list(run_concurrently(finetune_and_test, broken, jobs=2))
