"""The replay rules that differ between runtime releases (06 R-7, R-20, R-37, R-38).

The replay engine is one C library (and its Python reference) for every
runtime; what differs between releases of the runtime's scheduler is a
:class:`RuntimeRules` value: a few switches the engine consults, and the names
of the scheduler settings the release has.  A runtime plugin describes its
release with one; :func:`default_rules` gives the rules of the engine's
reference runtime, vLLM 0.33.0, whose step sequence the engine reproduces
and is verified against (06 R-40).

A replay configuration carries its rules (``ReplayConfig.rules``), and
:func:`fpmcore.replay.config.check_config` refuses a setting or a group the
release does not have.  The rules of a release are its runtime plugin's
(the ``fpm_replay_rules`` hook): ``fpm replay`` and ``fpm sweep`` take them
for the profile's ``backend_version`` and refuse a runtime without them::

    rules = host.hooks.replay_rules(runtime_pin(profile, deployment))
    cfg = config_from_profile(profile, deployment, rules=rules)

Each switch below cites the vLLM wheels' sources (paths under ``vllm/``);
every switch is implemented by both engines (``fpm_replay_rules`` in
``csrc/fpm_replay.h``) and drawn by their differential tests.
"""

from __future__ import annotations

import attrs

#: The vLLM scheduler settings the engine models (field names of vLLM's
#: ``SchedulerConfig``; ``fpm replay`` takes them as vLLM's engine arguments).
SCHEDULER_SETTINGS = frozenset(
    {
        "max_num_scheduled_tokens",
        "max_num_active_seqs",
        "long_prefill_token_threshold",
        "long_prefill_token_threshold_adaptive",
        "prefill_schedule_interval",
        "scheduling_policy",
        "max_num_queued_reqs",
        "max_num_queued_tokens",
        "watermark",
        "scheduler_reserve_full_isl",
    }
)


@attrs.frozen
class RuntimeRules:
    """Scheduler and pool rules of one runtime release.

    Every switch defaults to the behaviour of the engine's reference runtime
    (vLLM 0.33.0); a release that behaves differently sets it to ``False``.
    All of them are implemented by both engines (the C library and the
    Python reference) and covered by their differential tests.
    """

    #: A label naming the runtime release whose semantics these are (shown by ``fpm replay``).
    runtime: str = "built-in"
    #: R-7 step 1: window blocks and align extras are released before the free-space
    #: check of an allocation, also when it then fails (vLLM ``allocate_slots`` frees
    #: skipped blocks first).  ``False``: released only after a successful check.
    release_before_check: bool = True
    #: R-38: freed blocks without cached content go to the front of the free queue
    #: (LIFO reuse); ``False``: every freed block joins the back.
    uncached_blocks_to_front: bool = True
    #: R-37: a waiting head whose hit ends at a Mamba state cached in the current
    #: step waits one step (vLLM ``MambaManager.cached_blocks_this_step``).
    mamba_same_step_rule: bool = True
    #: R-20: the admission cap of a windowed group counts one extra block for a
    #: window that does not start at a block boundary (vLLM
    #: ``SlidingWindowSpec.max_admission_blocks_per_request``).
    window_admission_extra_block: bool = True
    #: The long-prefill cap applies only while more than one request runs or
    #: waits (vLLM 0.33.0 vllm/v1/core/sched/scheduler.py:754-763, 0.32.0
    #: :640-649); ``False``: it caps every chunk (vLLM 0.27.0 scheduler.py:521-522).
    long_prefill_cap_exempts_single_request: bool = True
    #: A step schedules at most ``min(max_num_scheduled_tokens,
    #: max_num_batched_tokens)`` tokens (vLLM 0.33.0's separate input budget,
    #: scheduler.py:719-722, 846-848); ``False``: ``max_num_scheduled_tokens``
    #: alone when it is set (vLLM 0.27.0 scheduler.py:110-114, 459).
    budget_capped_by_batched_tokens: bool = True
    #: Priority policy: after a request preempted itself the running scan goes
    #: on with the next request (vLLM 0.33.0 scheduler.py:983-992); ``False``:
    #: the scan stops (vLLM 0.32.0 scheduler.py:846-848, 0.27.0 :627-629).
    priority_self_preemption_continues: bool = True
    #: Priority policy: a victim ahead of the current request moves the running
    #: scan back one place (vLLM 0.33.0 scheduler.py:944-949, 0.32.0 :808-813);
    #: ``False``: only a victim already scheduled in the step does (vLLM 0.27.0
    #: scheduler.py:596-613), so after an unscheduled victim the scan skips one request.
    priority_victim_always_shifts_scan: bool = True
    #: R-38: of a windowed or Mamba group's blocks only those a later hit can
    #: reach are cached (vLLM 0.33.0 ``prefix_cache_retention_interval`` 0,
    #: vllm/config/cache.py:275); ``False``: every full block is cached (vLLM
    #: 0.27.0: the interval comes from ``VLLM_PREFIX_CACHE_RETENTION_INTERVAL``,
    #: unset by default, envs.py:302, v1/core/kv_cache_coordinator.py:121-125).
    sparse_retention: bool = True
    #: 04 G-6: the align split's last cacheable stop is the last block boundary
    #: strictly below the request's tokens (vLLM 0.33.0
    #: ``get_mamba_prefill_checkpoint_position``, v1/kv_cache_interface.py:1169-1181);
    #: ``False``: the last boundary at or below them (vLLM 0.27.0
    #: scheduler.py:392, ``num_tokens - num_tokens % block_size``).
    align_last_stop_below_tokens: bool = True
    #: R-37: a request scheduled from its prompt's last cacheable boundary does
    #: not key its Mamba state there again when it is keyed already (vLLM
    #: 0.33.0 v1/core/single_type_kv_cache_manager.py:2112-2115); ``False``: it
    #: keys it again, which marks it cached in that step, so a request whose
    #: hit ends there waits one more step (vLLM 0.32.0
    #: single_type_kv_cache_manager.py:1977-1982, 2087-2100).
    keyed_mamba_state_not_recached: bool = True
    #: The release's Mamba groups can hold prefill checkpoint blocks (R-6;
    #: ``MambaSpec.num_prefill_checkpoint_blocks``, absent in vLLM 0.27.0);
    #: ``False``: such a group is refused (R-3).
    mamba_prefill_checkpoints: bool = True
    #: The release has ring state groups (vLLM ``CircularBufferSpec``, absent
    #: in 0.27.0); ``False``: a ring group is refused (R-3).
    ring_groups: bool = True
    #: The scheduler settings of :data:`SCHEDULER_SETTINGS` the release has; a
    #: configuration that sets another one to a non-default value is refused.
    settings: frozenset[str] = attrs.field(default=SCHEDULER_SETTINGS, converter=frozenset)

    def __attrs_post_init__(self) -> None:
        unknown = self.settings - SCHEDULER_SETTINGS
        if unknown:
            raise ValueError(f"unknown scheduler settings: {sorted(unknown)}")


def default_rules() -> RuntimeRules:
    """The rules of the engine's reference runtime, vLLM 0.33.0 (every switch on, every setting known)."""
    return RuntimeRules()
