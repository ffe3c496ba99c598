"""``loopx demo``: the main job, a multi-process research campaign on bundled data."""

from __future__ import annotations

from pathlib import Path

import click

from loopx.cli.app import cli, emit, json_option


@cli.command("demo")
@click.option("--dir", "directory", type=click.Path(file_okay=False, path_type=Path),
              metavar="DIR", help="Run in this new or empty directory (default: a new "
                                  "temporary one).")
@click.option("--agents", type=click.IntRange(min=2, max=8), default=2, show_default=True,
              help="How many executor agents (each its own process).")
@click.option("--seed", type=int, default=7, show_default=True,
              help="The seed that splits the data into train, dev and held-out sets.")
@click.option("--iterations", type=click.IntRange(min=1, max=10), default=4, show_default=True,
              help="Decisions before the stop policy ends the campaign.")
@click.option("--kill-executor", is_flag=True,
              help="SIGKILL one executor while it holds a claim, to watch its todo reclaimed "
                   "by another once the lease runs out.")
@click.option("--store", metavar="URL",
              help="Run on PostgreSQL: postgresql://user@host/db (a log of the run's own "
                   "unless ?log= names one; password from the URL, PGPASSWORD or ~/.pgpass).")
@json_option
def demo(directory: Path | None, agents: int, seed: int, iterations: int, kill_executor: bool,
         store: str | None, as_json: bool) -> None:
    """Run a real research campaign on scikit-learn's bundled digits: a curator, a proposer,
    executors, an evaluator/promoter and a narrator, each a separate process, until the
    contract's stop policy ends it."""
    from loopx.demo.run import DemoOptions, run_demo

    def show(line: str) -> None:
        if not as_json:
            click.echo(line)

    report = run_demo(DemoOptions(directory, executors=agents, seed=seed,
                                  iterations=iterations, kill_executor=kill_executor,
                                  store=store), show)
    out = report.to_json()
    text = [f"\ncampaign {out['state']}" + (f" ({', '.join(out['stop_reasons'])})"
                                            if out["stop_reasons"] else "")
            + f" after {out['seconds']} s, {out['records']} records, verify "
            + ("ok" if out["verified"] else "FAILED"),
            f"promoted: {', '.join(out['promoted']) or 'none'}",
            f"retired:  {', '.join(out['retired']) or 'none'}",
            f"story:    {out['story'] or 'not published'}",
            f"board:    {out['board'] or 'not published'}",
            f"workspace: {out['directory']} (lane logs in .loopx/demo-logs/)"]
    if out["killed"]:
        todo = out["killed"]["todo_id"]
        text.append(f"killed:   {out['killed']['agent_id']} holding {todo}; "
                    + ("another executor took it over once its lease expired"
                       if todo in out["reclaimed"] else
                       "the campaign stopped before its lease expired"))
    if out["pending_preview"]:
        root = out["directory"]
        text += ["", f"The story's new first screen awaits your approval (preview "
                     f"{out['pending_preview']}):",
                 f"  loopx -C {root} approve {out['pending_preview']} --note 'reviewed' "
                 f"--token-file {root}/.loopx/tokens/owner.token",
                 f"  loopx -C {root} story --out {root}/public/story.md --agent-id narr "
                 f"--token-file {root}/.loopx/tokens/narr.token"]
    emit(as_json, out, "\n".join(text))
