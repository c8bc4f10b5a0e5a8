"""fpmcore.replay: the grouped KV pool, vLLM 0.33.0 scheduler loop and FPM latency model (06).

Public API::

    from fpmcore.profile import load_profile
    from fpmcore.replay import config_from_profile, load_table, load_trace, run_replay

    cfg = config_from_profile(load_profile(path), prefix_caching=True, table=load_table(t))
    result = run_replay(cfg, load_trace("trace.jsonl"))   # result.steps / .requests / .summary / .error

Engines.  The C library (``csrc/fpm_replay.c``, ``fpm_replay_run``) replays a
whole trace in one call; the pure-Python reference
(:mod:`fpmcore.replay.reference`, with :mod:`fpmcore.replay.prefix`) is its
oracle and runs instead when ``FPMCORE_PUREPYTHON=1`` is set.  Both take the
same checked :class:`ReplayConfig` and give identical records.  The summary
comes from the request records and the engine's R-35 totals; the R-34 step
records (``result.steps``) are built only when read: the C backend then
records the steps in a second call with exactly sized buffers.

Prefix caching (R-36 … R-38) keeps vLLM's block identities: the free queue,
reference counts, cached content keys, same-step Mamba states and eviction.
Without it the pool counts blocks (bytes in byte mode), which is all vLLM's
accounting needs when nothing is cached.

The align-stop rule (06 R-§4).  The C engine cannot call Python per step, so
it implements vLLM 0.33.0's ``_mamba_block_aligned_split`` (04 G-2 … G-6)
itself, parameterized by the deployment's Mamba groups (``ckpt_all`` and the
first group's ``prefill_checkpoint_alignment``), and vLLM's per-group
checkpoint reservation (R-6).  A model plugin's rule (the ``fpm_align_stop``
hook, e.g. the ``glm53flash`` plugin) is used by the Python reference:
``run_replay(cfg, trace, align_stop=fn)`` runs the reference with that rule.
``tests/replay/test_align_stop.py`` checks that the C rule, the reference's
and the installed plugin's agree on AS-1 … AS-19 and on random queries.

Deliberate differences from the letter of chapter 06 (each with its reason):

RD-1 (R-26)  A step that schedules nothing but preempted a request is no
    stall: the request is re-admitted at the next step, as in vLLM.
RD-2 (R-21)  The never-fit rejection is decided when a request becomes the
    waiting head, before its chunk (R-19); R-21 only says "before R-20".
RD-3 (R-35)  ``makespan_s`` is the last step's ``t_end`` minus the first
    step's ``t_start``; ``output_tokens_per_s`` and latency statistics are
    null when undefined; in byte mode ``max_full_context_requests`` is
    ``capacity_bytes // peak bytes``.  R-35 leaves these open.
RD-4 (R-32)  Lengths above 2**40 and arrivals after step 50,000,000 are
    refused (rule R-32): the engine's integers and the empty steps of R-25.
RD-5 (R-27)  A table file is a list of rows or ``{"rows": [...]}``; rows
    may carry ``dp_rank`` (the maximum over ranks is kept); malformed rows get
    ``latency table row <i>: ...`` diagnostics.
RD-6 (R-40)  vLLM reports finished requests one step late, so its loop makes
    one more, empty ``schedule()`` call; the replay ends with the last finish
    (R-23, R-25) and the differential comparison ignores that trailing step.
RD-7 (R-6)   A Mamba group reserves its checkpoint block only when the
    checkpoint column of its block table is free, as vLLM's
    ``_needs_internal_checkpoint`` requires; R-6 leaves this implicit.
RD-8 (R-35)  ``fpm replay --json`` adds ``"error"`` when the replay stopped.
"""

from importlib import import_module
from typing import Any

#: public name -> the submodule that defines it; loaded on first use, so that
#: registering ``fpm replay`` (which imports :mod:`fpmcore.replay.cli`) stays cheap.
_EXPORTS = {
    "check_config": "config", "config_from_profile": "config", "group_spec": "config", "make_config": "config",
    "ReplayChunk": "engine", "ReplayResult": "engine", "ReplayRun": "engine", "run_replay": "engine",
    "GroupSpec": "model", "LatencyTable": "model", "ReplayConfig": "model", "ReplayRequest": "model",
    "RuntimeRules": "rules", "default_rules": "rules",
    "load_table": "table", "table_from_rows": "table",
    "Trace": "trace", "TraceRequest": "trace", "from_sched_json": "trace", "load_trace": "trace",
    "parse_trace": "trace",
}  # fmt: skip

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'fpmcore.replay' has no attribute {name!r}")
    return getattr(import_module(f"fpmcore.replay.{module}"), name)
