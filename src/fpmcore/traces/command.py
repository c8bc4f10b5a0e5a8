"""``fpm trace``: what a trace holds, and a trace of any installed format as fpmcore's JSONL.

::

    fpm trace stats FILE [--trace-format NAME] [--block-tokens N] [transforms] [--plot OUT.png] [--json]
    fpm trace convert FILE -o OUT.jsonl [--trace-format NAME] [transforms] [--json]

``stats`` prints the statistics of :mod:`fpmcore.traces.stats` (of the trace after the
transforms, when given); ``--plot`` draws the arrival rate over time and the prompt and output
length distributions.  ``convert`` writes fpmcore's JSONL (06 R-32): one request per line,
``hash_ids``/``hash_block_tokens`` kept for a trace with content-block ids; the output is
checked before the trace is read and written atomically (rules ``O-1`` … ``O-6`` of
:mod:`fpmcore.documents.output_files`).  Both say on stderr which format read the file (sniffed or named) and
what was skipped; ``--json`` prints ``{"trace": provenance, "stats": …}`` or
``{"trace": provenance, "out": OUT}``.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from fpmcore.cli.options import integer
from fpmcore.host.hooktypes import CliCommand, CommandContext


def configure(p: argparse.ArgumentParser) -> None:
    from fpmcore.traces.options import add_trace_options

    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    stats = sub.add_parser("stats", help="requests, duration, arrival rate, length percentiles, prefix reuse")
    stats.add_argument("file", metavar="FILE")
    add_trace_options(stats)
    stats.add_argument("--block-tokens", type=integer(minimum=1), metavar="N",
                       help="the block of the prefix reuse: a multiple of the trace's hash block (default: it)")  # fmt: skip
    stats.add_argument("--plot", metavar="OUT.png", help="draw the arrival rate and the length distributions")
    stats.add_argument("--json", action="store_true", help="print JSON on stdout")
    convert = sub.add_parser("convert", help="write a trace of any installed format as fpmcore's JSONL")
    convert.add_argument("file", metavar="FILE")
    convert.add_argument("-o", "--output", required=True, metavar="OUT.jsonl", help="the JSONL trace to write")
    add_trace_options(convert)
    convert.add_argument("--json", action="store_true", help="print JSON on stdout")


def _note(ctx: CommandContext, text: str) -> None:
    ctx.message(f"fpm: {text}")


def read_for_command(ctx: CommandContext, args: argparse.Namespace, path: str) -> tuple[Any, dict[str, Any]]:
    """The trace of ``path`` read through the installed formats with the options, its provenance noted on stderr."""
    from fpmcore.traces.options import read_options
    from fpmcore.traces.reading import describe, read_trace

    trace, provenance = read_trace(ctx.host.hooks.trace_formats(), path, **read_options(args))
    _note(ctx, describe(provenance))
    return trace, provenance


def _run_convert(args: argparse.Namespace, ctx: CommandContext) -> int:
    import orjson

    from fpmcore.documents import output_files as outputs

    out = outputs.check_output_path(args.output, inputs=[args.file])
    trace, provenance = read_for_command(ctx, args, args.file)
    data = b"".join(orjson.dumps(r.to_json()) + b"\n" for r in trace.requests)
    outputs.write_file(out, data)
    if ctx.json:
        ctx.emit_json({"trace": provenance, "out": str(out)})
    else:
        _note(ctx, f"wrote {out} ({len(trace.requests):,} requests, {len(data):,} bytes)")
    return 0


def _run_stats(args: argparse.Namespace, ctx: CommandContext) -> int:
    from fpmcore.documents import output_files as outputs
    from fpmcore.traces.stats import trace_stats

    plot = fmt = None
    if args.plot is not None:
        from fpmcore.replay.plot import check_plot_path

        plot = outputs.check_output_path(args.plot, inputs=[args.file])
        fmt = check_plot_path(args.plot)
    trace, provenance = read_for_command(ctx, args, args.file)
    stats = trace_stats(trace.requests, block_tokens=args.block_tokens, where=args.file)
    if plot is not None and fmt is not None:
        from fpmcore.traces.plot import draw_stats

        outputs.write_file(plot, draw_stats(trace.requests, stats, f"{Path(args.file).name}: "
                                            f"{len(trace.requests):,} requests", fmt))  # fmt: skip
    if ctx.json:
        ctx.emit_json({"trace": provenance, "stats": stats, **({"plot": str(plot)} if plot else {})})
        return 0
    from fpmcore.cli.tables import Table

    t = Table(title=f"trace {args.file} ({provenance['format']})", show_header=True)
    t.add_column("quantity")
    t.add_column("value", justify="right")
    for key, value in stats.items():
        if key == "rate_over_time":
            value = "  ".join(f"{v:.3g}" for v in value["per_s"]) + f"  (per s, bins of {value['bin_s']:.4g} s)"
        elif isinstance(value, dict):
            value = "  ".join(f"{k} {_fmt(v)}" for k, v in value.items())
        t.add_row(key, _fmt(value))
    ctx.print_table(t)
    if plot is not None:
        _note(ctx, f"wrote the plot {plot}")
    return 0


def _fmt(v: Any) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:.6g}"
    if isinstance(v, int) and not isinstance(v, bool):
        return f"{v:,}"
    return str(v)


def run(args: argparse.Namespace, ctx: CommandContext) -> int:
    return _run_convert(args, ctx) if args.action == "convert" else _run_stats(args, ctx)


def trace_command() -> CliCommand:
    """The ``trace`` subcommand (registered by the host's built-in plugin)."""
    return CliCommand(
        name="trace",
        help="a trace of any installed format: its statistics, or converted to fpmcore's JSONL",
        configure=configure,
        run=run,
    )
