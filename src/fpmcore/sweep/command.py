"""``fpm sweep``: replay the cross product of a grid, locally or on Ray.

::

    fpm sweep GRID -o RESULTS [--engine local|ray|serial] [--address ADDR] [--workers N]
        [--objective [max:|min:]METRIC] [--constraint METRIC<=X]... [--top N]
        [--plot OUT.png] [--resume] [--json]

Everything is checked before the first run: the options, the plot path, the
results path (an existing file needs ``--resume``), the grid and every
configuration it makes.  Rows are appended to RESULTS as runs finish
(:mod:`fpmcore.sweep.results`); a rich progress bar on stderr counts finished
runs with an ETA.  A failed run is reported on stderr with its settings and
keeps its row (with ``error``).  At the end the best settings by the
objective are printed as a table (:mod:`fpmcore.sweep.objective`), or, with
``--json``, exactly ``{"schema": 1, "rows": [...]}`` with one row per task of
the grid in task order (rows of earlier runs included with ``--resume``).

Exit 0 when every run succeeded, 1 when a run failed or was lost, 2 for bad
usage or input.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from fpmcore.cli.options import integer
from fpmcore.documents.errors import FpmError
from fpmcore.host.hooktypes import CliCommand, CommandContext

RULE = "sweep"


#: A positive integer option, through the command line's one integer type (:mod:`fpmcore.cli.options`).
_workers = integer(minimum=1)


def configure(p: argparse.ArgumentParser) -> None:
    from fpmcore.sweep.engines import ENGINES

    p.add_argument("grid", metavar="GRID", help="the grid: profiles, traces, tables and settings (TOML or JSON)")
    p.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="RESULTS",
        help="results file (JSON Lines, one row per run, appended as runs finish)",
    )
    p.add_argument(
        "--engine",
        choices=ENGINES,
        default="local",
        help="local: a process pool (default); ray: a Ray cluster; serial: in this process",
    )
    p.add_argument("--address", metavar="ADDR", help="the Ray cluster to join (default: start a local instance)")
    p.add_argument(
        "--workers",
        type=_workers,
        metavar="N",
        help="worker processes of the local pool, CPUs of a local Ray instance (default: one per core)",
    )
    p.add_argument(
        "--objective",
        default="max:output_tokens_per_s",
        metavar="[max:|min:]METRIC",
        help="what the best table ranks by (default max:output_tokens_per_s)",
    )
    p.add_argument(
        "--constraint",
        action="append",
        default=[],
        metavar="METRIC<=X",
        help="keep runs whose metric meets the bound, e.g. p99_ttft_s<=2 (repeatable)",
    )
    p.add_argument("--top", type=_workers, default=10, metavar="N", help="rows of the best table (default 10)")
    p.add_argument("--plot", metavar="OUT.png", help="plot the objective against each swept setting (matplotlib)")
    p.add_argument("--resume", action="store_true", help="continue RESULTS: skip the runs that have a row")
    p.add_argument("--json", action="store_true", help='print {"schema": 1, "rows": [...]} on stdout')


def _check_output(path: str, resume: bool, inputs: Any = ()) -> None:
    """The results file, before any run: the one output-path rule (:mod:`fpmcore.documents.output_files`, O-1 … O-4), then resume.

    The results file is appended to, one durable row at a time, so that a
    killed sweep resumes (``--resume``) where it stopped; an existing file
    without ``--resume`` is refused.
    """
    from fpmcore.documents.output_files import check_output_path

    target = check_output_path(path, inputs=inputs)
    if target.exists() and not resume:
        raise FpmError(RULE, f"results {path} exists; --resume continues it (or remove it)")


def _metric_names(sweep: Any) -> list[str]:
    """The metrics of a replay summary, from a one-request replay of the first task's configuration."""
    from fpmcore.replay import parse_trace, run_replay
    from fpmcore.sweep.grid import build_config, rules_key
    from fpmcore.sweep.objective import metrics

    task = sweep.tasks[0]
    table = None if task.table is None else sweep.inputs[task.table].value
    cfg = build_config(
        sweep.inputs[task.profile].value,
        table,
        task.settings,
        sweep.settings,
        sweep.inputs[rules_key(task.profile)].value,
    )
    trace = parse_trace('{"request_id": "probe", "arrival_time": 0, "prompt_len": 1, "output_len": 1}\n')
    return list(metrics(run_replay(cfg, trace).summary))


