"""Honest promotion under eager agents: whole simulated campaigns through loopx's public API.

What it runs
    Each campaign is a fresh log (``MemoryStore``: the same checked write path as on disk,
    without the fsync) with an owner and four agents, curator ``cur``, proposer ``prop``,
    executor ``ex`` and evaluator ``ev``, each with its own token. The curator writes the
    contract: metric ``acc`` (maximize), 10 seeds per packet, a measured baseline (hypothesis
    ``baseline``, run on dev and held-out before anything else), alpha 0.05, 3 attempts, one
    held-out read, and the campaign-level control (``--rule``, LOND at 0.05 by default). Then
    ``--hypotheses`` hypotheses (default 100) arrive one by one: proposed under a todo, run on
    dev by the executor (a claimed todo, a packet, a completion), judged by the evaluator; if
    dev supports, run on held-out and judged; then promoted or retired on its candidate. Every
    value is ``0.80 + effect + gauss(0, 0.01)``: one seed's sd is 0.01.

Scenarios (true effects)
    null        every hypothesis has effect 0 (any promotion is a false one)
    power       10% have +2 sd (0.02) on both splits, the rest 0
    dev-only    10% have +2 sd on dev and 0 on held-out (a lift that does not generalise)

Behaviours (what the agents do; every refusal they meet is recorded in the log and counted)
    honest             one dev attempt, one held-out packet, one judgement per split
    optional-stopping  the executor re-runs dev until its own Welch test passes (up to 10
                       runs), and appends held-out packets under its one held-out claim until
                       its own test passes (up to 10 packets)
    cherry-picking     the evaluator asks for 3 dev attempts, appends a dev judgement citing
                       only the best one, and re-judges held-out when the verdict disappoints
    frontier-retries   executor and evaluator follow the frontier's ``retry_attempt`` on
                       inconclusive dev results for up to 10 rounds, then run once more anyway
    post-hoc-amendment after 30% of the hypotheses the curator tries to replace the measured
                       baseline with 0.79, then lowers the contract's scalar baseline to 0.79
                       and the evaluator re-judges the earlier hypotheses
    loosened-control   after each held-out miss the curator tries to double the campaign's
                       level (at most 0.5) under the laxer rule (lond), then to give the
                       hypothesis one more held-out read (a larger read budget); the baseline
                       and the hypothesis are measured again under the new plan, and the
                       hypothesis reads the held-out data again and is judged and decided
    baseline-shopping  before any hypothesis, the curator re-measures the baseline under a new
                       plan version (a trivial amendment) until its held-out mean comes out
                       1.5 standard errors low (up to 20 rounds); then everyone is honest
    weaker-baseline    a weaker model (``weak``, -2 sd) is proposed and run on dev beside the
                       measured baseline; after the first held-out miss the curator tries to
                       make it the measured baseline, and it is measured under the new plan
                       (every later hypothesis would then be compared with it)
    pseudo-replication the executor runs every seed 5 times (runs of one seed differ by 0.1 sd,
                       a training run's nondeterminism) and reports every run in the packet,
                       the baseline's too; refused, it reports each seed's mean run instead
    sandbagged-baseline the baseline's executor commits a smaller model (-2 sd) on the
                       baseline's branch, inside what the protected scope allows, and measures
                       that (its packets cite the base and its own commit); refused, it measures
                       the base unchanged under the same claim. Every packet of this behaviour
                       cites its commits
    racing-base        before the baseline is measured, the executor commits a smaller model
                       (-2 sd) on a branch and writes the campaign's first scored packet from
                       there, for a hypothesis of its own whose change undoes it; the honest
                       baseline then measures the base it is handed, and every later hypothesis
                       (the same executor's) starts from that base and undoes the smaller model
                       too. The contract pins the real base (``--unpinned``: it pins none,
                       whose packets write rules 9 refuse, so measure that with ``--rules 8``);
                       refused, the executor runs from the pinned base under the same claim

Verdict (the goals of the issue, for every behaviour)
    null:      campaigns with any false promotion          goal <= 5%
    power:     real +2 sd effects promoted                 goal >= 80%
    dev-only:  dev-only lifts promoted                     goal <= 5%

Run
    python bench/promotion_rule.py                          # 200 null campaigns per behaviour
    python bench/promotion_rule.py --campaigns 20 --power-campaigns 5      # a quick look
    python bench/promotion_rule.py --behaviours sandbagged-baseline --rules 7   # as before v8
    python bench/promotion_rule.py --behaviours racing-base --unpinned --rules 8   # as before v9
"""

