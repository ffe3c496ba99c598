"""Narrator commands: story, board (and board --serve) and preview."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import click

from loopx.cli.app import (
    cli,
    emit,
    run_tool,
    with_agent,
    with_token,
    workspace_of,
)
from loopx.cli.direct import credentials, screen_note
from loopx.kernel.errors import UsageProblem

out_option = click.option(
    "--out", type=click.Path(dir_okay=False, path_type=Path), metavar="PATH",
    help="Publish to this file (missing directories are created), with a publication record "
         "(needs the narrator's token). Without it, the text is printed and nothing is recorded.")
publisher_option = click.option(
    "--agent-id", envvar="LOOPX_AGENT_ID", metavar="ID",
    help="The publishing narrator (env LOOPX_AGENT_ID); needed with --out.")


@contextmanager
def _out_directory(out: Path) -> Iterator[None]:
    """Create the missing directories above ``out``; if publishing then fails, remove the ones
    created here again (nothing is left behind by a refused publication)."""
    missing = [d for d in (out.parent, *out.parent.parents) if not d.exists()]
    blocking = next((d for d in (out.parent, *out.parent.parents) if d.exists()), None)
    if blocking is not None and not blocking.is_dir():
        raise UsageProblem(f"--out {out}: {blocking} is a file, not a directory")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageProblem(f"--out {out}: cannot create the directory {out.parent}: "
                           f"{exc.strerror}") from None
    try:
        yield
    except BaseException:
        for directory in missing:  # deepest first
            try:
                directory.rmdir()
            except OSError:
                break  # not empty (something else wrote there): leave it
        raise


def _render_or_publish(ctx: click.Context, surface: str, fmt: str, out: Path | None,
                       agent_id: str | None, token_file: Path | None, as_json: bool) -> None:
    from loopx.tools.narrator import Publish, Render

    if out is None:
        rendered = run_tool(ctx, "story.render", Render(surface, fmt))
        if as_json:
            emit(True, rendered, "")
        else:
            click.echo(rendered["text"], nl=False)
            click.echo(f"loopx: {screen_note(rendered)}", err=True)
        return
    if not agent_id:
        raise UsageProblem("--out publishes a record: give the narrator's --agent-id "
                           "(or LOOPX_AGENT_ID) and its token")
    creds = credentials(agent_id, token_file)
    with _out_directory(out):
        published = run_tool(ctx, "story.publish", Publish(str(out), surface, fmt), creds)
    emit(as_json, published,
         f"{published['publication_id']}: {surface} ({fmt}) written to {out}, "
         f"{published['output_bytes']} bytes, sha256 {published['output_sha256'][:16]}; "
         f"pins seq {published['head']['seq']} ({published['head']['hash'][:16]}); "
         f"recorded at seq {published['seq']}\n{screen_note(published)}")


@cli.command("story")
@click.option("--format", "fmt", type=click.Choice(["md", "html"]), default="md",
              show_default=True, help="Markdown, or one self-contained HTML page.")
@out_option
@publisher_option
@with_token
def story(ctx: click.Context, fmt: str, out: Path | None, agent_id: str | None,
          token_file: Path | None, as_json: bool) -> None:
    """The public-safe case story, rendered from projections through the redaction and
    first-screen gates."""
    _render_or_publish(ctx, "story", fmt, out, agent_id, token_file, as_json)


@cli.command("board")
@out_option
@click.option("--serve", is_flag=True,
              help="Serve the board on localhost, refreshing as the log grows (records nothing).")
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True,
              help="Port for --serve (0: any free port).")
@publisher_option
@with_token
def board(ctx: click.Context, out: Path | None, serve: bool, port: int, agent_id: str | None,
          token_file: Path | None, as_json: bool) -> None:
    """The board: three candidate columns, the evidence graph and the frontier, as one
    self-contained HTML page."""
    if serve:
        if out is not None:
            raise UsageProblem("--serve and --out do not go together: serve, or publish a file")
        from loopx.cli.board_server import serve as serve_board

        def announce(url: str) -> None:
            emit(as_json, {"url": url}, f"serving the board at {url} (Ctrl-C stops)")

        try:
            serve_board(workspace_of(ctx), port, announce)
        except OSError as exc:
            raise UsageProblem(f"cannot serve on port {port}: {exc.strerror}") from None
        except KeyboardInterrupt:
            pass
        return
    _render_or_publish(ctx, "board", "html", out, agent_id, token_file, as_json)


@cli.command("preview")
@click.option("--preview-id", metavar="ID", help="Its id (default: a fresh preview-... id).")
@with_agent
def preview(ctx: click.Context, preview_id: str | None, agent_id: str, token_file: Path | None,
            as_json: bool) -> None:
    """Record a preview of the story's new first screen, for the owner to approve (`loopx
    approve ID`) before it is published."""
    from loopx.tools.narrator import Preview

    out = run_tool(ctx, "story.preview", Preview(preview_id), credentials(agent_id, token_file))
    screen = out["first_screen"]
    emit(as_json, out,
         f"{out['preview_id']} recorded at seq {out['seq']}; the owner approves it with "
         f"`loopx approve {out['preview_id']} --note ...`\n  title: {screen['title']}\n"
         f"  headline: {screen['headline']}\n  action: {screen['primary_action']['label']}")
