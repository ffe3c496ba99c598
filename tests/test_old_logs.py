"""A log written before the kernel/domain restructuring still verifies and folds the same.

``tests/data/pre_layers/log`` was written by loopx at commit a5c20c9 (before the packages): a
whole demo campaign, then a grant and its revocation, a finding, a rejected proposal, an
approved preview, an approved and a rejected promotion (which moves the standing best).
``expected.json`` is what that code folded from it: the state, the frontier and the candidates.
Later code may fold more from the same records, never less or otherwise.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from loopx.kernel.ledger import Ledger
from loopx.kernel.store.file import FileStore
from loopx.kernel.verify import verify_store
from loopx.research.projections import candidates, frontier

DATA = Path(__file__).resolve().parent / "data" / "pre_layers"


def _plain(value: Any) -> Any:
    return json.loads(json.dumps(value, sort_keys=True))


def _missing(actual: Any, expected: Any, where: str = "") -> list[str]:
    """Where ``actual`` lacks or changes something ``expected`` has (later versions may fold
    more fields than this log's code did, never fewer or different ones)."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        return [problem for key, value in expected.items()
                for problem in (_missing(actual[key], value, f"{where}.{key}") if key in actual
                                else [f"{where}.{key}: gone"])]
    if isinstance(expected, list) and isinstance(actual, list) and len(actual) == len(expected):
        return [p for i, (a, e) in enumerate(zip(actual, expected, strict=True))
                for p in _missing(a, e, f"{where}[{i}]")]
    return [] if actual == expected else [f"{where}: {expected!r} became {actual!r}"]


def _kept(data: Path, tmp_path: Path) -> tuple[FileStore, dict[str, Any]]:
    """A copy of the log kept in ``data``, opened, and what its writer folded from it."""
    shutil.copytree(data / "log", tmp_path / "log")
    return FileStore(tmp_path), json.loads((data / "expected.json").read_text())


def test_a_log_from_before_the_restructuring_verifies_and_folds_the_same(tmp_path: Path) -> None:
    store, expected = _kept(DATA, tmp_path)
    try:
        report = verify_store(store)
        assert report.ok, report
        assert report.records == expected["seq"] == 190
        state = Ledger(store).state()
        assert state.seq == expected["seq"]
        assert _missing(_plain(state.parts), expected["parts"]) == []
        view = state["lanes"]
        rows = _plain([r.to_json() for r in frontier(view)])
        assert _missing(rows, expected["frontier"]) == []
        assert _missing(_plain(candidates(view)), expected["candidates"]) == []
        # The fold moved between packages; what it computes did not (a rejected promotion
        # leaves the standing best to the promotion still approved).
        assert view["campaign"]["iterations"]["best_hypothesis"] == "h-neighbours"
        # Folded more from the same records: every hypothesis' fingerprint, one idea each (so no
        # duplicate candidates), and no research plan (the kind did not exist).
        assert sorted(h for ids in view["fingerprints"].values() for h in ids) == sorted(
            view["hypotheses"])
        assert all(len(ids) == 1 for ids in view["fingerprints"].values())
        assert view["research_plans"] == {}
    finally:
        store.close()


def test_a_version_5_log_verifies_and_folds_as_its_writer_did(tmp_path: Path) -> None:
    """``tests/data/rules_v5/log`` was written by loopx at 84f92fd (write rules version 5): a
    measured baseline whose held-out packet also reports seeds 7, 8 and 9 at 0.1, then two
    promotions under a stop policy of 5% and a patience of 2. That code pooled the padding
    into the first promotion's improvement, so it improved and no stop was owed. Today's
    loopx measures against the judged baseline (rules version 6), but only from an upgrade
    on: it folds this log as its writer did, and verify holds it to the stops owed then
    (folded by today's rules, the second promotion would owe a stop the log lacks)."""
    store, expected = _kept(DATA.parent / "rules_v5", tmp_path)
    try:
        report = verify_store(store)
        assert report.ok, report
        state = Ledger(store).state()
        assert (state.seq, state["kernel"]["rules"]) == (expected["seq"], expected["rules"])
        campaign = state["lanes"]["campaign"]
        assert _missing(_plain(campaign["iterations"]), expected["iterations"]) == []
        assert _missing(_plain(campaign["status"]), expected["status"]) == []
        assert campaign["iterations"]["stagnant"] == 1 and not campaign["status"]["stop_reasons"]
    finally:
        store.close()
