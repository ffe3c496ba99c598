"""Every loopx import follows loopx/layers.py: no import circles, no import upward.

The checker reads imports with ``ast`` (never importing the code), so it can also be
pointed at small synthetic packages, which prove that it fails when it should.

An import is an edge to the module it names (``from a.b import c`` names ``a.b.c`` when
that is a module, else ``a.b``), not to the packages above it that Python also runs:
each package's own imports are edges of their own, and package -> child -> package is
how every package loads, not a circle.
"""

from __future__ import annotations

import ast
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import networkx as nx
import pytest

from loopx.layers import BASE, LAYERS, group_of, groups_of, rank

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True, order=True)
class Import:
    """One import statement of one package module, resolved to the module it loads."""

    importer: str
    imported: str
    path: str  # relative to the root, so messages read the same for any checkout
    line: int

    def where(self) -> str:
        """``file:line`` of the statement."""
        return f"{self.path}:{self.line}"


@dataclass(frozen=True)
class Circle:
    """Modules that import each other, and the imports between them that close it."""

    modules: tuple[str, ...]
    edges: tuple[Import, ...]


@dataclass
class Report:
    """What the checker found; empty lists mean the package follows the rule."""

    circles: list[Circle] = field(default_factory=list)
    upward: list[Import] = field(default_factory=list)
    ungrouped: list[str] = field(default_factory=list)

    def messages(self) -> list[str]:
        """One human-readable paragraph per finding."""
        out = []
        for module in self.ungrouped:
            found = groups_of(module)
            why = f"in several groups ({', '.join(found)})" if found else "in no group"
            out.append(f"{module} is {why}: place it in loopx/layers.py LAYERS")
        for imp in self.upward:
            mine, theirs = group_of(imp.importer), group_of(imp.imported)
            rule = ("base modules import nothing from loopx" if mine == BASE
                    else f"{mine} may import only {mine} or groups below it")
            out.append(f"{imp.importer} ({mine}) imports {imp.imported} ({theirs}) "
                       f"at {imp.where()}: {rule}")
        for circle in self.circles:
            lines = [f"import circle of {len(circle.modules)} modules: "
                     + ", ".join(circle.modules)]
            lines += [f"    {e.importer} -> {e.imported}  ({e.where()})"
                      for e in circle.edges]
            out.append("\n".join(lines))
        return out


def modules(root: Path, package: str) -> dict[str, Path]:
    """Every module of ``package`` under ``root``, by dotted name."""
    found = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if "__pycache__" in parts:
            continue
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _known(name: str, known: set[str]) -> str:
    # An import of a name a module defines (``from a.b import c``) loads ``a.b``.
    while name not in known and "." in name:
        name = name.rpartition(".")[0]
    return name


def _targets(node: ast.Import | ast.ImportFrom, module: str, is_package: bool,
             package: str, known: set[str]) -> list[str]:
    def inside(name: str) -> bool:
        return name == package or name.startswith(package + ".")

    if isinstance(node, ast.Import):
        return [_known(a.name, known) for a in node.names if inside(a.name)]
    if node.level:
        parts = module.split(".") if is_package else module.split(".")[:-1]
        if node.level - 1 >= len(parts):
            return []  # beyond the top package: fails at runtime, not an edge
        base = ".".join(parts[:len(parts) - (node.level - 1)])
        target = f"{base}.{node.module}" if node.module else base
    else:
        target = node.module or ""
    if not inside(target):
        return []
    return [f"{target}.{a.name}" if f"{target}.{a.name}" in known
            else _known(target, known) for a in node.names]


def _statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    # Imports are statements and expressions hold none, so walking only statement blocks
    # (function, class, if TYPE_CHECKING, try, with, match) finds every import at a
    # fraction of ast.walk's cost.
    for node in body:
        yield node
        for block in ("body", "orelse", "finalbody"):
            yield from _statements(getattr(node, block, []))
        for clause in getattr(node, "handlers", []) + getattr(node, "cases", []):
            yield from _statements(clause.body)


def imports(root: Path, package: str) -> list[Import]:
    """Every import among ``package``'s modules, deferred ones included."""
    found = modules(root, package)
    known = set(found)
    out = set()
    for module, path in found.items():
        tree = ast.parse(path.read_bytes(), filename=str(path))
        is_package = path.name == "__init__.py"
        rel = path.relative_to(root).as_posix()
        for node in _statements(tree.body):
            if isinstance(node, ast.Import | ast.ImportFrom):
                for target in _targets(node, module, is_package, package, known):
                    if target != module:
                        out.add(Import(module, target, rel, node.lineno))
    return sorted(out)


def check(root: Path, package: str) -> Report:
    """Check ``package`` under ``root`` against loopx/layers.py."""
    report = Report()
    found = modules(root, package)
    edges = imports(root, package)
    report.ungrouped = [m for m in found if group_of(m) is None]
    for imp in edges:
        mine, theirs = group_of(imp.importer), group_of(imp.imported)
        if mine is None or theirs is None:
            continue  # already reported as ungrouped
        if mine == BASE or rank(theirs) > rank(mine):
            report.upward.append(imp)
    graph: nx.DiGraph[str] = nx.DiGraph()
    graph.add_nodes_from(found)
    graph.add_edges_from((e.importer, e.imported) for e in edges)
    for component in nx.strongly_connected_components(graph):
        if len(component) > 1:
            closing = tuple(e for e in edges
                            if e.importer in component and e.imported in component)
            report.circles.append(Circle(tuple(sorted(component)), closing))
    report.circles.sort(key=lambda c: c.modules)
    return report


