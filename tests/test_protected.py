"""The protected boundary gate, against real git repositories built in tmp_path."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from loopx.research.git_read import repo_root
from loopx.research.protected import (
    NO_EVIDENCE,
    NOT_IN_GIT,
    BoundaryResult,
    check_boundary,
    check_range,
    is_protected,
)
from loopx.research.protected_history import Violation

PROTECTED = ["eval/", "data/heldout/**", "*.lock"]


class Repo:
    """A throwaway git repository with a protected evaluator, held-out data and editable code."""

    def __init__(self, root: Path, home: Path) -> None:
        self.root = root
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
        self.env.update(HOME=str(home), GIT_CONFIG_NOSYSTEM="1", GIT_AUTHOR_NAME="Test",
                        GIT_AUTHOR_EMAIL="test@example.org", GIT_COMMITTER_NAME="Test",
                        GIT_COMMITTER_EMAIL="test@example.org")
        root.mkdir()
        self.git("init", "-q", "-b", "main")
        self.write("eval/score.py", "def score(): return 1\n")
        self.write("data/heldout/test.csv", "x,y\n1,2\n")
        self.write("data/train.csv", "x,y\n3,4\n")
        self.write("src/model.py", "def model(): return 0\n")
        self.write("poetry.lock", "pinned\n")
        self.base = self.commit("base")

    def git(self, *args: str) -> str:
        done = subprocess.run(["git", *args], cwd=self.root, env=self.env, check=True,
                              capture_output=True, text=True)
        return done.stdout.strip()

    def write(self, path: str, text: str) -> None:
        target = self.root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)

    def symlink(self, path: str, target: str) -> None:
        link = self.root / path
        link.parent.mkdir(parents=True, exist_ok=True)
        if link.is_symlink() or link.exists():
            link.unlink()
        os.symlink(target, link)

    def commit(self, message: str) -> str:
        self.git("add", "-A")
        self.git("commit", "-q", "--allow-empty", "-m", message)
        return self.git("rev-parse", "HEAD")

    def commit_on_branch(self, branch: str, path: str, text: str, message: str) -> str:
        """Commit ``text`` to ``path`` on a new branch off main's head, then go back to main."""
        self.git("checkout", "-q", "-b", branch)
        self.write(path, text)
        commit = self.commit(message)
        self.git("checkout", "-q", "main")
        return commit

    def packet(self, evaluated: str, packet_id: str = "p1", base: str | None = None,
               **extra: object) -> dict[str, object]:
        return {"packet_id": packet_id, "base_commit": base or self.base,
                "evaluated_commit": evaluated, **extra}


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Repo:
    # Keep repository discovery from wandering above tmp_path into some enclosing checkout.
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    return Repo(tmp_path / "repo", tmp_path)


def only(result: BoundaryResult) -> Violation:
    assert not result.passed
    assert len(result.violations) == 1, result.violations
    return result.violations[0]


# --- pattern semantics ------------------------------------------------------------------------


@pytest.mark.parametrize(("path", "protected", "expected"), [
    ("eval/score.py", ["eval/"], True),
    ("eval/score.py", ["eval"], True),
    ("eval/deep/nested/score.py", ["eval"], True),
    ("eval", ["eval/"], True),
    ("evaluation.py", ["eval"], False),
    ("evaluation.py", ["eval/"], False),
    ("eval.py", ["eval"], False),
    ("src/eval/score.py", ["eval/"], False),
    ("./eval/score.py", ["eval/"], True),
    ("eval/score.py", ["./eval/"], True),
    ("eval/score.py", ["eval/score.py"], True),
    ("eval/other.py", ["eval/score.py"], False),
    ("data/heldout/a/b/c.csv", ["data/heldout/**"], True),
    ("data/heldout", ["data/heldout/**"], True),
    ("data/train.csv", ["data/heldout/**"], False),
    ("a/x/y/secret.txt", ["a/**/secret.txt"], True),
    ("a/secret.txt", ["a/**/secret.txt"], True),
    ("secret.txt", ["**/secret.txt"], True),
    ("poetry.lock", ["*.lock"], True),
    ("web/yarn.lock", ["*.lock"], True),
    ("poetry.lock.bak", ["*.lock"], False),
    ("conf.d/app.ini", ["*.d"], True),
    ("anything/at/all", ["."], True),
    ("src/model.py", [], False),
    ("src/model.py", ["", "../src/model.py"], False),
    ("Eval/score.py", ["eval/"], False),
])
def test_is_protected(path: str, protected: list[str], expected: bool) -> None:
    assert is_protected(path, protected) is expected


