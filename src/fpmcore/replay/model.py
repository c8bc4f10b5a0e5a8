"""Value types of the replay engine (06 R-1, R-27, R-32).

Both backends (the C library through :mod:`fpmcore.replay.engine` and the
Python reference :mod:`fpmcore.replay.reference`) take the same
:class:`ReplayConfig` and :class:`ReplayRequest` tuple and return the same
:class:`RawResult`; :mod:`fpmcore.replay.records` turns it into the R-34/R-35
records.  Everything here is already validated: the checks with diagnostics
live in :mod:`fpmcore.replay.config`, :mod:`fpmcore.replay.trace` and
:mod:`fpmcore.replay.table`.
"""

from __future__ import annotations

import contextlib
import gc
import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple, overload

import attrs

from fpmcore.replay.rules import ReplayRules, default_rules
from fpmcore.replay.settings import DEFAULT_MAX_STEPS as DEFAULT_MAX_STEPS
from fpmcore.replay.settings import DEFAULTS

# The C library's numbering (csrc/fpm_replay.h); tests/replay/test_c_library.py
# checks every value against the header.
KIND_FULL = 0  #: attention without a window
KIND_WINDOW = 1  #: attention with a sliding window
KIND_CONV = 2  #: convolution (always windowed)
KIND_RING = 3  #: state group without checkpoint fields (ring buffer)
KIND_MAMBA = 4  #: state group with checkpoint fields (Mamba / KDA)
KIND_CHUNK = 5  #: chunked-local attention: only the current chunk of ``window`` tokens is attended

# Arrival modes.
ARRIVE_STEP = 0  #: step-exact arrivals (``arrival_step``, or timed with fixed step seconds)
ARRIVE_TIME = 1  #: timed arrivals with a latency table (idle periods are no steps)

# Scheduling policies (vLLM ``--scheduling-policy``).
POLICY_FCFS = 0
POLICY_PRIORITY = 1
POLICIES = {"fcfs": POLICY_FCFS, "priority": POLICY_PRIORITY}

# Error codes of a replay that stops (R-9, R-26, R-27, the step limit).
ERR_OVERSIZED = 1
ERR_STALL = 2
ERR_NO_PHASE = 3
ERR_STEP_LIMIT = 4

# Reject reasons (R-12, R-21, vLLM's front-end queue limits).
REJ_PROMPT = 1
REJ_FINAL_FORWARD = 2
REJ_INPUT_SEQUENCE = 3
REJ_QUEUED_REQS = 4
REJ_QUEUED_TOKENS = 5

#: Bounds the C library checks at its boundary (FPM_MAX_* in csrc/fpm_replay.h).
MAX_TOKENS = 2**40
MAX_BYTES = 2**53
MAX_ARRIVAL_STEP = 2**40
MAX_STEPS = 2**40
MAX_PRIORITY = 2**62

# Request status in the raw result.
ST_FINISHED = 1
ST_REJECTED = 2

# Event kinds of a step.
EV_ADMITTED = 0
EV_PREEMPTED = 1
EV_FINISHED = 2
EV_REJECTED = 3


@attrs.frozen
class GroupSpec:
    """One cache group as the engine sees it (06 R-1, R-4)."""

    name: str
    kind: int
    block: int
    page: int
    window: int = 0  #: the sliding window of a windowed or convolution group, the chunk of a chunked-local one
    blocks_per_request: int = 0
    checkpoint_blocks: int = 0
    checkpoint_alignment: int = 0


@attrs.frozen
class LatencyTable:
    """A validated FPM table (R-27), sorted for lookup.

    ``prefill`` rows ``(batch_size, total_prefill_tokens, total_kv_read_tokens,
    wall_time_seconds)`` and ``decode`` rows ``(batch_size,
    total_kv_read_tokens, wall_time_seconds)``, each sorted by its
    coordinates.  ``shared_step_seconds`` is the time a step with both phases
    pays once although each phase's rows include it (the step's fixed cost,
    RD-16); 0 keeps R-31's additive mixed step.
    """

    prefill: tuple[tuple[int, int, int, float], ...]
    decode: tuple[tuple[int, int, float], ...]
    shared_step_seconds: float = 0.0


