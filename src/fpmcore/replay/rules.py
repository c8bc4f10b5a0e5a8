"""The replay rules that differ between runtime releases (06 R-7, R-20, R-37, R-38).

The replay engine is one C library (and its Python reference) for every
runtime; what differs between releases of the runtime's scheduler is a
:class:`ReplayRules` value: a few switches the engine consults, and the names
of the scheduler settings the release has.  A runtime plugin describes its
release with one; :func:`default_rules` gives the rules of the engine's
reference runtime, vLLM 0.33.0, whose step sequence the engine reproduces
and is verified against (06 R-40).

Every switch names how a release departs from the reference runtime and is
off there: the rules of vLLM 0.33.0 are all switches off, as the C library's
all-zero ``fpm_replay_rules`` is.  The switches are the fields of
``fpm_replay_rules`` in ``csrc/fpm_replay.h``, with the same names in the same
order (:data:`SWITCHES`; ``tests/replay/test_rules_vocabulary.py`` checks both),
and the binding copies them one for one.

A replay configuration carries its rules (``ReplayConfig.rules``), and
:func:`fpmcore.replay.config.check_config` refuses a setting or a group the
release does not have.  The rules of a release are its runtime plugin's
(the ``fpm_replay_rules`` hook): ``fpm replay`` and ``fpm sweep`` take them
for the profile's ``backend_version`` and refuse a runtime without them::

    rules = host.hooks.replay_rules(runtime_pin(profile, deployment))
    cfg = config_from_profile(profile, deployment, rules=rules)

Each switch below cites the vLLM wheels' sources (paths under ``vllm/``);
every switch is implemented by both engines and drawn by their differential
tests.
"""

from __future__ import annotations

from typing import Any

import attrs

from fpmcore.documents.field_helpers import as_frozenset
from fpmcore.replay.settings import RELEASE_SETTINGS

#: The vLLM scheduler settings the engine models that a release may lack (field
#: names of vLLM's ``SchedulerConfig``), from the replay's settings
#: (:data:`fpmcore.replay.settings.SETTINGS`).
SCHEDULER_SETTINGS: frozenset[str] = RELEASE_SETTINGS


def _switch() -> Any:
    """A switch of :class:`ReplayRules`: off in the reference runtime."""
    return attrs.field(default=False, metadata={"switch": True})


