"""Where vLLM 0.32.0's scheduler is the one fpmcore's replay models, and where it is not (README §3-§4).

fpmcore's replay follows vLLM 0.33.0's ``Scheduler`` (06).  vLLM 0.32.0's
scheduler and KV managers take the same decisions on every path inside the
replay's envelope (06 R-40: FCFS, synchronous scheduling, chunked prefill,
no speculative decoding, connectors, LoRA or multimodal inputs,
``prefill_schedule_interval`` 1); outside it they differ (README D-S1 …
D-S11, D-M1 … D-M8).  A replay of a 0.32.0 engine or profile must never take
0.33.0's behaviour silently where 0.32.0's differs, so
:func:`outside_envelope` names every setting of a configuration that leaves
the shared envelope, with the difference it would reach, and a replay check
refuses such a configuration.

The reasons, by setting:

* ``prefill_schedule_interval`` > 1 (D-S1): 0.33.0 holds prefills between
  intervals on one engine; 0.32.0 ignores the setting without data parallelism;
* asynchronous scheduling (D-S8; the CPU platform forces it off, D-L2);
* a speculative configuration (D-S2, D-M1, D-C4: lookahead hashes and the
  EAGLE block drop);
* a KV transfer connector (D-S6, D-S7);
* LoRA (D-S5);
* a multimodal model (D-S3, D-S11: encoder inputs; 0.32.0 stops the waiting
  scan where 0.33.0 skips the request).

With a hash block smaller than the Mamba block D-M2 (Mamba align-mode
re-keying) reaches partial keys the replay does not model;
:func:`outside_envelope` names that too.

:data:`REPLAY_RULES` are the replay's rules of vLLM 0.32.0
(:class:`fpmcore.replay.rules.ReplayRules`, given by ``fpm_replay_rules``):
R-7's release before the check, R-38's free-queue order and retention, R-20's
window admission block and the long-prefill, budget and align rules are
0.33.0's (the same code, README §3-§4); two switches are 0.32.0's own:

* ``priority_self_preemption_stops`` (D-S4): after a request
  preempts itself 0.32.0 ends the running scan (``break``), 0.33.0 goes on;
* ``mamba_boundary_recached`` (D-M2): a request scheduled from
  its prompt's last cacheable boundary keys its Mamba state there again, so
  it counts as cached in that step (R-37) and a request whose hit ends there
  waits one more step.

Its settings are all but ``prefill_schedule_interval`` (D-S1), which a replay
of a 0.32.0 profile refuses instead of following 0.33.0.  Checked against
0.32.0's own ``Scheduler`` step by step (README §3).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fpmcore.plugin_api import SCHEDULER_SETTINGS, ReplayRules, RuntimePin
from fpmcore_vllm032 import VERSION

#: The replay's rules of vLLM 0.32.0's scheduler (README §3-§4).
REPLAY_RULES = ReplayRules(
    runtime=str(RuntimePin(VERSION)),
    priority_self_preemption_stops=True,
    mamba_boundary_recached=True,
    settings=SCHEDULER_SETTINGS - {"prefill_schedule_interval"},  # type: ignore[arg-type]
)


def outside_envelope(scheduler: Mapping[str, Any], *, speculative: bool = False, kv_transfer: bool = False,
                     lora: bool = False, multimodal: bool = False,
                     hash_block_size: int | None = None, mamba_block_sizes: tuple[int, ...] = ()) -> list[str]:  # fmt: skip
    """Every setting that leaves the envelope both schedulers share, each with the 0.32.0 difference it reaches.

    ``scheduler`` holds the engine's ``SchedulerConfig`` values
    (:func:`fpmcore_vllm032.engine.scheduler_settings`).  An empty list: the
    replay's scheduler is 0.32.0's for this configuration.
    """
    out = []
    interval = scheduler.get("prefill_schedule_interval") or 1
    if interval != 1:
        out.append(f"prefill_schedule_interval {interval}: vLLM 0.32.0 does not hold prefills on one engine (D-S1)")
    if scheduler.get("async_scheduling"):
        out.append("asynchronous scheduling: vLLM 0.32.0 does not re-cache stopped requests' blocks (D-S8)")
    if speculative:
        out.append("speculative decoding: vLLM 0.32.0 has no lookahead hashes (D-S2, D-M1)")
    if kv_transfer:
        out.append("a KV transfer connector: vLLM 0.32.0 bounds hits and loads differently (D-S6, D-S7)")
    if lora:
        out.append("LoRA: vLLM 0.32.0 keeps LoRA bookkeeping of the scheduled requests only (D-S5)")
    if multimodal:
        out.append("encoder inputs: vLLM 0.32.0 stops the waiting scan where 0.33.0 skips the request (D-S3, D-S11)")
    if hash_block_size is not None and any(hash_block_size < b for b in mamba_block_sizes):
        out.append(f"hash block {hash_block_size} below a Mamba block {max(mamba_block_sizes)}: "
                   "vLLM 0.32.0 re-keys aligned boundary blocks (D-M2)")  # fmt: skip
    return out


def engine_outside_envelope(engine: Any) -> list[str]:
    """:func:`outside_envelope` of a running engine (:class:`fpmcore_vllm032.engine.LiveEngine`)."""
    from vllm.v1.kv_cache_interface import MambaSpec

    from fpmcore_vllm032.engine import scheduler_settings

    vc = engine.vllm_config
    mamba = tuple(g.kv_cache_spec.block_size for g in engine.kv_cache_config.kv_cache_groups
                  if isinstance(g.kv_cache_spec, MambaSpec))  # fmt: skip
    caching = bool(vc.cache_config.enable_prefix_caching)
    return outside_envelope(
        scheduler_settings(vc.scheduler_config), speculative=vc.speculative_config is not None,
        kv_transfer=vc.kv_transfer_config is not None, lora=vc.lora_config is not None,
        multimodal=bool(vc.model_config.is_multimodal_model),
        hash_block_size=engine.scheduler.hash_block_size if caching else None, mamba_block_sizes=mamba,
    )  # fmt: skip