@attrs.frozen
class ReplayConfig:
    """The replay configuration of R-1, already checked by R-3.

    The scheduler settings carry vLLM's ``SchedulerConfig`` field names and
    defaults (``None``: vLLM's default, e.g. ``max_num_scheduled_tokens`` =
    ``max_num_batched_tokens``); ``reserve_full_isl`` is vLLM's
    ``scheduler_reserve_full_isl``.  ``rules`` are the runtime release's
    (:mod:`fpmcore.replay.rules`).  ``max_steps`` bounds the steps the
    engine executes one by one (a replay past it stops with a diagnostic).
    """

    groups: tuple[GroupSpec, ...]
    capacity_bytes: int
    max_num_batched_tokens: int
    max_num_seqs: int
    max_model_len: int
    enable_chunked_prefill: bool = DEFAULTS["enable_chunked_prefill"]
    reserve_full_isl: bool = DEFAULTS["reserve_full_isl"]
    watermark: float = DEFAULTS["watermark"]
    prefix_caching: bool = False
    hash_block_size: int = 0
    fixed_step_seconds: float | None = 1.0
    table: LatencyTable | None = None
    max_num_scheduled_tokens: int | None = DEFAULTS["max_num_scheduled_tokens"]
    max_num_active_seqs: int | None = DEFAULTS["max_num_active_seqs"]
    long_prefill_token_threshold: int = DEFAULTS["long_prefill_token_threshold"]
    long_prefill_token_threshold_adaptive: bool = DEFAULTS["long_prefill_token_threshold_adaptive"]
    prefill_schedule_interval: int = DEFAULTS["prefill_schedule_interval"]
    scheduling_policy: str = DEFAULTS["scheduling_policy"]
    max_num_queued_reqs: int | None = DEFAULTS["max_num_queued_reqs"]
    max_num_queued_tokens: int | None = DEFAULTS["max_num_queued_tokens"]
    max_steps: int = DEFAULTS["max_steps"]
    rules: ReplayRules = attrs.Factory(default_rules)

    @property
    def block_mode(self) -> bool:
        """R-2: every group page equals one common page."""
        return len({g.page for g in self.groups}) == 1

    @property
    def page(self) -> int:
        return self.groups[0].page

    @property
    def usable_blocks(self) -> int:
        """Pool blocks in block mode (0 in byte mode)."""
        return self.capacity_bytes // self.page if self.block_mode else 0

    @property
    def watermark_blocks(self) -> int:
        """R-7: ``floor(watermark × (usable_blocks + 1))``, as vLLM's ``int(w × num_blocks)``."""
        return int(self.watermark * (self.usable_blocks + 1)) if self.block_mode else 0

    @property
    def token_budget(self) -> int:
        """The tokens one step schedules at most: ``min(max_num_scheduled_tokens, max_num_batched_tokens)``."""
        if self.max_num_scheduled_tokens is None:
            return self.max_num_batched_tokens
        if self.rules.budget_scheduled_only:
            return self.max_num_scheduled_tokens
        return min(self.max_num_scheduled_tokens, self.max_num_batched_tokens)

    @property
    def fixed_request_bytes(self) -> int:
        """R-5: bytes of the state groups, charged once per request."""
        return sum(g.blocks_per_request * g.page for g in self.groups if g.kind in (KIND_RING, KIND_MAMBA))


