"""``fpm replay``: replay a request trace against a profile's deployment (06).

::

    fpm replay PROFILE --trace TRACE [--fpm-table TABLE] [--deployment I]
        [--max-num-seqs N] [--max-num-batched-tokens N] [--prefix-caching on|off]
        [vLLM scheduler settings: --max-num-scheduled-tokens N --max-num-active-seqs N
         --long-prefill-token-threshold N --[no-]long-prefill-token-threshold-adaptive
         --prefill-schedule-interval N --scheduling-policy fcfs|priority
         --max-num-queued-reqs N --max-num-queued-tokens N --watermark W
         --[no-]scheduler-reserve-full-isl --[no-]enable-chunked-prefill]
        [--max-steps N] [--steps] [--out DIR] [--plot OUT.png] [--json]

The scheduler settings are vLLM's engine arguments, with vLLM's defaults
(``--scheduling-policy priority`` reads each request's trace field
``priority``; ``--max-num-queued-*`` reject arrivals as vLLM's API server
does).

Prints the R-35 summary as a table; ``--out DIR`` writes
``replay-steps.jsonl``, ``replay-requests.jsonl`` and ``replay-summary.json``
(R-34, R-35); ``--json`` prints ``{"schema": 1, "summary": …, "requests": […],
"steps": […]}`` (steps only with ``--steps``).  Exit 0 when the whole trace
ran, 1 when the replay stopped (R-9, R-26, R-27: the records up to the stop
are still written), 2 for bad input.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from fpmcore.errors import FpmError
from fpmcore.hooktypes import CliCommand


def _positive(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}") from None
    if v <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return v


def _non_negative(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer >= 0, got {text!r}") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"must be an integer >= 0, got {text!r}")
    return v


def _fraction(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number in [0, 1), got {text!r}") from None
    if not 0.0 <= v < 1.0:
        raise argparse.ArgumentTypeError(f"must be a number in [0, 1), got {text!r}")
    return v


def _on_off(g: Any, option: str, dest: str, default: bool, help: str) -> None:
    """vLLM's ``--X`` / ``--no-X`` pair of a boolean setting, as two flags of one ``dest``."""
    g.add_argument(option, dest=dest, action="store_true", default=default,
                   help=f"{help} (default {'on' if default else 'off'})")
    g.add_argument("--no-" + option[2:], dest=dest, action="store_false", help=f"turn {option} off")


def _scheduler_options(p: argparse.ArgumentParser) -> None:
    """vLLM 0.33.0's scheduler settings that change what is scheduled or allocated, as its engine arguments."""
    g = p.add_argument_group("vLLM scheduler settings (vLLM's engine arguments and defaults)")
    g.add_argument("--max-num-scheduled-tokens", type=_positive, metavar="N",
                   help="tokens one step schedules at most (default: --max-num-batched-tokens)")
    g.add_argument("--max-num-active-seqs", type=_positive, metavar="N",
                   help="requests admitted into running at most (default: --max-num-seqs)")
    g.add_argument("--long-prefill-token-threshold", type=_non_negative, default=0, metavar="N",
                   help="cap a prefill chunk at N tokens while other requests wait or run (default 0: no cap)")
    _on_off(g, "--long-prefill-token-threshold-adaptive", "long_prefill_token_threshold_adaptive", False,
            "floor that cap at max_num_batched_tokens / (running + waiting requests)")
    g.add_argument("--prefill-schedule-interval", type=_positive, default=1, metavar="N",
                   help="admit prefill once every N executed steps (default 1)")
    g.add_argument("--scheduling-policy", choices=("fcfs", "priority"), default="fcfs",
                   help="fcfs, or priority by the trace field priority (lower first)")
    g.add_argument("--max-num-queued-reqs", type=_non_negative, metavar="N",
                   help="reject an arrival when N requests are unfinished (vLLM's API server; default: no limit)")
    g.add_argument("--max-num-queued-tokens", type=_non_negative, metavar="N",
                   help="reject an arrival while N prompt tokens are in prefill (default: no limit)")
    g.add_argument("--watermark", type=_fraction, default=0.0, metavar="W",
                   help="fraction of the pool kept free when admitting requests (default 0)")
    _on_off(g, "--scheduler-reserve-full-isl", "reserve_full_isl", True,
            "admit a request only when its whole input fits (R-20)")
    g.add_argument("--no-reserve-full-isl", action="store_true",
                   help="the same as --no-scheduler-reserve-full-isl (fpmcore's earlier name)")
    _on_off(g, "--enable-chunked-prefill", "enable_chunked_prefill", True,
            "split prefills into chunks of the token budget")


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("profile", metavar="PROFILE", help="an *.fpm-profile.json file")
    p.add_argument("--trace", required=True, metavar="TRACE", help="JSONL trace (R-32) or the oracle's SCHED.json")
    p.add_argument("--fpm-table", metavar="TABLE", help="FPM latency table (R-27); default: 1.0 s per step")
    p.add_argument("--deployment", type=int, default=0, metavar="I", help="deployment index in the profile (default 0)")
    p.add_argument("--max-num-seqs", type=_positive, metavar="N", help="default: the profile's max_batch_size")
    p.add_argument("--max-num-batched-tokens", type=_positive, metavar="N",
                   help="default: the profile's max_num_tokens")
    p.add_argument("--prefix-caching", choices=("on", "off"), default="off",
                   help="model vLLM prefix caching (Mamba align mode); default off")
    _scheduler_options(p)
    p.add_argument("--max-steps", type=_positive, metavar="N",
                   help="stop a replay that reaches N steps (default 1,000,000,000)")
    p.add_argument("--steps", action="store_true", help="include the step records in --json output")
    p.add_argument("--out", metavar="DIR", help="write replay-steps.jsonl, replay-requests.jsonl, replay-summary.json")
    p.add_argument("--plot", metavar="OUT.png", help="plot running/waiting requests and pool use per step (matplotlib)")
    p.add_argument("--json", action="store_true", help="print JSON on stdout")


