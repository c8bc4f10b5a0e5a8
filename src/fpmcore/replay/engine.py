"""Run a trace through the replay engine: the C library or the Python reference.

Two entry points:

* :func:`run_replay` replays a whole trace and returns a
  :class:`ReplayResult` (the summary at once, the step records built when
  read);
* :class:`ReplayRun` replays it in chunks of steps, so that a caller can
  move a progress bar and stream step and request records to disk while the
  replay runs, with memory bounded by the trace (never by the steps).

The backend follows :mod:`fpmcore.replay.native` (``FPM_PUREPYTHON=1`` selects the
Python reference); ``backend=`` overrides it.

The align-stop rule (06 R-§4): the C engine has vLLM 0.33.0's Mamba align
split built in (04 G-2 … G-6), parameterized by the profile's Mamba groups
(``prefill_checkpoint_blocks`` / ``prefill_checkpoint_alignment``), because
it cannot call Python per step.  A model plugin's rule (the
``fpm_align_stop`` hook) is honoured by the Python reference: pass it as
``align_stop=``, and the run uses the reference engine with that rule.
"""

from __future__ import annotations

import gc
import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from itertools import islice
from typing import TYPE_CHECKING, Any, overload

import attrs

from fpmcore.documents.errors import FpmError
from fpmcore.replay import records
from fpmcore.replay.model import (
    ARRIVE_STEP,
    ARRIVE_TIME,
    MAX_TOKENS,
    RawChunk,
    RawError,
    RawResult,
    RawTotals,
    ReplayConfig,
    ReplayRequest,
)
from fpmcore.replay.trace import Trace, TraceRequest

if TYPE_CHECKING:  # imported where records are written as lines (--out), not by every replay
    from fpmcore.host.stage_hooktypes import AlignStopQuery
    from fpmcore.replay import record_lines


class BuiltOnRead(Sequence[dict[str, Any]]):
    """Records of a run that are built on first use (the base of :class:`StepRecords` and
    :class:`RequestRecords`).

    ``len()`` is known at once; indexing, iteration or comparison build every
    record once (``build()``).  ``list()`` it for a plain list (e.g. to
    serialise it).
    """

    _what = "records"

    def __init__(self, n: int, build: Callable[[], list[dict[str, Any]]]) -> None:
        self._build: Callable[[], list[dict[str, Any]]] | None = build
        self._n = n
        self._items: list[dict[str, Any]] | None = None

    def _list(self) -> list[dict[str, Any]]:
        if self._items is None:
            assert self._build is not None
            self._items = self._build()
            self._build = None
        return self._items

    def __len__(self) -> int:
        return self._n

    @overload
    def __getitem__(self, i: int) -> dict[str, Any]: ...
    @overload
    def __getitem__(self, i: slice) -> list[dict[str, Any]]: ...
    def __getitem__(self, i: int | slice) -> dict[str, Any] | list[dict[str, Any]]:
        return self._list()[i]

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self._list())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, BuiltOnRead):
            return self._list() == other._list()
        if isinstance(other, list):
            return self._list() == other
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"<{type(self).__name__}: {self._n} {self._what}{'' if self._items is not None else ', not built yet'}>"


class StepRecords(BuiltOnRead):
    """The R-34 step records of a run (:func:`fpmcore.replay.records.step_records`), built on first use."""

    _what = "steps"

    def __init__(self, cfg: ReplayConfig, ids: Sequence[str], raw: RawResult) -> None:
        super().__init__(len(raw.steps), lambda: records.step_records(cfg, ids, raw))


class RequestRecords(BuiltOnRead):
    """The R-35 request records of a run, in trace order (:func:`fpmcore.replay.records.request_records`),
    built on first use: the summary is made from the raw results without them
    (:func:`fpmcore.replay.records.add_completed`), so a caller that reads only the summary, as a sweep does,
    makes no record object."""

    _what = "requests"

    def __init__(self, trace_reqs: Sequence[Any], raw: RawResult, n: int) -> None:
        super().__init__(n, lambda: records.request_records(trace_reqs, raw))


