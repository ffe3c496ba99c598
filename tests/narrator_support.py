"""A small fixed campaign for the narrator's tests: one promotion, one retirement of a
refinement, one retry, one promotion candidate, and findings of three standings."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from lanes_support import Campaign, campaign

from loopx.agents import register_agent
from loopx.checks import Credentials
from loopx.decisions import decide
from loopx.findings import add_finding
from loopx.testing.research import CONTRACT, ResearchLoop

DEV_GOOD = [0.93, 0.94, 0.95]
HELDOUT_GOOD = [0.92, 0.93, 0.94]
HELDOUT_BEST = [0.95, 0.96, 0.97]
BAD = [0.85, 0.84, 0.86]


@dataclass
class Fixed:
    """The campaign, its research driver and the narrator's credentials."""

    c: Campaign
    r: ResearchLoop
    narrator: Credentials

    def view(self) -> dict[str, Any]:
        return self.c.ledger.state()["lanes"]


BASE_COMMIT = hashlib.sha1(b"base").hexdigest()
EVALUATED_COMMIT = hashlib.sha1(b"evaluated").hexdigest()


def fixed_campaign(contract: dict[str, Any] | None = None, **hypothesis_fields: Any) -> Fixed:
    """h-wide promoted; h-wider (refines h-wide) contradicted and retired; h-drop failed once
    (a retry candidate); h-deep contradicted on dev (a retirement candidate); h-norm supported
    on both splits (a promotion candidate).
    ``hypothesis_fields`` are added to every hypothesis (to plant values in them)."""
    c = campaign()
    r = ResearchLoop(c.ledger, c.owner)
    r.contract(contract or CONTRACT)
    _, token = register_agent(c.ledger, c.owner, "narr", "product_narrator")
    ev = r.agents["ev"]
    r.supported("h-wide", DEV_GOOD, HELDOUT_GOOD, title="Wider hidden layer",
                **hypothesis_fields)
    decide(c.ledger, ev, "h-wide", "promoted", decision_id="d-wide")
    r.propose("h-wider", parent_id="h-wide", title="Even wider hidden layer",
              mechanism="width", parameters={"width": 1024}, **hypothesis_fields)
    r.run("h-wider", "dev", BAD)
    r.judge("h-wider", "dev")
    decide(c.ledger, ev, "h-wider", "retired", reason="contradicted", decision_id="d-wider")
    r.propose("h-drop", title="Dropout before the head", mechanism="regularization",
              **hypothesis_fields)
    r.run("h-drop", "dev", None, status="failed")
    r.propose("h-deep", title="Two more layers", mechanism="depth", **hypothesis_fields)
    r.run("h-deep", "dev", BAD, commits=(BASE_COMMIT, EVALUATED_COMMIT))
    r.judge("h-deep", "dev")
    r.supported("h-norm", DEV_GOOD, HELDOUT_BEST, title="Batch norm", mechanism="normalization",
                **hypothesis_fields)
    add_finding(c.ledger, r.agents["cur"], kind="interpretation", finding_id="f-why",
                statement="Width helps because the digits need more features",
                evidence=[{"kind": "record", "ref": "d-wide"}])
    add_finding(c.ledger, r.agents["cur"], kind="risk", finding_id="f-risk",
                statement="Three seeds are few", evidence=[])
    return Fixed(c, r, Credentials("narr", token))