def _row(sweep: Any, task: Any, outcome: dict[str, Any]) -> dict[str, Any]:
    return {
        "task": task.index,
        "key": task.key,
        "profile": sweep.label(task.profile),
        "trace": sweep.label(task.trace),
        "table": sweep.label(task.table),
        "settings": dict(task.settings),
        "summary": outcome["summary"],
        "error": outcome["error"],
    }


def _describe(row: dict[str, Any]) -> str:
    settings = json.dumps(row["settings"], sort_keys=True)
    return (
        f"run {row['task']} (profile {row['profile']}, trace {row['trace']}, table {row['table']}, settings {settings})"
    )


def run(args: argparse.Namespace, ctx: CommandContext) -> int:
    from fpmcore.sweep import engines, objective
    from fpmcore.sweep.grid import expand
    from fpmcore.sweep.results import ResultsWriter, read_rows

    goal = objective.parse_objective(args.objective)
    constraints = [objective.parse_constraint(c) for c in args.constraint]
    if args.address is not None and args.engine != "ray":
        raise FpmError(RULE, "--address needs --engine ray")
    if args.engine == "ray":
        engines._import_ray()
    from fpmcore.documents.output_files import check_outputs_apart
    from fpmcore.sweep.objective_plot import check_path

    if args.plot:
        check_path(args.plot, inputs=[args.grid])
    _check_output(args.output, args.resume, inputs=[args.grid])
    check_outputs_apart([("results", args.output), ("plot", args.plot)])
    sweep = expand(args.grid, replay_rules=ctx.host.hooks.replay_rules, trace_formats=ctx.host.hooks.trace_formats())
    inputs = [args.grid, *(i.path for i in sweep.inputs.values())]
    _check_output(args.output, args.resume, inputs=inputs)
    if args.plot:
        check_path(args.plot, inputs=inputs)
    if not sweep.tasks:
        raise FpmError(RULE, "the grid makes no task", args.grid)
    objective.check_metrics([goal.metric] + [c.metric for c in constraints], _metric_names(sweep))

    rows, keep = read_rows(args.output) if args.resume else ({}, 0)
    by_index = {t.index: t for t in sweep.tasks}
    todo = [t for t in sweep.tasks if t.key not in rows]
    failed = lost = 0
    with ResultsWriter(args.output, keep) as out, ctx.progress("runs") as bar:
        done = len(sweep.tasks) - len(todo)
        if done:
            ctx.err.print(f"resuming: {done} of {len(sweep.tasks)} runs have rows in {args.output}",
                          highlight=False, soft_wrap=True)  # fmt: skip
        progress = bar.add_task(f"sweep of {len(sweep.tasks)} runs ({args.engine})", total=len(sweep.tasks),
                                completed=done)  # fmt: skip
        for outcome in engines.run_tasks(sweep, todo, engine=args.engine, workers=args.workers, address=args.address):
            task = by_index[outcome["task"]]
            row = _row(sweep, task, outcome)
            if outcome.get("lost"):
                lost += 1
            else:
                out.write(row)
                rows[task.key] = row
            if row["error"] is not None:
                failed += not outcome.get("lost")
                err = row["error"]
                ctx.message(f"fpm: {_describe(row)} failed: {err['message']} [{err['rule']}]")  # fmt: skip
            bar.advance(progress)
    final = [{**rows[t.key], "task": t.index} for t in sweep.tasks if t.key in rows]
    if args.plot:
        from fpmcore.sweep.objective_plot import plot

        plot(args.plot, final, sweep.axes, goal, constraints)
    if ctx.json:
        ctx.emit_json({"rows": final})
    else:
        objective.render_best(ctx.out, final, sweep.axes, goal, constraints, args.top)
    errors = sum(1 for r in final if r["error"] is not None)
    note = f"{len(final)} of {len(sweep.tasks)} runs in {args.output}; {errors} with an error"
    if lost:
        note += f"; {lost} lost (--resume runs them again)"
    if args.plot:
        note += f"; plot written to {args.plot}"
    ctx.err.print(note, highlight=False, soft_wrap=True)
    return 1 if errors or lost else 0


def sweep_command() -> CliCommand:
    """The ``sweep`` subcommand (registered by the host's built-in plugin)."""
    return CliCommand(
        name="sweep",
        help="replay a grid of profiles, traces, tables and settings, locally or on Ray",
        configure=configure,
        run=run,
    )


__all__ = ["configure", "run", "sweep_command"]
