"""fpmcore.replay: the grouped KV pool, vLLM 0.33.0 scheduler loop and FPM latency model (06).

Public API::

    from fpmcore.documents.profile import load_profile
    from fpmcore.replay import ReplayRun, config_from_profile, load_table, load_trace, run_replay

    cfg = config_from_profile(load_profile(path), prefix_caching=True, table=load_table(t),
                              long_prefill_token_threshold=2048, scheduling_policy="priority")
    result = run_replay(cfg, load_trace("trace.jsonl"))   # result.steps / .requests / .summary / .error
                                                          # (the records are built when first read)

    run = ReplayRun(cfg, load_trace("trace.jsonl"))       # the same replay in chunks of steps
    for chunk in run:                                     # chunk.steps, chunk.requests: records to stream
        ...                                               # run.steps_done, run.requests_completed: progress
    run.summary(), run.error

Engines.  The C library (``csrc/``: ``fpm_replay_open``, ``fpm_replay_advance``,
``fpm_replay_close``) and its Python reference mirror each other file by file
and phase by phase: :mod:`~fpmcore.replay.reference` (the scheduler loop,
``fpm_replay.c``), :mod:`~fpmcore.replay.pool` (the block-count pool,
``fpm_pool.c``), :mod:`~fpmcore.replay.prefix` (the prefix-caching pool,
``fpm_prefix.c`` and its lookup ``fpm_prefix_lookup.c``),
:mod:`~fpmcore.replay.latency` (``fpm_latency.c``) and
:mod:`~fpmcore.replay.align` (``fpm_align.c``).  ``FPM_PUREPYTHON=1`` runs the
reference instead of C.  Both take the same checked :class:`ReplayConfig` and give
identical records.  :func:`run_replay` computes the summary in one pass
without step records (the C engine then jumps over idle periods and
decode-only stretches) and builds the R-34 step records only when they are
read.  :class:`ReplayRun` advances a replay in chunks of steps; its memory is
bounded by the trace, never by the steps.

The rules that differ between runtime releases are a
:class:`~fpmcore.replay.rules.ReplayRules` value (``ReplayConfig.rules``;
:func:`~fpmcore.replay.rules.default_rules` gives vLLM 0.33.0's).

Prefix caching (R-36 … R-38) keeps vLLM's block identities: the free queue,
reference counts, cached content keys, same-step Mamba states and eviction,
for every group kind.  Without it the pool counts blocks (bytes in byte
mode), which is all vLLM's accounting needs when nothing is cached.

The align-stop rule (06 R-§4).  The C engine cannot call Python per step, so
it implements vLLM 0.33.0's ``_mamba_block_aligned_split`` (04 G-2 … G-6)
itself, parameterized by the deployment's Mamba groups (``ckpt_all`` and the
first group's ``prefill_checkpoint_alignment``), and vLLM's per-group
checkpoint reservation (R-6).  A model plugin's rule (the ``fpm_align_stop``
hook, e.g. the ``glm53flash`` plugin) is used by the Python reference:
``run_replay(cfg, trace, align_stop=fn)`` runs the reference with that rule.
``tests/replay/test_align_stop.py`` checks that the C rule, the reference's
and the installed plugin's agree on AS-1 … AS-19 and on random queries.

Deliberate differences from the letter of chapter 06 (each with its reason;
where vLLM 0.33.0 and the chapter disagree, the engine follows vLLM):

RD-1 (R-26)  A step that schedules nothing but preempted a request is no
    stall: the request is re-admitted at the next step, as in vLLM.
RD-2 (R-21)  The never-fit rejection is decided when a request becomes the
    waiting head, before its chunk (R-19); R-21 only says "before R-20".
RD-3 (R-35)  ``makespan_s`` is the last step's ``t_end`` minus the first
    step's ``t_start``; ``output_tokens_per_s`` and latency statistics are
    null when undefined; in byte mode ``max_full_context_requests`` is
    ``capacity_bytes // peak bytes``.  R-35 leaves these open.
RD-4 (R-32)  Lengths above 2**40 and arrivals after step 50,000,000 are
    refused (rule R-32): the engine's integers, and the empty steps of R-25
    that the Python reference replays one by one.  The C library bounds every
    input itself (``FPM_MAX_*`` in ``csrc/fpm_replay.h``).
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
RD-9 (R-3, R-36 … R-38)  Prefix caching works with sliding-window and
    convolution groups (R-3 refused them), as vLLM's ``SlidingWindowManager``
    does it: a hit at ``h`` needs the ``cdiv(W − 1, B)`` blocks below ``h``
    cached (or every block from the start); blocks that leave the window
    become null and are freed before the free-space check (R-7 step 1), one
    batch per group, highest first; of a request's blocks only the run a later
    hit needs below its replay boundary ``P − 1`` and below its junction is
    cached (vLLM's ``prefix_cache_retention_interval`` 0), the others are
    freed to the front of the queue.  The hit of a request is the fixed point
    of vLLM's ``HybridKVCacheCoordinator``: full attention first, then every
    windowed group and the Mamba groups until none shortens it; the junction
    (R-36) is the first cacheable group's hit when it is longer, for every
    model with two or more groups.  Every attention, convolution and Mamba
    group must use one block size (vLLM schedules by the groups' least
    common multiple; refused with a diagnostic).
RD-10 (R-20) With prefix caching, a windowed group's share of the full-input
    gate is ``max(min(cdiv(N, B), cap) − h / B, 0)`` plus its evictable hit
    blocks (vLLM subtracts the hit from the capped count); R-20 omits the hit.
RD-11 (R-13, R-14, R-18 … R-22)  vLLM 0.33.0's scheduler settings
    (``ReplayConfig``): a step schedules at most
    ``min(max_num_scheduled_tokens, max_num_batched_tokens)`` tokens;
    ``long_prefill_token_threshold`` caps every chunk while more than one
    request runs or waits (its adaptive form floors the cap at
    ``max_num_batched_tokens`` divided by them); the align split's chunk
    limit is ``min(max_num_scheduled_tokens, long_prefill_token_threshold)``;
    ``max_num_active_seqs`` bounds admissions into running;
    ``prefill_schedule_interval`` N defers prefill (running prefill chunks, and
    admissions with more than one token to compute) until N executed steps
    have passed since the last step that carried prefill, unless the last
    admission pass could not drain the waiting queue; the ``priority`` policy
    orders the waiting queue by (``priority``, arrival order), preempts the
    running request with the largest (``priority``, arrival order), returns
    the tokens of a victim already scheduled in the step to the budget, and
    goes on with the next running request after one that preempted itself.
RD-12 (R-12, R-25)  ``max_num_queued_reqs`` / ``max_num_queued_tokens`` reject
    an arrival as vLLM's API server does (``AsyncLLM.check_admission``,
    before the prompt-length check of R-12): when the unfinished requests
    plus one exceed the limit, or when the prompt tokens of unfinished
    requests that have produced no token reach it.
RD-13 (R-25)  A replay stops at ``max_steps`` steps (default 10**9) with
    ``replay stopped at step <k>: it reached its limit of <n> steps; raise it
    with --max-steps`` (rule R-25).  Without step records the C engine jumps
    over idle periods and decode-only stretches (the same totals and request
    records as stepping through them); jumped steps count toward the limit,
    so a replay stops at the same step with and without records.
RD-14 (R-40)  The verified envelope: every group kind with prefix caching on
    and off, shared prefixes under preemption, eviction and resumption, and
    every scheduler setting above (``tests/replay/test_vllm_real.py``).  Left
    out: asynchronous scheduling (vLLM's engine core schedules a step ahead
    with output placeholders, a different step sequence the replay does not
    model), speculative decoding, KV connectors, LoRA, multimodal and
    structured outputs, data parallelism.
RD-15 (R-1, R-40)  Semantics per runtime release.  The rules above are
    vLLM 0.33.0's; a replay follows the rules of the profile's runtime
    (``backend_version``) as its runtime plugin gives them
    (``fpm_replay_rules``, :class:`~fpmcore.replay.rules.ReplayRules`), and
    a runtime without them is refused (R-1), naming the installed runtimes
    that have them.  vLLM 0.27.0 caps every chunk by
    ``long_prefill_token_threshold`` (also a request alone), budgets a step by
    ``max_num_scheduled_tokens`` alone, ends the priority scan after a
    self-preemption and moves it back only for a victim already scheduled,
    caches every full windowed and Mamba block, puts the align split's last
    stop at or below the tokens, and has no ring groups, Mamba checkpoint
    blocks, ``max_num_active_seqs``, adaptive threshold or queue limits
    (and ``prefill_schedule_interval`` only with data parallelism); vLLM
    0.32.0 ends the priority scan after a self-preemption, keys a Mamba
    state at the prompt's last cacheable boundary again when its request is
    scheduled from there (a hit ending there waits one more step, R-37), and
    has no single-engine ``prefill_schedule_interval``.  Each release is
    checked against its own ``Scheduler`` (``tools/replay_vs_vllm.py``):
    vLLM 0.33.0: 300 of 300 random traces identical, 36,282 steps, 373
    preemptions, 183 prefix hits, 316 rejections; vLLM 0.32.0: 300 of 300
    random traces identical, 36,726 steps, 406 preemptions, 171 prefix
    hits, 308 rejections; vLLM 0.27.0: 300 of 300 random traces identical,
    39,732 steps, 561 preemptions, 221 prefix hits, 0 rejections (docs:
    Replaying a trace).
RD-16 (R-31)  A table may carry ``shared_step_seconds`` ``S`` (``fpm
    publish`` writes the smallest decode row's wall time): a step with both
    phases lasts ``P + D − min(S, P, D)`` instead of ``P + D``.  Every row is
    the time of a whole engine step, so each phase's value includes the cost
    every step pays whatever its tokens (scheduling, input preparation,
    reading the weights, sampling, output processing); a mixed step is one
    forward and pays it once.  Measured on the vLLM 0.32.0 CPU engine with
    the tiny plain model under queueing: the additive rule over-predicted
    mixed steps by the decode phase's ≈ 7–11 ms, of which ≈ 7 ms is that cost.
    Without the field (GLM tables, spec test vectors) the step is ``P + D``.
RD-17 (R-4, R-20, R-37, R-38)  Chunked-local attention groups (vLLM's
    ``ChunkedLocalAttentionSpec``, Llama 4): an attention group with
    ``attention_chunk_size`` ``C`` attends only to the current chunk, so
    from computed ``c`` it needs the blocks from ``(c // C · C) // B`` on
    (``ChunkedLocalAttentionManager.get_num_skipped_tokens``); the blocks
    before are released before the free-space check as a window's are.  Its
    share of the full-input gate is capped at ``cdiv(min(C + T, L), B)``
    blocks, without a window's alignment block
    (``max_admission_blocks_per_request``).  Its hit at most ``x``: the
    chunks before the one of ``x`` count as hit without a lookup, then the
    cached blocks of that chunk from its start until the first miss; ``x``
    is the request's length less one while no group has shortened the hit
    (vLLM's first candidate, read unaligned).  Every full block it holds is
    cached (vLLM's base ``reachable_block_mask``).  Checked against vLLM
    0.33.0's own Scheduler (``tools/replay_vs_vllm.py --kinds chunk``, chunks
    of 16 … 100 tokens on 16-token blocks, alone or beside full attention):
    60 of 60 random traces identical, 6,034 steps, 49 preemptions, 63
    prefix hits, 42 rejections.
"""

from importlib import import_module
from typing import Any

#: public name -> the submodule that defines it; loaded on first use, so that
#: registering ``fpm replay`` (which imports :mod:`fpmcore.replay.command`) stays cheap.
_EXPORTS = {
    "check_config": "config", "config_from_profile": "config", "group_spec": "config", "make_config": "config",
    "runtime_pin": "config",
    "ReplayChunk": "engine", "ReplayResult": "engine", "ReplayRun": "engine", "run_replay": "engine",
    "GroupSpec": "model", "LatencyTable": "model", "ReplayConfig": "model", "ReplayRequest": "model",
    "ReplayRules": "rules", "default_rules": "rules",
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