def test_is_protected_refuses_a_bare_string() -> None:
    with pytest.raises(TypeError):
        is_protected("eval/score.py", "eval/")  # type: ignore[arg-type]


# --- passing ranges ---------------------------------------------------------------------------


def test_clean_change_outside_the_scope_passes(repo: Repo) -> None:
    repo.write("src/model.py", "def model(): return 42\n")
    head = repo.commit("tune the model")
    result = check_boundary(repo.root, [repo.packet(head)], PROTECTED)
    assert result == BoundaryResult(True, [], [], [
        {"packet_id": "p1", "base_commit": repo.base, "evaluated_commit": head, "commits": 1}])
    json.dumps(result.to_json())


def test_copy_out_of_the_scope_and_a_harmless_symlink_pass(repo: Repo) -> None:
    repo.write("src/score_copy.py", (repo.root / "eval/score.py").read_text())
    repo.symlink("src/alias.py", "model.py")
    repo.symlink("src/train.csv", "../data/train.csv")
    head = repo.commit("copy and alias")
    result = check_boundary(repo.root, [repo.packet(head)], PROTECTED)
    assert result.passed, result.reasons


def test_empty_scope_passes_but_still_verifies_commits(repo: Repo) -> None:
    repo.write("eval/score.py", "def score(): return 100\n")
    head = repo.commit("nothing is protected")
    assert check_boundary(repo.root, [repo.packet(head)], []).passed
    unknown = check_boundary(repo.root, [repo.packet("0" * 40)], [])
    assert not unknown.passed and unknown.violations == []


# --- violations -------------------------------------------------------------------------------


def test_edit_to_a_protected_file_fails_whatever_the_packet_claims(repo: Repo) -> None:
    repo.write("eval/score.py", "def score(): return 100\n")
    head = repo.commit("improve the score")
    packet = repo.packet(head, protected_scope_clean=True)
    result = check_boundary(repo.root, [packet], PROTECTED)
    violation = only(result)
    assert (violation.commit, violation.path, violation.change) == (
        head, "eval/score.py", "modified")
    assert "'eval/'" in violation.detail
    assert result.reasons == [(f"packet p1 ({repo.base}..{head}) changes the protected scope: "
                               f"eval/score.py modified in {head[:12]}")]


@pytest.mark.parametrize(("path", "entry"), [
    ("data/heldout/test.csv", "data/heldout/**"), ("poetry.lock", "*.lock")])
def test_deleting_protected_data_fails(repo: Repo, path: str, entry: str) -> None:
    (repo.root / path).unlink()
    head = repo.commit("drop")
    violation = only(check_boundary(repo.root, [repo.packet(head)], PROTECTED))
    assert (violation.path, violation.change) == (path, "deleted")
    assert repr(entry) in violation.detail


def test_protected_file_renamed_out_of_the_scope_fails_on_the_old_path(repo: Repo) -> None:
    repo.git("mv", "eval/score.py", "src/score.py")
    head = repo.commit("move the evaluator")
    violation = only(check_boundary(repo.root, [repo.packet(head)], PROTECTED))
    assert (violation.path, violation.change) == ("eval/score.py", "renamed to src/score.py")


