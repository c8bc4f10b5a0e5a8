"""The replay rules that differ between runtime releases (06 R-7, R-20, R-37, R-38).

The replay engine is one C library (and its Python reference) for every
runtime; what differs between releases of the runtime's scheduler is a
:class:`RuntimeRules` value: a few switches the engine consults, and the names
of the scheduler settings the release has.  A runtime plugin describes its
release with one; :func:`default_rules` gives the rules of the engine's
reference runtime, vLLM 0.33.0, whose step sequence the engine reproduces
and is verified against (06 R-40).

A replay configuration carries its rules (``ReplayConfig.rules``), and
:func:`fpmcore.replay.config.check_config` refuses a setting the release
does not have, so wiring rules to a runtime is one call::

    cfg = config_from_profile(profile, rules=rules_of_the_profile_runtime)
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
