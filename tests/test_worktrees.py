"""Tests for loopx.runner.worktrees: per-(todo, epoch) git worktrees, on real repositories in tmp_path."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from loopx.kernel.errors import Refused, WorkspaceError
from loopx.runner import worktrees
from loopx.runner.worktrees import Worktree

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not on PATH")


@pytest.fixture(autouse=True)
def git_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Make git independent of the machine's config, for the tests and the module alike."""
    monkeypatch.setenv("GIT_AUTHOR_NAME", "Test Author")
    monkeypatch.setenv("GIT_AUTHOR_EMAIL", "author@example.com")
    monkeypatch.setenv("GIT_COMMITTER_NAME", "Test Committer")
    monkeypatch.setenv("GIT_COMMITTER_EMAIL", "committer@example.com")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", "/dev/null")
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    # A repository above tmp_path must not make the "not in git" cases look like they are.
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    for name in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE"):
        monkeypatch.delenv(name, raising=False)


def git(cwd: Path, *args: str, check: bool = True) -> str:
    proc = subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, text=True,
                          check=False)
    if check and proc.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {proc.stderr}")
    return proc.stdout


def commit_all(cwd: Path, message: str) -> str:
    git(cwd, "add", "-A")
    git(cwd, "commit", "-q", "-m", message)
    return git(cwd, "rev-parse", "HEAD").strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q")
    (root / "README.md").write_text("hello\n")
    commit_all(root, "init")
    return root


def listed_worktrees(repo: Path) -> list[Path]:
    out = git(repo, "worktree", "list", "--porcelain")
    return [Path(line.split(" ", 1)[1]).resolve()
            for line in out.splitlines() if line.startswith("worktree ")]


def branch_exists(repo: Path, branch: str) -> bool:
    return git(repo, "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}",
               check=False).strip() != ""


def test_create_makes_a_worktree_on_a_new_branch_from_head(repo: Path) -> None:
    head = git(repo, "rev-parse", "HEAD").strip()
    wt = worktrees.create(repo, "dev-h1", 2)
    assert wt is not None
    assert wt.path == (repo / ".loopx" / "worktrees" / "dev-h1.2").resolve()
    assert wt.path.is_absolute() and (wt.path / "README.md").read_text() == "hello\n"
    assert wt.branch == "loopx/dev-h1/2"
    assert wt.base_commit == head and len(head) == 40
    assert git(wt.path, "rev-parse", "--abbrev-ref", "HEAD").strip() == "loopx/dev-h1/2"
    assert wt.path in listed_worktrees(repo)
    assert git(repo, "check-ignore", "-q", ".loopx", check=False) == ""
    assert git(repo, "status", "--porcelain", "--untracked-files=all") == ""
    exclude = (repo / ".git" / "info" / "exclude").read_text()
    assert ".loopx/" in exclude.splitlines()
    assert not (repo / ".gitignore").exists()


def test_exclude_line_is_added_once_and_not_when_already_ignored(repo: Path,
                                                                tmp_path: Path) -> None:
    exclude = repo / ".git" / "info" / "exclude"
    assert worktrees.create(repo, "a", 1) is not None
    assert worktrees.create(repo, "b", 1) is not None
    assert exclude.read_text().splitlines().count(".loopx/") == 1

    other = tmp_path / "other"
    other.mkdir()
    git(other, "init", "-q")
    (other / ".gitignore").write_text(".loopx/\n")
    commit_all(other, "init")
    before = (other / ".git" / "info" / "exclude").read_text()
    assert worktrees.create(other, "a", 1) is not None
    assert (other / ".git" / "info" / "exclude").read_text() == before
    assert git(other, "status", "--porcelain") == ""


def test_a_commit_in_the_worktree_moves_only_its_head(repo: Path) -> None:
    main_head = git(repo, "rev-parse", "HEAD").strip()
    wt = worktrees.create(repo, "dev-h1", 1)
    assert wt is not None
    assert worktrees.head_commit(wt) == wt.base_commit
    (wt.path / "result.txt").write_text("42\n")
    new = commit_all(wt.path, "result")
    assert worktrees.head_commit(wt) == new != wt.base_commit
    assert git(repo, "rev-parse", "HEAD").strip() == main_head