class ReplayRequest(NamedTuple):
    """One trace request in engine form (R-32); a named tuple (one per request: cheap to make).

    ``arrival_step`` is the step it enters at (step-exact arrivals and timed
    arrivals with fixed step seconds); ``arrival_time`` is used with a
    latency table and timed arrivals.  ``origin`` and ``own_key`` describe
    the request's content (R-36; read only with prefix caching): tokens
    ``[0, q)`` carry the key of the first ``(upto, key)`` pair with
    ``q ≤ upto``, else ``own_key`` (:func:`fpmcore.replay.engine.origins`).
    """

    request_id: str
    prompt_len: int
    output_len: int
    arrival_step: int = 0
    arrival_time: float = 0.0
    origin: tuple[tuple[int, int], ...] = ()
    own_key: int = -1
    priority: int = 0


@attrs.frozen
class RawStep:
    """One step as the engine reports it (R-34 before formatting)."""

    step: int
    t_start: float
    t_end: float
    duration_s: float
    extrapolated: bool
    scheduled: tuple[tuple[int, int, int], ...]  # (request index, tokens, computed_before)
    num_prefill_requests: int
    sum_prefill_tokens: int
    sum_prefill_kv_tokens: int
    num_decode_requests: int
    sum_decode_kv_tokens: int
    events: tuple[tuple[int, int], ...]  # (EV_*, request index) in order
    running: int
    waiting: int
    used_bytes_scheduled: int
    used_bytes_end: int
    used_blocks_scheduled: int
    used_blocks_end: int
    held: tuple[tuple[int, tuple[int, ...]], ...]  # (request index, blocks per group)


class RawRequest(NamedTuple):
    """One request's outcome (R-35 before formatting); times are NaN when unset (a named tuple)."""

    status: int
    reject_reason: int
    reject_a: int
    reject_b: int
    arrival_time: float
    first_scheduled_time: float
    first_token_time: float
    finish_time: float
    output_tokens: int
    preemptions: int
    prefix_hit_tokens: int
    request: int = -1  #: the request's index in the trace


#: A request that has not completed (never arrived, or still queued when the replay stopped).
NOT_COMPLETED = RawRequest(0, 0, 0, 0, math.nan, math.nan, math.nan, math.nan, 0, 0, 0)


@attrs.frozen
class RawError:
    """A replay that stopped (R-9, R-26, R-27): the code and its numbers."""

    code: int
    values: tuple[Any, ...]


@attrs.frozen
class RawTotals:
    """The R-35 aggregates over the completed steps (the C engine counts them as it runs)."""

    first_t_start: float  #: ``t_start`` of the first step (0.0 without steps)
    last_t_end: float  #: ``t_end`` of the last step (0.0 without steps)
    preemptions: int  #: preemption events
    peak_running: int  #: max over steps of ``running`` + requests finished in the step
    peak_used_bytes: int  #: max ``used_bytes_scheduled``
    peak_used_blocks: int  #: max ``used_blocks_scheduled``
    extrapolated_steps: int


def totals_of(steps: Sequence[RawStep]) -> RawTotals:
    """:class:`RawTotals` of a list of steps (the reference's way; the C engine's must agree)."""
    return RawTotals(
        first_t_start=steps[0].t_start if steps else 0.0,
        last_t_end=steps[-1].t_end if steps else 0.0,
        preemptions=sum(1 for s in steps for k, _ in s.events if k == EV_PREEMPTED),
        peak_running=max((s.running + sum(1 for k, _ in s.events if k == EV_FINISHED) for s in steps), default=0),
        peak_used_bytes=max((s.used_bytes_scheduled for s in steps), default=0),
        peak_used_blocks=max((s.used_blocks_scheduled for s in steps), default=0),
        extrapolated_steps=sum(1 for s in steps if s.extrapolated),
    )


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while records are built in bulk.

    Building millions of small, acyclic lists and dicts would otherwise
    trigger full collections over an ever larger heap, which costs more than
    the building itself.
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