def test_file_renamed_into_the_scope_fails_on_the_new_path(repo: Repo) -> None:
    repo.git("mv", "src/model.py", "eval/model.py")
    head = repo.commit("move into eval")
    violation = only(check_boundary(repo.root, [repo.packet(head)], PROTECTED))
    assert (violation.path, violation.change) == ("eval/model.py", "renamed from src/model.py")


def test_copy_into_the_scope_fails(repo: Repo) -> None:
    repo.write("eval/helper.py", (repo.root / "src/model.py").read_text())
    head = repo.commit("copy into eval")
    violation = only(check_boundary(repo.root, [repo.packet(head)], PROTECTED))
    assert (violation.path, violation.change) == ("eval/helper.py", "added")


@pytest.mark.parametrize(("path", "target", "change", "detail"), [
    pytest.param("eval/score.py", "../src/model.py", "type changed", "100644 -> 120000",
                 id="a protected file swapped for a link"),
    pytest.param("src/score.py", "../eval/score.py", "symlink -> ../eval/score.py",
                 "resolves to eval/score.py", id="a link in the editable area to a protected file"),
    pytest.param("src/data", "../data", "symlink -> ../data",
                 "holds protected entry 'data/heldout/**'",
                 id="a link to a directory holding protected data"),
])
def test_symlink_into_the_scope_fails(repo: Repo, path: str, target: str, change: str,
                                      detail: str) -> None:
    repo.symlink(path, target)
    head = repo.commit(f"link {path}")
    violation = only(check_boundary(repo.root, [repo.packet(head)], PROTECTED))
    assert (violation.commit, violation.path, violation.change) == (head, path, change)
    assert detail in violation.detail


def test_symlink_through_an_existing_symlink_fails(repo: Repo) -> None:
    repo.symlink("src/shortcut", "../eval")
    base = repo.commit("an old shortcut, accepted before this experiment")
    repo.symlink("src/score.py", "shortcut/score.py")
    head = repo.commit("link through it")
    violation = only(check_boundary(repo.root, [repo.packet(head, base=base)], PROTECTED))
    assert (violation.path, violation.change) == ("src/score.py", "symlink -> shortcut/score.py")
    assert "resolves to eval/score.py" in violation.detail


@pytest.mark.parametrize("target", ["../../outside.txt", "/etc/passwd", "../.."])
def test_symlink_leaving_the_repository_fails(repo: Repo, target: str) -> None:
    repo.symlink("src/outside", target)
    head = repo.commit("link outside")
    violation = only(check_boundary(repo.root, [repo.packet(head)], PROTECTED))
    assert (violation.path, violation.change) == ("src/outside", f"symlink -> {target}")
    assert "leaves the repository" in violation.detail


def test_symlink_loop_fails(repo: Repo) -> None:
    repo.symlink("src/a", "b")
    repo.symlink("src/b", "a")
    head = repo.commit("loop")
    result = check_boundary(repo.root, [repo.packet(head)], PROTECTED)
    assert not result.passed
    assert {(v.path, v.change) for v in result.violations} == {
        ("src/a", "symlink -> b"), ("src/b", "symlink -> a")}


def test_change_reverted_later_in_the_range_still_fails(repo: Repo) -> None:
    original = (repo.root / "eval/score.py").read_text()
    repo.write("eval/score.py", "def score(): return 100\n")
    tampered = repo.commit("tamper")
    repo.write("src/model.py", "def model(): return 7\n")
    repo.commit("work")
    repo.write("eval/score.py", original)
    head = repo.commit("put it back")
    assert repo.git("diff", "--name-only", repo.base, head) == "src/model.py"
    result = check_boundary(repo.root, [repo.packet(head)], PROTECTED)
    assert not result.passed
    assert [(v.commit, v.path, v.change) for v in result.violations] == [
        (tampered, "eval/score.py", "modified"), (head, "eval/score.py", "modified")]
    assert result.checked[0]["commits"] == 3