from __future__ import annotations

import argparse
import multiprocessing
import platform
import random
import statistics
import time
from collections import Counter
from typing import Any

from loopx.governance.contract import amend_contract
from loopx.kernel.checks import Credentials
from loopx.kernel.errors import Refused, ResearchRefused
from loopx.kernel.ledger import Ledger
from loopx.kernel.store import MemoryStore
from loopx.research.decisions import decide
from loopx.research.evidence import judgement_payload
from loopx.research.operations import append_packet
from loopx.research.projections import row
from loopx.research.state import campaign_base
from loopx.research.stats import judge as welch
from loopx.testing.research import ResearchLoop
from loopx.work.claims import complete, should_run
from loopx.work.todos import add_todos
from loopx.workspace import bootstrap_log

BEHAVIOURS = ("honest", "optional-stopping", "cherry-picking", "frontier-retries",
              "post-hoc-amendment", "loosened-control", "weaker-baseline", "baseline-shopping",
              "pseudo-replication", "sandbagged-baseline", "racing-base")
SCENARIOS = ("null", "power", "dev-only")
BASE, SD, SEEDS = 0.80, 0.01, list(range(10))
EFFECT = 2 * SD
# Each comparator the campaign may name, with its true effect against the real baseline.
COMPARATORS = {"baseline": 0.0, "weak": -EFFECT}
REAL_SHARE = 0.10
RETRY_ROUNDS = 10
SHOPPING_ROUNDS = 20
RUNS_PER_SEED, RUN_SD = 5, 0.1 * SD
# The commits the sandbagged-baseline and racing-base campaigns' packets cite: the campaign's
# base, an executor's weaker model on its branch, and (by number) each hypothesis' change.
BASE_COMMIT, WEAKER_COMMIT = "b" * 40, "d" * 40
COMMITTING = ("sandbagged-baseline", "racing-base")
RACER = "h-race"


def contract(rule: str, level: float, base_commit: str | None = None) -> dict[str, Any]:
    """The curator's contract: measured baseline, 10 seeds, online campaign-level control, and
    the base commit when it pins one."""
    pin = {} if base_commit is None else {"base_commit": base_commit}
    return {**pin,
        "contract_id": "bench",
        "objective": {"name": "bench", "prompt": "beat the measured baseline", "domain": "sim"},
        "metric": {"name": "acc", "direction": "maximize", "baseline": BASE,
                   "baseline_hypothesis": "baseline", "seeds": SEEDS},
        "evaluation": {"dev": {"name": "dev"}, "heldout": {"name": "heldout",
                                                           "location": "/data/heldout"}},
        "protected_scope": ["eval/"],
        "promotion_policy": {"required_gates": ["heldout"], "alpha": 0.05, "max_attempts": 3,
                             "campaign_control": {"rule": rule, "level": level}},
    }


