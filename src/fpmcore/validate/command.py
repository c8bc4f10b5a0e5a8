"""``fpm validate RUN_DIR --plan PLAN [--json]``: the measurement reader on a collected run (05).

Exit codes: 0 every cell accepted; 1 some cell refused (each refusal names
its rule, the file and the value); 2 unreadable input — the run directory
cannot be listed, or the plan is not strict JSON or not a frozen collection
plan (a profile, a point plan of ``fpm plan``, any other document).

``--json`` prints exactly one JSON document on stdout, errors included::

    {"schema": 1, "status": "accepted" | "refused",
     "cells": [{"cell", "contract", "status", "diagnostics": [{"rule", "message", "where"}],
                "gaps": [str], "retained": [{"benchmark_id", "rank", "point_type", "batch_size",
                "total_prefill_tokens", "total_kv_read_tokens", "wall_time", "kv_seed_regime"}]}]}
    {"schema": 1, "status": "error", "diagnostics": [{"rule", "message", "where"}]}   (exit 2)

The gaps are the non-blocking ones of 05 §7.3; the retained rows are the
values an accepted cell publishes (the table of the human output).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs

from fpmcore.cli.context import print_table
from fpmcore.documents.errors import FpmError
from fpmcore.host.hooktypes import CliCommand, CommandContext, Diagnostic
from fpmcore.validate.measured_values import ABSENT, plain, shown
from fpmcore.validate.reader import CellResult, read_plan, validate_run

_COLUMNS = ("id", "rank", "phase", "b", "new", "kv read", "wall_time (s)", "kv_seed_regime")


def _text(value: str) -> str:
    """Text that can be printed and written as JSON (lone surrogates escaped)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    return value


def _diagnostic(d: Diagnostic) -> dict[str, str]:
    return {"rule": _text(d.rule), "message": _text(d.message), "where": _text(d.where)}


def _cell_json(r: CellResult) -> dict[str, Any]:
    return {
        "cell": _text(r.cell),
        "contract": r.contract,
        "status": r.status,
        "diagnostics": [_diagnostic(d) for d in r.diagnostics],
        "gaps": list(r.gaps),
        "retained": [{k: None if v is ABSENT else v for k, v in attrs.asdict(x).items()} for x in r.retained],
    }


def _configure(p: Any) -> None:
    p.add_argument("artifact_dir", metavar="ARTIFACT_DIR", help="a run directory (one attempt per cell) or one attempt")
    p.add_argument("--plan", required=True, metavar="PLAN", help="the frozen collection plan the run was collected for")
    p.add_argument("--json", action="store_true", help="print one JSON document")


def _read(args: Any, ctx: CommandContext) -> list[CellResult]:
    run_dir = Path(args.artifact_dir)
    if not run_dir.is_dir():
        raise FpmError("input", f"not a directory: {shown(str(run_dir))}")
    plan = read_plan(args.plan)
    try:
        results = validate_run(ctx.host, run_dir, plan)
    except OSError as exc:
        raise FpmError("input", f"cannot read the run directory: {exc.strerror}", shown(str(run_dir))) from None
    if not results:
        raise FpmError("input", f"no attempt found in {shown(str(run_dir))}")
    return results


def _run(args: Any, ctx: CommandContext) -> int:
    try:
        results = _read(args, ctx)
    except BrokenPipeError:
        raise
    except Exception as exc:
        if ctx.json:  # one JSON document, errors included; the message goes to stderr as well
            d = exc.diagnostic if isinstance(exc, FpmError) else Diagnostic("internal", f"{type(exc).__name__}: {exc}")
            ctx.emit_json({"status": "error", "diagnostics": [_diagnostic(d)]})
        raise
    refused = any(r.status == "refused" for r in results)
    if ctx.json:
        ctx.emit_json({"status": "refused" if refused else "accepted", "cells": [_cell_json(r) for r in results]})
        return 1 if refused else 0
    _print(ctx, results)
    return 1 if refused else 0


def _print(ctx: CommandContext, results: list[CellResult]) -> None:
    from rich.markup import escape
    from rich.table import Table

    for r in results:
        mark = "[red]refused[/red]" if r.diagnostics else "[green]accepted[/green]"
        ctx.out.print(f"cell {escape(_text(r.cell))} ({escape(r.contract)}): {mark}")
        for d in r.diagnostics:
            ctx.out.print(f"  [bold]{escape(_text(d.rule))}[/bold] {escape(_text(d.message))}")
        for g in r.gaps:
            ctx.out.print(f"  gap: {escape(g)}")
        if r.retained:
            t = Table(*_COLUMNS)
            for x in r.retained:
                t.add_row(*(plain(v) for v in attrs.astuple(x)))
            print_table(ctx.out, t)


def validate_command() -> CliCommand:
    """``fpm validate ARTIFACT_DIR --plan PLAN [--json]`` (exit 0 all accepted, 1 some refused, 2 unreadable input)."""
    return CliCommand(
        name="validate",
        help="validate the measurement artifacts of a collected run against its plan",
        configure=_configure,
        run=_run,
    )
