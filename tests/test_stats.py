"""The ``welch_one_sided`` promotion rule: Student's t tail, the one-sample and Welch tests,
the verdicts, their edge cases, and the honest vs naive promotion rules."""

from __future__ import annotations

import itertools
import json
import math
import random

import pytest

from loopx.research.stats import (
    Judgement,
    TestResult,
    judge,
    naive_promotes,
    one_sided_test,
    promotes,
    student_t_sf,
)


def closed_form_sf(t: float, df: int) -> float:
    """P(T > t) for integer df by the finite series of Abramowitz & Stegun 26.7.3-26.7.4."""
    theta = math.atan(abs(t) / math.sqrt(df))
    s, c = math.sin(theta), math.cos(theta)
    if df % 2 == 1:
        series, term = 0.0, c
        for k in range(1, (df - 1) // 2 + 1):  # cos + (2/3) cos^3 + (2*4)/(3*5) cos^5 + ...
            series += term
            term *= c * c * (2 * k) / (2 * k + 1)
        inside = 2 / math.pi * (theta + s * series)
    else:
        series, term = 0.0, 1.0
        for k in range(1, df // 2 + 1):  # 1 + (1/2) cos^2 + (1*3)/(2*4) cos^4 + ...
            series += term
            term *= c * c * (2 * k - 1) / (2 * k)
        inside = s * series
    upper = (1 - inside) / 2  # inside = P(|T| < |t|)
    return upper if t >= 0 else 1 - upper


def simpson_sf(t: float, df: float, steps: int = 4000) -> float:
    """P(T > t) as 1/2 minus the integral of the t density over [0, t] (Simpson's rule)."""
    log_c = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)

    def density(x: float) -> float:
        return math.exp(log_c - (df + 1) / 2 * math.log1p(x * x / df))

    h = t / steps
    total = density(0.0) + density(t)
    total += sum((4 if i % 2 else 2) * density(i * h) for i in range(1, steps))
    return 0.5 - total * h / 3


def mean_var(xs: list[float]) -> tuple[float, float]:
    mean = sum(xs) / len(xs)
    return mean, sum((x - mean) ** 2 for x in xs) / (len(xs) - 1)


# --- Student's t survival function -------------------------------------------------------------

@pytest.mark.parametrize("t, df, expected", [
    (2.131847, 4, 0.05), (1.812461, 10, 0.05), (2.570582, 5, 0.025), (3.169273, 10, 0.005),
    (1.644854, math.inf, 0.05), (12.706205, 1, 0.025), (2.919986, 2, 0.05),
])
def test_sf_matches_t_table(t: float, df: float, expected: float) -> None:
    assert student_t_sf(t, df) == pytest.approx(expected, abs=1e-7)


@pytest.mark.parametrize("t", [-30.0, -2.5, -1.0, -0.01, 0.01, 0.3, 1.0, 2.0, 7.0, 1e4])
def test_sf_df1_is_cauchy_and_df2_has_its_closed_form(t: float) -> None:
    assert student_t_sf(1.0, 1) == pytest.approx(0.25, abs=1e-14)
    assert student_t_sf(t, 1) == pytest.approx(0.5 - math.atan(t) / math.pi, abs=1e-12)
    assert student_t_sf(t, 2) == pytest.approx(0.5 - t / (2 * math.sqrt(t * t + 2)), abs=1e-12)


@pytest.mark.parametrize("df", list(range(1, 31)) + [47, 120])
def test_sf_matches_the_integer_df_series(df: int) -> None:
    for t in (-6.0, -1.7, -0.2, 0.05, 0.7, 1.5, 2.2, 3.3, 5.0, 11.0):
        assert student_t_sf(t, df) == pytest.approx(closed_form_sf(t, df), abs=1e-11), (t, df)


@pytest.mark.parametrize("t, df", [(1.3, 3.5), (0.4, 0.5), (2.7, 6.25), (1.9, 17.3), (0.9, 1.5)])
def test_sf_fractional_df_matches_numerical_integration(t: float, df: float) -> None:
    assert student_t_sf(t, df) == pytest.approx(simpson_sf(t, df), abs=1e-10)


@pytest.mark.parametrize("df", [0.3, 1.0, 2.5, 4.0, 9.9, 250.0, 3e6])
def test_sf_is_symmetric_and_decreasing(df: float) -> None:
    ts = [-8.0, -3.0, -1.0, -0.1, 0.0, 0.1, 1.0, 3.0, 8.0]
    for t in ts:
        assert student_t_sf(-t, df) == pytest.approx(1 - student_t_sf(t, df), abs=1e-13)
    tails = [student_t_sf(t, df) for t in ts]
    assert all(a > b for a, b in itertools.pairwise(tails))


def test_sf_large_df_approaches_the_normal() -> None:
    assert student_t_sf(1.959964, 1e7) == pytest.approx(0.025, abs=1e-7)
    normal = 0.5 * math.erfc(2.0 / math.sqrt(2))
    assert student_t_sf(2.0, 1e12) == pytest.approx(normal, abs=1e-12)
    assert student_t_sf(2.0, 1e6) > student_t_sf(2.0, 1e7) > normal  # heavier tails, shrinking
    # No jump where the computation switches method near 1e6 df.
    for t in (0.5, 1.96, 3.0):
        assert student_t_sf(t, 1e6 * (1 - 1e-9)) == pytest.approx(
            student_t_sf(t, 1e6 * (1 + 1e-9)), abs=1e-11)


def test_sf_limits_and_bad_arguments() -> None:
    assert student_t_sf(0.0, 3) == 0.5
    assert student_t_sf(math.inf, 3) == 0.0
    assert student_t_sf(-math.inf, 3) == 1.0
    assert student_t_sf(1e300, 2) == 0.0
    # Tiny df: the tail stays fat even at astronomical t (t^-df), however t^2 overflows.
    assert 0 < student_t_sf(1e200, 0.01) < student_t_sf(1e100, 0.01) < 0.5
    for t, df in ((1.0, 0.0), (1.0, -2.0), (math.nan, 3.0), (1.0, math.nan)):
        with pytest.raises(ValueError):
            student_t_sf(t, df)


# --- the tests --------------------------------------------------------------------------------

DEV = [0.52, 0.55, 0.49, 0.58, 0.54]


def test_one_sample_matches_the_textbook_formula() -> None:
    mean, var = mean_var(DEV)
    t = (mean - 0.5) / math.sqrt(var / len(DEV))
    result = one_sided_test(DEV, baseline=0.5, direction="maximize")
    assert isinstance(result, TestResult)
    assert result.n == 5 and result.df == 4
    assert result.statistic == pytest.approx(t, rel=1e-12)
    assert result.mean_delta == pytest.approx(mean - 0.5, rel=1e-12)
    assert result.p_value == pytest.approx(closed_form_sf(t, 4), abs=1e-12)
    assert 0.01 < result.p_value < 0.05  # t is about 2.6 on 4 df


def test_welch_matches_the_textbook_formula() -> None:
    cand, base = [0.61, 0.64, 0.58, 0.66], [0.50, 0.55, 0.47, 0.52, 0.61, 0.44]
    (m1, v1), (m2, v2) = mean_var(cand), mean_var(base)
    se2 = v1 / 4 + v2 / 6
    t = (m1 - m2) / math.sqrt(se2)
    df = se2 ** 2 / ((v1 / 4) ** 2 / 3 + (v2 / 6) ** 2 / 5)
    result = one_sided_test(cand, baseline=123.0, direction="maximize", baseline_values=base)
    assert result.statistic == pytest.approx(t, rel=1e-12)
    assert result.df == pytest.approx(df, rel=1e-12)
    assert not float(result.df).is_integer() and min(3, 5) <= result.df <= 3 + 5
    assert result.mean_delta == pytest.approx(m1 - m2, rel=1e-12)  # not against the scalar
    assert result.p_value == pytest.approx(simpson_sf(t, df), abs=1e-10)
    assert result.n == 4


def test_welch_with_one_constant_side_uses_the_other_sides_df() -> None:
    result = one_sided_test([0.7, 0.7, 0.7], baseline=0.0, direction="maximize",
                            baseline_values=[0.5, 0.6, 0.55, 0.52])
    base_mean, base_var = mean_var([0.5, 0.6, 0.55, 0.52])
    assert result.df == pytest.approx(3)
    assert result.statistic == pytest.approx((0.7 - base_mean) / math.sqrt(base_var / 4))


def test_empty_baseline_values_means_one_sample() -> None:
    assert one_sided_test(DEV, baseline=0.5, direction="maximize", baseline_values=[]) == \
        one_sided_test(DEV, baseline=0.5, direction="maximize")


def test_minimize_flips_the_sign() -> None:
    errors = [0.31, 0.29, 0.30, 0.28, 0.30]
    down = one_sided_test(errors, baseline=0.35, direction="minimize")
    assert down.mean_delta == pytest.approx(0.35 - sum(errors) / 5)
    assert down.mean_delta > 0 and down.statistic is not None and down.statistic > 0
    mirrored = one_sided_test([-e for e in errors], baseline=-0.35, direction="maximize")
    assert down.statistic == pytest.approx(mirrored.statistic)
    assert down.p_value == pytest.approx(mirrored.p_value)
    assert judge(errors, baseline=0.35, direction="minimize").verdict == "supports"
    assert judge(errors, baseline=0.35, direction="maximize").verdict == "contradicts"


def test_welch_minimize_flips_the_sign() -> None:
    cand, base = [0.20, 0.22, 0.19, 0.21], [0.30, 0.28, 0.33, 0.29]
    result = one_sided_test(cand, baseline=0.0, direction="minimize", baseline_values=base)
    assert result.mean_delta == pytest.approx(sum(base) / 4 - sum(cand) / 4)
    assert result.p_value < 0.001


# --- verdicts ---------------------------------------------------------------------------------

def test_supports_when_significantly_better() -> None:
    got = judge(DEV, baseline=0.5, direction="maximize")
    assert isinstance(got, Judgement)
    assert got.verdict == "supports" and got.rule == "welch_one_sided"
    assert got.alpha == 0.05 and got.min_delta == 0.0 and got.n == 5
    # Same data, stricter alpha: no longer significant, but not worse either.
    assert judge(DEV, baseline=0.5, direction="maximize", alpha=0.01).verdict == "inconclusive"


def test_min_delta_blocks_a_significant_but_tiny_improvement() -> None:
    tiny = [0.5010, 0.5011, 0.5012, 0.5009, 0.5010]
    plain = judge(tiny, baseline=0.5, direction="maximize")
    assert plain.verdict == "supports" and plain.p_value < 1e-4
    blocked = judge(tiny, baseline=0.5, direction="maximize", min_delta=0.01)
    assert blocked.verdict == "inconclusive" and blocked.p_value == plain.p_value
    assert judge(tiny, baseline=0.5, direction="maximize", min_delta=0.001).verdict == "supports"


def test_contradicts_only_when_significantly_worse() -> None:
    worse = [0.41, 0.44, 0.40, 0.43, 0.42]
    got = judge(worse, baseline=0.5, direction="maximize")
    assert got.verdict == "contradicts" and got.mean_delta < 0 and got.p_value > 0.99
    noisy_worse = [0.2, 0.7, 0.45, 0.6, 0.3]  # mean below the baseline, far from significant
    assert judge(noisy_worse, baseline=0.5, direction="maximize").verdict == "inconclusive"
    welch = judge([0.41, 0.44, 0.40], baseline=0.0, direction="maximize",
                  baseline_values=[0.50, 0.52, 0.49, 0.51])
    assert welch.verdict == "contradicts"


def test_null_rejection_rate_is_alpha() -> None:
    rng = random.Random(7)
    trials = 4000
    hits = sum(one_sided_test([rng.gauss(0, 1) for _ in range(5)], baseline=0.0,
                              direction="maximize").p_value < 0.05 for _ in range(trials))
    assert 0.04 < hits / trials < 0.06
    welch_hits = sum(one_sided_test([rng.gauss(3, 1) for _ in range(4)], baseline=0.0,
                                    direction="maximize",
                                    baseline_values=[rng.gauss(3, 2) for _ in range(6)]
                                    ).p_value < 0.05 for _ in range(trials))
    assert 0.035 < welch_hits / trials < 0.065  # Welch is approximate, close to nominal


# --- edge cases -------------------------------------------------------------------------------

@pytest.mark.parametrize("values, delta", [([], 0.0), ([0.9], 0.4)])
def test_fewer_than_two_values_support_nothing(values: list[float], delta: float) -> None:
    result = one_sided_test(values, baseline=0.5, direction="maximize")
    assert result == TestResult(None, None, 1.0, pytest.approx(delta), len(values))
    assert judge(values, baseline=0.5, direction="maximize").verdict == "inconclusive"
    assert judge(values, baseline=0.5, direction="minimize").verdict == "inconclusive"


def test_welch_with_one_baseline_value_supports_nothing() -> None:
    result = one_sided_test([0.9, 0.95, 0.92], baseline=0.0, direction="maximize",
                            baseline_values=[0.1])
    assert result.statistic is None and result.df is None and result.p_value == 1.0
    assert result.mean_delta == pytest.approx(0.9233333333333333 - 0.1)
    assert judge([0.9, 0.95, 0.92], baseline=0.0, direction="maximize",
                 baseline_values=[0.1]).verdict == "inconclusive"


def test_identical_values_are_a_deterministic_measurement() -> None:
    above = judge([0.7] * 4, baseline=0.5, direction="maximize")
    assert (above.verdict, above.p_value, above.statistic, above.df) == \
        ("supports", 0.0, math.inf, None)
    assert above.mean_delta == pytest.approx(0.2)
    below = judge([0.7] * 4, baseline=0.5, direction="minimize")
    assert (below.verdict, below.p_value, below.statistic) == ("contradicts", 1.0, -math.inf)
    equal = judge([0.1 + 0.2] * 3, baseline=0.1 + 0.2, direction="maximize")
    assert (equal.verdict, equal.p_value, equal.statistic, equal.mean_delta) == \
        ("inconclusive", 1.0, 0.0, 0.0)
    assert judge([0.7] * 4, baseline=0.5, direction="maximize",
                 min_delta=0.3).verdict == "inconclusive"
    # mean_delta exactly min_delta (0.75 - 0.5 is exact in binary) is enough.
    assert judge([0.75] * 3, baseline=0.5, direction="maximize",
                 min_delta=0.25).verdict == "supports"
    welch = judge([0.7] * 3, baseline=0.0, direction="maximize", baseline_values=[0.6] * 5)
    assert (welch.verdict, welch.p_value, welch.statistic) == ("supports", 0.0, math.inf)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_inputs_raise(bad: float) -> None:
    with pytest.raises(ValueError, match=r"values\[1\] is"):
        one_sided_test([0.5, bad, 0.6], baseline=0.5, direction="maximize")
    with pytest.raises(ValueError, match=r"baseline_values\[0\] is"):
        judge([0.5, 0.6], baseline=0.5, direction="maximize", baseline_values=[bad, 0.4])
    with pytest.raises(ValueError, match="baseline is"):
        judge([0.5, 0.6], baseline=bad, direction="maximize")


def test_bad_parameters_raise() -> None:
    with pytest.raises(ValueError, match="overflows"):
        judge([1.7e308, 1.7e308], baseline=-1.7e308, direction="maximize")
    with pytest.raises(ValueError, match="direction"):
        judge(DEV, baseline=0.5, direction="up")
    for alpha in (0.0, 1.0, -0.1, math.nan):
        with pytest.raises(ValueError, match="alpha"):
            judge(DEV, baseline=0.5, direction="maximize", alpha=alpha)
    for min_delta in (-0.01, math.nan, math.inf):
        with pytest.raises(ValueError, match="min_delta"):
            judge(DEV, baseline=0.5, direction="maximize", min_delta=min_delta)


def test_to_json_is_plain_and_finite() -> None:
    got = judge([0.7] * 4, baseline=0.5, direction="maximize").to_json()
    assert got["verdict"] == "supports" and got["rule"] == "welch_one_sided"
    assert got["statistic"] is None and got["p_value"] == 0.0
    json.dumps(got, allow_nan=False)
    normal = judge(DEV, baseline=0.5, direction="maximize", min_delta=0.01).to_json()
    assert set(normal) == {"verdict", "rule", "statistic", "df", "p_value", "mean_delta", "n",
                           "alpha", "min_delta"}
    assert normal["df"] == 4 and normal["min_delta"] == 0.01
    assert json.loads(json.dumps(normal, allow_nan=False)) == normal


# --- promotion ---------------------------------------------------------------------------------

def test_promotes_needs_dev_and_heldout_support() -> None:
    good = judge(DEV, baseline=0.5, direction="maximize")
    flat = judge([0.2, 0.7, 0.45, 0.6, 0.3], baseline=0.5, direction="maximize")
    bad = judge([0.41, 0.44, 0.40, 0.43, 0.42], baseline=0.5, direction="maximize")
    assert good.verdict == "supports" and flat.verdict == "inconclusive"
    assert promotes(good, good)
    assert not promotes(good, None)  # a dev-only lift never promotes
    assert not promotes(good, flat)
    assert not promotes(good, bad)
    assert not promotes(flat, good)
    assert not promotes(bad, good)


def test_naive_rule_takes_any_single_win() -> None:
    assert naive_promotes([0.3, 0.2, 0.51], baseline=0.5, direction="maximize")
    assert not naive_promotes([0.3, 0.2, 0.5], baseline=0.5, direction="maximize")
    assert naive_promotes([0.6, 0.7, 0.49], baseline=0.5, direction="minimize")
    assert not naive_promotes([0.6, 0.7, 0.5], baseline=0.5, direction="minimize")
    assert not naive_promotes([], baseline=0.5, direction="maximize")
    with pytest.raises(ValueError):
        naive_promotes([1.0], baseline=0.5, direction="sideways")