#: The per-step scalar fields of :class:`RawStep`, in :class:`StepColumns` order.
STEP_SCALARS = (
    "step", "t_start", "t_end", "duration_s", "extrapolated", "num_prefill_requests", "sum_prefill_tokens",
    "sum_prefill_kv_tokens", "num_decode_requests", "sum_decode_kv_tokens", "running", "waiting",
    "used_bytes_scheduled", "used_bytes_end", "used_blocks_scheduled", "used_blocks_end",
)  # fmt: skip


@attrs.frozen
class StepColumns:
    """Every step as columns: the form the step records are built from in bulk.

    ``scalars`` maps each name of :data:`STEP_SCALARS` to one value per step.
    Step ``i`` scheduled ``sched_*[sched_off[i] : sched_off[i] + sched_len[i]]``,
    had the events ``event_*[event_off[i] : …]`` and ended with the running
    requests ``held_req[held_off[i] : …]``; ``held_counts[g][j]`` is the
    blocks that entry ``j`` holds in group ``g``.
    """

    scalars: dict[str, list[Any]]
    sched_off: list[int]
    sched_len: list[int]
    sched_req: list[int]
    sched_tokens: list[int]
    sched_computed: list[int]
    event_off: list[int]
    event_len: list[int]
    event_kind: list[int]
    event_req: list[int]
    held_off: list[int]
    held_len: list[int]
    held_req: list[int]
    held_counts: list[list[int]]

    def __len__(self) -> int:
        return len(self.sched_off)

    def step(self, i: int) -> RawStep:
        """Step ``i`` as a :class:`RawStep`."""
        so, eo, ho = self.sched_off[i], self.event_off[i], self.held_off[i]
        se, ee, he = so + self.sched_len[i], eo + self.event_len[i], ho + self.held_len[i]
        kw = {name: col[i] for name, col in self.scalars.items()}
        kw["extrapolated"] = bool(kw["extrapolated"])
        return RawStep(
            scheduled=tuple(zip(self.sched_req[so:se], self.sched_tokens[so:se], self.sched_computed[so:se])),
            events=tuple(zip(self.event_kind[eo:ee], self.event_req[eo:ee])),
            held=tuple(zip(self.held_req[ho:he], zip(*(g[ho:he] for g in self.held_counts)))),
            **kw,
        )


def columns_of(steps: Sequence[RawStep], ngroups: int) -> StepColumns:
    """:class:`StepColumns` of a list of steps of a pool with ``ngroups`` cache groups."""
    c = StepColumns({name: [getattr(s, name) for s in steps] for name in STEP_SCALARS},
                    [], [], [], [], [], [], [], [], [], [], [], [], [[] for _ in range(ngroups)])  # fmt: skip
    for s in steps:
        c.sched_off.append(len(c.sched_req))
        c.sched_len.append(len(s.scheduled))
        for r, n, cb in s.scheduled:
            c.sched_req.append(r)
            c.sched_tokens.append(n)
            c.sched_computed.append(cb)
        c.event_off.append(len(c.event_kind))
        c.event_len.append(len(s.events))
        for k, r in s.events:
            c.event_kind.append(k)
            c.event_req.append(r)
        c.held_off.append(len(c.held_req))
        c.held_len.append(len(s.held))
        for r, h in s.held:
            c.held_req.append(r)
            for g, n in zip(c.held_counts, h, strict=True):
                g.append(n)
    return c


