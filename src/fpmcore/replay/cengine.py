"""The C replay engine through cffi (``csrc/fpm_replay.c``).

:func:`run_c` marshals a checked :class:`~fpmcore.replay.model.ReplayConfig`
and the engine-form requests into the C structs and calls ``fpm_replay_run``
for the whole trace.  The first call passes no step buffers (a sizing pass):
it returns the request records, the stop error, the R-35 totals and the
exact sizes of the step outputs.  The step records are read only when a
caller asks for them (:class:`~fpmcore.replay.model.LazySteps`): a second
call with buffers of exactly those sizes, unpacked column-wise from the
buffers.  Inputs are validated before they reach C
(:func:`fpmcore.replay.config.check_config`, the trace and table parsers); a
status other than ``FPM_OK`` is a programming error and raises.
"""

from __future__ import annotations

from typing import Any

from fpmcore.replay.model import (
    STEP_SCALARS,
    LazySteps,
    RawError,
    RawRequest,
    RawResult,
    RawTotals,
    ReplayConfig,
    ReplayRequest,
    StepColumns,
)

FPM_OK = 0
FPM_ENOSPC = 4

#: The C fields read back and their memoryview formats ("q" int64, "d" double, "i" int32).
_STEP_FORMAT = {"t_start": "d", "t_end": "d", "duration_s": "d", "extrapolated": "i"}
_STEP_FIELDS = tuple((name, _STEP_FORMAT.get(name, "q")) for name in STEP_SCALARS) + (
    ("sched_off", "q"), ("sched_len", "q"), ("event_off", "q"), ("event_len", "q"), ("held_off", "q"), ("held_len", "q"),
)  # fmt: skip
_REQUEST_FIELDS = (
    ("status", "i"), ("reject_reason", "i"), ("reject_a", "q"), ("reject_b", "q"), ("arrival_time", "d"),
    ("first_scheduled_time", "d"), ("first_token_time", "d"), ("finish_time", "d"), ("output_tokens", "q"),
    ("preemptions", "q"), ("prefix_hit_tokens", "q"),
)  # fmt: skip
_WIDTH = {"q": 8, "d": 8, "i": 4}


def _lib():  # imported lazily: FPMCORE_PUREPYTHON=1 runs without the build
    from fpmcore._native import ffi, lib

    return ffi, lib