@attrs.frozen
class ReplayResult:
    """The records of one run (R-34, R-35) and the stop diagnostic, if the run stopped.

    ``steps`` and ``requests`` are :class:`StepRecords` and :class:`RequestRecords` sequences: the R-34 and
    R-35 records are built only when they are read; the summary never needs them.
    """

    steps: StepRecords
    requests: RequestRecords
    summary: dict[str, Any]
    error: FpmError | None
    backend: str
    raw: RawResult = attrs.field(repr=False)


def arrival_step_for(t: float, s: float) -> int:
    """R-25: the first step ``k`` with ``k × s ≥ t`` (one double multiplication per candidate).

    Past 2**53 steps (far past the replay's limit, which the caller checks) a
    double cannot tell ``k`` from ``k - 1``: the quotient is the answer, in
    constant time (an arrival time of 1e308 is a refusal, not a hang).
    """
    q = t / s
    if not q <= 2**53:
        return int(q) if math.isfinite(q) else 2**1024
    k = max(int(math.ceil(q)), 0)
    while k > 0 and (k - 1) * s >= t:
        k -= 1
    while k * s < t:
        k += 1
    return k


class HashChains:
    """The keys of the chains of content-block ids seen so far: a trie per block size.

    ``tries[H][parent][id]`` is the key of the chain ``parent`` extended by ``id`` at
    block size ``H`` (the root's parent is ``-1``); keys are numbered from ``base`` in
    order of appearance.
    """

    __slots__ = ("base", "count", "tries")

    def __init__(self, base: int) -> None:
        self.base = base
        self.count = 0
        self.tries: dict[int, dict[int, dict[int, int]]] = {}


def hash_breakpoints(r: TraceRequest, chains: HashChains) -> tuple[tuple[int, int], ...]:
    """R-36 origin breakpoints of a request given as content-block ids (``hash_ids``).

    Block ``k`` of the request's ``hash_block_tokens`` ``H`` covers tokens
    ``[k·H, min((k+1)·H, prompt_len))``; its breakpoint is
    ``(min((k+1)·H, prompt_len), key)`` where the key names the chain of ids
    ``hash_ids[0..k]`` at block size ``H`` (vLLM's hash chain: a block's hash
    covers every block before it).  ``chains`` holds one key per distinct chain
    prefix of the trace (:class:`HashChains`).  So two requests share tokens ``[0, q)``
    exactly when their ids agree up to the block that holds token ``q − 1``
    and ``q`` is within both prompts (:func:`fpmcore.replay.trace.hash_id_count`).
    """
    assert r.hash_ids is not None and r.hash_block_tokens is not None
    H, p = r.hash_block_tokens, r.prompt_len
    trie = chains.tries.get(H)
    if trie is None:
        trie = chains.tries[H] = {}
    parent = -1
    keys: list[int] = []
    for block_id in r.hash_ids:
        kids = trie.get(parent)
        if kids is None:
            kids = trie[parent] = {}
        key = kids.get(block_id)
        if key is None:
            key = kids[block_id] = chains.base + chains.count
            chains.count += 1
        keys.append(key)
        parent = key
    return tuple(zip([min(u, p) for u in range(H, (len(keys) + 1) * H, H)], keys))


