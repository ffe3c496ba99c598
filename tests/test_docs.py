"""Every CLI command has help text and a section in docs/cli.md, and the README's commands hold."""

from __future__ import annotations

from pathlib import Path

import click

from loopx.cli import cli

ROOT = Path(__file__).resolve().parent.parent


def commands(group: click.Group, prefix: str = "loopx") -> list[tuple[str, click.Command]]:
    out = []
    for name, command in sorted(group.commands.items()):
        path = f"{prefix} {name}"
        if isinstance(command, click.Group):
            out += commands(command, path)
        else:
            out.append((path, command))
    return out


def test_every_command_has_help_and_a_docs_section() -> None:
    cli_doc = (ROOT / "docs" / "cli.md").read_text()
    found = commands(cli)
    assert len(found) >= 7
    for path, command in found:
        assert (command.help or "").strip(), f"{path} has no help text"
        assert f"## `{path}`" in cli_doc, f"docs/cli.md has no section for {path}"
        for param in command.params:
            if isinstance(param, click.Option) and param.name != "as_json":
                assert param.help, f"{path} {param.opts[0]} has no help text"
                assert param.opts[-1] in cli_doc, f"docs/cli.md does not mention {param.opts[-1]}"


def test_readme_test_command_is_what_ci_runs() -> None:
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    command = next(line for line in ci.splitlines() if "pytest" in line)
    assert command.strip() in readme