def test_dirty_paths_lists_edits_and_untracked_files(repo: Path) -> None:
    wt = worktrees.create(repo, "dev-h1", 1)
    assert wt is not None
    assert worktrees.dirty_paths(wt) == []
    (wt.path / "README.md").write_text("edited\n")
    (wt.path / "new file.txt").write_text("new\n")
    assert worktrees.dirty_paths(wt) == ["README.md", "new file.txt"]
    commit_all(wt.path, "work")
    assert worktrees.dirty_paths(wt) == []


def test_dirty_paths_sees_untracked_files_a_config_would_hide(repo: Path) -> None:
    git(repo, "config", "status.showUntrackedFiles", "no")
    wt = worktrees.create(repo, "dev-h1", 1)
    assert wt is not None
    (wt.path / "sub").mkdir()
    (wt.path / "sub" / "out.txt").write_text("x\n")
    assert worktrees.dirty_paths(wt) == ["sub/"]


def test_dirty_paths_names_both_sides_of_a_rename(repo: Path) -> None:
    wt = worktrees.create(repo, "dev-h1", 1)
    assert wt is not None
    git(wt.path, "mv", "README.md", "READ.md")
    assert worktrees.dirty_paths(wt) == ["READ.md", "README.md"]


def test_the_same_todo_and_epoch_again_gets_a_fresh_branch_and_keeps_the_old(
        repo: Path) -> None:
    first = worktrees.create(repo, "dev-h1", 3)
    assert first is not None
    (first.path / "result.txt").write_text("42\n")
    work = commit_all(first.path, "an attempt that crashed before it was recorded")
    second = worktrees.create(repo, "dev-h1", 3)
    assert second is not None
    assert (second.branch, second.path.name) == ("loopx/dev-h1/3-2", "dev-h1.3-2")
    assert worktrees.head_commit(second) == first.base_commit  # from HEAD, not the old branch
    worktrees.remove(first)
    # Once the old worktree is gone its branch stays, keeps its commit, and is not reused.
    third = worktrees.create(repo, "dev-h1", 3)
    assert third is not None and third.branch == "loopx/dev-h1/3-3"
    assert git(repo, "rev-parse", "loopx/dev-h1/3").strip() == work
    assert all(branch_exists(repo, w.branch) for w in (first, second, third))


def test_a_leftover_directory_is_not_reused_or_deleted(repo: Path) -> None:
    leftover = repo / ".loopx" / "worktrees" / "dev-h1.1"
    leftover.mkdir(parents=True)
    (leftover / "notes.txt").write_text("from a crashed attempt\n")
    wt = worktrees.create(repo, "dev-h1", 1)
    assert wt is not None and wt.path.name == "dev-h1.1-2" and wt.branch == "loopx/dev-h1/1-2"
    assert (leftover / "notes.txt").read_text() == "from a crashed attempt\n"


def test_a_new_epoch_gets_its_own_branch(repo: Path) -> None:
    first = worktrees.create(repo, "dev-h1", 1)
    second = worktrees.create(repo, "dev-h1", 2)
    assert first is not None and second is not None
    assert first.branch != second.branch and first.path != second.path
    assert second.branch == "loopx/dev-h1/2" and second.path.name == "dev-h1.2"
    assert branch_exists(repo, first.branch) and branch_exists(repo, second.branch)


def test_remove_deletes_the_worktree_and_keeps_the_branch(repo: Path) -> None:
    wt = worktrees.create(repo, "dev-h1", 1)
    assert wt is not None
    (wt.path / "result.txt").write_text("42\n")
    commit = commit_all(wt.path, "result")
    (wt.path / "scratch.txt").write_text("uncommitted\n")
    worktrees.remove(wt)
    assert not wt.path.exists()
    assert wt.path not in listed_worktrees(repo)
    assert git(repo, "rev-parse", wt.branch).strip() == commit
    worktrees.remove(wt)


