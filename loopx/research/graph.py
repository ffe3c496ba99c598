"""``research_evidence_graph_v0``: the campaign's sources as a typed networkx graph.

Nodes are contract versions, hypotheses, todos, evidence packets, judgements, novelty audits,
gate results, decisions, the owner's verdicts on decisions and grounding refs; edges say how
they relate. Built from the folded state, so the same log always gives the same graph, and
exported with nodes and edges in a fixed order as canonical JSON: the same log, the same bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Protocol

from loopx.research.projections import Row, frontier
from loopx.research.ref_identity import ref_key

if TYPE_CHECKING:
    import networkx

View = dict[str, Any]
SCHEMA = "research_evidence_graph_v0"
EDGE_TYPES = ("amends", "under_contract", "refines", "supersedes", "works_on", "attempt_of",
              "under", "judges", "judgement_of", "audits", "checks", "decides", "rests_on",
              "approves", "rejects", "grounds")


def _contract_at(view: View, seq: int) -> str | None:
    versions = [v for v in view["campaign"]["versions"] if v["seq"] <= seq]
    return f"contract:v{versions[-1]['version']}" if versions else None


class Graph(Protocol):
    """What :func:`build` uses of ``networkx.MultiDiGraph``."""

    def __contains__(self, node: object) -> bool: ...
    def __iter__(self) -> Iterator[str]: ...
    def add_node(self, node: str, **attrs: Any) -> None: ...
    def add_edge(self, source: str, target: str, key: str, **attrs: Any) -> Any: ...
    def nodes(self, data: bool = ...) -> Any: ...
    def edges(self, data: bool = ...) -> Any: ...


class PlainGraph:
    """The part of a ``networkx.MultiDiGraph`` that :func:`build` uses, in plain dicts:
    :func:`graph_json` reads only nodes and edges, so a cold ``loopx board`` never imports
    networkx (about 0.2 s). Same semantics: re-adding a node updates its attributes, an edge is
    keyed by (source, target, key)."""

    def __init__(self) -> None:
        self._nodes: dict[str, dict[str, Any]] = {}
        self._edges: dict[tuple[str, str, str], dict[str, Any]] = {}

    def __contains__(self, node: object) -> bool:
        return node in self._nodes

    def __iter__(self) -> Iterator[str]:
        return iter(self._nodes)

    def add_node(self, node: str, **attrs: Any) -> None:
        self._nodes.setdefault(node, {}).update(attrs)

    def add_edge(self, source: str, target: str, key: str, **attrs: Any) -> None:
        self._edges.setdefault((source, target, key), {}).update(attrs)

    def nodes(self, data: bool = False) -> list[Any]:
        return list(self._nodes.items()) if data else list(self._nodes)

    def edges(self, data: bool = False) -> list[Any]:
        return [(s, t, d) if data else (s, t) for (s, t, _), d in self._edges.items()]


def build(view: View, into: Graph | None = None, rows: list[Row] | None = None, *,
          evidence_only: bool = False) -> networkx.MultiDiGraph:
    """The evidence graph of the folded state, as a networkx graph (networkx is imported only
    here) or filled into ``into``; ``rows``: the frontier of ``view``, if already computed.
    ``evidence_only``: without contracts, todos, grounding and what decisions rest on (what
    the board's picture draws: hypotheses, the records about them, how they relate)."""
    if into is None:
        import networkx

        into = networkx.MultiDiGraph(schema_version=SCHEMA)
    g = into

    def edge(source: str, target: str, kind: str) -> None:
        if source in g and target in g:
            g.add_edge(source, target, key=kind, type=kind)

    previous = None
    for v in () if evidence_only else view["campaign"]["versions"]:
        node = f"contract:v{v['version']}"
        g.add_node(node, kind="contract", seq=v["seq"], record_id=v["record_id"],
                   contract_id=v["contract_id"], version=v["version"])
        if previous:
            edge(node, previous, "amends")
        previous = node
    by_id = {r.hypothesis_id: r for r in (frontier(view) if rows is None else rows)}
    hypotheses = view["hypotheses"]
    for hid, h in hypotheses.items():
        g.add_node(f"hypothesis:{hid}", kind="hypothesis", seq=h["seq"], record_id=h["record_id"],
                   title=h["title"], mechanism_family=h["mechanism_family"],
                   state=by_id[hid].state, revision=h["revision"],
                   completeness=by_id[hid].completeness)
    todos = view["todos"]
    for hid, todo_ids in ({} if evidence_only else view["hypothesis_todos"]).items():
        for todo_id in todo_ids:
            todo = todos.get(todo_id)
            if todo is not None:
                g.add_node(f"todo:{todo_id}", kind="todo", seq=todo["seq"], role=todo["role"],
                           action_kind=todo["action_kind"], status=todo["status"])
                edge(f"todo:{todo_id}", f"hypothesis:{hid}", "works_on")
    for packet_id, p in view["packets"].items():
        g.add_node(f"packet:{packet_id}", kind="packet", seq=p["seq"], status=p["status"],
                   attempt=p["attempt"], provenance=p["provenance"])
        edge(f"packet:{packet_id}", f"hypothesis:{p['hypothesis_id']}", "attempt_of")
        if p["todo_id"] is not None:
            edge(f"packet:{packet_id}", f"todo:{p['todo_id']}", "under")
    for hid, h in hypotheses.items():
        node = f"hypothesis:{hid}"
        contract = _contract_at(view, h["seq"])
        if contract:
            edge(node, contract, "under_contract")
        if h["parent_id"]:
            edge(node, f"hypothesis:{h['parent_id']}", "refines")
        if h["supersedes"]:
            edge(node, f"hypothesis:{h['supersedes']}", "supersedes")
        for e in h["events"]:
            g.add_node(f"event:{e['event_id']}", kind="evidence_event", seq=e["seq"],
                       split=e["split"], verdict=e["verdict"])
            edge(f"event:{e['event_id']}", node, "judgement_of")
            for packet_id in e["packet_ids"]:
                edge(f"event:{e['event_id']}", f"packet:{packet_id}", "judges")
        for a in h["audits"]:
            g.add_node(f"audit:{a['record_id']}", kind="novelty_audit", seq=a["seq"],
                       verdict=a["verdict"])
            edge(f"audit:{a['record_id']}", node, "audits")
        for gate in h["gates"]:
            g.add_node(f"gate:{gate['record_id']}", kind="gate_result", seq=gate["seq"],
                       gate=gate["gate"], passed=gate["passed"])
            edge(f"gate:{gate['record_id']}", node, "checks")
    by_record: dict[str, str] = {}
    if not evidence_only:
        _grounding(view, g, edge)
        by_record = {data["record_id"]: node for node, data in g.nodes(data=True)
                     if "record_id" in data}
        by_record.update({node.split(":", 1)[1]: node for node in g
                          if node.split(":", 1)[0] in ("packet", "event", "audit", "gate")})
    for did, d in view["decisions"].items():
        node = f"decision:{did}"
        g.add_node(node, kind="decision", seq=d["seq"], outcome=d["outcome"],
                   reason=d["reason"], revision=d["revision"], live=d["superseded_by"] is None)
        edge(node, f"hypothesis:{d['hypothesis_id']}", "decides")
        for ref in d["evidence_ids"]:
            if ref in by_record:
                edge(node, by_record[ref], "rests_on")
        if d.get("supersedes"):
            edge(node, f"decision:{d['supersedes']}", "supersedes")
        approval = d["approval"]
        if approval is not None:
            verdict = f"approval:{approval['record_id']}"
            g.add_node(verdict, kind="approval", seq=approval["seq"],
                       verdict=approval["verdict"])
            edge(verdict, node, "approves" if approval["verdict"] == "approved" else "rejects")
    return g  # type: ignore[return-value]


def _grounding(view: View, g: Graph,
               edge: Callable[[str, str, str], None]) -> None:
    # Recorded grounding refs (a hypothesis' own grounding_refs are part of its record): each
    # grounds its hypothesis, or the contract version in force when the curator recorded it.
    for gid, ref in view["grounding"].items():
        if ref["source"] != "grounding_ref_v0":
            continue
        hid = ref["hypothesis_id"]
        g.add_node(f"grounding:{gid}", kind="grounding_ref", seq=ref["seq"], record_id=gid,
                   scope="campaign" if hid is None else "hypothesis", ref_kind=ref["ref"]["kind"],
                   ref=ref["ref"]["ref"], normalised=ref_key(ref["ref"]).name)
        target = _contract_at(view, ref["seq"]) if hid is None else f"hypothesis:{hid}"
        if target:
            edge(f"grounding:{gid}", target, "grounds")


def graph_json(view: View, head_seq: int, rows: list[Row] | None = None, *,
               evidence_only: bool = False) -> dict[str, Any]:
    """The graph as plain data for the log up to ``head_seq``: nodes sorted by id, edges by
    (source, target, type); ``rows``: the frontier of ``view``, if already computed;
    ``evidence_only`` as in :func:`build`."""
    g = build(view, PlainGraph(), rows, evidence_only=evidence_only)
    nodes = [{"id": node, **data} for node, data in sorted(g.nodes(data=True))]
    edges = sorted(({"source": s, "target": t, "type": data["type"]}
                    for s, t, data in g.edges(data=True)),
                   key=lambda e: (e["source"], e["target"], e["type"]))
    kinds: dict[str, int] = {}
    for node in nodes:
        kinds[node["kind"]] = kinds.get(node["kind"], 0) + 1
    return {"schema_version": SCHEMA, "head_seq": head_seq, "nodes": nodes, "edges": edges,
            "counts": {"nodes": len(nodes), "edges": len(edges), "by_kind": kinds}}