# The real tree

@pytest.fixture(scope="module")
def real() -> Report:
    return check(ROOT, "loopx")


def _clean(report: Report) -> None:
    # No traceback: the findings are the message, not the Report's repr.
    if found := report.messages():
        pytest.fail("\n" + "\n".join(found), pytrace=False)


def test_every_module_is_in_exactly_one_group(real: Report) -> None:
    _clean(Report(ungrouped=real.ungrouped))


def test_no_import_goes_up_the_layers(real: Report) -> None:
    _clean(Report(upward=real.upward))


def test_no_import_circles(real: Report) -> None:
    _clean(Report(circles=real.circles))


def test_group_of() -> None:
    assert group_of("loopx") == BASE
    assert group_of("loopx.layers") == BASE
    assert group_of("loopx.kernel") == "kernel"
    assert group_of("loopx.kernel.store.file") == "kernel"
    assert group_of("loopx.domains") == "assembly"
    assert group_of("loopx.workspace.create") == "assembly"  # the package, every module
    assert group_of("loopx.__main__") == "main"
    assert group_of("loopx.kernelx") is None  # a prefix covers whole names only
    assert group_of("loopx.newthing") is None  # the top package covers only itself
    assert len({group for group, _ in LAYERS}) == len(LAYERS)
    # No name may fall under another group's name, or a module would sit in two groups.
    assert all(groups_of(name) == [group] for group, names in LAYERS for name in names)


# Synthetic packages: the checker fails when it should

def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


# Named loopx so the real group table applies; it is only read, never imported.
FAKE = {
    "loopx/__init__.py": '__version__ = "0"\n',
    "loopx/kernel/__init__.py": "",
    "loopx/kernel/fold.py": """\
        def later() -> None:
            from loopx.work import todos  # deferred, still kernel -> work
        """,
    "loopx/work/__init__.py": "class Todo: ...\n",
    "loopx/work/todos.py": "from loopx.kernel import fold\n",
    "loopx/governance/__init__.py": "",
    "loopx/governance/a.py": "from . import b\n",
    "loopx/governance/b.py": """\
        from typing import TYPE_CHECKING

        if TYPE_CHECKING:
            from .a import Thing
        """,
    "loopx/research/__init__.py": "",
    "loopx/research/plan.py": """\
        import loopx.kernel.fold
        from loopx import __version__
        from loopx.work import Todo
        from ..governance import a
        from ..kernel.fold import later


        class Deferred:
            def run(self) -> None:
                try:
                    pass
                except ImportError:
                    from loopx.work import todos
        """,
    "loopx/newthing.py": "",
}


def test_imports_are_resolved(tmp_path: Path) -> None:
    _write(tmp_path, FAKE)
    got = {(i.importer, i.imported, i.line) for i in imports(tmp_path, "loopx")}
    assert got == {
        ("loopx.kernel.fold", "loopx.work.todos", 2),
        ("loopx.work.todos", "loopx.kernel.fold", 1),
        ("loopx.governance.a", "loopx.governance.b", 1),
        ("loopx.governance.b", "loopx.governance.a", 4),
        ("loopx.research.plan", "loopx.kernel.fold", 1),
        ("loopx.research.plan", "loopx", 2),
        ("loopx.research.plan", "loopx.work", 3),
        ("loopx.research.plan", "loopx.governance.a", 4),
        ("loopx.research.plan", "loopx.kernel.fold", 5),
        ("loopx.research.plan", "loopx.work.todos", 13),
    }


def test_checker_reports_exactly_the_planted_faults(tmp_path: Path) -> None:
    _write(tmp_path, FAKE)
    report = check(tmp_path, "loopx")
    assert report.ungrouped == ["loopx.newthing"]
    assert [(i.importer, i.imported, i.where()) for i in report.upward] == [
        ("loopx.kernel.fold", "loopx.work.todos", "loopx/kernel/fold.py:2")]
    assert [(c.modules, [(e.importer, e.imported) for e in c.edges])
            for c in report.circles] == [
        (("loopx.governance.a", "loopx.governance.b"),
         [("loopx.governance.a", "loopx.governance.b"),
          ("loopx.governance.b", "loopx.governance.a")]),
        (("loopx.kernel.fold", "loopx.work.todos"),
         [("loopx.kernel.fold", "loopx.work.todos"),
          ("loopx.work.todos", "loopx.kernel.fold")]),
    ]
    text = "\n".join(report.messages())
    assert ("loopx.kernel.fold (kernel) imports loopx.work.todos (work) "
            "at loopx/kernel/fold.py:2") in text
    assert "loopx.governance.b -> loopx.governance.a  (loopx/governance/b.py:4)" in text
    assert "loopx.newthing is in no group" in text


def test_base_modules_import_nothing_from_loopx(tmp_path: Path) -> None:
    _write(tmp_path, {
        "loopx/__init__.py": "from loopx.kernel import fold\n",
        "loopx/layers.py": "from loopx import __version__\n",
        "loopx/kernel/__init__.py": "",
        "loopx/kernel/fold.py": "from loopx.layers import group_of\n",
    })
    report = check(tmp_path, "loopx")
    assert [(i.importer, i.imported) for i in report.upward] == [
        ("loopx", "loopx.kernel.fold"), ("loopx.layers", "loopx")]
    assert report.ungrouped == []
    assert [c.modules for c in report.circles] == [
        ("loopx", "loopx.kernel.fold", "loopx.layers")]
