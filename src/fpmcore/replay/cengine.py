"""The C replay engine through cffi (``csrc/fpm_replay.c``).

:class:`CReplay` marshals a checked :class:`~fpmcore.replay.model.ReplayConfig`
and the engine-form requests into the C structs, opens a replay
(``fpm_replay_open``) and advances it in chunks (``fpm_replay_advance``),
unpacking each chunk's records column-wise from reusable output buffers.
:func:`run_c` runs a whole trace: one pass without step records (the engine
jumps over idle periods and decode-only stretches), and the step records
only when a caller asks for them (:class:`~fpmcore.replay.model.LazySteps`:
a second pass in chunks).  Inputs are validated before they reach C
(:func:`fpmcore.replay.config.check_config`, the trace and table parsers); a
status other than ``FPM_OK``/``FPM_ENOSPC`` is a programming error and raises.
"""

from __future__ import annotations

import struct
from array import array
from collections.abc import Callable, Iterable, Sequence
from functools import cache, partial
from itertools import accumulate, chain, islice
from typing import Any, ClassVar

from fpmcore.replay.model import (
    ERR_NO_PHASE,
    ERR_OVERSIZED,
    ERR_STALL,
    ERR_STEP_LIMIT,
    NOT_COMPLETED,
    POLICIES,
    STEP_SCALARS,
    LazySteps,
    RawChunk,
    RawError,
    RawRequest,
    RawResult,
    RawTotals,
    ReplayConfig,
    ReplayRequest,
    StepColumns,
    concat_columns,
)
from fpmcore.replay.rules import SWITCHES

#: The C fields read back and their memoryview formats ("q" int64, "d" double, "i" int32).
_STEP_FORMAT = {"t_start": "d", "t_end": "d", "duration_s": "d", "extrapolated": "i"}
_STEP_FIELDS = tuple((name, _STEP_FORMAT.get(name, "q")) for name in STEP_SCALARS) + (
    ("sched_off", "q"), ("sched_len", "q"), ("event_off", "q"), ("event_len", "q"), ("held_off", "q"), ("held_len", "q"),
)  # fmt: skip
_WIDTH = {"q": 8, "d": 8, "i": 4}
#: Steps of one recording call of :func:`run_c`'s step pass.
STEP_CHUNK = 65536


def _lib() -> tuple[Any, Any]:  # imported lazily: FPM_PUREPYTHON=1 runs without the build
    from fpmcore.replay._native import ffi, lib

    return ffi, lib


#: The fields of the C request, in its order (:func:`_packing` checks them against the build).
_REQUEST_IN = ("prompt_len", "output_len", "arrival_step", "arrival_time", "own_key", "origin_off", "origin_len",
               "priority")  # fmt: skip
_CODES = {"int64_t": "q", "double": "d", "int32_t": "i"}
#: A :class:`RawRequest` of a tuple of its fields (``RawRequest._make`` without its Python frame).
_raw_request = partial(tuple.__new__, RawRequest)


@cache
def _packing(ctype: str, names: tuple[str, ...]) -> struct.Struct:
    """The :mod:`struct` layout of the C struct ``ctype`` as the build laid it out (pad bytes where the compiler put
    them), whose fields must be ``names`` in that order: many structs are packed into, or read from, one buffer with
    it, without a Python call per field (the records' field order is :class:`RawRequest`'s)."""
    ffi, _lib_ = _lib()
    t = ffi.typeof(ctype)
    if tuple(name for name, _ in t.fields) != names:
        raise RuntimeError(f"the C library's {ctype} has the fields {[n for n, _ in t.fields]}, not {list(names)}")
    fmt, at = "=", 0
    for _name, f in t.fields:
        if f.offset > at:
            fmt += f"{f.offset - at}x"
        fmt += _CODES[f.type.cname]
        at = f.offset + ffi.sizeof(f.type)
    if ffi.sizeof(t) > at:
        fmt += f"{ffi.sizeof(t) - at}x"
    layout = struct.Struct(fmt)
    assert layout.size == ffi.sizeof(t), (ctype, fmt)
    return layout


