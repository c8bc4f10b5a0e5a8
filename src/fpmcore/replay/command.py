"""``fpm replay``: replay a request trace against a profile's deployment (06).

::

    fpm replay PROFILE --trace TRACE [--trace-format NAME] [transforms] [--fpm-table TABLE] [--campaign CAMPAIGN] [--deployment I]
        [--max-num-seqs N] [--max-num-batched-tokens N] [--prefix-caching on|off]
        [vLLM scheduler settings: --max-num-scheduled-tokens N --max-num-active-seqs N
         --long-prefill-token-threshold N --[no-]long-prefill-token-threshold-adaptive
         --prefill-schedule-interval N --scheduling-policy fcfs|priority
         --max-num-queued-reqs N --max-num-queued-tokens N --watermark W
         --[no-]scheduler-reserve-full-isl --[no-]enable-chunked-prefill]
        [--max-steps N] [--steps] [--out DIR [--out-format jsonl.gz|parquet]] [--plot OUT.png] [--json]

The trace is read through the installed trace formats (:mod:`fpmcore.traces`):
``--trace-format NAME``, or the format whose sniff claims the file, said on
stderr (but for fpmcore's JSONL read as it is, the trace ``fpm replay`` always
read); ``--start``, ``--limit``, ``--max-prompt-len``/``--over-long``,
``--time-scale`` and ``--rate`` transform it (:mod:`fpmcore.traces.transforms`).
What was read (file, format, skipped rows, transforms and their counts) is
``trace`` beside ``summary`` in ``--json`` and in the summary file of ``--out``.

The scheduler settings are vLLM's engine arguments, with vLLM's defaults
(``--scheduling-policy priority`` reads each request's trace field
``priority``; ``--max-num-queued-*`` reject arrivals as vLLM's API server
does).

A profile or table that lies in a finalized campaign (a ``final.json`` beside
it) is read only when every file the campaign's ``final.json`` names is
unchanged; ``--campaign CAMPAIGN`` reads the table of that finalized campaign
(``--fpm-table``, when given, must be it), checked the same way (F-2, F-8 of
:mod:`fpmcore.campaign.finalize`).

``--prefix-caching`` defaults to the profile's ``enable_prefix_caching``;
an explicit value that differs from it is noted on stderr.  Without
``--fpm-table`` every step takes 1 s (noted on stderr, and as
``"latency": {"table": null, "fixed_step_seconds": 1.0}`` in ``--json``).

The replay runs in chunks of steps (:class:`~fpmcore.replay.ReplayRun`)
under a progress bar on stderr (steps, requests completed of the total, ETA;
off when stderr is not a terminal).  ``--out DIR`` streams the step and
request records to disk as they are made and publishes the folder atomically
at the end (:mod:`fpmcore.replay.outputs`); ``--plot OUT.png`` draws
downsampled series collected while streaming (:mod:`fpmcore.replay.plot`).
Both output paths are checked before the replay starts (rules ``O-1`` …
``O-6`` of :mod:`fpmcore.documents.output_files`).  ``--json`` prints ``{"schema": 1,
"summary": …, "requests": […], "steps": […], "latency": …}`` (steps only with
``--steps``, which keeps them in memory).  Exit 0 when the whole trace ran,
1 when the replay stopped (R-9, R-26, R-27: the records up to the stop are
still written), 2 for bad input or an output that cannot be written.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from fpmcore.documents.errors import FpmError
from fpmcore.documents.paths import file_name
from fpmcore.host.hooktypes import CliCommand, CommandContext
from fpmcore.replay.settings import SCHEDULER_GROUP, SETTINGS, ReplaySetting, Section

if TYPE_CHECKING:
    from pathlib import Path


def _add_setting(g: Any, s: ReplaySetting) -> None:
    """A setting's option: vLLM's ``--X`` / ``--no-X`` pair for a flag, else one option with its parser."""
    if s.flag:
        g.add_argument(s.option, dest=s.name, action="store_true", default=s.default, help=s.option_help)
        g.add_argument("--no-" + s.option[2:], dest=s.name, action="store_false", help=f"turn {s.option} off")
        return
    g.add_argument(*s.options, dest=s.name, type=s.parse, choices=s.choices, default=s.default, metavar=s.metavar,
                   help=s.help)  # fmt: skip


def _add_settings(g: Any, section: Section) -> None:
    """The options of the settings of one section (:data:`fpmcore.replay.settings.SETTINGS`), in their order."""
    for s in SETTINGS:
        if s.section == section:
            _add_setting(g, s)


def configure(p: argparse.ArgumentParser) -> None:
    from fpmcore.replay.outputs import DEFAULT_FORMAT, FORMATS

    p.add_argument("profile", metavar="PROFILE", help="an *.fpm-profile.json file")
    from fpmcore.traces.options import add_trace_options

    p.add_argument("--trace", required=True, metavar="TRACE",
                   help="a trace of an installed format: fpmcore's JSONL (R-32), the oracle's SCHED.json, mooncake, "
                        "burstgpt, azure or a plugin's")  # fmt: skip
    p.add_argument("--fpm-table", metavar="TABLE", help="FPM latency table (R-27); default: 1.0 s per step")
    p.add_argument(
        "--campaign",
        metavar="CAMPAIGN",
        help="a finalized campaign (fpm finalize): its digests are checked and its table.json is the --fpm-table",
    )
    _add_settings(p, "deployment")
    add_trace_options(p)
    _add_settings(p.add_argument_group(SCHEDULER_GROUP), "scheduler")
    _add_settings(p, "limits")
    p.add_argument("--steps", action="store_true", help="include the step records in --json output (kept in memory)")
    p.add_argument(
        "--out",
        metavar="DIR",
        help="stream the step and request records to DIR while the replay runs; DIR is published whole "
        "at the end (a new or empty folder, or an earlier --out of fpm replay, which is replaced)",
    )
    p.add_argument(
        "--out-format",
        choices=FORMATS,
        default=DEFAULT_FORMAT,
        help="record files of --out: jsonl.zst (default: zstd JSON lines, as small as Parquet and "
        "the fastest to write), jsonl.gz (gzip, twice the size) or parquet (pyarrow: typed "
        "columns, twice the time and memory to write)",
    )
    p.add_argument(
        "--plot",
        metavar="OUT.png",
        help="draw pool use per group, running/waiting requests, preemptions and (with --fpm-table) "
        "TTFT/TPOT percentiles; the format follows the extension (matplotlib)",
    )
    p.add_argument("--json", action="store_true", help="print JSON on stdout")


def _fmt(v: Any) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:.6g}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def _print_summary(ctx: CommandContext, s: dict[str, Any], title: str) -> None:
    """The summary as two tables that fit an 80-column terminal whole: the quantities (a name is never cut: its
    column is as wide as the longest name), and the latency distributions, one row per metric and one column
    per statistic (a label never parted from its value)."""
    from fpmcore.cli.tables import Table

    t = Table(title=title, show_header=True)
    t.add_column("quantity", no_wrap=True, min_width=max((len(k) for k in s), default=8))
    t.add_column("value", justify="right")
    dists: list[tuple[str, dict[str, Any]]] = []
    for key, value in s.items():
        if key == "schema":
            continue
        if isinstance(value, dict) and key != "rejected_by_reason":
            dists.append((key, value))
            continue
        if isinstance(value, dict):
            value = "  ".join(f"{k} {_fmt(v)}" for k, v in value.items() if v) or "–"
        t.add_row(key, _fmt(value))
    ctx.print_table(t)
    if dists:
        stats = list(dict.fromkeys(k for _, d in dists for k in d))
        d = Table(show_header=True)
        d.add_column("latency", no_wrap=True)
        for k in stats:
            d.add_column(k, justify="right", no_wrap=True)
        for key, value in dists:
            d.add_row(key, *(_fmt(value.get(k)) for k in stats))
        ctx.print_table(d)


def unpublished_table_note(path: str) -> str:
    """The note on a latency table without a ``source`` (not published by ``fpm publish`` from a measured run):
    its ``description`` when it has one, for a table's own words say what its numbers are (the examples' tables
    say they come from a formula)."""
    from fpmcore.documents.jsonio import loads, read_input

    try:
        doc = loads(read_input(path))
    except Exception:  # noqa: BLE001 - read once already; a note never fails the replay
        doc = None
    said = doc.get("description") if isinstance(doc, dict) else None
    what = f": {said}" if isinstance(said, str) and said.strip() else ""
    return (f"{path} was not published from a measured run (it has no source){what} — its latencies are as good "
            "as where its rows came from")  # fmt: skip


def extrapolated_note(extrapolated: int, steps: int) -> str:
    """The note on ``extrapolated_steps``: steps whose coordinates lie outside the table's knots."""
    share = extrapolated / steps if steps else 0.0
    return (f"{extrapolated:,} of {steps:,} steps ({share:.0%}) lie outside the latency table's knots; their times "
            "are extrapolated linearly from the nearest knots (floored at the smallest row): a table whose grid "
            "covers the deployment's batch sizes, chunks and contexts has none (docs: The latency model)")  # fmt: skip


