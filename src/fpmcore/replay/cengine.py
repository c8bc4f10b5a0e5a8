"""The C replay engine through cffi (``csrc/fpm_replay.c``).

:func:`run_c` marshals a checked :class:`~fpmcore.replay.model.ReplayConfig`
and the engine-form requests into the C structs, calls ``fpm_replay_run``
once for the whole trace, and reads the output buffers back into a
:class:`~fpmcore.replay.model.RawResult`.  Inputs are validated before they
reach C (:func:`fpmcore.replay.config.check_config`, the trace and table
parsers); a status other than ``FPM_OK`` is a programming error and raises.
"""

from __future__ import annotations

from fpmcore.replay.model import (
    RawError,
    RawRequest,
    RawResult,
    RawStep,
    ReplayConfig,
    ReplayRequest,
)

FPM_OK = 0
FPM_ENOSPC = 4


def _lib():  # imported lazily: FPMCORE_PUREPYTHON=1 runs without the build
    from fpmcore._native import ffi, lib

    return ffi, lib


def _check_ints(cfg: ReplayConfig, reqs: tuple[ReplayRequest, ...]) -> None:
    limit = 2**40
    for r in reqs:
        if not (1 <= r.prompt_len <= limit and 1 <= r.output_len <= limit and 0 <= r.arrival_step <= 2**62):
            raise ValueError(f"request {r.request_id}: lengths out of the engine range")


def run_c(cfg: ReplayConfig, reqs: tuple[ReplayRequest, ...], mode: int) -> RawResult:
    """Run the whole trace in C (one ``fpm_replay_run`` call, retried with larger buffers)."""
    ffi, lib = _lib()
    _check_ints(cfg, reqs)
    G = len(cfg.groups)
    groups = ffi.new("fpm_group[]", G)
    for i, g in enumerate(cfg.groups):
        groups[i].kind = g.kind
        groups[i].block = g.block
        groups[i].page = g.page
        groups[i].window = g.window
        groups[i].blocks_per_request = g.blocks_per_request
        groups[i].checkpoint_blocks = g.checkpoint_blocks
        groups[i].checkpoint_alignment = g.checkpoint_alignment
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
        for i, (b, t, k, w) in enumerate(cfg.table.prefill):
            pre[i].batch_size, pre[i].total_prefill_tokens, pre[i].total_kv_read_tokens, pre[i].wall_time = b, t, k, w
        dec = ffi.new("fpm_decode_row[]", max(len(cfg.table.decode), 1))
        for i, (b, k, w) in enumerate(cfg.table.decode):
            dec[i].batch_size, dec[i].total_kv_read_tokens, dec[i].wall_time = b, k, w
        c.prefill, c.nprefill = pre, len(cfg.table.prefill)
        c.decode, c.ndecode = dec, len(cfg.table.decode)
        keep += [pre, dec]
    n = len(reqs)
    rq = ffi.new("fpm_replay_request[]", max(n, 1))
    nor = sum(len(r.origin) for r in reqs)
    upto = ffi.new("int64_t[]", max(nor, 1))
    okey = ffi.new("int64_t[]", max(nor, 1))
    off = 0
    for i, r in enumerate(reqs):
        rq[i].prompt_len = r.prompt_len
        rq[i].output_len = r.output_len
        rq[i].arrival_step = r.arrival_step
        rq[i].arrival_time = r.arrival_time
        rq[i].own_key = r.own_key if r.own_key >= 0 else (1 << 40) + i
        rq[i].origin_off = off
        rq[i].origin_len = len(r.origin)
        for u, k in r.origin:
            upto[off], okey[off] = u, k
            off += 1
    c.origin_upto, c.origin_key, c.norigin = upto, okey, nor
    keep += [upto, okey]
    steps_cap = max(64, 4 * n + 16)
    sched_cap = max(256, 8 * n)
    events_cap = max(64, 4 * n)
    held_cap = max(256, 8 * n * (1 + G))
    while True:
        out = ffi.new("fpm_replay_output *")
        steps = ffi.new("fpm_step_rec[]", steps_cap)
        sched = ffi.new("fpm_sched_rec[]", sched_cap)
        events = ffi.new("fpm_event_rec[]", events_cap)
        held = ffi.new("int64_t[]", held_cap)
        rrec = ffi.new("fpm_request_rec[]", max(n, 1))
        out.steps, out.steps_cap = steps, steps_cap
        out.sched, out.sched_cap = sched, sched_cap
        out.events, out.events_cap = events, events_cap
        out.held, out.held_cap = held, held_cap
        out.requests = rrec
        st = lib.fpm_replay_run(c, rq, n, mode, out)
        if st == FPM_OK:
            break
        if st != FPM_ENOSPC:
            raise RuntimeError(f"fpm_replay_run failed with status {st}")
        if out.nsteps >= steps_cap - 1:
            steps_cap *= 4
        if out.nsched >= sched_cap - n:
            sched_cap *= 4
        if out.nevents >= events_cap - 4 * n:
            events_cap *= 4
        if out.nheld >= held_cap - n * (1 + G):
            held_cap *= 4
    raw_steps = []
    buf_sched = ffi.unpack(sched, out.nsched)
    buf_events = ffi.unpack(events, out.nevents)
    buf_held = ffi.unpack(held, out.nheld)
    for s in ffi.unpack(steps, out.nsteps):
        sch = tuple((x.req, x.tokens, x.computed_before) for x in buf_sched[s.sched_off : s.sched_off + s.sched_len])
        ev = tuple((x.kind, x.req) for x in buf_events[s.event_off : s.event_off + s.event_len])
        hl = []
        for j in range(s.held_len):
            base = s.held_off + j * (1 + G)
            hl.append((buf_held[base], tuple(buf_held[base + 1 : base + 1 + G])))
        raw_steps.append(
            RawStep(
                step=s.step,
                t_start=s.t_start,
                t_end=s.t_end,
                duration_s=s.duration_s,
                extrapolated=bool(s.extrapolated),
                scheduled=sch,
                num_prefill_requests=s.num_prefill_requests,
                sum_prefill_tokens=s.sum_prefill_tokens,
                sum_prefill_kv_tokens=s.sum_prefill_kv_tokens,
                num_decode_requests=s.num_decode_requests,
                sum_decode_kv_tokens=s.sum_decode_kv_tokens,
                events=ev,
                running=s.running,
                waiting=s.waiting,
                used_bytes_scheduled=s.used_bytes_scheduled,
                used_bytes_end=s.used_bytes_end,
                used_blocks_scheduled=s.used_blocks_scheduled,
                used_blocks_end=s.used_blocks_end,
                held=tuple(hl),
            )
        )
    rr = tuple(
        RawRequest(
            status=x.status,
            reject_reason=x.reject_reason,
            reject_a=x.reject_a,
            reject_b=x.reject_b,
            arrival_time=x.arrival_time,
            first_scheduled_time=x.first_scheduled_time,
            first_token_time=x.first_token_time,
            finish_time=x.finish_time,
            output_tokens=x.output_tokens,
            preemptions=x.preemptions,
            prefix_hit_tokens=x.prefix_hit_tokens,
        )
        for x in ffi.unpack(rrec, n)
    )
    err = None
    if out.error_code == 1:
        err = RawError(1, tuple(out.err_i[0:5]))
    elif out.error_code == 2:
        err = RawError(2, (out.err_i[0], out.err_d, out.err_i[1], out.err_i[2]))
    elif out.error_code == 3:
        err = RawError(3, (out.err_i[0],))
    return RawResult(steps=tuple(raw_steps), requests=rr, error=err)


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
