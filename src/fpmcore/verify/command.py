"""The command line of ``fpm verify`` (:mod:`fpmcore.verify`): options, the human report, ``-o`` and ``--plot``.

Every output path is checked before any work (rules ``O-1`` … ``O-6`` of
:mod:`fpmcore.documents.output_files`).  ``-o REPORT`` writes the report (the document
``--json`` prints) with the atomic writer of :mod:`fpmcore.documents.output_files`: a kill at
any moment leaves the old report or the new one, whole.  Progress goes to
stderr: a rich progress bar on a terminal, one line per serving otherwise.
Exit 0 when the verdict is ``pass``, 1 when it is ``fail`` or ``contended``,
2 for bad usage or input (V-1 … V-5 and the readers' rules).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from fpmcore.cli.context import EXIT_NEGATIVE, EXIT_OK
from fpmcore.host.hooktypes import CliCommand, CommandContext, ProgressBar


def _range(text: str) -> tuple[int, int]:
    """``A:B`` with integers ``1 ≤ A ≤ B`` (an argparse type)."""
    lo, sep, hi = text.partition(":")
    try:
        a, b = int(lo), int(hi)
    except ValueError:
        a = b = 0
    if not sep or not 1 <= a <= b:
        raise argparse.ArgumentTypeError(f"must be LO:HI with integers 1 <= LO <= HI; got {text!r}")
    return a, b


def _rate(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number of requests per second; got {text!r}")
    return value


def configure(p: argparse.ArgumentParser) -> None:
    from fpmcore.cli.options import integer

    p.add_argument("campaign", metavar="CAMPAIGN", help="a campaign folder of fpm onboard (its table is verified)")
    p.add_argument("--trace", metavar="TRACE", help="a trace fpm replay reads, with arrival_time in seconds "
                   "(default: a seeded Poisson trace of --rate, --requests, --prompt, --output)")  # fmt: skip
    p.add_argument("--rate", type=_rate, default=1.0, metavar="R", help="Poisson arrivals per second (default 1)")
    p.add_argument("--requests", type=integer(minimum=1), default=20, metavar="N",
                   help="requests of a Poisson trace (default 20)")  # fmt: skip
    p.add_argument("--prompt", type=_range, default=(64, 512), metavar="A:B",
                   help="prompt lengths of a Poisson trace, uniform in A…B (default 64:512)")  # fmt: skip
    p.add_argument("--output", type=_range, default=(8, 64), metavar="A:B",
                   help="output lengths of a Poisson trace, uniform in A…B (default 8:64)")  # fmt: skip
    p.add_argument("--seed", type=integer(minimum=0), default=1, metavar="S",
                   help="seed of run 1; run k uses S + k − 1 for its trace and token ids (default 1)")  # fmt: skip
    p.add_argument("--runs", type=integer(minimum=1), default=3, metavar="K", help="runs (default 3)")
    p.add_argument("--warmup-requests", type=integer(minimum=0), default=4, metavar="N",
                   help="requests served first and not measured (default 4)")  # fmt: skip
    p.add_argument("--noise-floor", action="store_true",
                   help="serve every trace twice and compare the servings: the engine's own noise floor")  # fmt: skip
    p.add_argument("-o", "--report", metavar="REPORT", help="write the report (the --json document) atomically")
    p.add_argument("--plot", metavar="OUT.png", help="draw predicted against served CDFs of TTFT and TPOT and "
                   "per-step times (matplotlib); the format follows the extension")  # fmt: skip
    p.add_argument("--json", action="store_true", help="print the report as one JSON document on stdout")
    from fpmcore.traces.options import add_trace_options

    add_trace_options(p, transforms=False)  # --rate is the Poisson trace's; a file's transforms: fpm trace convert


def options_of(args: argparse.Namespace) -> Any:
    from fpmcore.verify.run import VerifyOptions
    from fpmcore.verify.traces import PoissonSpec

    return VerifyOptions(trace=args.trace, poisson=PoissonSpec(args.rate, args.requests, args.prompt, args.output),
                         trace_format=args.trace_format, hash_block_tokens=args.hash_block_tokens,
                         trace_filters=tuple(args.trace_filter), seed=args.seed, runs=args.runs,
                         warmup_requests=args.warmup_requests, noise_floor=args.noise_floor)  # fmt: skip


def _progress(ctx: CommandContext) -> tuple[ProgressBar | None, Callable[[int, int, str], None]]:
    """``(bar or None, progress callback)``: a rich bar on a terminal, else one stderr line per serving."""
    if sys.stderr.isatty():
        bar = ctx.progress("servings", transient=False)
        task = bar.add_task("verify", total=1)

        def on_bar(done: int, total: int, what: str) -> None:
            bar.update(task, completed=done, total=total, description=f"verify: {what}")

        return bar, on_bar

    def on_line(done: int, total: int, what: str) -> None:
        if done < total:
            ctx.message(f"verify: serving {what} ({done + 1}/{total})")

    return None, on_line


def run(args: argparse.Namespace, ctx: CommandContext) -> int:
    from contextlib import nullcontext

    from fpmcore.documents import output_files as outputs
    from fpmcore.verify.run import read_campaign, verify_campaign

    inputs = [*read_campaign(args.campaign).inputs(), args.trace]
    report = outputs.check_output_path(args.report, inputs=inputs) if args.report else None
    plot = fmt = None
    if args.plot:
        from fpmcore.replay.plot import check_plot_path

        plot = outputs.check_output_path(args.plot, inputs=inputs)
        fmt = check_plot_path(args.plot)
    outputs.check_outputs_apart([("report", report), ("plot", plot)])
    bar, progress = _progress(ctx)
    with bar if bar is not None else nullcontext():
        doc = verify_campaign(ctx.host, args.campaign, options_of(args), progress=progress)
    if report is not None:
        from fpmcore.documents.jsonio import dumps_output

        outputs.write_file(report, dumps_output(doc))
    if plot is not None:
        from fpmcore.verify.prediction_plot import render

        outputs.write_file(plot, render(doc, str(fmt)))
    if ctx.json:
        ctx.emit_json(doc)
    else:
        print_report(ctx, doc)
    return EXIT_OK if doc["verdict"] == "pass" else EXIT_NEGATIVE


def _pct(v: Any, signed: bool = False) -> str:
    if v is None:
        return "–"
    return f"{v:+.1%}" if signed else f"{v:.1%}"


def print_report(ctx: CommandContext, doc: dict[str, Any]) -> None:
    """The human report on stdout (rich tables; values never read as markup)."""
    from rich.markup import escape
    from rich.table import Table

    o = doc["options"]
    what = o["trace"] or "Poisson {rate}/s × {requests}, prompts {prompt[0]}…{prompt[1]}, outputs {output[0]}…" \
        "{output[1]}".format(**o["poisson"])  # fmt: skip
    ctx.out.print(escape(f"fpm verify {doc['campaign']}: {doc['runtime']} ({doc['plugin']}), {what}, "
                         f"{o['runs']} run(s)" + (", noise floor" if o["noise_floor"] else "")),
                  highlight=False)  # fmt: skip
    if doc["deployment_differences"]:
        ctx.out.print(escape("the engine differs from the plan: " + "; ".join(doc["deployment_differences"])),
                      highlight=False)  # fmt: skip
    t = Table(title="per-request errors |predicted − served| / served (median / P90); makespan, throughput signed",
              title_justify="left")  # fmt: skip
    for col in ("run", "TTFT", "TPOT", "E2E", "makespan", "throughput", "contended time", "load (1 min)", ""):
        t.add_column(col, justify="left" if col in ("run", "") else "right")
    for r in doc["runs"]:
        e = r["errors"]
        load = r["load_average"]
        t.add_row(
            str(r["run"]), *(f"{_pct(e[m]['median'])} / {_pct(e[m]['p90'])}" for m in ("ttft", "tpot", "e2e")),
            _pct(e["makespan"], True), _pct(e["throughput"], True), _pct(r["contention"]["contended_time_fraction"]),
            f"{load['start'][0] if load['start'] else '–'} → {load['end'][0] if load['end'] else '–'}",
            "contended: not counted" if r["contended"] else "",
        )  # fmt: skip
        if "noise_floor" in r:
            f = r["noise_floor"]
            t.add_row(f"{r['run']} again", *(f"{_pct(f[m]['median'])} / {_pct(f[m]['p90'])}"
                                            for m in ("ttft", "tpot", "e2e")), _pct(f["makespan"], True),
                      _pct(f["throughput"], True), _pct(r["again"]["contention"]["contended_time_fraction"]), "",
                      "the second serving against the first")  # fmt: skip
    ctx.print_table(t)
    st = Table(title="served steps against the latency model, by kind", title_justify="left")
    for col in ("run", "kind", "steps", "served s", "predicted s", "median step error"):
        st.add_column(col, justify="left" if col in ("run", "kind") else "right")
    for r in doc["runs"]:
        for kind, k in r["steps"].items():
            st.add_row(str(r["run"]), kind, str(k["n"]), f"{k['served_s']:.3f}", f"{k['predicted_s']:.3f}",
                       _pct(k["median_error"], True))  # fmt: skip
    ctx.print_table(st)
    s = doc["summary"]
    dt = Table(title=f"over the trace, predicted against served (medians over {s['runs_counted']} uncontended "
                     f"run(s) of {s['runs']})", title_justify="left")  # fmt: skip
    for col in ("metric", "p50", "p90", "mean", "per-request median", "noise floor"):
        dt.add_column(col, justify="left" if col == "metric" else "right")
    floor = s["noise_floor"]
    for m in ("ttft", "tpot", "e2e"):
        d = s["distribution"][m]
        dt.add_row(m.upper(), _pct(d["p50"], True), _pct(d["p90"], True), _pct(d["mean"], True),
                   _pct(s[m]["median"]), _pct(floor[m]) if floor else "–")  # fmt: skip
    dt.add_row("makespan", "", "", "", _pct(s["makespan"], True), _pct(floor["makespan"], True) if floor else "–")
    ctx.print_table(dt)
    for c in doc["checks"]:
        mark = "ok" if c["ok"] else "FAILED"
        ctx.out.print(escape(f"  {mark}: {c['check']}: {_pct(c['value'], c['signed'])} (limit {'±' if c['signed'] else ''}{_pct(c['limit'])})"),
                      highlight=False)  # fmt: skip
    style = {"pass": "green", "fail": "red", "contended": "yellow"}[doc["verdict"]]
    why = " (every run was contended beyond the bound: nothing to judge)" if doc["verdict"] == "contended" else ""
    ctx.out.print(f"verdict: [{style}]{doc['verdict']}[/]{escape(why)}", highlight=False)


def verify_command() -> CliCommand:
    return CliCommand(name="verify", help="serve a trace on the campaign's engine and compare it with the replay's "
                      "predictions (TTFT, TPOT, E2E, makespan, steps)", configure=configure, run=run)  # fmt: skip