def origins(trace: Trace) -> tuple[list[tuple[tuple[int, int], ...]], list[int]]:
    """R-36 origin breakpoints and own keys of every request.

    Tokens ``[0, q)`` of a request carry the key of its first ``(upto, key)``
    pair with ``q ≤ upto``, else the request's own key.  Shared prefix ids get
    keys ``0 … S−1`` in order of appearance; request ``i``'s own key is
    ``S + i``; the chains of content-block ids (``hash_ids``) get keys from
    ``S + n`` on, in order of appearance (:func:`hash_breakpoints`).
    """
    shared: dict[str, int] = {}
    any_prefix_of = any_hash = False
    for r in trace.requests:
        if r.shared_prefix_id is not None:
            shared.setdefault(r.shared_prefix_id, len(shared))
        any_prefix_of = any_prefix_of or r.prefix_of is not None
        any_hash = any_hash or r.hash_ids is not None
    base = len(shared)
    n = len(trace.requests)
    if not shared and not any_prefix_of and not any_hash:
        return [()] * n, list(range(base, base + n))
    index = {r.request_id: i for i, r in enumerate(trace.requests)} if any_prefix_of else {}
    chains = HashChains(base + n)
    out: list[tuple[tuple[int, int], ...]] = []
    for r in trace.requests:
        if r.shared_prefix_id is not None:
            out.append(((int(r.shared_prefix_len or 0), shared[r.shared_prefix_id]),))
        elif r.hash_ids is not None:
            out.append(hash_breakpoints(r, chains))
        elif r.prefix_of is not None:
            lim = int(r.prefix_of_len or 0)
            src = index[r.prefix_of]
            bps: list[tuple[int, int]] = []
            for upto, key in out[src]:
                if upto >= lim:
                    bps.append((lim, key))
                    break
                bps.append((upto, key))
            else:
                bps.append((lim, base + src))
            out.append(tuple(bps))
        else:
            out.append(())
    return out, list(range(base, base + n))


#: Largest arrival step of a trace: every step up to it has a record (R-25),
#: which the Python reference always makes.
MAX_ARRIVAL_STEP = 50_000_000


def arrival_mode(cfg: ReplayConfig, trace: Trace) -> int:
    """R-25: step-exact arrivals (``arrival_step``, or timed with fixed step seconds), or timed with a table."""
    return ARRIVE_STEP if trace.step_exact or cfg.fixed_step_seconds is not None else ARRIVE_TIME


def iter_engine_requests(cfg: ReplayConfig, trace: Trace) -> Iterator[ReplayRequest]:
    """The trace's requests in engine form, one at a time (R-25, R-36).

    Refuses (rule ``R-32``) lengths above :data:`~fpmcore.replay.model.MAX_TOKENS`
    (the engine's integers) and arrivals after step :data:`MAX_ARRIVAL_STEP`.
    """
    make = partial(tuple.__new__, ReplayRequest)  # ReplayRequest(*fields) without the named tuple's Python frame
    for columns in engine_batches(cfg, trace):
        yield from map(make, zip(*columns))


#: Requests put in engine form at once by :func:`engine_batches`.
ENGINE_BATCH = 4096


def engine_batches(cfg: ReplayConfig, trace: Trace) -> Iterator[tuple[Sequence[Any], ...]]:
    """The trace's requests in engine form, :data:`ENGINE_BATCH` at a time, as columns: the fields of
    :class:`~fpmcore.replay.model.ReplayRequest` in its order, a sequence each (what :func:`iter_engine_requests`
    makes requests of, and the C engine's marshalling reads as they are).

    A field of a batch is read in one pass, which on a large trace costs several times less than a Python loop
    per request.  A batch with a request out of bounds (``R-32``, see :func:`iter_engine_requests`) is read again
    one request at a time, which names the first such request.
    """
    if cfg.prefix_caching:
        origin, own = origins(trace)
    else:  # the engine reads no content origin without prefix caching
        origin, own = [()] * len(trace.requests), list(range(len(trace.requests)))
    step_exact = trace.step_exact
    step_seconds = cfg.fixed_step_seconds if arrival_mode(cfg, trace) == ARRIVE_STEP else None
    it = iter(trace.requests)
    lo = 0
    while batch := list(islice(it, ENGINE_BATCH)):
        hi = lo + len(batch)
        if step_exact:
            steps = [int(r.arrival_step or 0) for r in batch]
            times = [0.0] * len(batch)
        else:
            times = [float(r.arrival_time or 0.0) for r in batch]
            steps = [arrival_step_for(t, step_seconds) for t in times] if step_seconds is not None else [0] * len(batch)
        prompt = [r.prompt_len for r in batch]
        output = [r.output_len for r in batch]
        if max(prompt) > MAX_TOKENS or max(output) > MAX_TOKENS or max(steps) > MAX_ARRIVAL_STEP:
            for i, r, step in zip(range(lo, hi), batch, steps):
                _check_engine_bounds(i, r, step)
        yield ([r.request_id for r in batch], prompt, output, steps, times, origin[lo:hi], own[lo:hi],
               [r.priority or 0 for r in batch])  # fmt: skip
        lo = hi


