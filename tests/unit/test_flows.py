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