def _check_ints(cfg: ReplayConfig, reqs: tuple[ReplayRequest, ...]) -> None:
    limit = 2**40
    for r in reqs:
        if not (1 <= r.prompt_len <= limit and 1 <= r.output_len <= limit and 0 <= r.arrival_step <= 2**62):
            raise ValueError(f"request {r.request_id}: lengths out of the engine range")


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
            views[fmt] = mem.cast(fmt)
        out[name] = views[fmt][off // w :: size // w].tolist()
    return out


def _marshal(ffi: Any, cfg: ReplayConfig, reqs: tuple[ReplayRequest, ...]) -> tuple[Any, Any, list[Any]]:
    """The C config and request array (and the cdata they point into, to keep alive)."""
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
        for i, row in enumerate(cfg.table.decode):
            dec[i] = row
        c.prefill, c.nprefill = pre, len(cfg.table.prefill)
        c.decode, c.ndecode = dec, len(cfg.table.decode)
        keep += [pre, dec]
    n = len(reqs)
    rq = ffi.new("fpm_replay_request[]", max(n, 1))
    upto_l: list[int] = []
    key_l: list[int] = []
    for i, r in enumerate(reqs):
        rq[i] = (r.prompt_len, r.output_len, r.arrival_step, r.arrival_time,
                 r.own_key if r.own_key >= 0 else (1 << 40) + i, len(upto_l), len(r.origin))  # fmt: skip
        for u, k in r.origin:
            upto_l.append(u)
            key_l.append(k)
    nor = len(upto_l)
    upto = ffi.new("int64_t[]", upto_l or [0])
    okey = ffi.new("int64_t[]", key_l or [0])
    c.origin_upto, c.origin_key, c.norigin = upto, okey, nor
    keep += [upto, okey]
    return c, rq, keep


def run_c(cfg: ReplayConfig, reqs: tuple[ReplayRequest, ...], mode: int) -> RawResult:
    """Run the whole trace in C: one sizing call; the step records on demand (a second, exactly sized call)."""
    ffi, lib = _lib()
    _check_ints(cfg, reqs)
    c, rq, keep = _marshal(ffi, cfg, reqs)
    n = len(reqs)
    G = len(cfg.groups)
    rrec = ffi.new("fpm_request_rec[]", max(n, 1))
    out = ffi.new("fpm_replay_output *")  # zeroed: no step buffers, capacities 0
    out.requests = rrec
    st = lib.fpm_replay_run(c, rq, n, mode, out)
    if st not in (FPM_OK, FPM_ENOSPC):
        raise RuntimeError(f"fpm_replay_run failed with status {st}")
    need = (out.nsteps, out.nsched, out.nevents, out.nheld)
    inputs = (c, rq, keep)  # the config, the requests and every array they point into

    def load() -> StepColumns:
        c, rq, _arrays = inputs
        alloc = ffi.new_allocator(should_clear_after_alloc=False)
        o = ffi.new("fpm_replay_output *")
        bufs = []
        for field, ctype, count in (("steps", "fpm_step_rec[]", need[0]), ("sched", "fpm_sched_rec[]", need[1]),
                                    ("events", "fpm_event_rec[]", need[2]), ("held", "int64_t[]", need[3])):
            buf = alloc(ctype, count) if count else ffi.NULL
            setattr(o, field, buf)
            setattr(o, field + "_cap", count)
            bufs.append(buf)
        reqbuf = ffi.new("fpm_request_rec[]", max(n, 1))
        o.requests = reqbuf
        st2 = lib.fpm_replay_run(c, rq, n, mode, o)
        if st2 != FPM_OK or (o.nsteps, o.nsched, o.nevents, o.nheld) != need:
            raise RuntimeError(f"fpm_replay_run failed with status {st2} on the recording call")
        return _step_columns(ffi, bufs, need, G)

    totals = RawTotals(
        first_t_start=out.totals.first_t_start,
        last_t_end=out.totals.last_t_end,
        preemptions=out.totals.preemptions,
        peak_running=out.totals.peak_running,
        peak_used_bytes=out.totals.peak_used_bytes,
        peak_used_blocks=out.totals.peak_used_blocks,
        extrapolated_steps=out.totals.extrapolated_steps,
    )
    rc = _columns(ffi, rrec, "fpm_request_rec", n, _REQUEST_FIELDS)
    requests = tuple(map(RawRequest, *(rc[name] for name, _ in _REQUEST_FIELDS)))
    err = None
    if out.error_code == 1:
        err = RawError(1, tuple(out.err_i[0:5]))
    elif out.error_code == 2:
        err = RawError(2, (out.err_i[0], out.err_d, out.err_i[1], out.err_i[2]))
    elif out.error_code == 3:
        err = RawError(3, (out.err_i[0],))
    return RawResult(steps=LazySteps(out.nsteps, load), requests=requests, error=err, totals=totals)


def _step_columns(ffi: Any, bufs: list[Any], need: tuple[int, int, int, int], G: int) -> StepColumns:
    """Unpack the four output buffers of a recording call into :class:`StepColumns`."""
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


def align_stop_c(q) -> int:  # type: ignore[no-untyped-def]
    """04 G-2 … G-6 through the C library (``fpm_align_stop``), for the agreement tests."""
    ffi, lib = _lib()
    cq = ffi.new("fpm_align_query *")
    cq.start, cq.num_new_tokens, cq.prompt_len, cq.num_tokens = q.start, q.num_new_tokens, q.prompt_len, q.num_tokens
    cq.block_size, cq.hash_block_size = q.block_size, q.hash_block_size
    cq.max_num_batched_tokens = q.max_num_batched_tokens
    cq.checkpoint_alignment = q.checkpoint_alignment or 0
    cq.junction, cq.junction_checkpoint = q.junction, int(q.junction_checkpoint)
    out = ffi.new("int64_t *")
    st = lib.fpm_align_stop(cq, out)
    if st != FPM_OK:
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
    sec = ffi.new("double *")
    ext = ffi.new("int32_t *")
    miss = ffi.new("int32_t *")
    st = lib.fpm_step_time(c, np_, pt, pkv, nd, dkv, sec, ext, miss)
    if st != FPM_OK:
        raise ValueError(f"fpm_step_time refused the query (status {st})")
    if miss[0] >= 0:
        return int(miss[0])
    return float(sec[0]), bool(ext[0])


def _group(ffi, g):  # type: ignore[no-untyped-def]
    cg = ffi.new("fpm_group *")
    cg.kind, cg.block, cg.page, cg.window = g.kind, g.block, g.page, g.window
    cg.blocks_per_request, cg.checkpoint_blocks = g.blocks_per_request, g.checkpoint_blocks
    cg.checkpoint_alignment = g.checkpoint_alignment
    return cg


def block_range_c(g, computed: int, target: int) -> tuple[int, int]:  # type: ignore[no-untyped-def]
    """01 P-14 through the C library (``fpm_block_range``)."""
    ffi, lib = _lib()
    first, end = ffi.new("int64_t *"), ffi.new("int64_t *")
    if lib.fpm_block_range(_group(ffi, g), computed, target, first, end) != FPM_OK:
        raise ValueError("fpm_block_range refused its arguments")
    return int(first[0]), int(end[0])


def peak_request_blocks_c(g, context: int, max_num_tokens: int) -> int:  # type: ignore[no-untyped-def]
    """01 P-16 in blocks through the C library (``fpm_peak_request_blocks``)."""
    ffi, lib = _lib()
    out = ffi.new("int64_t *")
    if lib.fpm_peak_request_blocks(_group(ffi, g), context, max_num_tokens, out) != FPM_OK:
        raise ValueError("fpm_peak_request_blocks refused its arguments")
    return int(out[0])