def _fmt(v: Any) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:.6g}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def _print_summary(ctx: Any, s: dict[str, Any], title: str) -> None:
    from rich.table import Table

    t = Table(title=title, show_header=True)
    t.add_column("quantity")
    t.add_column("value", justify="right")
    for key, value in s.items():
        if key == "schema":
            continue
        if isinstance(value, dict):
            value = "  ".join(f"{k} {_fmt(v)}" for k, v in value.items())
        t.add_row(key, _fmt(value))
    ctx.out.print(t)


def _write_out(out_dir: Path, result: Any) -> None:
    from fpmcore.jsonio import dumps_output  # compact JSON, one line each

    out_dir.mkdir(parents=True, exist_ok=True)
    with open(out_dir / "replay-steps.jsonl", "wb") as f:
        f.writelines(map(dumps_output, result.steps))
    with open(out_dir / "replay-requests.jsonl", "wb") as f:
        f.writelines(map(dumps_output, result.requests))
    (out_dir / "replay-summary.json").write_text(json.dumps(result.summary, indent=2) + "\n", encoding="utf-8")


def _pyplot() -> Any:
    """matplotlib's pyplot on the Agg backend, imported only for ``--plot``."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise FpmError(
            "R-35", "--plot needs matplotlib, which is not installed; install the package: pip install matplotlib"
        ) from None
    return plt


def plot(result: Any, path: str) -> None:
    """Running and waiting requests and the pool use per step."""
    plt = _pyplot()
    steps = result.steps
    x = [s["step"] for s in steps]
    fig, (a1, a2) = plt.subplots(2, 1, sharex=True, figsize=(9, 6))
    a1.plot(x, [s["running"] for s in steps], label="running")
    a1.plot(x, [s["waiting"] for s in steps], label="waiting")
    a1.set_ylabel("requests")
    a1.legend()
    a2.plot(x, [s["used_bytes_scheduled"] for s in steps], label="used bytes (scheduled)")
    a2.axhline(result.summary["capacity_bytes"], color="grey", linestyle="--", label="capacity")
    a2.set_ylabel("bytes")
    a2.set_xlabel("step")
    a2.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def scheduler_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The replay configuration's scheduler settings (:class:`~fpmcore.replay.model.ReplayConfig`) of the options."""
    out: dict[str, Any] = {
        "max_num_scheduled_tokens": args.max_num_scheduled_tokens,
        "max_num_active_seqs": args.max_num_active_seqs,
        "long_prefill_token_threshold": args.long_prefill_token_threshold,
        "long_prefill_token_threshold_adaptive": args.long_prefill_token_threshold_adaptive,
        "prefill_schedule_interval": args.prefill_schedule_interval,
        "scheduling_policy": args.scheduling_policy,
        "max_num_queued_reqs": args.max_num_queued_reqs,
        "max_num_queued_tokens": args.max_num_queued_tokens,
    }
    if args.max_steps is not None:
        out["max_steps"] = args.max_steps
    return out


def run(args: argparse.Namespace, ctx: Any) -> int:
    from fpmcore.profile import load_profile
    from fpmcore.replay import config_from_profile, load_table, load_trace, run_replay

    if args.plot:
        _pyplot()  # refuse before the run when matplotlib is missing
    profile = load_profile(args.profile)
    if not 0 <= args.deployment < len(profile.deployments):
        raise FpmError("R-1", f"profile has no deployment {args.deployment}", args.profile)
    table = load_table(args.fpm_table) if args.fpm_table else None
    cfg = config_from_profile(
        profile,
        args.deployment,
        max_num_batched_tokens=args.max_num_batched_tokens,
        max_num_seqs=args.max_num_seqs,
        prefix_caching=args.prefix_caching == "on",
        reserve_full_isl=args.reserve_full_isl and not args.no_reserve_full_isl,
        enable_chunked_prefill=args.enable_chunked_prefill,
        watermark=args.watermark,
        table=table,
        **scheduler_settings(args),
    )
    trace = load_trace(args.trace)
    with ctx.progress("replay", total=len(trace.requests)) as bar:
        task = bar.add_task(f"replaying {len(trace.requests)} requests", total=len(trace.requests))
        result = run_replay(cfg, trace)
        bar.update(task, completed=len(trace.requests))
    if args.out:
        _write_out(Path(args.out), result)
    if args.plot:
        plot(result, args.plot)
    if ctx.json:
        doc: dict[str, Any] = {"summary": result.summary, "requests": result.requests}
        if args.steps:
            doc["steps"] = list(result.steps)
        if result.error is not None:
            doc["error"] = {"rule": result.error.rule, "message": result.error.message}
        ctx.emit_json(doc)
    else:
        _print_summary(ctx, result.summary, f"replay of {args.trace} ({result.backend} engine)")
        if args.out:
            ctx.err.print(f"wrote replay-steps.jsonl, replay-requests.jsonl, replay-summary.json to {args.out}")
    if result.error is not None:
        ctx.err.print(f"fpm: {result.error} [{result.error.rule}]", markup=False, highlight=False)
        return 1
    return 0


def replay_command() -> CliCommand:
    """The ``replay`` subcommand (registered by the host's built-in plugin)."""
    return CliCommand(
        name="replay",
        help="replay a request trace: grouped KV pool, vLLM-like scheduler, FPM latency (06)",
        configure=configure,
        run=run,
    )