def test_two_packets_cite_the_packet_whose_range_has_the_change(repo: Repo) -> None:
    original = (repo.root / "eval/score.py").read_text()
    repo.write("eval/score.py", "def score(): return 100\n")
    first = repo.commit("tamper")
    repo.write("eval/score.py", original)
    second = repo.commit("revert")
    packets = [repo.packet(first, "p1"), repo.packet(second, "p2")]
    result = check_boundary(repo.root, packets, PROTECTED)
    assert not result.passed
    assert (f"packet p1 ({repo.base}..{first}) changes the protected scope: "
            f"eval/score.py modified in {first[:12]}") in result.reasons
    assert result.reasons[1].startswith(f"packet p2 ({repo.base}..{second}) ")
    # The tampering commit is in both ranges but is reported once.
    assert [(v.commit, v.change) for v in result.violations] == [
        (first, "modified"), (second, "modified")]
    assert [c["commits"] for c in result.checked] == [1, 2]


def test_merge_that_brings_in_a_protected_change_fails(repo: Repo) -> None:
    side = repo.commit_on_branch("side", "eval/score.py", "def score(): return 100\n",
                                 "tamper on a side branch")
    repo.write("src/model.py", "def model(): return 7\n")
    repo.commit("work")
    repo.git("merge", "-q", "--no-ff", "-m", "merge side", "side")
    merge = repo.git("rev-parse", "HEAD")
    result = check_boundary(repo.root, [repo.packet(merge)], PROTECTED)
    assert not result.passed
    assert [(v.commit, v.path, v.change) for v in result.violations] == [
        (side, "eval/score.py", "modified"), (merge, "eval/score.py", "modified")]


def test_change_made_only_by_the_merge_commit_fails(repo: Repo) -> None:
    repo.commit_on_branch("side", "src/side.py", "x = 1\n", "harmless side work")
    repo.write("src/model.py", "def model(): return 7\n")
    repo.commit("work")
    repo.git("merge", "-q", "--no-ff", "--no-commit", "side")
    repo.write("eval/score.py", "def score(): return 100\n")
    merge = repo.commit("evil merge")
    violation = only(check_boundary(repo.root, [repo.packet(merge)], PROTECTED))
    assert (violation.commit, violation.path, violation.change) == (
        merge, "eval/score.py", "modified")


def test_odd_file_names_are_read_exactly(repo: Repo) -> None:
    name = "eval/we ird\tname\n\"q\".py"
    repo.write(name, "x = 1\n")
    head = repo.commit("odd name")
    violation = only(check_boundary(repo.root, [repo.packet(head)], PROTECTED))
    assert (violation.path, violation.change) == (name, "added")


def test_check_range_reports_violations_and_problems(repo: Repo) -> None:
    repo.write("eval/score.py", "def score(): return 100\n")
    head = repo.commit("tamper")
    violations, problems = check_range(repo.root, repo.base, head, ["eval"])
    assert problems == []
    assert [(v.commit, v.path, v.change) for v in violations] == [
        (head, "eval/score.py", "modified")]
    assert check_range(repo.root, head, repo.base, ["eval"]) == (
        [], [f"base_commit {head} is not an ancestor of evaluated_commit {repo.base}"])


# --- failing closed ---------------------------------------------------------------------------


def test_workspace_outside_git_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    plain = tmp_path / "plain"
    plain.mkdir()
    assert repo_root(plain) is None
    result = check_boundary(repo_root(plain), [{"packet_id": "p1", "base_commit": "ab" * 20,
                                               "evaluated_commit": "cd" * 20}], PROTECTED)
    assert result == BoundaryResult(False, [NOT_IN_GIT], [], [])


def test_repo_root_finds_the_top_level(repo: Repo) -> None:
    assert repo_root(repo.root / "eval") == repo.root.resolve()
    assert repo_root(repo.root / "eval" / "score.py") == repo.root.resolve()
    assert repo_root(repo.root / "not" / "yet" / "made") == repo.root.resolve()


