"""Every CLI command has help text and a section in docs/cli.md, and the README's commands hold."""

from __future__ import annotations

from pathlib import Path

import click

from loopx.cli import cli
from loopx.cli.app import COMMAND_MODULES

ROOT = Path(__file__).resolve().parent.parent


def commands(group: click.Group, prefix: str = "loopx") -> list[tuple[str, click.Command]]:
    out = []
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        assert command is not None, f"{prefix} {name} is listed but does not load"
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


def test_every_command_module_is_mapped() -> None:
    import importlib

    for module in set(COMMAND_MODULES.values()):
        importlib.import_module(f"loopx.cli.{module}")
    assert set(cli.commands) == set(COMMAND_MODULES)


def test_readme_test_command_is_what_ci_runs() -> None:
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    command = next(line for line in ci.splitlines() if "pytest" in line)
    assert command.strip() in readme


def test_every_tool_is_in_the_registry_table() -> None:
    from loopx.tools import all_tools

    lanes_doc = (ROOT / "docs" / "lanes.md").read_text()
    for tool in all_tools().values():
        row = f"| `{tool.name}` | {tool.risk} | {'yes' if tool.writes else 'no'} |"
        assert row in lanes_doc, f"docs/lanes.md lacks the row for {tool.name}: {row}"
