"""The replay rules of vLLM 0.27.0's scheduler (``fpm_replay_rules``).

Read from the 0.27.0 wheel and checked step by step against its own
``Scheduler`` (``tools/replay_vs_vllm.py``; counts in the plugin's README).
Where 0.27.0 differs from vLLM 0.33.0, the engine's reference runtime
(paths under ``vllm/``):

* ``long_prefill_token_threshold`` caps every chunk, also of a request alone
  (v1/core/sched/scheduler.py:521-522); 0.33.0 lifts it while at most one
  request runs or waits (scheduler.py:754-763);
* a step's budget is ``max_num_scheduled_tokens`` alone when it is set
  (scheduler.py:110-114, 459); 0.33.0 also caps it by
  ``max_num_batched_tokens`` (scheduler.py:719-722, 846-848);
* priority policy: a request that preempted itself ends the running scan
  (scheduler.py:627-629); only a victim already scheduled in the step moves
  the scan back (scheduler.py:596-613), so an unscheduled victim ahead of the
  current request makes the scan skip one;
* windowed and Mamba groups cache every full block: the retention interval
  comes from ``VLLM_PREFIX_CACHE_RETENTION_INTERVAL``, unset by default
  (envs.py:302, v1/core/kv_cache_coordinator.py:121-125), where 0.33.0 keeps
  only the blocks a later hit can reach (config/cache.py:275, default 0);
* the align split's last cacheable stop is the block boundary at or below
  the request's tokens (scheduler.py:392), not strictly below;
* ``MambaSpec`` has no prefill checkpoint blocks and there is no
  ``CircularBufferSpec`` (v1/kv_cache_interface.py): such groups are refused;
* ``SchedulerConfig`` has no ``max_num_active_seqs``,
  ``long_prefill_token_threshold_adaptive``, ``max_num_queued_reqs`` or
  ``max_num_queued_tokens`` (config/scheduler.py), and
  ``prefill_schedule_interval`` acts only in the data-parallel engine core
  (v1/engine/core.py:1937, 2097-2098): a replay that sets one is refused.
"""

from __future__ import annotations

from fpmcore.plugin_api import SCHEDULER_SETTINGS, ReplayRules, RuntimePin
from fpmcore_vllm027 import VERSION

#: vLLM 0.27.0's scheduler.
REPLAY_RULES = ReplayRules(
    runtime=str(RuntimePin(VERSION)),
    long_prefill_cap_always=True,
    budget_scheduled_only=True,
    priority_self_preemption_stops=True,
    priority_shift_if_scheduled=True,
    dense_retention=True,
    align_last_stop_at_tokens=True,
    no_mamba_checkpoints=True,
    no_ring_groups=True,
    settings=SCHEDULER_SETTINGS
    - {
        "max_num_active_seqs",
        "long_prefill_token_threshold_adaptive",
        "prefill_schedule_interval",
        "max_num_queued_reqs",
        "max_num_queued_tokens",
    },
)
