"""fpmcore's replay checked against a running vLLM 0.32.0 scheduler, step by step (06 R-40).

The replay is configured from the profile that the live probe and the import
give for the very engine the traces run on (:func:`engine_profile`:
:func:`fpmcore_vllm032.live.probe_engine` into an evidence folder, then
``fpm import``'s pipeline), never from the engine's objects directly, so a
match checks the whole chain: observer, evidence, import rules, profile,
replay.  The scheduler settings the profile does not hold (chunked prefill,
the full-input reservation, the watermark, the token and request limits) are
the engine's, as ``fpm replay`` takes them as options, and the replay's rules
are vLLM 0.32.0's (:data:`fpmcore_vllm032.envelope.REPLAY_RULES`).

The replay models vLLM 0.33.0's scheduler.  :func:`replay_config` refuses an
engine whose settings leave the envelope where 0.32.0's scheduler takes the
same decisions (:func:`fpmcore_vllm032.envelope.engine_outside_envelope`), and
a profile of another runtime, so that a 0.32.0 engine is never compared
with (or replayed by) another scheduler's behaviour silently.

:func:`check_trace` steps one trace through the engine
(:func:`fpmcore_vllm032.steps.run_trace`) and through the replay, and
compares every step (:func:`fpmcore.replay.differential.compare_steps`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fpmcore.plugin_api import FpmError
from fpmcore_vllm032.engine import VERSION, LiveEngine
from fpmcore_vllm032.envelope import REPLAY_RULES, engine_outside_envelope
from fpmcore_vllm032.steps import TraceRequest, run_trace, trace_lines, trace_stats


def import_folder(folder: str | os.PathLike[str]) -> Any:
    """``fpm import``'s result of an evidence folder (one configuration), with the installed plugins."""
    from fpmcore.plugin_api import HostServices, build_host, import_evidence

    run = import_evidence(Path(folder), HostServices(build_host(environ={})))
    if len(run.results) != 1:
        raise FpmError("I-2", f"{folder}: expected one configuration, found {len(run.results)}")
    return run.results[0]


def engine_profile(engine: LiveEngine, folder: str | os.PathLike[str], *, model: str, configuration: str) -> Any:
    """Probe the running ``engine`` into ``folder`` and import it; the import result (its profile when complete)."""
    from fpmcore_vllm032 import plugin
    from fpmcore_vllm032.live import probe_engine

    probe_engine(engine, folder, model=model, configuration=configuration, observer=plugin.build_record)
    return import_folder(folder)


def replay_config(profile: Any, engine: LiveEngine) -> Any:
    """The replay configuration of ``profile`` with ``engine``'s scheduler settings (06 R-1).

    Refused (rule R-40) when the profile names another runtime than the
    engine, or when the engine's settings leave the envelope both
    schedulers share.
    """
    from fpmcore.plugin_api import replay_config_from_profile

    dep = profile.deployments[0]
    if dep.backend_version != VERSION:
        raise FpmError("R-40", f"the profile's runtime is vLLM {dep.backend_version}; the engine runs vLLM {VERSION}")
    reasons = engine_outside_envelope(engine)
    if reasons:
        raise FpmError("R-40", "the replay does not model vLLM 0.32.0's scheduler here: " + "; ".join(reasons))
    rm = dep.resources.runtime_memory
    sc = engine.vllm_config.scheduler_config
    return replay_config_from_profile(
        profile, prefix_caching=bool(rm.enable_prefix_caching), reserve_full_isl=bool(sc.scheduler_reserve_full_isl),
        enable_chunked_prefill=bool(sc.enable_chunked_prefill), watermark=float(sc.watermark or 0.0),
        max_num_scheduled_tokens=sc.max_num_scheduled_tokens, max_num_active_seqs=sc.max_num_active_seqs,
        long_prefill_token_threshold=sc.long_prefill_token_threshold,
        long_prefill_token_threshold_adaptive=bool(sc.long_prefill_token_threshold_adaptive),
        max_num_queued_reqs=sc.max_num_queued_reqs, max_num_queued_tokens=sc.max_num_queued_tokens,
        fixed_step_seconds=1.0, rules=REPLAY_RULES,
    )  # fmt: skip


def check_trace(engine: LiveEngine, config: Any, requests: Sequence[TraceRequest], *, seed: int = 0) -> dict[str, Any]:
    """Step ``requests`` through the engine and the replay; the trace's counts and the first difference (``None``)."""
    from fpmcore.plugin_api import compare_replay_steps, parse_trace_lines, run_replay

    run = run_trace(engine, requests, seed=seed)
    out = run_replay(config, parse_trace_lines(trace_lines(requests)))
    difference = (
        f"the replay stopped: {out.error}" if out.error is not None else compare_replay_steps(out.steps, run["steps"])
    )
    return {**trace_stats(run), "difference": difference, "run": run}