class LazySteps(Sequence[RawStep]):
    """The steps of a run, read on first use.

    The C backend knows the number of steps after its first call; the step
    columns (``load()``) come from the output buffers only when a caller
    asks for them.
    """

    def __init__(self, n: int, load: Callable[[], StepColumns]) -> None:
        self._n = n
        self._load: Callable[[], StepColumns] | None = load
        self._cols: StepColumns | None = None

    def columns(self, keep: bool = True) -> StepColumns:
        """The steps as :class:`StepColumns`; loaded once and kept, or with ``keep=False`` loaded
        for one use (the step records are built from them once: no second copy stays in memory)."""
        if self._cols is not None:
            return self._cols
        assert self._load is not None
        with gc_paused():
            cols = self._load()
        if len(cols) != self._n:
            raise RuntimeError(f"replay engine returned {len(cols)} steps, expected {self._n}")
        if keep:
            self._cols, self._load = cols, None
        return cols

    def __len__(self) -> int:
        return self._n

    @overload
    def __getitem__(self, i: int) -> RawStep: ...
    @overload
    def __getitem__(self, i: slice) -> tuple[RawStep, ...]: ...
    def __getitem__(self, i: int | slice) -> RawStep | tuple[RawStep, ...]:
        cols = self.columns()
        if isinstance(i, slice):
            return tuple(cols.step(j) for j in range(*i.indices(self._n)))
        if i < 0:
            i += self._n
        if not 0 <= i < self._n:
            raise IndexError("step index out of range")
        return cols.step(i)

    def __iter__(self) -> Iterator[RawStep]:
        cols = self.columns()
        return (cols.step(j) for j in range(self._n))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"<LazySteps: {self._n} steps>"


def step_columns(steps: Sequence[RawStep], ngroups: int, keep: bool = True) -> StepColumns:
    """The columns of a backend's steps: read from the C buffers, or built from :class:`RawStep` values."""
    return steps.columns(keep) if isinstance(steps, LazySteps) else columns_of(steps, ngroups)


@attrs.frozen
class RawResult:
    """What a backend returns: every step, every request, the stop error if any, and the R-35 totals.

    ``steps`` is a tuple (reference) or a :class:`LazySteps` (C backend);
    ``totals`` defaults to :func:`totals_of` the steps.
    """

    steps: Sequence[RawStep]
    requests: tuple[RawRequest, ...]
    error: RawError | None = None
    totals: RawTotals = attrs.field(default=attrs.Factory(lambda self: totals_of(self.steps), takes_self=True))


def concat_columns(parts: Sequence[StepColumns], ngroups: int) -> StepColumns:
    """The steps of consecutive chunks as one :class:`StepColumns` (offsets rebased)."""
    if len(parts) == 1:
        return parts[0]
    out = StepColumns({name: [] for name in STEP_SCALARS}, [], [], [], [], [], [], [], [], [], [], [], [],
                      [[] for _ in range(ngroups)])  # fmt: skip
    for p in parts:
        for name in STEP_SCALARS:
            out.scalars[name].extend(p.scalars[name])
        base_s, base_e, base_h = len(out.sched_req), len(out.event_kind), len(out.held_req)
        out.sched_off.extend(x + base_s for x in p.sched_off)
        out.event_off.extend(x + base_e for x in p.event_off)
        out.held_off.extend(x + base_h for x in p.held_off)
        for a, b in ((out.sched_len, p.sched_len), (out.sched_req, p.sched_req), (out.sched_tokens, p.sched_tokens),
                     (out.sched_computed, p.sched_computed), (out.event_len, p.event_len),
                     (out.event_kind, p.event_kind), (out.event_req, p.event_req), (out.held_len, p.held_len),
                     (out.held_req, p.held_req)):  # fmt: skip
            a.extend(b)
        for a, b in zip(out.held_counts, p.held_counts, strict=True):
            a.extend(b)
    return out


@attrs.frozen
class RawChunk:
    """What a backend reports after advancing a replay (:mod:`fpmcore.replay.engine`).

    ``steps`` holds the chunk's steps (``None`` when step records were not
    asked for), ``done`` the requests completed in the chunk (finished or
    rejected) in completion order.  The counts and ``totals`` cover every
    step so far; ``ended`` says the replay is over (``error`` when it stopped).
    """

    steps: StepColumns | None
    done: tuple[RawRequest, ...]
    steps_total: int
    completed_total: int
    ended: bool
    error: RawError | None
    totals: RawTotals