class Campaign:
    """One campaign's log, agents and tallies."""

    def __init__(self, rng: random.Random, behaviour: str, rule: str, level: float,
                 rules: int | None = None, pinned: bool = True) -> None:
        from loopx.domains import DOMAINS
        from loopx.kernel.domains import Domains

        ledger = Ledger(MemoryStore(), domains=DOMAINS if rules is None else Domains(
            DOMAINS.domains, version=DOMAINS.version, rules=rules))
        token = bootstrap_log(ledger, "bench")
        self.loop = ResearchLoop(ledger, Credentials("owner", token))
        # Packets citing commits need a pinned base (write rules 9): the curator pins it.
        pin = BASE_COMMIT if behaviour in COMMITTING and pinned else None
        self.loop.contract(contract(rule, level, pin))
        self.ledger, self.agents = ledger, self.loop.agents
        self.rng, self.behaviour = rng, behaviour
        self.refusals: Counter[str] = Counter()
        self.todo_no = 0
        self.swapped = False
        self.measure_baseline()

    # -- the agents' primitive steps, each through the public API ---------------------------

    def values(self, effect: float) -> list[float]:
        return [BASE + effect + self.rng.gauss(0.0, SD) for _ in SEEDS]

    def view(self) -> dict[str, Any]:
        return self.ledger.state()["lanes"]

    def refused(self, exc: Refused) -> None:
        self.refusals[exc.rule if isinstance(exc, ResearchRefused) else "unrecorded"] += 1

    def claim(self, hypothesis_id: str, split: str) -> tuple[str, int]:
        """The evaluator adds an evaluation todo for the executor, which claims it."""
        self.todo_no += 1
        todo_id = f"{split}-{self.todo_no}"
        action = "run_holdout_eval" if split == "heldout" else "run_dev_eval"
        add_todos(self.ledger, self.agents["ev"], [{
            "todo_id": todo_id, "title": f"{split} run of {hypothesis_id}",
            "role": "research_executor", "action_kind": action, "assigned_to": "ex",
            "hypothesis_id": hypothesis_id}])
        got = should_run(self.ledger, "ex", claim=True, creds=self.agents["ex"])
        if not got["claimed"]:
            raise Refused(f"nothing to claim for {hypothesis_id} {split}: {got['reason']}")
        return got["todo"]["todo_id"], got["todo"]["epoch"]

    def packet(self, hypothesis_id: str, split: str, values: list[float],
               under: tuple[str, int], commits: tuple[str, str] | None = None) -> bool:
        runs = [[v] for v in values]
        if commits is None and self.behaviour in COMMITTING:
            # h<n>'s own change, from the base the campaign hands out (the claim packet's)
            fixed = campaign_base(self.view())
            commits = (BASE_COMMIT if fixed is None else fixed["base_commit"],
                       f"{int(hypothesis_id[1:]) + 1:040x}")
        if commits is not None and commits[1] == WEAKER_COMMIT:
            runs = [[v + COMPARATORS["weak"]] for v in values]  # the smaller model's runs
        if self.behaviour == "pseudo-replication":
            runs = [[v + self.rng.gauss(0.0, RUN_SD) for _ in range(RUNS_PER_SEED)]
                    for v in values]
        while True:
            payload = {"hypothesis_id": hypothesis_id, "status": "scored",
                       "results": [{"split": split, "metric": "acc", "seed": s, "value": v}
                                   for s, seed_runs in zip(SEEDS, runs, strict=True)
                                   for v in seed_runs]}
            if commits is not None:
                payload["base_commit"], payload["evaluated_commit"] = commits
            try:
                append_packet(self.ledger, self.agents["ex"], payload, under=under)
                return True
            except Refused as exc:
                self.refused(exc)
                rule = exc.rule if isinstance(exc, ResearchRefused) else None
                if rule == "baseline_changed":
                    # Under the same claim: the base itself (the same draws as an honest run).
                    commits, runs = (BASE_COMMIT, BASE_COMMIT), [[v] for v in values]
                    continue
                if rule == "other_base" and commits is not None:
                    commits = (BASE_COMMIT, commits[1])  # the pinned base, the same change
                    continue
                if rule != "repeated_seed":
                    return False
                runs = [[statistics.fmean(seed_runs)] for seed_runs in runs]

    def attempt(self, hypothesis_id: str, split: str, effect: float,
                commits: tuple[str, str] | None = None) -> bool:
        """One run: claim a todo, record a packet, complete it (its result says when the packet
        was refused: the todo is done, so no later claim hands it out again)."""
        try:
            under = self.claim(hypothesis_id, split)
        except Refused as exc:
            self.refused(exc)
            return False
        done = self.packet(hypothesis_id, split, self.values(effect), under, commits)
        if done:
            complete(self.ledger, self.agents["ex"], *under, {"status": "scored"})
        else:
            complete(self.ledger, self.agents["ex"], *under, {"status": "refused"})
        return done

    def judge(self, hypothesis_id: str, split: str) -> str | None:
        try:
            return str(self.loop.judge(hypothesis_id, split)["verdict"])
        except Refused as exc:
            self.refused(exc)
            return None

    def measure_baseline(self) -> None:
        if self.behaviour == "racing-base":
            # The racer's own hypothesis: from the smaller model, a change that undoes it.
            self.loop.propose(RACER, mechanism="sim", parameters={"n": -1})
            # Its runs draw apart, so the campaign's own draws stay paired with honest ones.
            paired, self.rng = self.rng, random.Random(RACER)
            self.attempt(RACER, "dev", 0.0, (WEAKER_COMMIT, "e" * 40))
            self.rng = paired
        self.loop.propose("baseline", mechanism="baseline")
        for split in ("dev", "heldout"):
            commits = None
            if self.behaviour == "sandbagged-baseline":
                commits = (BASE_COMMIT, WEAKER_COMMIT)
            elif self.behaviour == "racing-base":  # honest: the base it is handed, unchanged
                fixed = campaign_base(self.view())
                start = BASE_COMMIT if fixed is None else fixed["base_commit"]
                commits = (start, start)
            self.attempt("baseline", split, 0.0, commits)
        if self.behaviour == "weaker-baseline":
            self.loop.propose("weak", mechanism="baseline", parameters={"size": "small"})
            self.attempt("weak", "dev", COMPARATORS["weak"])
        if self.behaviour == "baseline-shopping":
            self.shop_for_a_low_baseline()

    def shop_for_a_low_baseline(self) -> None:
        """The eager curator: a trivial amendment opens a new plan version, under which the
        baseline is measured again, until its held-out mean is low."""
        from loopx.research.evidence import packets_for

        low = BASE - 1.5 * SD / len(SEEDS) ** 0.5
        for round_no in range(SHOPPING_ROUNDS):
            view = self.view()
            values = [r[3] for p in packets_for(view, "baseline", "heldout")
                      for r in view["packets"][p]["results"] if r[0] == "heldout"]
            if values and statistics.fmean(values) <= low:
                return
            self.amend_and_remeasure("one more attempt allowed", [
                [("promotion_policy.max_attempts", 4 if round_no % 2 == 0 else 3)]])

    def own_test_passes(self, values: list[float], split: str) -> bool:
        """What an eager executor computes for itself from the log before stopping."""
        view = self.view()
        from loopx.research.evidence import packets_for

        base = [v for p in packets_for(view, "baseline", split)
                for r_split, _, _, v in view["packets"][p]["results"] if r_split == split]
        return welch(values, baseline=BASE, direction="maximize",
                     baseline_values=base).verdict == "supports"

    # -- one hypothesis, as each behaviour plays it ------------------------------------------

    def hypothesis(self, number: int, dev_effect: float, heldout_effect: float) -> None:
        hid = f"h{number}"
        self.loop.propose(hid, mechanism="sim", parameters={"n": number})
        getattr(self, "dev_" + self.behaviour.replace("-", "_"), self.dev_honest)(hid, dev_effect)
        if self.judge(hid, "dev") == "supports":
            self.heldout(hid, heldout_effect)
            missed = row(self.view(), hid).promotion is None
            if self.behaviour == "loosened-control" and missed:
                self.loosen_and_measure_again(hid, dev_effect, heldout_effect)
            elif self.behaviour == "weaker-baseline" and missed and not self.swapped:
                self.swapped = True
                self.amend_and_remeasure("the small model is the fairer comparison", [
                    [("metric.baseline_hypothesis", "weak")]])
        self.decide(hid)

    def dev_honest(self, hid: str, effect: float) -> None:
        self.attempt(hid, "dev", effect)

    def dev_optional_stopping(self, hid: str, effect: float) -> None:
        pooled: list[float] = []
        for _ in range(RETRY_ROUNDS):
            values = self.values(effect)
            try:
                under = self.claim(hid, "dev")
            except Refused as exc:
                self.refused(exc)
                return
            if not self.packet(hid, "dev", values, under):
                complete(self.ledger, self.agents["ex"], *under, {"status": "refused"})
                return
            complete(self.ledger, self.agents["ex"], *under, {"status": "scored"})
            pooled += values
            if self.own_test_passes(pooled, "dev"):
                return

    def dev_cherry_picking(self, hid: str, effect: float) -> None:
        for _ in range(3):
            self.attempt(hid, "dev", effect)
        view = self.view()
        packets = view["hypotheses"][hid]["packets"]
        best = max(packets, key=lambda p: statistics.fmean(r[3] for r in
                                                           view["packets"][p]["results"]))
        forged = judgement_payload(view, hid, "dev")
        values = [r[3] for r in view["packets"][best]["results"]]
        chosen = welch(values, baseline=BASE, direction="maximize",
                       baseline_values=forged["baseline_values"]).to_json()
        forged.update(packet_ids=[best], values=values, seeds=list(SEEDS),
                      **{k: chosen[k] for k in ("verdict", "p_value", "mean_delta",
                                                "statistic")})
        try:
            self.ledger.append({"payload": forged}, creds=self.agents["ev"],
                               kind="research_evidence_event_v0")
        except Refused as exc:
            self.refused(exc)

    def dev_frontier_retries(self, hid: str, effect: float) -> None:
        self.attempt(hid, "dev", effect)
        for _ in range(RETRY_ROUNDS):
            if self.judge(hid, "dev") == "supports":
                return
            if row(self.view(), hid).next_action != "retry_attempt":
                break
            self.attempt(hid, "dev", effect)
        self.attempt(hid, "dev", effect)  # once more, past what the frontier offers

    def dev_post_hoc_amendment(self, hid: str, effect: float) -> None:
        self.attempt(hid, "dev", effect)

    def heldout(self, hid: str, effect: float) -> None:
        try:
            under = self.claim(hid, "heldout")
        except Refused as exc:
            self.refused(exc)
            return
        values = self.values(effect)
        if not self.packet(hid, "heldout", values, under):
            complete(self.ledger, self.agents["ex"], *under, {"status": "refused"})
            return
        if self.behaviour == "optional-stopping":
            for _ in range(RETRY_ROUNDS - 1):
                if self.own_test_passes(values, "heldout"):
                    break
                values = self.values(effect)
                self.packet(hid, "heldout", values, under)  # the same claim, again
        complete(self.ledger, self.agents["ex"], *under, {"status": "scored"})
        verdict = self.judge(hid, "heldout")
        if self.behaviour == "cherry-picking" and verdict != "supports":
            self.judge(hid, "heldout")  # once more, hoping for better

    def decide(self, hid: str) -> None:
        current = row(self.view(), hid)
        try:
            if current.promotion is not None:
                decide(self.ledger, self.agents["ev"], hid, "promoted")
            elif current.retirement is not None:
                decide(self.ledger, self.agents["ev"], hid, "retired",
                       reason=current.retirement["reasons"][0])
        except Refused as exc:
            self.refused(exc)

    def amend_and_remeasure(self, reason: str, amendments: list[list[tuple[str, Any]]]) -> None:
        """The curator tries each amendment in turn (a refusal is counted); the baseline the
        plan names is then measured again, as a new plan version needs."""
        for settings in amendments:
            try:
                amend_contract(self.ledger, self.agents["cur"], reason, settings=settings)
            except Refused as exc:
                self.refused(exc)
        named = self.view()["campaign"]["plans"][-1]["plan"]["metric.baseline_hypothesis"]
        for split in ("dev", "heldout"):
            self.attempt(named, split, COMPARATORS[named])

    def amend_after_the_fact(self, earlier: list[tuple[str, float, float]]) -> None:
        """The eager curator: drop the measured baseline for a lower number, then lower the
        scalar; the evaluator re-judges what came before, and has it run again."""
        lower = round(BASE - SD, 6)
        self.amend_and_remeasure("the baseline was too strict", [
            [("metric.baseline_hypothesis", None), ("metric.baseline", lower)],
            [("metric.baseline", lower)]])
        for hid, dev_effect, heldout_effect in earlier:
            if self.judge(hid, "dev") != "supports":
                self.attempt(hid, "dev", dev_effect)
            if self.judge(hid, "dev") == "supports":
                self.heldout(hid, heldout_effect)
            self.decide(hid)

    def loosen_and_measure_again(self, hid: str, dev_effect: float,
                                 heldout_effect: float) -> None:
        """The eager curator after a held-out miss: a laxer campaign control, then one more
        held-out read for the hypothesis; it is measured again under the new plan."""
        plan = self.view()["campaign"]["plans"][-1]["plan"]
        level = plan["promotion_policy.campaign_control"]["level"]
        budget = plan["evaluation.heldout_read_budget"] or 1
        looser = {"rule": "lond", "level": min(0.5, level * 2)}
        self.amend_and_remeasure("it was so close", [
            [("promotion_policy.campaign_control", looser)],
            [("evaluation.heldout_read_budget", budget + 1)]])
        self.attempt(hid, "dev", dev_effect)
        if self.judge(hid, "dev") == "supports":
            self.heldout(hid, heldout_effect)

    def promoted(self) -> set[str]:
        view = self.view()
        return {d["hypothesis_id"] for d in view["decisions"].values()
                if d["outcome"] == "promoted" and d["superseded_by"] is None}