@attrs.frozen
class ReplayRules:
    """Scheduler and pool rules of one runtime release.

    Every switch is off in the engine's reference runtime (vLLM 0.33.0); a
    release that behaves differently turns on the switch that names its
    difference.  All of them are implemented by both engines (the C library
    and the Python reference) and covered by their differential tests.
    """

    #: A label naming the runtime release whose semantics these are (shown by ``fpm replay``).
    runtime: str = "built-in"
    #: R-7 step 1: window blocks and align extras are released only after a
    #: successful free-space check of an allocation.  Off: they are released
    #: before the check, also when it then fails (vLLM ``allocate_slots``
    #: frees skipped blocks first).
    check_before_release: bool = _switch()
    #: R-38: freed blocks without cached content join the back of the free
    #: queue too.  Off: they go to its front (LIFO reuse).
    free_uncached_to_back: bool = _switch()
    #: R-37: a Mamba state cached in the current step can be hit at once.  Off:
    #: a waiting head whose hit ends at such a state waits one step (vLLM
    #: ``MambaManager.cached_blocks_this_step``).
    mamba_hits_same_step: bool = _switch()
    #: R-20: the admission cap of a windowed group without an extra block for a
    #: window that does not start at a block boundary.  Off: the extra block is
    #: counted (vLLM ``SlidingWindowSpec.max_admission_blocks_per_request``).
    window_cap_exact: bool = _switch()
    #: The long-prefill cap applies to every chunk (vLLM 0.27.0
    #: scheduler.py:521-522).  Off: only while more than one request runs or
    #: waits (vLLM 0.33.0 vllm/v1/core/sched/scheduler.py:754-763, 0.32.0 :640-649).
    long_prefill_cap_always: bool = _switch()
    #: ``max_num_scheduled_tokens`` alone is a step's budget when it is set
    #: (vLLM 0.27.0 scheduler.py:110-114, 459).  Off: a step schedules at most
    #: ``min(max_num_scheduled_tokens, max_num_batched_tokens)`` tokens (vLLM
    #: 0.33.0's separate input budget, scheduler.py:719-722, 846-848).
    budget_scheduled_only: bool = _switch()
    #: Priority policy: the running scan stops when a request preempted itself
    #: (vLLM 0.32.0 scheduler.py:846-848, 0.27.0 :627-629).  Off: the scan goes
    #: on with the next request (vLLM 0.33.0 scheduler.py:983-992).
    priority_self_preemption_stops: bool = _switch()
    #: Priority policy: only a victim already scheduled in the step moves the
    #: running scan back one place (vLLM 0.27.0 scheduler.py:596-613), so after
    #: an unscheduled victim the scan skips one request.  Off: any victim ahead
    #: of the current request does (vLLM 0.33.0 scheduler.py:944-949, 0.32.0 :808-813).
    priority_shift_if_scheduled: bool = _switch()
    #: R-38: every full block of a windowed or Mamba group is cached (vLLM
    #: 0.27.0: the retention interval comes from ``VLLM_PREFIX_CACHE_RETENTION_INTERVAL``,
    #: unset by default, envs.py:302, v1/core/kv_cache_coordinator.py:121-125).
    #: Off: only the blocks a later hit can reach are (vLLM 0.33.0
    #: ``prefix_cache_retention_interval`` 0, vllm/config/cache.py:275).
    dense_retention: bool = _switch()
    #: 04 G-6: the align split's last cacheable stop is the last block boundary
    #: at or below the request's tokens (vLLM 0.27.0 scheduler.py:392,
    #: ``num_tokens - num_tokens % block_size``).  Off: the last boundary
    #: strictly below them (vLLM 0.33.0 ``get_mamba_prefill_checkpoint_position``,
    #: v1/kv_cache_interface.py:1169-1181).
    align_last_stop_at_tokens: bool = _switch()
    #: R-37: a request scheduled from its prompt's last cacheable boundary keys
    #: its Mamba state there again when it is keyed already, which marks it
    #: cached in that step, so a request whose hit ends there waits one more
    #: step (vLLM 0.32.0 single_type_kv_cache_manager.py:1977-1982, 2087-2100).
    #: Off: the keyed state is left alone (vLLM 0.33.0
    #: v1/core/single_type_kv_cache_manager.py:2112-2115).
    mamba_boundary_recached: bool = _switch()
    #: The release's Mamba groups hold no prefill checkpoint blocks
    #: (``MambaSpec.num_prefill_checkpoint_blocks`` is absent in vLLM 0.27.0):
    #: such a group is refused (R-3).  Off: they can (R-6).
    no_mamba_checkpoints: bool = _switch()
    #: The release has no ring state groups (vLLM ``CircularBufferSpec`` is
    #: absent in 0.27.0): a ring group is refused (R-3).
    no_ring_groups: bool = _switch()
    #: The scheduler settings of :data:`SCHEDULER_SETTINGS` the release has; a
    #: configuration that sets another one to a non-default value is refused.
    settings: frozenset[str] = attrs.field(default=SCHEDULER_SETTINGS, converter=as_frozenset)

    def __attrs_post_init__(self) -> None:
        unknown = self.settings - SCHEDULER_SETTINGS
        if unknown:
            raise ValueError(f"unknown scheduler settings: {sorted(unknown)}")


#: The switches of :class:`ReplayRules` in declaration order: the fields of the C
#: library's ``fpm_replay_rules``, named alike.
SWITCHES: tuple[str, ...] = tuple(f.name for f in attrs.fields(ReplayRules) if f.metadata.get("switch"))


def default_rules() -> ReplayRules:
    """The rules of the engine's reference runtime, vLLM 0.33.0 (every switch off, every setting known)."""
    return ReplayRules()