def _note(ctx: CommandContext, text: str) -> None:
    ctx.message(f"fpm: note: {text}")


def replay_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The replay's settings (:func:`~fpmcore.replay.config_from_profile`'s keywords) of the options."""
    return {s.name: s.config_value(getattr(args, s.name)) for s in SETTINGS if s.config_field}


def _check_outputs(args: argparse.Namespace) -> tuple[Path | None, Path | None, str | None]:
    """Every output path and format checked before any work (O-1 … O-4; the plot's format; pyarrow)."""
    if args.out is None and args.plot is None:
        return None, None, None
    from fpmcore.documents import output_files as outputs

    inputs = [args.profile, args.trace, args.fpm_table]
    out = plot = fmt = None
    if args.out is not None:
        from fpmcore.replay import outputs as record_files

        out = outputs.check_output_folder(args.out, inputs=inputs, replace=True)
        record_files.check_format(args.out_format)
    if args.plot is not None:
        from fpmcore.replay.plot import check_plot_path

        plot = outputs.check_output_path(args.plot, inputs=inputs)
        fmt = check_plot_path(args.plot)
    outputs.check_outputs_apart([("--out", out), ("plot", plot)], folders={"--out"})
    return out, plot, fmt


def _title(profile: Any, args: argparse.Namespace, cfg: Any, n: int) -> str:
    model = getattr(profile, "model", None) or file_name(args.profile)
    table = file_name(args.fpm_table) if args.fpm_table else "none (1 s per step)"
    return (f"{model} (deployment {args.deployment}) · trace {file_name(args.trace)}: {n:,} requests\n"
            f"max_num_seqs {cfg.max_num_seqs} · max_num_batched_tokens {cfg.max_num_batched_tokens:,} · "
            f"prefix caching {'on' if cfg.prefix_caching else 'off'} · policy {cfg.scheduling_policy} · "
            f"latency table {table}")  # fmt: skip


#: Steps per chunk: with step records (streamed), and without (the engine jumps over quiet stretches).
CHUNK_STEPS = 1024
CHUNK_STEPS_SUMMARY = 1 << 20


def run(args: argparse.Namespace, ctx: CommandContext) -> int:
    from fpmcore.campaign.layout import TABLE, finalized_folders
    from fpmcore.documents.profile import load_profile
    from fpmcore.replay import ReplayRun, config_from_profile, runtime_pin
    from fpmcore.replay.config import profile_prefix_caching

    if args.campaign is not None and args.fpm_table is None:
        from pathlib import Path

        args.fpm_table = str(Path(args.campaign) / TABLE)
    out, plot_path, plot_fmt = _check_outputs(args)  # before any work
    if args.campaign is not None or finalized_folders(args.profile, args.fpm_table):
        from fpmcore.campaign.finalize import campaign_table, check_inputs

        if args.campaign is not None:
            campaign_table(args.campaign, args.fpm_table)  # F-8, F-2
        check_inputs(args.profile, args.fpm_table)  # an input of a finalized campaign: its digests (F-2)
    profile = load_profile(args.profile)
    if not 0 <= args.deployment < len(profile.deployments):
        raise FpmError("R-1", f"profile has no deployment {args.deployment}", args.profile)
    table = None
    if args.fpm_table:
        from fpmcore.documents.profile import profile_digest
        from fpmcore.replay.table import check_table_origin, load_table_document

        table, source = load_table_document(args.fpm_table)
        note = check_table_origin(source, profile.model, lambda: profile_digest(profile), args.fpm_table)
        if note is not None:
            _note(ctx, note)
        if not source and not ctx.json:  # not published from a measured run: say where its numbers come from
            _note(ctx, unpublished_table_note(args.fpm_table))
    rules = ctx.host.hooks.replay_rules(runtime_pin(profile, args.deployment))
    recorded = profile_prefix_caching(profile, args.deployment)
    cfg = config_from_profile(profile, args.deployment, table=table, rules=rules, **replay_settings(args))
    caching = cfg.prefix_caching
    from fpmcore.traces.options import read_options
    from fpmcore.traces.reading import describe, plain, read_trace

    trace, provenance = read_trace(ctx.host.hooks.trace_formats(), args.trace, **read_options(args))
    if not plain(provenance):
        _note(ctx, describe(provenance))
    if caching != recorded:
        _note(ctx, f"--prefix-caching {args.prefix_caching} differs from the profile, which recorded "
                   f"enable_prefix_caching {str(recorded).lower()}")  # fmt: skip
    if table is None:
        _note(ctx, "no --fpm-table: every step takes 1 s, so the times and latencies are in steps, not seconds")
    keep_steps = bool(args.steps and ctx.json)
    with_steps = bool(out or plot_path or keep_steps)
    try:
        run = ReplayRun(cfg, trace, steps=with_steps)
    except FpmError as exc:  # the engine's bounds of a request: named in the trace's file
        if not exc.where:
            exc.where = args.trace
        raise
    files = plot = None
    if out is not None:
        from fpmcore.replay.outputs import RecordFiles

        files = RecordFiles(out, args.out_format, groups=len(cfg.groups))
    if plot_path is not None:
        from fpmcore.replay.plot import PlotData

        plot = PlotData([g.name for g in cfg.groups], cfg.usable_blocks if cfg.block_mode else cfg.capacity_bytes,
                        cfg.block_mode)  # fmt: skip
    kept: list[dict[str, Any]] = []
    requests: list[dict[str, Any]] = []
    try:
        with ctx.progress("requests", steps=True) as bar:
            task = bar.add_task(f"replaying {file_name(args.trace)}", total=run.requests_total, steps=0)
            chunk_steps = CHUNK_STEPS if with_steps else CHUNK_STEPS_SUMMARY
            # step records wanted only in the files: written as JSON lines without a record object
            as_lines = files is not None and files.takes_lines and plot is None and not keep_steps
            while as_lines and not run.ended:
                lines = run.advance_lines(chunk_steps, requests=ctx.json)
                files.write_lines(lines.steps, lines.requests)  # type: ignore[union-attr]
                requests.extend(lines.request_records or ())
                bar.update(task, completed=run.requests_completed, steps=run.steps_done)
            while not run.ended:
                chunk = run.advance(chunk_steps)
                if files is not None:
                    files.write(chunk.steps, chunk.requests)
                if plot is not None:
                    plot.add(chunk.steps, chunk.requests)
                if keep_steps:
                    kept.extend(chunk.steps)
                if ctx.json:
                    requests.extend(chunk.requests)
                bar.update(task, completed=run.requests_completed, steps=run.steps_done)
        summary = run.summary()
        digests = files.publish({**summary, "trace": provenance}) if files is not None else None
    finally:
        if files is not None:
            files.discard()
    image = None
    if plot is not None and plot_path is not None and plot_fmt is not None:
        from fpmcore.documents import output_files as outputs

        image = plot.render(_title(profile, args, cfg, run.requests_total), plot_fmt, latency=table is not None)
        outputs.write_file(plot_path, image)
    error = run.error
    if ctx.json:
        requests.sort(key=_trace_order(trace))
        doc: dict[str, Any] = {
            "summary": summary,
            "trace": provenance,
            "requests": requests,
            "latency": {
                "table": args.fpm_table,
                "fixed_step_seconds": cfg.fixed_step_seconds if table is None else None,
            },
        }
        if args.steps:
            doc["steps"] = kept
        if error is not None:
            doc["error"] = {"rule": error.rule, "message": error.message}
        if digests is not None:
            doc["out"] = {"folder": str(out), "files": digests}
        if plot_path is not None:
            doc["plot"] = str(plot_path)
        ctx.emit_json(doc)
    else:
        _print_summary(ctx, summary, f"replay of {args.trace} ({run.backend} engine, {rules.runtime} scheduler)")
    if table is not None and summary.get("extrapolated_steps") and not ctx.json:  # --json: the summary's count
        _note(ctx, extrapolated_note(summary["extrapolated_steps"], summary["steps"]))
    for kind, reason in run.first_rejections.items():
        n = summary["rejected_by_reason"][kind]
        _note(ctx, f"{n:,} request{'s' if n != 1 else ''} rejected ({kind}), the first: {reason}")
    if digests is not None:
        listed = ", ".join(f"{name} (sha256 {digest[:12]}…)" for name, digest in digests.items())
        ctx.message(f"fpm: wrote {out}/: {listed}")
    if plot_path is not None and image is not None:
        ctx.message(f"fpm: wrote the plot {plot_path} ({len(image):,} bytes)")
    if error is not None:
        ctx.message(f"fpm: {error} [{error.rule}]")
        return 1
    return 0


def _trace_order(trace: Any) -> Any:
    """Sort key of request records: their line in the trace (the records of ``--json`` keep trace order)."""
    ids = trace.request_ids()
    if trace.columns is not None:  # request ids are increasing line numbers: found by a binary search
        return lambda rec: ids.index(rec["request_id"])
    index = {r: i for i, r in enumerate(ids)}
    return lambda rec: index[rec["request_id"]]


def replay_command() -> CliCommand:
    """The ``replay`` subcommand (registered by the host's built-in plugin)."""
    return CliCommand(
        name="replay",
        help="replay a request trace: grouped KV pool, vLLM-like scheduler, FPM latency",
        configure=configure,
        run=run,
    )
