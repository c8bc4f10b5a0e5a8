"""``fpm collect PLAN --model-dir DIR -o RUN_DIR [--smoke] [--repetitions N] [--passes P] [--warmup N] [--resume] [--json]``.

Measures the staged points of a plan cell on the engine of the runtime plugin
selected for the plan's runtime (:func:`fpmcore.collect.run.run_collect`), with a progress
bar of points done / total and an ETA, and writes the run folder
(:mod:`fpmcore.collect.store`).  Exit 0 when the run is complete, 1 when a
point exhausted its rejections (the finished points stay; ``--resume``
continues), 2 for bad usage or input.

``fpm assess RUN --plan PLAN -o REPORT [--points N] [--seed S] [--json]`` re-measures a sample of a finished
run's points on a fresh engine (:func:`fpmcore.collect.assess.assess_run`) and writes the report: exit 0
when the run is repeatable, 1 when it is not (A-45).
"""

from __future__ import annotations

import argparse

from fpmcore.collect.protocol_options import add_protocol_options, at_least
from fpmcore.host.hooktypes import CliCommand, CommandContext


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("plan", metavar="PLAN", help="a plan file of fpm plan whose points the model-agnostic grid gave")
    p.add_argument(
        "--model-dir", required=True, metavar="DIR", help="the model folder the plan's profile was probed with"
    )
    p.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="RUN_DIR",
        help="the run folder to write (new or empty; with --resume the folder of an earlier run of this plan)",
    )
    p.add_argument(
        "--smoke",
        action="store_true",
        help="collect the smoke subset of the plan (its few points, staged under the same plan hash)",
    )
    add_protocol_options(p)
    p.add_argument(
        "--spacing",
        type=float,
        metavar="SECONDS",
        help="pause before every repetition, to spread a point's samples over a shared machine's load (default 0)",
    )
    p.add_argument(
        "--dtype", metavar="DTYPE", help="the model dtype the engine runs (default: the plan's, else the model's own)"
    )
    p.add_argument("--resume", action="store_true", help="continue an interrupted run: finished points are kept")
    p.add_argument("--json", action="store_true", help="print a JSON summary on stdout")


def _run(args: argparse.Namespace, ctx: CommandContext) -> int:
    from fpmcore.collect.measure import PointFailed
    from fpmcore.collect.run import run_collect
    from fpmcore.documents.errors import FpmError
    from fpmcore.documents.jsonio import load_path

    plan = load_path(args.plan)
    if not isinstance(plan, dict):
        raise FpmError("input", f"plan is not a JSON object: {args.plan}")
    try:
        summary = run_collect(ctx, plan=plan, model_dir=args.model_dir, output=args.output, smoke=args.smoke,
                              warmups=args.warmup, repetitions=args.repetitions, resume=args.resume,
                              dtype=args.dtype, spacing=args.spacing, passes=args.passes,
                              max_contended=args.max_contended, retake_pause=args.retake_pause,
                              prefill_idle=args.prefill_idle)  # fmt: skip
    except PointFailed as exc:
        ctx.message(f"fpm: {exc.message}; the finished points are kept, --resume continues [{exc.rule}]")  # fmt: skip
        return 1
    if ctx.json:
        ctx.emit_json({"command": "collect", **summary})
    else:
        ctx.out.print(f"collected {summary['points']} points of {summary['cell']} into {summary['run']}"
                      + (" (resumed)" if summary["resumed"] else "")
                      + f": {summary['passes']} passes, {summary['contended_samples']} contended samples retaken, "
                      f"{len(summary['remeasured_points'])} points re-measured, "
                      f"{len(summary['flagged_points'])} flagged", markup=False, highlight=False)  # fmt: skip
    return 0


def collect_command() -> CliCommand:
    return CliCommand(
        name="collect",
        help="measure a plan's points on the engine of the runtime plugin the plan names",
        configure=configure,
        run=_run,
    )


# ---------------------------------------------------------------------------
# fpm assess
# ---------------------------------------------------------------------------


def configure_assess(p: argparse.ArgumentParser) -> None:
    from fpmcore.collect.assess import SMALL_RUN

    p.add_argument("run_dir", metavar="RUN", help="a finished full run of fpm collect")
    p.add_argument("--plan", required=True, metavar="PLAN", help="the plan the run was collected for")
    p.add_argument("-o", "--output", required=True, metavar="REPORT", help="the assessment report to write")
    p.add_argument(
        "--points",
        type=at_least(1),
        metavar="N",
        help=f"points to re-measure (default: all when the run has at most {SMALL_RUN}, else {SMALL_RUN})",
    )
    p.add_argument("--seed", type=at_least(0), default=0, metavar="S", help="the sample's seed (default 0)")
    p.add_argument("--model-dir", metavar="DIR", help="the model folder (default: the one the run measured)")
    p.add_argument("--dtype", metavar="DTYPE", help="the model dtype the engine runs (default: the plan's)")
    p.add_argument("--json", action="store_true", help="print the report on stdout")


def _run_assess(args: argparse.Namespace, ctx: CommandContext) -> int:
    from contextlib import nullcontext
    from pathlib import Path

    from fpmcore.collect.assess import P90_BOUND, assess_run, describe
    from fpmcore.collect.store import json_bytes, write_durable
    from fpmcore.documents.errors import FpmError
    from fpmcore.documents.jsonio import load_path
    from fpmcore.documents.output_files import check_output_path

    check_output_path(args.output, inputs=[args.plan, args.run_dir])
    plan = load_path(args.plan)
    if not isinstance(plan, dict):
        raise FpmError("input", f"plan is not a JSON object: {args.plan}")
    bar = ctx.progress("points", transient=False) if not ctx.json else None
    with bar if bar is not None else nullcontext():
        task = bar.add_task("assess", total=None) if bar is not None else None

        def progress(done: int, total: int) -> None:
            if bar is not None:
                bar.update(task, completed=done, total=total)

        report = assess_run(ctx.host, args.run_dir, plan, points=args.points, seed=args.seed,
                            model_dir=args.model_dir, dtype=args.dtype, progress=progress)  # fmt: skip
    write_durable(Path(args.output), json_bytes(report))
    if ctx.json:
        ctx.emit_json(report)
    else:
        word = "repeatable" if report["repeatable"] else "NOT repeatable [A-45]"
        ctx.out.print(f"{args.run_dir}: {word}: {describe(report)}; report {args.output}", markup=False,
                      highlight=False)  # fmt: skip
        over = report["summary"]["over_bound"]
        if over:
            ctx.out.print(f"points beyond {P90_BOUND:.0%}: {', '.join(map(str, over))}", markup=False, highlight=False)
    return 0 if report["repeatable"] else 1


def assess_command() -> CliCommand:
    return CliCommand(name="assess", help="re-measure a sample of a run's points on a fresh engine: is it repeatable?",
                      configure=configure_assess, run=_run_assess)  # fmt: skip