def test_unknown_commit_fails(repo: Repo) -> None:
    result = check_boundary(repo.root, [repo.packet("0" * 40)], PROTECTED)
    assert result == BoundaryResult(False, [
        (f"packet p1: evaluated_commit {'0' * 40} is not a commit in this repository "
         "(unknown or ambiguous)")], [], [])


def test_a_ref_name_is_not_accepted_as_a_commit(repo: Repo) -> None:
    result = check_boundary(repo.root, [repo.packet("HEAD")], PROTECTED)
    assert result.reasons == [
        "packet p1: evaluated_commit 'HEAD' is not a commit id (a hexadecimal object name)"]


def test_base_that_is_not_an_ancestor_fails(repo: Repo) -> None:
    other = repo.commit_on_branch("other", "src/model.py", "def model(): return 1\n", "elsewhere")
    repo.write("src/model.py", "def model(): return 2\n")
    head = repo.commit("here")
    result = check_boundary(repo.root, [repo.packet(head, base=other)], PROTECTED)
    assert result == BoundaryResult(False, [
        f"packet p1: base_commit {other} is not an ancestor of evaluated_commit {head}"], [], [])


def test_packet_without_commits_fails(repo: Repo) -> None:
    packets: list[dict[str, object]] = [
        {"packet_id": "p1", "evaluated_commit": repo.base},
        {"packet_id": "p2", "base_commit": "", "evaluated_commit": None}]
    result = check_boundary(repo.root, packets, PROTECTED)
    assert result == BoundaryResult(False, [
        "packet p1 has no base_commit: its range cannot be checked",
        "packet p2 has no base_commit and no evaluated_commit: its range cannot be checked"],
        [], [])


def test_no_packets_fails(repo: Repo) -> None:
    assert check_boundary(repo.root, [], PROTECTED) == BoundaryResult(False, [NO_EVIDENCE], [], [])


def test_unusable_scope_entries_fail(repo: Repo) -> None:
    result = check_boundary(repo.root, [repo.packet(repo.base)], ["eval/", "../outside", ""])
    assert result.reasons == ["protected scope entry '../outside' is outside the repository",
                              "protected scope entry '' is not a path or pattern"]
    one_string: list[str] = "eval/"  # type: ignore[assignment]
    assert check_boundary(repo.root, [repo.packet(repo.base)], one_string).reasons == [
        "the protected scope is not a list of paths or patterns"]


def test_history_cut_short_inside_the_range_fails(repo: Repo, tmp_path: Path) -> None:
    # base -> s1 (tampers) -> s2 -> s3 on a side branch, merged into main at M. A depth-3 clone
    # still proves base an ancestor of M, but s2's parent s1 is missing from it.
    repo.git("checkout", "-q", "-b", "side")
    repo.write("eval/score.py", "def score(): return 100\n")
    repo.commit("s1")
    repo.write("src/side.py", "x = 2\n")
    s2 = repo.commit("s2")
    repo.write("src/side.py", "x = 3\n")
    repo.commit("s3")
    repo.git("checkout", "-q", "main")
    repo.write("src/model.py", "def model(): return 7\n")
    repo.commit("m1")
    repo.git("merge", "-q", "--no-ff", "-m", "M", "side")
    merge = repo.git("rev-parse", "HEAD")
    clone = tmp_path / "clone"
    repo.git("clone", "-q", "--depth", "3", f"file://{repo.root}", str(clone))
    result = check_boundary(clone, [repo.packet(merge)], PROTECTED)
    assert not result.passed
    assert (f"packet p1: commit {s2} has parents missing from this repository (shallow "
            "history): it cannot be inspected") in result.reasons
    # In the full repository the same packet is judged on the tampering commit itself.
    assert not check_boundary(repo.root, [repo.packet(merge)], PROTECTED).passed


def test_empty_range_passes(repo: Repo) -> None:
    result = check_boundary(repo.root, [repo.packet(repo.base)], PROTECTED)
    assert result.passed and result.checked[0]["commits"] == 0
