"""``fpm publish RUN_DIR --plan PLAN -o TABLE [--json]``: its arguments, and the run that publishes a validated run
(:func:`fpmcore.publish.publication.publish_run`) as the FPM latency table ``fpm replay`` reads."""

from __future__ import annotations

import argparse

from fpmcore.documents.errors import FpmError
from fpmcore.host.hooktypes import CliCommand, CommandContext
from fpmcore.publish.publication import assessment_source, publish_run, write_table


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_dir", metavar="RUN_DIR", help="a collected run (fpm collect -o)")
    p.add_argument("--plan", required=True, metavar="PLAN", help="the plan the run was collected for")
    p.add_argument("-o", "--output", required=True, metavar="TABLE", help="the FPM latency table to write (R-27)")
    p.add_argument("--assessment", metavar="REPORT", help="fpm assess's report of the run: refuse it if not repeatable")
    p.add_argument(
        "--accept-unrepeatable",
        action="store_true",
        help="publish a run the assessment found not repeatable (the table records it)",
    )
    p.add_argument("--json", action="store_true", help="print a JSON summary on stdout")


def _run(args: argparse.Namespace, ctx: CommandContext) -> int:
    from fpmcore.documents.output_files import check_output_path
    from fpmcore.validate.reader import read_plan

    check_output_path(args.output, inputs=[args.plan, args.run_dir, args.assessment])  # before any work
    plan = read_plan(args.plan)  # as fpm validate reads it
    assessment = None
    if args.assessment is not None:
        try:
            assessment = assessment_source(args.assessment, args.run_dir,
                                           accept_unrepeatable=args.accept_unrepeatable)  # fmt: skip
        except FpmError as exc:
            if exc.rule != "A-45" or "not repeatable" not in exc.message:
                raise
            if ctx.json:
                ctx.emit_json({"command": "publish", "status": "refused",
                               "refused": [{"cell": None, "rule": exc.rule, "message": exc.message}]})  # fmt: skip
            else:
                ctx.message(f"fpm: {args.assessment}: {exc.message} [{exc.rule}]")  # fmt: skip
            return 1
    doc, results = publish_run(ctx.host, args.run_dir, plan)
    if doc is None:
        refused = [{"cell": r.cell, "rule": d.rule, "message": d.message} for r in results for d in r.diagnostics]
        if ctx.json:
            ctx.emit_json({"command": "publish", "status": "refused", "refused": refused})
        else:
            for x in refused:
                ctx.message(f"fpm: cell {x['cell']} refused: {x['message']} [{x['rule']}]")  # fmt: skip
            ctx.err.print("fpm: nothing was published", markup=False)
        return 1
    if assessment is not None:
        doc["source"]["assessment"] = assessment
    write_table(args.output, doc)
    if ctx.json:
        ctx.emit_json({"command": "publish", "status": "published", "table": args.output, "rows": len(doc["rows"]),
                       "source": doc["source"]})  # fmt: skip
    else:
        ctx.out.print(f"published {len(doc['rows'])} rows of {args.run_dir} to {args.output}", markup=False,
                      highlight=False)  # fmt: skip
    return 0


def publish_command() -> CliCommand:
    return CliCommand(name="publish", help="publish a validated run as the FPM latency table fpm replay reads",
                      configure=configure, run=_run)  # fmt: skip
