"""The ``welch_one_sided`` promotion rule on a simulated campaign: false promotions and power.

What it measures
    A campaign of hypotheses (default 2,000) is simulated with a fixed ``random.Random(seed)``.
    Each hypothesis has a true effect; for each of the contract's seeds (default 5) the
    executor reports a dev value and, independently drawn, a held-out value, each
    ``baseline + effect + gauss(0, sigma)``, with baseline 0.0, direction maximize and
    min_delta 0. Two scenarios: every true effect 0 (nothing works), and every true effect
    2 sigma (everything works). For each, the share of hypotheses promoted by:
      honest    ``loopx.stats.judge`` supports on dev AND on held-out (scalar contract
                baseline), combined by ``loopx.stats.promotes``
      dev only  ``judge`` supports on dev (what a dev-only lift would promote)
      naive     any single dev value beats the baseline (``loopx.stats.naive_promotes``)

Verdict (the honest rule)
    false promotion rate (effect 0)        goal <= 5%: chance lifts are not promoted
    promotion rate (effect 2 sigma)        goal >= 80%: real lifts of that size are
    The naive rule's figures are printed beside them for comparison.

Run
    python bench/promotion_rule.py                    # defaults, well under a second
    python bench/promotion_rule.py --seeds 3 --hypotheses 5000
"""

from __future__ import annotations

import argparse
import platform
import random
import time

from loopx.stats import judge, naive_promotes, promotes

BASELINE = 0.0
DIRECTION = "maximize"


def campaign(rng: random.Random, effect: float, *, hypotheses: int, seeds: int, sigma: float,
             alpha: float) -> dict[str, float]:
    """Share of hypotheses promoted by each rule, when every true effect is ``effect``."""
    counts = {"honest": 0, "dev only": 0, "naive": 0}
    for _ in range(hypotheses):
        dev = [BASELINE + effect + rng.gauss(0.0, sigma) for _ in range(seeds)]
        heldout = [BASELINE + effect + rng.gauss(0.0, sigma) for _ in range(seeds)]
        on_dev = judge(dev, baseline=BASELINE, direction=DIRECTION, alpha=alpha)
        on_heldout = judge(heldout, baseline=BASELINE, direction=DIRECTION, alpha=alpha)
        counts["honest"] += promotes(on_dev, on_heldout)
        counts["dev only"] += on_dev.verdict == "supports"
        counts["naive"] += naive_promotes(dev, baseline=BASELINE, direction=DIRECTION)
    return {rule: count / hypotheses for rule, count in counts.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hypotheses", type=int, default=2000, help="hypotheses per scenario")
    parser.add_argument("--seeds", type=int, default=5, help="seeds (values) per split")
    parser.add_argument("--sigma", type=float, default=1.0, help="per-seed noise (std dev)")
    parser.add_argument("--seed", type=int, default=20261203, help="random seed of the run")
    parser.add_argument("--alpha", type=float, default=0.05, help="the promotion policy's alpha")
    args = parser.parse_args()

    rng = random.Random(args.seed)
    t0 = time.perf_counter()
    scenarios = {"0": 0.0, "2 sigma": 2.0 * args.sigma}
    rates = {name: campaign(rng, effect, hypotheses=args.hypotheses, seeds=args.seeds,
                            sigma=args.sigma, alpha=args.alpha)
             for name, effect in scenarios.items()}
    elapsed = time.perf_counter() - t0

    print(f"promotion_rule: python {platform.python_version()}, {args.hypotheses} hypotheses "
          f"per scenario, {args.seeds} seeds, sigma {args.sigma:g}, alpha {args.alpha:g}, "
          f"seed {args.seed}, {elapsed:.1f} s")
    print(f"{'true effect':<11} | {'honest':>7} | {'dev only':>8} | {'naive':>7}")
    print("-" * 42)
    for name, row in rates.items():
        print(f"{name:<11} | {row['honest']:>7.1%} | {row['dev only']:>8.1%} | "
              f"{row['naive']:>7.1%}")
    false_rate, power = rates["0"]["honest"], rates["2 sigma"]["honest"]
    print(f"\nfalse promotion rate (effect 0) = {false_rate:.1%} (goal <= 5%: "
          f"{'PASS' if false_rate <= 0.05 else 'MISS'}); naive rule {rates['0']['naive']:.1%}")
    print(f"promotion rate (effect 2 sigma) = {power:.1%} (goal >= 80%: "
          f"{'PASS' if power >= 0.80 else 'MISS'}); naive rule {rates['2 sigma']['naive']:.1%}")


if __name__ == "__main__":
    main()