def test_remove_of_a_deleted_directory_prunes_its_entry(repo: Path) -> None:
    wt = worktrees.create(repo, "dev-h1", 1)
    assert wt is not None
    shutil.rmtree(wt.path)
    worktrees.remove(wt)
    assert wt.path not in listed_worktrees(repo)
    shutil.rmtree(repo / ".loopx")
    worktrees.remove(wt)


def test_a_removed_worktree_is_not_read_as_the_main_checkout(repo: Path) -> None:
    wt = worktrees.create(repo, "dev-h1", 1)
    assert wt is not None
    worktrees.remove(wt)
    with pytest.raises(WorkspaceError, match="not a git worktree"):
        worktrees.head_commit(wt)
    with pytest.raises(WorkspaceError, match="not a git worktree"):
        worktrees.dirty_paths(wt)


def test_a_workspace_outside_git_gets_no_worktree(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    assert worktrees.repo_root(plain) is None
    assert worktrees.create(plain, "dev-h1", 1) is None
    assert not (plain / ".loopx").exists()


def test_missing_git_means_no_repository(repo: Path, monkeypatch: pytest.MonkeyPatch,
                                         tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))
    assert worktrees.repo_root(repo) is None
    assert worktrees.create(repo, "dev-h1", 1) is None


def test_a_repository_without_commits_is_refused(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    git(empty, "init", "-q")
    with pytest.raises(Refused, match="no commit yet"):
        worktrees.create(empty, "dev-h1", 1)


def test_a_workspace_in_a_subdirectory_uses_the_repository_top(repo: Path) -> None:
    workspace = repo / "projects" / "alpha"
    workspace.mkdir(parents=True)
    assert worktrees.repo_root(workspace) == repo.resolve()
    wt = worktrees.create(workspace, "dev-h1", 1)
    assert wt is not None
    assert wt.path == (workspace / ".loopx" / "worktrees" / "dev-h1.1").resolve()
    assert wt.base_commit == git(repo, "rev-parse", "HEAD").strip()
    assert (wt.path / "README.md").exists()
    assert git(repo, "status", "--porcelain", "--untracked-files=all") == ""


@pytest.mark.parametrize("todo_id", [
    "dev-h1.heldout_after_supported_dev",
    "todo:dev-h1:2",
    "a b~c^d?e*f[g\\h",
    "..hidden..",
    "x.lock",
    "x.lock.",
    "@",
    "a@{b}",
    "nested/todo//id/",
    "-leading",
    "é-unicode",
    "tab\there",
])
def test_branch_names_are_valid_git_refs(todo_id: str, repo: Path) -> None:
    name = worktrees.branch_name(todo_id, 7)
    assert name.startswith("loopx/") and name.endswith("/7")
    assert git(repo, "check-ref-format", "--branch", name, check=False).strip() == name


def test_branch_names_keep_plain_ids_and_replace_colons() -> None:
    assert (worktrees.branch_name("dev-h1.heldout_after_supported_dev", 0)
            == "loopx/dev-h1.heldout_after_supported_dev/0")
    assert worktrees.branch_name("todo:dev-h1", 4) == "loopx/todo-dev-h1/4"


def test_a_todo_id_with_a_colon_gets_a_worktree(repo: Path) -> None:
    wt = worktrees.create(repo, "todo:dev/h1", 1)
    assert wt is not None
    assert wt.branch == "loopx/todo-dev-h1/1"
    assert wt.path.name == "todo-dev-h1.1"
    assert wt.path.parent == (repo / ".loopx" / "worktrees").resolve()


def test_a_failing_git_command_raises_workspace_error(repo: Path) -> None:
    bogus = Worktree(path=repo, branch="loopx/x/1", base_commit="0" * 40)
    git(repo, "checkout", "-q", "--orphan", "unborn")
    with pytest.raises(WorkspaceError, match=r"`git rev-parse --verify .*` failed in .*: fatal: "):
        worktrees.head_commit(bogus)