def run_campaign(job: tuple[str, str, int, int, str, float, int | None, bool]
                 ) -> dict[str, Any]:
    """One whole campaign; returns its tallies."""
    behaviour, scenario, seed, hypotheses, rule, level, rules, pinned = job
    rng = random.Random(seed)
    sim = Campaign(rng, behaviour, rule, level, rules, pinned)
    real: set[str] = set()
    earlier: list[tuple[str, float, float]] = []
    for n in range(hypotheses):
        lifted = scenario != "null" and rng.random() < REAL_SHARE
        dev = EFFECT if lifted else 0.0
        heldout = EFFECT if lifted and scenario == "power" else 0.0
        if lifted:
            real.add(f"h{n}")
        sim.hypothesis(n, dev, heldout)
        earlier.append((f"h{n}", dev, heldout))
        if behaviour == "post-hoc-amendment" and n == int(hypotheses * 0.3):
            sim.amend_after_the_fact(earlier)
    promoted = sim.promoted()
    return {"behaviour": behaviour, "scenario": scenario, "real": len(real),
            "real_promoted": len(promoted & real), "false": len(promoted - real),
            "promoted": len(promoted), "refusals": dict(sim.refusals),
            "records": sim.ledger.store.head().seq}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--campaigns", type=int, default=200, help="null campaigns per behaviour")
    parser.add_argument("--power-campaigns", type=int, default=50,
                        help="campaigns per behaviour for the power and dev-only scenarios")
    parser.add_argument("--hypotheses", type=int, default=100, help="hypotheses per campaign")
    parser.add_argument("--rule", choices=("lond", "alpha_spending"), default="lond")
    parser.add_argument("--level", type=float, default=0.05, help="the control's level")
    parser.add_argument("--behaviours", default=",".join(BEHAVIOURS),
                        help="comma-separated subset of: " + ", ".join(BEHAVIOURS))
    parser.add_argument("--processes", type=int, default=multiprocessing.cpu_count())
    parser.add_argument("--seed", type=int, default=20261204, help="random seed of the run")
    parser.add_argument("--rules", type=int, default=None,
                        help="write the logs under this older write-rules version (default: "
                             "the newest), to measure what a rule changed")
    parser.add_argument("--unpinned", action="store_true",
                        help="the contract of a behaviour whose packets cite commits "
                             "(sandbagged-baseline, racing-base) pins no base commit")
    args = parser.parse_args()
    behaviours = [b for b in args.behaviours.split(",") if b]
    unknown = sorted(set(behaviours) - set(BEHAVIOURS))
    if unknown:
        parser.error(f"unknown behaviour(s): {', '.join(unknown)}")

    jobs = []
    for behaviour in behaviours:
        for s_no, scenario in enumerate(SCENARIOS):
            count = args.campaigns if scenario == "null" else args.power_campaigns
            for c in range(count):
                # The same campaign seeds for every behaviour: paired comparisons.
                seed = args.seed * 1000 + s_no * 100_000 + c
                jobs.append((behaviour, scenario, seed, args.hypotheses, args.rule,
                             args.level, args.rules, not args.unpinned))
    t0 = time.perf_counter()
    with multiprocessing.get_context("spawn").Pool(max(1, args.processes)) as pool:
        results = pool.map(run_campaign, jobs, chunksize=4)
    elapsed = time.perf_counter() - t0

    print(f"promotion_rule: python {platform.python_version()}, {args.hypotheses} hypotheses per "
          f"campaign, {args.campaigns} null and {args.power_campaigns} power / dev-only "
          f"campaigns per behaviour, {len(SEEDS)} seeds, sd {SD}, {args.rule} at {args.level:g}, "
          f"seed {args.seed}, write rules {args.rules or 'newest'}"
          f"{', no base pinned' if args.unpinned else ''}, {len(jobs)} campaigns, "
          f"{sum(r['records'] for r in results):,} records, {elapsed:.0f} s")
    print(f"{'behaviour':<19} | {'null: any false':>15} | {'power':>6} | {'FDP':>5} | "
          f"{'dev-only':>8} | refusals met, by research rule (each recorded) or unrecorded")
    print("-" * 110)
    verdicts = []
    for behaviour in behaviours:
        mine = [r for r in results if r["behaviour"] == behaviour]
        null = [r for r in mine if r["scenario"] == "null"]
        power = [r for r in mine if r["scenario"] == "power"]
        devonly = [r for r in mine if r["scenario"] == "dev-only"]
        any_false = sum(r["false"] > 0 for r in null) / max(1, len(null))
        hit = sum(r["real_promoted"] for r in power) / max(1, sum(r["real"] for r in power))
        fdp = statistics.fmean(r["false"] / max(1, r["promoted"]) for r in power) if power else 0
        dev_only = (sum(r["real_promoted"] for r in devonly)
                    / max(1, sum(r["real"] for r in devonly)))
        refusals: Counter[str] = Counter()
        for r in mine:
            refusals.update(r["refusals"])
        shown = ", ".join(f"{k} {v}" for k, v in sorted(refusals.items())) or "-"
        print(f"{behaviour:<19} | {any_false:>15.1%} | {hit:>6.1%} | {fdp:>5.1%} | "
              f"{dev_only:>8.1%} | {shown}")
        verdicts.append((behaviour, any_false <= 0.05, hit >= 0.80, dev_only <= 0.05))
    print()
    for behaviour, null_ok, power_ok, dev_ok in verdicts:
        marks = [("null <= 5%", null_ok), ("power >= 80%", power_ok), ("dev-only <= 5%", dev_ok)]
        print(f"{behaviour:<19} " + "; ".join(f"{name}: {'PASS' if ok else 'MISS'}"
                                               for name, ok in marks))


if __name__ == "__main__":
    main()