def _check_engine_bounds(i: int, r: TraceRequest, step: int) -> None:
    """R-32: request ``i`` (``r``, arriving at step ``step``) within the engine's integers and arrival steps."""
    if r.prompt_len > MAX_TOKENS or r.output_len > MAX_TOKENS:
        name, v = ("prompt_len", r.prompt_len) if r.prompt_len > MAX_TOKENS else ("output_len", r.output_len)
        raise FpmError("R-32", f"trace line {i + 1}: {name} {v} exceeds the replay limit {MAX_TOKENS}")
    if step > MAX_ARRIVAL_STEP:
        raise FpmError(
            "R-32",
            f"trace line {i + 1}: arrival at step {step:,} is beyond the last arrival step a trace may have, "
            f"{MAX_ARRIVAL_STEP:,} (a limit of arrivals, apart from --max-steps, which bounds the steps run)",
        )


def engine_requests(cfg: ReplayConfig, trace: Trace) -> tuple[tuple[ReplayRequest, ...], int]:
    """The trace in engine form and its arrival mode (:func:`iter_engine_requests`)."""
    return tuple(iter_engine_requests(cfg, trace)), arrival_mode(cfg, trace)


def default_backend() -> str:
    from fpmcore.replay import native

    return native.BACKEND


def _backend(backend: str | None, align_stop: Callable[[AlignStopQuery], int] | None) -> str:
    if backend is None:
        backend = "python" if align_stop is not None else default_backend()
    if backend == "c" and align_stop is not None:
        raise ValueError("a model align-stop rule runs only in the Python reference (backend='python')")
    if backend not in ("c", "python"):
        raise ValueError(f"unknown replay backend {backend!r}")
    return backend


def run_replay(
    cfg: ReplayConfig,
    trace: Trace,
    *,
    backend: str | None = None,
    align_stop: Callable[[AlignStopQuery], int] | None = None,
) -> ReplayResult:
    """Replay ``trace`` under ``cfg`` and format the records (R-34, R-35).

    Python's cyclic garbage collector is paused while the call runs (:func:`collector_paused`).
    """
    with collector_paused():
        return _run_replay(cfg, trace, backend, align_stop)


@contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off inside the block, and on again after it if it was on.

    A replay makes a few objects per request (its engine form, its outcome, its latencies), none of them
    part of a reference cycle, and the collector, which runs after every few hundred new objects, would
    traverse them again and again: a tenth of a large replay's time (20,000 requests: 23 ms of 230 ms).
    Other threads of the process see the collector off meanwhile; reference counting still frees what they
    drop, and a cycle they leave is collected later.
    """
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


def _run_replay(
    cfg: ReplayConfig,
    trace: Trace,
    backend: str | None,
    align_stop: Callable[[AlignStopQuery], int] | None,
) -> ReplayResult:
    used = _backend(backend, align_stop)
    if used == "c":  # marshalled from the engine-form columns: no request object
        from fpmcore.replay import cengine

        raw = cengine.run_c(cfg, (), arrival_mode(cfg, trace), len(trace.requests), engine_batches(cfg, trace))
    else:
        from fpmcore.replay.reference import run_reference

        raw = run_reference(cfg, *engine_requests(cfg, trace), align_stop)
    ids = trace.request_ids()
    stats = records.RequestStats()
    records.add_completed(stats, [r for r in raw.requests if r.status != 0], trace.arrival_times(), ids)
    summ = records.summary_of(cfg, stats, raw.totals, len(raw.steps))
    err = records.error_of(raw.error) if raw.error is not None else None
    return ReplayResult(steps=StepRecords(cfg, ids, raw), requests=RequestRecords(trace.requests, raw, stats.requests),
                        summary=summ, error=err, backend=used, raw=raw)  # fmt: skip


@attrs.frozen
class ReplayChunk:
    """The records of one chunk of a :class:`ReplayRun`.

    ``steps`` are the R-34 records of the chunk's steps, in step order (empty
    when the run was opened with ``steps=False``); ``requests`` the R-35
    records of the requests completed (finished or rejected) in the chunk, in
    completion order, made when first read (:class:`BuiltOnRead`: the run's
    summary is aggregated without them).  ``first_step`` is the step number of
    the chunk's first record.
    """

    first_step: int
    steps: list[dict[str, Any]]
    requests: Sequence[dict[str, Any]]


class ReplayRun:
    """A replay in progress, advanced in chunks of steps (06 R-25 … R-35).

    Use it to show progress and to stream the records of a long replay while
    it runs; memory stays bounded by the trace, never by the number of steps::

        run = ReplayRun(cfg, trace, steps=True)
        while not run.ended:
            chunk = run.advance(4096)              # up to 4,096 more steps
            write_steps(chunk.steps)               # R-34 records of those steps
            write_requests(chunk.requests)         # R-35 records completed in them
            bar.update(task, completed=run.requests_completed, total=run.requests_total)
        summary, error = run.summary(), run.error  # R-35 summary; the stop diagnostic or None

    Iterating (``for chunk in run``) advances by :attr:`chunk_steps` until
    the replay ends.  Both backends give the same chunks as :func:`run_replay`
    gives records.  With ``steps=False`` no step record is made: the C engine
    then jumps over idle periods and decode-only stretches (a chunk may cover
    many more steps than asked), and :meth:`advance` returns only request
    records.  :meth:`advance_lines` gives a chunk's records as JSON lines
    instead (``fpm replay --out``).  ``backend`` and ``align_stop`` are those
    of :func:`run_replay`.
    """

    chunk_steps = 4096

    def __init__(
        self,
        cfg: ReplayConfig,
        trace: Trace,
        *,
        steps: bool = True,
        backend: str | None = None,
        align_stop: Callable[[AlignStopQuery], int] | None = None,
    ) -> None:
        self.cfg = cfg
        # the trace fields of request i's record: its line, or a column view of it
        self._fields = trace.requests.__getitem__ if trace.columns is None else trace.columns.fields
        self._arrival_times = trace.arrival_times()
        self._trace = trace
        # the names of the step records and of the reject reasons (a trace of columns makes each when it is read)
        self._names = trace.request_ids()
        self._ids: Sequence[str] = self._names if steps else []
        self._with_steps = steps
        self.backend = _backend(backend, align_stop)
        mode = arrival_mode(cfg, trace)
        if self.backend == "c":  # marshalled a batch of columns at a time, or from the trace's columns
            from fpmcore.replay.cengine import CReplay, _lib, _marshal

            inputs = None
            if trace.columns is not None:
                from fpmcore.replay.column_engine import column_inputs

                inputs = column_inputs(*_lib(), cfg, trace, mode, MAX_ARRIVAL_STEP)
            if inputs is None:  # requests, or columns with one beyond the engine's bounds (refused here)
                inputs = _marshal(_lib()[0], cfg, (), len(trace.requests), engine_batches(cfg, trace))
            self._engine: Any = CReplay(cfg, (), mode, len(trace.requests), inputs)
        else:
            from fpmcore.replay.reference import ReferenceEngine

            self._engine = ReferenceEngine(cfg, engine_requests(cfg, trace)[0], mode, align_stop)
        self._stats = records.RequestStats()
        #: Requests in the trace.
        self.requests_total = len(trace.requests)
        #: Requests completed (finished or rejected) so far.
        self.requests_completed = 0
        #: Steps replayed so far (the number of the next step).
        self.steps_done = 0
        #: The replay is over: every request completed, or it stopped (:attr:`error`).
        self.ended = not trace.requests
        self._raw_error: RawError | None = None
        self._totals: RawTotals | None = None
        self._lines: Any = None  # the C engine's record writer, made on the first advance_lines

    def advance(self, max_steps: int | None = None) -> ReplayChunk:
        """Replay up to ``max_steps`` more steps (default :attr:`chunk_steps`); their records."""
        if self.ended:
            return ReplayChunk(self.steps_done, [], [])
        n = self.chunk_steps if max_steps is None else max_steps
        if n < 1:
            raise ValueError(f"max_steps must be positive, got {n}")
        raw: RawChunk = self._engine.advance(n, self._with_steps)
        first = self.steps_done
        step_recs = records.step_records_of(self.cfg, self._ids, raw.steps) if raw.steps is not None else []
        records.add_completed(self._stats, raw.done, self._arrival_times, self._names)
        self._account(raw)
        fields, done = self._fields, raw.done
        reqs = BuiltOnRead(len(done), lambda: [records.request_record(fields(r.request), r) for r in done])
        return ReplayChunk(first, step_recs, reqs)

    def advance_lines(self, max_steps: int | None = None, *, requests: bool = False) -> record_lines.RecordLines:
        """:meth:`advance`, its records as JSON lines (what :func:`~fpmcore.documents.jsonio.dumps_output` writes of them);
        the C engine writes them without a record object (:mod:`fpmcore.replay.record_lines`).  ``requests``:
        the request records as objects too (``request_records``)."""
        from fpmcore.replay import record_lines

        if self._lines is None and self.backend == "c":
            fields = record_lines.trace_fields(self._trace)
            self._lines = record_lines.LineWriter(self.cfg, fields, self._names, self._stats) if fields else False
        if not self._lines or self.ended:
            from fpmcore.documents.jsonio import dumps_output

            chunk = self.advance(max_steps)
            return record_lines.RecordLines(chunk.first_step, b"".join(map(dumps_output, chunk.steps)),
                                            b"".join(map(dumps_output, chunk.requests)),
                                            list(chunk.requests) if requests else None)  # fmt: skip
        n = self.chunk_steps if max_steps is None else max_steps
        if n < 1:
            raise ValueError(f"max_steps must be positive, got {n}")
        raw, step_lines, request_lines = self._engine.advance_lines(n, self._with_steps, self._lines, requests)
        first = self.steps_done
        self._account(raw)
        recs = [records.request_record(self._fields(r.request), r) for r in raw.done] if requests else None
        return record_lines.RecordLines(first, step_lines, request_lines, recs)

    def _account(self, raw: RawChunk) -> None:
        self.steps_done = raw.steps_total
        self.requests_completed = raw.completed_total
        self.ended = raw.ended
        self._raw_error = raw.error
        self._totals = raw.totals

    def __iter__(self) -> Iterator[ReplayChunk]:
        while not self.ended:
            yield self.advance()

    @property
    def error(self) -> FpmError | None:
        """The diagnostic of a replay that stopped (R-9, R-26, R-27, the step limit), else ``None``."""
        return records.error_of(self._raw_error) if self._raw_error is not None else None

    @property
    def first_rejections(self) -> dict[str, str]:
        """The reason of the first rejected request of each kind so far (``rejected_by_reason``'s keys)."""
        return dict(self._stats.first_rejection)

    def summary(self) -> dict[str, Any]:
        """The R-35 summary of the steps and requests so far (of the whole replay once it :attr:`ended`)."""
        tot = self._totals or RawTotals(0.0, 0.0, 0, 0, 0, 0, 0)
        return records.summary_of(self.cfg, self._stats, tot, self.steps_done)