#: Requests marshalled at once by :func:`_marshal`: each field of a batch written in one strided store.
_MARSHAL_BATCH = 4096


@cache
def _request_filler(ffi: Any) -> Callable[..., None]:
    """A function that stores the fields of requests ``lo`` … ``hi - 1`` of an ``fpm_replay_request`` array (its
    bytes ``mem``), a column per field (``prompt_len=[...]``, …), each in one strided store."""
    _packing("fpm_replay_request", _REQUEST_IN)  # the build's fields are the ones written here, in this order
    t = ffi.typeof("fpm_replay_request")
    size = ffi.sizeof(t)
    layout = []
    for name, f in t.fields:
        code, width = _CODES[f.type.cname], ffi.sizeof(f.type)
        assert f.offset % width == 0 and size % width == 0 and width == 8
        layout.append((name, code, f.offset // width, size // width))

    def fill(mem: memoryview, lo: int, hi: int, **columns: Sequence[Any]) -> None:
        views = {code: mem.cast(code) for code in ("q", "d")}
        for name, code, off, stride in layout:
            views[code][lo * stride + off : hi * stride : stride] = array(code, columns[name])

    return fill


def _columns(ffi: Any, ptr: Any, ctype: str, n: int, fields: tuple[tuple[str, str], ...]) -> dict[str, list[Any]]:
    """Fields of ``n`` C structs as Python lists, read in bulk through strided memoryviews."""
    size = ffi.sizeof(ctype)
    mem = memoryview(ffi.buffer(ptr, n * size) if n else b"").cast("B")
    views: dict[str, memoryview] = {}
    out: dict[str, list[Any]] = {}
    for name, fmt in fields:
        w = _WIDTH[fmt]
        off = ffi.offsetof(ctype, name)
        assert off % w == 0 and size % w == 0
        if fmt not in views:
            views[fmt] = mem.cast(fmt)  # type: ignore[call-overload]
        out[name] = views[fmt][off // w :: size // w].tolist()
    return out


def _marshal(
    ffi: Any, cfg: ReplayConfig, reqs: Iterable[ReplayRequest], n: int,
    batches: Iterable[tuple[Sequence[Any], ...]] | None = None,
) -> tuple[Any, Any, list[Any]]:  # fmt: skip
    """The C config and the array of the ``n`` requests (and the cdata they point into, to keep alive).

    The requests are ``reqs``, or with ``batches`` the requests of its batches, each the engine-form fields as
    columns (:func:`fpmcore.replay.engine.engine_batches`).  A batch's fields are written a column at a time.
    """
    G = len(cfg.groups)
    groups = ffi.new("fpm_group[]", G)
    for i, g in enumerate(cfg.groups):
        groups[i] = (g.kind, g.block, g.page, g.window, g.blocks_per_request, g.checkpoint_blocks,
                     g.checkpoint_alignment)  # fmt: skip
    c = ffi.new("fpm_replay_config *")
    c.groups = groups
    c.ngroups = G
    c.capacity_bytes = cfg.capacity_bytes
    c.max_num_batched_tokens = cfg.max_num_batched_tokens
    c.max_num_seqs = cfg.max_num_seqs
    c.max_model_len = cfg.max_model_len
    c.enable_chunked_prefill = int(cfg.enable_chunked_prefill)
    c.reserve_full_isl = int(cfg.reserve_full_isl)
    c.prefix_caching = int(cfg.prefix_caching)
    c.watermark_blocks = cfg.watermark_blocks
    c.hash_block_size = cfg.hash_block_size
    c.max_num_scheduled_tokens = cfg.max_num_scheduled_tokens or 0
    c.max_num_active_seqs = cfg.max_num_active_seqs or 0
    c.long_prefill_token_threshold = cfg.long_prefill_token_threshold
    c.long_prefill_adaptive = int(cfg.long_prefill_token_threshold_adaptive)
    c.prefill_schedule_interval = cfg.prefill_schedule_interval
    c.policy = POLICIES[cfg.scheduling_policy]
    c.max_num_queued_reqs = -1 if cfg.max_num_queued_reqs is None else cfg.max_num_queued_reqs
    c.max_num_queued_tokens = -1 if cfg.max_num_queued_tokens is None else cfg.max_num_queued_tokens
    c.max_steps = cfg.max_steps
    for switch in SWITCHES:  # fpm_replay_rules: the same names, the same polarity
        setattr(c.rules, switch, int(getattr(cfg.rules, switch)))
    keep = [groups]
    if cfg.table is None:
        c.use_fixed_step = 1
        c.fixed_step_seconds = 1.0 if cfg.fixed_step_seconds is None else cfg.fixed_step_seconds
    else:
        c.use_fixed_step = 0
        pre = ffi.new("fpm_prefill_row[]", max(len(cfg.table.prefill), 1))
        for i, row in enumerate(cfg.table.prefill):
            pre[i] = row
        dec = ffi.new("fpm_decode_row[]", max(len(cfg.table.decode), 1))
        for i, drow in enumerate(cfg.table.decode):
            dec[i] = drow
        c.prefill, c.nprefill = pre, len(cfg.table.prefill)
        c.decode, c.ndecode = dec, len(cfg.table.decode)
        c.shared_step_seconds = cfg.table.shared_step_seconds
        keep += [pre, dec]
    rq = ffi.new("fpm_replay_request[]", max(n, 1))
    upto_l: list[int] = []
    key_l: list[int] = []
    fill = _request_filler(ffi)
    mem = memoryview(ffi.buffer(rq, n * ffi.sizeof("fpm_replay_request")) if n else bytearray()).cast("B")
    if batches is None:
        it = iter(reqs)
        batches = (tuple(zip(*batch)) for batch in iter(lambda: list(islice(it, _MARSHAL_BATCH)), []))
    lo = 0
    for _ids, prompt, output, step, t, origin, own, priority in batches:
        hi = lo + len(prompt)
        if hi > n:
            raise ValueError(f"more than the {n} requests announced")
        lens = list(map(len, origin))
        offsets = list(accumulate(lens, initial=len(upto_l)))[:-1]
        if any(lens):  # origin pairs in the batch
            pairs = list(chain.from_iterable(origin))
            upto_l += [u for u, _k in pairs]
            key_l += [k for _u, k in pairs]
        if min(own) < 0:
            own = [k if k >= 0 else (1 << 40) + i for i, k in zip(range(lo, hi), own)]
        fill(mem, lo, hi, prompt_len=prompt, output_len=output, arrival_step=step, arrival_time=t,
             own_key=own, origin_off=offsets, origin_len=lens, priority=priority)  # fmt: skip
        lo = hi
    upto = ffi.new("int64_t[]", upto_l or [0])
    okey = ffi.new("int64_t[]", key_l or [0])
    c.origin_upto, c.origin_key, c.norigin = upto, okey, len(upto_l)
    keep += [upto, okey]
    return c, rq, keep


def _error(out: Any) -> RawError | None:
    code = out.error_code
    if code == ERR_OVERSIZED:
        return RawError(ERR_OVERSIZED, tuple(out.err_i[0:5]))
    if code == ERR_STALL:
        return RawError(ERR_STALL, (out.err_i[0], out.err_d, out.err_i[1], out.err_i[2]))
    if code == ERR_NO_PHASE:
        return RawError(ERR_NO_PHASE, (out.err_i[0],))
    if code == ERR_STEP_LIMIT:
        return RawError(ERR_STEP_LIMIT, (out.err_i[0], out.err_i[1]))
    return None


def _totals(out: Any) -> RawTotals:
    t = out.totals
    return RawTotals(first_t_start=t.first_t_start, last_t_end=t.last_t_end, preemptions=t.preemptions,
                     peak_running=t.peak_running, peak_used_bytes=t.peak_used_bytes,
                     peak_used_blocks=t.peak_used_blocks, extrapolated_steps=t.extrapolated_steps)  # fmt: skip


class CReplay:
    """One replay in the C engine (``fpm_replay_open`` … ``fpm_replay_close``), advanced in chunks."""

    def __init__(
        self, cfg: ReplayConfig, reqs: Iterable[ReplayRequest], mode: int, n: int | None = None, inputs: Any = None
    ) -> None:
        """``inputs``: the marshalled config and requests of ``n`` requests (:mod:`fpmcore.replay.column_engine`)."""
        ffi, lib = _lib()
        self._ffi, self._lib = ffi, lib
        self.G = len(cfg.groups)
        if n is None:
            reqs = tuple(reqs)
            n = len(reqs)
        self.n = n
        # kept alive: the library reads them while the replay is open
        self._inputs = _marshal(ffi, cfg, reqs, n) if inputs is None else inputs
        c, rq, _keep = self._inputs
        pp = ffi.new("fpm_replay **")
        st = lib.fpm_replay_open(c, rq, self.n, mode, pp)
        if st != lib.FPM_OK:
            raise RuntimeError(f"fpm_replay_open failed with status {st}")
        self._rp = ffi.gc(pp[0], lib.fpm_replay_close)
        self._out = ffi.new("fpm_replay_output *")
        self._alloc = ffi.new_allocator(should_clear_after_alloc=False)
        self._bufs: dict[str, Any] = {}
        slots = min(self.n, cfg.max_num_seqs) + 1
        self._caps = {"steps": 0, "sched": 0, "events": 0, "held": 0, "done": min(max(self.n, 1), 65536)}
        self._per_step = {"sched": slots, "events": 2 * slots + 16, "held": slots * (1 + self.G)}
        self._set("done", self._caps["done"])

    _CTYPES: ClassVar[dict[str, str]] = {"steps": "fpm_step_rec[]", "sched": "fpm_sched_rec[]", "events": "fpm_event_rec[]",
               "held": "int64_t[]", "done": "fpm_request_rec[]"}  # fmt: skip

    def _set(self, field: str, cap: int) -> None:
        buf = self._alloc(self._CTYPES[field], cap) if cap else self._ffi.NULL
        self._bufs[field] = buf
        self._caps[field] = cap
        setattr(self._out, field, buf)
        setattr(self._out, field + "_cap", cap)

    def _size_for_steps(self, steps: int) -> None:
        if self._caps["steps"] >= steps:
            return
        self._set("steps", steps)
        for field, per in self._per_step.items():
            self._set(field, max(self._caps[field], min(steps * per, 1 << 20)))

    def advance(self, max_steps: int, with_steps: bool) -> RawChunk:
        """Run up to ``max_steps`` more steps; the chunk's records."""
        ffi, out = self._ffi, self._run(max_steps, with_steps)
        done = self._done(out)
        steps = None
        if with_steps:
            steps = _step_columns(ffi, [self._bufs[f] for f in ("steps", "sched", "events", "held")],
                                  (out.nsteps, out.nsched, out.nevents, out.nheld), self.G)  # fmt: skip
        return self._chunk(out, steps, done)

    def advance_lines(self, max_steps: int, with_steps: bool, writer: Any,
                      done: bool = False) -> tuple[RawChunk, bytes, bytes]:  # fmt: skip
        """Run up to ``max_steps`` more steps; the chunk (without step records, with the completed requests only
        when ``done``) and its records as JSON lines, written by ``writer`` (a
        :class:`fpmcore.replay.record_lines.LineWriter`)."""
        out = self._run(max_steps, with_steps)
        steps = writer.steps(out) if with_steps else b""
        requests = writer.requests(self._bufs["done"], out.ndone)
        return self._chunk(out, None, self._done(out) if done else ()), steps, requests

    def _done(self, out: Any) -> tuple[RawRequest, ...]:
        layout = _packing("fpm_request_rec", RawRequest._fields)
        if not out.ndone:
            return ()
        mem = self._ffi.buffer(self._bufs["done"], out.ndone * layout.size)
        return tuple(map(_raw_request, layout.iter_unpack(mem)))

    @staticmethod
    def _chunk(out: Any, steps: StepColumns | None, done: tuple[RawRequest, ...]) -> RawChunk:
        return RawChunk(steps=steps, done=done, steps_total=out.steps_total, completed_total=out.completed_total,
                        ended=bool(out.ended), error=_error(out), totals=_totals(out))  # fmt: skip

    def _run(self, max_steps: int, with_steps: bool) -> Any:
        """``fpm_replay_advance`` into the output buffers (grown to a step's needs); the output it filled."""
        ffi, lib, out = self._ffi, self._lib, self._out
        if with_steps:
            self._size_for_steps(min(max_steps, STEP_CHUNK))
        else:
            for field in ("steps", "sched", "events", "held"):
                setattr(out, field, ffi.NULL)
                setattr(out, field + "_cap", 0)
        while True:
            st = lib.fpm_replay_advance(self._rp, max_steps, out)
            if st == lib.FPM_OK:
                break
            if st != lib.FPM_ENOSPC:
                raise RuntimeError(f"fpm_replay_advance failed with status {st}")
            # one step needs more room than the buffers have: grow to its needs and call again
            for field, need in (("sched", out.nsched), ("events", out.nevents), ("held", out.nheld),
                                ("done", out.ndone)):  # fmt: skip
                if need > self._caps[field]:
                    self._set(field, max(need, 2 * self._caps[field]))
        if with_steps:
            for field in ("steps", "sched", "events", "held"):
                setattr(out, field, self._bufs[field])
                setattr(out, field + "_cap", self._caps[field])
        return out


def run_c(
    cfg: ReplayConfig, reqs: tuple[ReplayRequest, ...], mode: int, n: int | None = None,
    batches: Iterable[tuple[Sequence[Any], ...]] | None = None,
) -> RawResult:  # fmt: skip
    """Run the whole trace in C: one pass without step records; the step records on demand (a second pass).

    The requests are ``reqs``, or the ``n`` requests of ``batches`` (as :func:`_marshal` takes them)."""
    if n is None:
        n = len(reqs)
    inputs = _marshal(_lib()[0], cfg, reqs, n, batches)
    rp = CReplay(cfg, (), mode, n, inputs)
    requests = [NOT_COMPLETED] * n
    while True:
        chunk = rp.advance(1 << 40, with_steps=False)
        for r in chunk.done:
            requests[r.request] = r
        if chunk.ended:
            break
    G = len(cfg.groups)

    def load() -> StepColumns:
        again = CReplay(cfg, (), mode, n, inputs)  # the same inputs: the library only reads them
        parts = []
        while True:
            ch = again.advance(STEP_CHUNK, with_steps=True)
            assert ch.steps is not None
            parts.append(ch.steps)
            if ch.ended:
                return concat_columns(parts, G)

    return RawResult(steps=LazySteps(chunk.steps_total, load), requests=tuple(requests), error=chunk.error,
                     totals=chunk.totals)  # fmt: skip


def _step_columns(ffi: Any, bufs: list[Any], need: tuple[int, int, int, int], G: int) -> StepColumns:
    """Unpack the four step buffers of an advance call into :class:`StepColumns`."""
    steps, sched, events, held = bufs
    nsteps, nsched, nevents, nheld = need
    sc = _columns(ffi, steps, "fpm_step_rec", nsteps, _STEP_FIELDS)
    sr = _columns(ffi, sched, "fpm_sched_rec", nsched, (("req", "q"), ("tokens", "q"), ("computed_before", "q")))
    ev = _columns(ffi, events, "fpm_event_rec", nevents, (("kind", "i"), ("req", "q")))
    flat = memoryview(ffi.buffer(held, nheld * 8) if nheld else b"").cast("B").cast("q").tolist()
    w = 1 + G
    return StepColumns(
        scalars={name: sc[name] for name in STEP_SCALARS},
        sched_off=sc["sched_off"],
        sched_len=sc["sched_len"],
        sched_req=sr["req"],
        sched_tokens=sr["tokens"],
        sched_computed=sr["computed_before"],
        event_off=sc["event_off"],
        event_len=sc["event_len"],
        event_kind=ev["kind"],
        event_req=ev["req"],
        held_off=[x // w for x in sc["held_off"]],
        held_len=sc["held_len"],
        held_req=flat[0::w],
        held_counts=[flat[g::w] for g in range(1, w)],
    )


def align_stop_c(q, last_stop_at_tokens: bool = False) -> int:  # type: ignore[no-untyped-def]
    """04 G-2 … G-6 through the C library (``fpm_align_stop``), for the agreement tests.

    ``last_stop_at_tokens`` is :attr:`~fpmcore.replay.rules.ReplayRules.align_last_stop_at_tokens`.
    """
    ffi, lib = _lib()
    cq = ffi.new("fpm_align_query *")
    cq.start, cq.num_new_tokens, cq.prompt_len, cq.num_tokens = q.start, q.num_new_tokens, q.prompt_len, q.num_tokens
    cq.block_size, cq.hash_block_size = q.block_size, q.hash_block_size
    cq.max_num_batched_tokens = q.max_num_batched_tokens
    cq.checkpoint_alignment = q.checkpoint_alignment or 0
    cq.junction, cq.junction_checkpoint = q.junction, int(q.junction_checkpoint)
    cq.last_stop_at_tokens = int(last_stop_at_tokens)
    out = ffi.new("int64_t *")
    st = lib.fpm_align_stop(cq, out)
    if st != lib.FPM_OK:
        raise ValueError(f"fpm_align_stop refused the query (status {st})")
    return int(out[0])


def step_time_c(table, np_: int, pt: int, pkv: int, nd: int, dkv: int) -> tuple[float, bool] | int:  # type: ignore[no-untyped-def]
    """R-31 through the C library (``fpm_step_time``): ``(seconds, extrapolated)`` or the missing phase."""
    ffi, lib = _lib()
    c = ffi.new("fpm_replay_config *")
    pre = ffi.new("fpm_prefill_row[]", max(len(table.prefill), 1))
    for i, (b, t, k, w) in enumerate(table.prefill):
        pre[i].batch_size, pre[i].total_prefill_tokens, pre[i].total_kv_read_tokens, pre[i].wall_time = b, t, k, w
    dec = ffi.new("fpm_decode_row[]", max(len(table.decode), 1))
    for i, (b, k, w) in enumerate(table.decode):
        dec[i].batch_size, dec[i].total_kv_read_tokens, dec[i].wall_time = b, k, w
    c.prefill, c.nprefill, c.decode, c.ndecode = pre, len(table.prefill), dec, len(table.decode)
    c.shared_step_seconds = table.shared_step_seconds
    sec = ffi.new("double *")
    ext = ffi.new("int32_t *")
    miss = ffi.new("int32_t *")
    st = lib.fpm_step_time(c, np_, pt, pkv, nd, dkv, sec, ext, miss)
    if st != lib.FPM_OK:
        raise ValueError(f"fpm_step_time refused the query (status {st})")
    if miss[0] >= 0:
        return int(miss[0])
    return float(sec[0]), bool(ext[0])


def _group(ffi: Any, g: Any) -> Any:
    cg = ffi.new("fpm_group *")
    cg.kind, cg.block, cg.page, cg.window = g.kind, g.block, g.page, g.window
    cg.blocks_per_request, cg.checkpoint_blocks = g.blocks_per_request, g.checkpoint_blocks
    cg.checkpoint_alignment = g.checkpoint_alignment
    return cg


def block_range_c(g, computed: int, target: int) -> tuple[int, int]:  # type: ignore[no-untyped-def]
    """01 P-14 through the C library (``fpm_block_range``)."""
    ffi, lib = _lib()
    first, end = ffi.new("int64_t *"), ffi.new("int64_t *")
    if lib.fpm_block_range(_group(ffi, g), computed, target, first, end) != lib.FPM_OK:
        raise ValueError("fpm_block_range refused its arguments")
    return int(first[0]), int(end[0])


def peak_request_blocks_c(g, context: int, max_num_tokens: int) -> int:  # type: ignore[no-untyped-def]
    """01 P-16 in blocks through the C library (``fpm_peak_request_blocks``)."""
    ffi, lib = _lib()
    out = ffi.new("int64_t *")
    if lib.fpm_peak_request_blocks(_group(ffi, g), context, max_num_tokens, out) != lib.FPM_OK:
        raise ValueError("fpm_peak_request_blocks refused its arguments")
    return int(out[0])
