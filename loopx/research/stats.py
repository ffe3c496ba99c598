"""The promotion rule ``welch_one_sided``: do a candidate's per-seed values beat the baseline?

An executor reports one metric value per seed for a split (dev or held-out). The rule judges
those values against the contract's metric: its ``direction`` (``maximize`` or ``minimize``),
its scalar ``baseline``, its ``min_delta`` (>= 0) and the promotion policy's ``alpha``
(default 0.05).

The test. ``mean_delta`` is the improvement in the contract's direction: ``mean - baseline``
when maximizing, ``baseline - mean`` when minimizing, so a positive ``mean_delta`` is always
better. With only the scalar baseline, the test is a one-sample Student t-test of H1 "the
mean is better than the baseline": ``t = mean_delta / (s / sqrt(n))`` with ``n - 1`` degrees
of freedom, ``s`` the sample standard deviation. When the baseline was itself re-run over
seeds (``baseline_values``), it is Welch's unequal-variance two-sample t-test of H1 "the mean
is better than the mean of the baseline runs": ``mean_delta`` is taken relative to that mean,
``t = mean_delta / sqrt(s1^2/n1 + s2^2/n2)``, and the degrees of freedom are
Welch-Satterthwaite's ``(s1^2/n1 + s2^2/n2)^2 / ((s1^2/n1)^2/(n1-1) + (s2^2/n2)^2/(n2-1))``.
The p-value is the upper tail ``P(T > t)`` of Student's t with those degrees of freedom.

The verdict, for one split:

- ``supports`` iff the one-sided p-value is below ``alpha`` AND ``mean_delta >= min_delta``;
- otherwise ``contradicts`` iff the same test in the opposite direction (H1 "the mean is worse
  than the baseline") has a p-value below ``alpha``, that is, the values are significantly
  worse than the baseline;
- otherwise ``inconclusive``.

Degenerate cases. With fewer than 2 values (or, in Welch mode, fewer than 2 baseline values)
no variance can be estimated: the test has no statistic and p-value 1.0 both ways, so the
verdict is ``inconclusive``. When every value is identical (and, in Welch mode, every
baseline value too) the measurement is taken as deterministic: p-value 0.0 if
``mean_delta > 0`` and 1.0 otherwise, statistic +inf, -inf or 0; so identical values
strictly better than the baseline support (given ``min_delta``), strictly worse ones
contradict, and equal ones are inconclusive. A NaN or infinite value is an error
(``ValueError``), never a verdict. With ``alpha`` above 0.5 both tests could pass at once;
``supports`` then takes precedence.

Promotion. A hypothesis is promoted only if its dev values support AND its held-out values
were measured AND they support too. A lift on dev alone never promotes: with many hypotheses
tried, some look better on dev by chance, and only an independent held-out test catches that.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Literal

RULE = "welch_one_sided"
DIRECTIONS = ("maximize", "minimize")

Verdict = Literal["supports", "contradicts", "inconclusive"]

_EPS = 1e-15
_TINY = 1e-300
# The continued fraction's first terms cancel when df/2 is huge, losing digits roughly in
# proportion to df (1e-9 absolute by df = 1e9); past this point the normal tail with its 1/df
# correction is already within ~1e-12 of Student's t (the next term is O(1/df^2)).
_LARGE_DF = 1e6


def _log_gamma_ratio(p: float, q: float) -> float:
    """``lgamma(p) - lgamma(p + q)`` without the cancellation two huge lgamma values suffer."""
    if p < 100.0:
        return math.lgamma(p) - math.lgamma(p + q)

    def stirling_tail(z: float) -> float:
        # lgamma(z) - ((z - 0.5) ln z - z + 0.5 ln 2 pi); these terms reach ~1e-20 at z >= 100.
        z2 = z * z
        return (1 / 12 - (1 / 360 - (1 / 1260 - 1 / (1680 * z2)) / z2) / z2) / z

    return (-(p - 0.5) * math.log1p(q / p) - q * math.log(p + q) + q
            + stirling_tail(p) - stirling_tail(p + q))


def _log_beta(a: float, b: float) -> float:
    small, big = min(a, b), max(a, b)
    return math.lgamma(small) + _log_gamma_ratio(big, small)


def _beta_continued_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of ``I_x(a, b)`` (modified Lentz); fast for x < (a+1)/(a+b+2)."""
    max_steps = 1000 + int(20 * math.sqrt(max(a, b)))
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c = 1.0
    d = 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > _TINY else _TINY)
    h = d
    for m in range(1, max_steps + 1):
        m2 = 2 * m
        for coeff in (m * (b - m) * x / ((qam + m2) * (a + m2)),
                      -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1.0 + coeff * d
            d = 1.0 / (d if abs(d) > _TINY else _TINY)
            c = 1.0 + coeff / c
            c = c if abs(c) > _TINY else _TINY
            step = c * d
            h *= step
        if abs(step - 1.0) < _EPS:
            return h
    raise ArithmeticError(f"incomplete beta did not converge (a={a}, b={b}, x={x})")


def _regularized_beta(a: float, b: float, x: float, y: float,
                      log_x: float, log_y: float) -> float:
    """``I_x(a, b)`` from ``x``, ``y = 1 - x`` and their logs, all computed without cancellation."""
    if log_x == -math.inf:
        return 0.0
    if log_y == -math.inf:
        return 1.0
    log_front = a * log_x + b * log_y - _log_beta(a, b)
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _beta_continued_fraction(a, b, x) / a
    return 1.0 - math.exp(log_front) * _beta_continued_fraction(b, a, y) / b


def student_t_sf(t: float, df: float) -> float:
    """P(T > t) for Student's t with ``df`` > 0 degrees of freedom (not necessarily an integer).

    ``I_x(df/2, 1/2) / 2`` with ``x = df / (df + t^2)``; past 1e6 df, the normal tail plus its
    1/df correction. Accurate to about 1e-12 absolute.
    """
    if math.isnan(t) or math.isnan(df) or df <= 0:
        raise ValueError(f"student_t_sf needs a number t and df > 0, got t={t}, df={df}")
    if t == 0.0:
        return 0.5
    if math.isinf(t):
        return 0.0 if t > 0 else 1.0
    if df > _LARGE_DF:
        normal = 0.5 * math.erfc(t / math.sqrt(2.0))
        if abs(t) > 40.0:  # the density underflows to 0 while t^3 may overflow
            return normal
        density = math.exp(-0.5 * t * t) / math.sqrt(2.0 * math.pi)
        return normal + density * (t * t * t + t) / (4.0 * df)
    q = abs(t) / math.sqrt(df)
    if q < 1e150:
        q2 = q * q
        log_x = -math.log1p(q2)
        x, y = 1.0 / (1.0 + q2), q2 / (1.0 + q2)
        log_y = math.log(y) if y > 0.0 else -math.inf
    else:
        # q^2 would overflow; x = 1/(1+q^2) is then 1/q^2 to double precision.
        log_x = -2.0 * math.log(q)
        x, y, log_y = math.exp(log_x), 1.0, 0.0
    tail = 0.5 * _regularized_beta(df / 2.0, 0.5, x, y, log_x, log_y)
    return tail if t > 0 else 1.0 - tail


@dataclass(frozen=True)
class TestResult:
    """One one-sided t-test; ``mean_delta`` > 0 means better in the contract's direction."""

    __test__ = False  # not a pytest test class, despite the name

    statistic: float | None
    df: float | None
    p_value: float
    mean_delta: float
    n: int


@dataclass(frozen=True)
class Judgement:
    """The ``welch_one_sided`` verdict on one split's values, with the figures behind it."""

    verdict: Verdict
    rule: str
    statistic: float | None
    df: float | None
    p_value: float
    mean_delta: float
    n: int
    alpha: float
    min_delta: float

    def to_json(self) -> dict[str, Any]:
        """A plain dict. An infinite statistic becomes None, since canonical JSON has no infinity;
        ``p_value`` and ``mean_delta`` still say which way the deterministic measurement went."""
        out = asdict(self)
        if out["statistic"] is not None and math.isinf(out["statistic"]):
            out["statistic"] = None
        return out


def _check_direction(direction: str) -> None:
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be 'maximize' or 'minimize', got {direction!r}")


def _check_finite(name: str, values: list[float]) -> None:
    for i, value in enumerate(values):
        if not math.isfinite(value):
            raise ValueError(f"{name}[{i}] is {value}: metric values must be finite numbers")


def _mean_var(values: list[float]) -> tuple[float, float]:
    """Mean and sample variance; exactly (value, 0.0) when every value is the same (or just one)."""
    if all(v == values[0] for v in values):
        return values[0], 0.0
    mean = math.fsum(values) / len(values)
    return mean, math.fsum((v - mean) ** 2 for v in values) / (len(values) - 1)


def one_sided_test(values: list[float], *, baseline: float, direction: str,
                   baseline_values: list[float] | None = None) -> TestResult:
    """One-sided t-test of "``values`` beat the baseline in ``direction``" (see the module doc).

    One-sample against ``baseline``, or Welch against ``baseline_values`` when given non-empty
    (the scalar ``baseline`` is then unused). ``n`` is ``len(values)``.
    Fewer than 2 values (or baseline values): statistic and df None, p 1.0, ``mean_delta`` 0.0
    when there are no values. All values identical (baseline values too): p 0.0 if
    ``mean_delta`` > 0 else 1.0, statistic +inf/-inf/0, df None. NaN or inf: ValueError.
    """
    _check_direction(direction)
    values = [float(v) for v in values]
    _check_finite("values", values)
    welch = bool(baseline_values)
    reference_values = [float(v) for v in baseline_values or []]
    _check_finite("baseline_values", reference_values)
    if not welch and not math.isfinite(baseline):
        raise ValueError(f"baseline is {baseline}: it must be a finite number")
    sign = 1.0 if direction == "maximize" else -1.0
    n, m = len(values), len(reference_values)
    reference, ref_var = _mean_var(reference_values) if welch else (float(baseline), 0.0)
    if n == 0:
        return TestResult(None, None, 1.0, 0.0, 0)
    mean, var = _mean_var(values)
    delta = sign * (mean - reference)
    if not math.isfinite(delta):
        raise ValueError("values are so far from the baseline that their difference overflows")
    if n < 2 or (welch and m < 2):
        return TestResult(None, None, 1.0, delta, n)
    if welch:
        a, b = var / n, ref_var / m
        se2 = a + b
        # Shares of se2 rather than squared variances, which underflow for tiny spreads.
        df = 1.0 / ((a / se2) ** 2 / (n - 1) + (b / se2) ** 2 / (m - 1)) if se2 else 0.0
    else:
        se2, df = var / n, float(n - 1)
    if se2 == 0.0:
        # Deterministic measurement (or variance underflow): no noise to test against.
        statistic = math.copysign(math.inf, delta) if delta else 0.0
        return TestResult(statistic, None, 0.0 if delta > 0 else 1.0, delta, n)
    statistic = delta / math.sqrt(se2)
    return TestResult(statistic, df, student_t_sf(statistic, df), delta, n)


def judge(values: list[float], *, baseline: float, direction: str, min_delta: float = 0.0,
          alpha: float = 0.05, baseline_values: list[float] | None = None) -> Judgement:
    """The ``welch_one_sided`` verdict on one split: supports, contradicts or inconclusive."""
    _check_direction(direction)
    if not (0.0 < alpha < 1.0):
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    if not (min_delta >= 0.0 and math.isfinite(min_delta)):
        raise ValueError(f"min_delta must be a finite number >= 0, got {min_delta}")
    result = one_sided_test(values, baseline=baseline, direction=direction,
                            baseline_values=baseline_values)
    opposite = "minimize" if direction == "maximize" else "maximize"
    worse = one_sided_test(values, baseline=baseline, direction=opposite,
                           baseline_values=baseline_values)
    verdict: Verdict
    if result.p_value < alpha and result.mean_delta >= min_delta:
        verdict = "supports"
    elif worse.p_value < alpha:
        verdict = "contradicts"
    else:
        verdict = "inconclusive"
    return Judgement(verdict=verdict, rule=RULE, statistic=result.statistic, df=result.df,
                     p_value=result.p_value, mean_delta=result.mean_delta, n=result.n,
                     alpha=alpha, min_delta=min_delta)


def promotes(dev: Judgement, heldout: Judgement | None) -> bool:
    """The honest promotion rule: dev supports AND held-out was measured AND it supports."""
    return dev.verdict == "supports" and heldout is not None and heldout.verdict == "supports"


def naive_promotes(dev_values: list[float], *, baseline: float, direction: str) -> bool:
    """The naive rule, for comparison only: any single dev value beats the baseline."""
    _check_direction(direction)
    if direction == "maximize":
        return any(v > baseline for v in dev_values)
    return any(v < baseline for v in dev_values)
