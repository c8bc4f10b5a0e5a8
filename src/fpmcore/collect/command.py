"""``fpm collect PLAN --model-dir DIR -o RUN_DIR [--smoke] [--repetitions N] [--passes P] [--warmup N] [--resume] [--json]``.

Measures the staged points of a plan cell on the engine of the runtime plugin
selected for the plan's runtime (:mod:`fpmcore.collect.run`), with a progress
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
from collections.abc import Callable
from contextlib import nullcontext
from typing import Any

from fpmcore.host.hooktypes import CliCommand


def at_least(low: int) -> Callable[[str], int]:  # an argparse type
    """An integer option of at least ``low``, through the command line's one integer type (:mod:`fpmcore.cli.options`)."""
    from fpmcore.cli.options import integer

    return integer(minimum=low)


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


def add_protocol_options(p: argparse.ArgumentParser) -> None:
    """The measurement protocol's options, shared by ``fpm collect`` and ``fpm onboard``."""
    p.add_argument(
        "--repetitions",
        type=at_least(3),
        metavar="N",
        help="clean measured samples per point over all passes (default 6; the retained value is the trimmed mean "
        "of all but the first)",
    )
    p.add_argument(
        "--passes",
        type=at_least(1),
        metavar="P",
        help="passes over the whole plan that share a point's samples, so that no burst of load moves all of them "
        "(default 3)",
    )
    p.add_argument("--warmup", type=at_least(0), metavar="N", help="warm-up repetitions per point and pass (default 1)")
    p.add_argument(
        "--max-contended",
        type=at_least(0),
        metavar="N",
        help="contended samples a point may retake in one pass before it fails (default 20)",
    )
    p.add_argument(
        "--retake-pause",
        type=float,
        metavar="SECONDS",
        help="first pause before retaking a contended sample, doubled per contended sample in a row up to 16 s (default 0.5)",
    )
    p.add_argument(
        "--prefill-idle",
        type=float,
        metavar="SECONDS",
        help="the engine idles this long before every prefill repetition, as before a served prefill-only step "
        "(default 0.1)",
    )


def replan(fix: str) -> str:
    """The way out of an engine limit for a plan: its profile was probed with the setting the engine cannot run."""
    return f"the plan's deployment needs {fix}: probe the model with {fix}, then import and plan it again"


def run_collect(
    ctx: Any,
    *,
    plan_path: str,
    plan: Any,
    model_dir: str,
    output: str,
    smoke: bool = False,
    warmups: int | None = None,
    repetitions: int | None = None,
    resume: bool = False,
    dtype: str | None = None,
    spacing: float | None = None,
    passes: int | None = None,
    max_contended: int | None = None,
    retake_pause: float | None = None,
    prefill_idle: float | None = None,
) -> dict[str, Any]:
    """Collect (or resume) a run with a progress bar; the summary of the finished run."""
    from fpmcore.collect import run as collect_run
    from fpmcore.host import engine_limits

    c = collect_run.prepare(plan, model_dir, output, smoke=smoke, warmups=warmups, repetitions=repetitions,
                            resume=resume, spacing=spacing, passes=passes, max_contended=max_contended,
                            retake_pause=retake_pause, prefill_idle=prefill_idle)  # fmt: skip
    driver = ctx.host.hooks.measurement_driver(plan["engine"]["runtime"]) if not c.complete else None
    if driver is not None:  # what the runtime's engine cannot run is refused before it starts
        engine_limits.refuse(ctx.host.hooks.runtime(plan["engine"]["runtime"]), model_dir,
                             prefix_caching=bool(plan["engine"]["prefix_caching"]),
                             dtype=dtype if dtype is not None else plan["engine"].get("dtype"),
                             max_model_len=plan["engine"]["max_model_len"], way_out=replan)  # fmt: skip
    label = f"collect {c.stage.cell['cell_id']}"
    bar = ctx.progress("points", transient=False) if not ctx.json else None
    with bar if bar is not None else nullcontext():
        task = bar.add_task(label, total=c.total_visits) if bar is not None else None

        def progress(done: int, total: int, point: Any) -> None:
            if bar is not None:
                bar.update(task, completed=done, total=total)

        if driver is None:
            from fpmcore.collect import store

            files = store.build_artifacts(c.run or c.folder.read_run(), c.done.values())
            store.publish_artifacts(c.folder, files)
        else:
            collect_run.collect(c, driver, progress=progress, dtype=dtype)
    return {
        "run": output,
        "cell": c.stage.cell["cell_id"],
        "points": len(c.stage.points),
        "resumed": c.resumed,
        "repetitions": c.settings.repetitions,
        "warmups": c.settings.warmups,
        "passes": c.settings.passes,
        **contention_counts(c.done.values(), c.settings.passes),
    }


def contention_counts(records: Any, passes: int) -> dict[str, Any]:
    """What the run's records say about contention and disagreeing passes: the samples retaken because they
    were contended, the points re-measured because their passes disagreed, and those still disagreeing."""
    recs = list(records)
    return {
        "contended_samples": sum(1 for r in recs for rep in r["repetitions"] if rep.get("role") == "contended"),
        "remeasured_points": sorted(r["benchmark_id"] for r in recs if len(r.get("passes", ())) > passes),
        "flagged_points": sorted(r["benchmark_id"] for r in recs if r.get("flagged")),
    }


def _run(args: argparse.Namespace, ctx: Any) -> int:
    from fpmcore.collect.measure import PointFailed
    from fpmcore.documents.errors import FpmError
    from fpmcore.documents.jsonio import load_path

    plan = load_path(args.plan)
    if not isinstance(plan, dict):
        raise FpmError("input", f"plan is not a JSON object: {args.plan}")
    try:
        summary = run_collect(ctx, plan_path=args.plan, plan=plan, model_dir=args.model_dir, output=args.output,
                              smoke=args.smoke, warmups=args.warmup, repetitions=args.repetitions,
                              resume=args.resume, dtype=args.dtype, spacing=args.spacing, passes=args.passes,
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


def _run_assess(args: argparse.Namespace, ctx: Any) -> int:
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
