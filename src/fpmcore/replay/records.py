"""Step records, request records and the summary (06 R-34, R-35, R-10).

Both backends return a :class:`~fpmcore.replay.model.RawResult`; this module
formats it, so the two can differ only in what they compute.  The summary
reads the run's totals (:class:`~fpmcore.replay.model.RawTotals`) and the
request records; the step records are built in bulk from
:class:`~fpmcore.replay.model.StepColumns`, only when asked for.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterable, Sequence
from itertools import compress
from typing import Any

from fpmcore.documents import blocks
from fpmcore.documents.blocks import cdiv
from fpmcore.documents.errors import FpmError
from fpmcore.replay.model import (
    ERR_NO_PHASE,
    ERR_OVERSIZED,
    ERR_STALL,
    ERR_STEP_LIMIT,
    EV_ADMITTED,
    EV_FINISHED,
    EV_PREEMPTED,
    EV_REJECTED,
    KIND_CHUNK,
    KIND_CONV,
    KIND_FULL,
    KIND_MAMBA,
    KIND_RING,
    KIND_WINDOW,
    REJ_FINAL_FORWARD,
    REJ_INPUT_SEQUENCE,
    REJ_PROMPT,
    REJ_QUEUED_REQS,
    REJ_QUEUED_TOKENS,
    ST_FINISHED,
    STEP_SCALARS,
    RawError,
    RawResult,
    ReplayConfig,
    StepColumns,
    gc_paused,
    step_columns,
)

SUMMARY_SCHEMA = "fpmcore.replay.summary/v1"


def _t(x: float) -> float | None:
    return None if math.isnan(x) else x


def error_of(err: RawError) -> FpmError:
    """The diagnostic of a replay that stopped (R-9, R-26, R-27)."""
    if err.code == ERR_OVERSIZED:
        nb, n, c, cap, fixed = err.values
        msg = (
            f"grouped kv forward needs {nb} bytes for {n} scheduled tokens after {c} computed tokens, "
            f"exceeding the entire {cap}-byte cache pool"
        )
        if fixed > 0:
            msg += f" (including {fixed} fixed state bytes per request)"
        return FpmError("R-9", msg + "; reduce max_num_batched_tokens or increase cache memory")
    if err.code == ERR_STALL:
        k, t, r, w = err.values
        return FpmError(
            "R-26", f"replay stalled at step {k}, t={t!r}: {r} running and {w} waiting requests cannot be scheduled"
        )
    if err.code == ERR_NO_PHASE:
        return FpmError("R-27", f"latency table has no {('prefill', 'decode')[err.values[0]]} points")
    if err.code == ERR_STEP_LIMIT:
        limit, k = err.values
        return FpmError(
            "R-25", f"replay stopped at step {k}: it reached its limit of {limit} steps; raise it with --max-steps"
        )
    raise AssertionError(f"unknown replay error code {err.code}")  # pragma: no cover


def reject_reason(code: int, a: int, b: int, request_id: str) -> str | None:
    if code == REJ_PROMPT:
        return f"prompt_len {a} >= max_model_len {b}"
    if code == REJ_FINAL_FORWARD:
        return f"request {request_id} can never fit the cache pool: its final forward needs {a} bytes, capacity {b}"
    if code == REJ_INPUT_SEQUENCE:
        return f"request {request_id} can never fit the cache pool: its input sequence needs {a} bytes, capacity {b}"
    if code == REJ_QUEUED_REQS:
        return f"max_num_queued_reqs {b} reached: {a} unfinished requests"
    if code == REJ_QUEUED_TOKENS:
        return f"max_num_queued_tokens {b} reached: {a} prompt tokens in prefill"
    return None


#: The kinds of rejection the summary counts (``rejected_by_reason``), by the engine's reason code.
REJECT_KINDS = {
    REJ_PROMPT: "prompt_too_long", REJ_FINAL_FORWARD: "never_fits_final_forward",
    REJ_INPUT_SEQUENCE: "never_fits_input_sequence", REJ_QUEUED_REQS: "max_num_queued_reqs",
    REJ_QUEUED_TOKENS: "max_num_queued_tokens",
}  # fmt: skip


def step_records(cfg: ReplayConfig, ids: Sequence[str], raw: RawResult) -> list[dict[str, Any]]:
    """R-34 records, one per step, built from the step columns in bulk."""
    with gc_paused():
        return _step_records(cfg, ids, step_columns(raw.steps, len(cfg.groups), keep=False))


def step_records_of(cfg: ReplayConfig, ids: Sequence[str], columns: StepColumns) -> list[dict[str, Any]]:
    """R-34 records of the steps in ``columns`` (one chunk of a replay)."""
    with gc_paused():
        return _step_records(cfg, ids, columns)


def _step_records(cfg: ReplayConfig, ids: Sequence[str], c: StepColumns) -> list[dict[str, Any]]:
    bm = cfg.block_mode
    usable = cfg.usable_blocks
    name = ids.__getitem__
    scheduled = list(map(list, zip(map(name, c.sched_req), c.sched_tokens, c.sched_computed)))
    ev_name = list(map(name, c.event_req))
    ev_kind = c.event_kind
    held_name = list(map(name, c.held_req))
    held_blocks = list(map(list, zip(*c.held_counts)))
    v = c.scalars
    out = []
    for (step, t_start, t_end, duration, extra, npre, spt, spkv, ndec, sdkv, running, waiting, ubs, ube, ublks, ublke,
         so, sl, eo, el, ho, hl) in zip(*(v[k] for k in STEP_SCALARS), c.sched_off, c.sched_len, c.event_off,
                                       c.event_len, c.held_off, c.held_len):  # fmt: skip
        ev: tuple[list[str], list[str], list[str], list[str]] = ([], [], [], [])
        for j in range(eo, eo + el):  # EV_ADMITTED, EV_PREEMPTED, EV_FINISHED, EV_REJECTED
            ev[ev_kind[j]].append(ev_name[j])
        out.append(
            {
                "step": step,
                "t_start": t_start,
                "t_end": t_end,
                "duration_s": duration,
                "extrapolated": bool(extra),
                "scheduled": scheduled[so : so + sl],
                "num_prefill_requests": npre,
                "sum_prefill_tokens": spt,
                "sum_prefill_kv_tokens": spkv,
                "num_decode_requests": ndec,
                "sum_decode_kv_tokens": sdkv,
                "admitted": ev[EV_ADMITTED],
                "preempted": ev[EV_PREEMPTED],
                "finished": ev[EV_FINISHED],
                "rejected": ev[EV_REJECTED],
                "running": running,
                "waiting": waiting,
                "used_bytes_scheduled": ubs,
                "used_bytes_end": ube,
                "used_blocks_scheduled": ublks if bm else None,
                "used_blocks_end": ublke if bm else None,
                "free_blocks": usable - ublke if bm else None,
                "held_blocks_end": dict(zip(held_name[ho : ho + hl], held_blocks[ho : ho + hl])) if bm else None,
            }
        )
    return out


def request_record(tr: Any, r: Any) -> dict[str, Any]:
    """The R-35 record of one completed request (``tr`` its trace line or the column view of its fields,
    :class:`~fpmcore.replay.columns.RequestFields`; ``r`` its :class:`RawRequest`)."""
    ft, fin_t, arr = r.first_token_time, r.finish_time, r.arrival_time
    if tr.arrival_time is not None:
        arr = tr.arrival_time  # timed arrivals keep the trace's time
    if r.status == ST_FINISHED:  # a finished request has every time
        return {
            "request_id": tr.request_id, "arrival_time": arr, "prompt_len": tr.prompt_len,
            "output_len": tr.output_len, "status": "finished", "reject_reason": None,
            "first_scheduled_time": r.first_scheduled_time, "first_token_time": ft, "finish_time": fin_t,
            "output_tokens": r.output_tokens, "preemptions": r.preemptions, "prefix_hit_tokens": r.prefix_hit_tokens,
            "ttft_s": ft - arr, "tpot_s": (fin_t - ft) / (r.output_tokens - 1) if r.output_tokens > 1 else None,
            "e2e_s": fin_t - arr,
        }  # fmt: skip
    return {
        "request_id": tr.request_id, "arrival_time": _t(arr), "prompt_len": tr.prompt_len,
        "output_len": tr.output_len, "status": "rejected",
        "reject_reason": reject_reason(r.reject_reason, r.reject_a, r.reject_b, tr.request_id),
        "first_scheduled_time": _t(r.first_scheduled_time), "first_token_time": _t(ft), "finish_time": _t(fin_t),
        "output_tokens": r.output_tokens, "preemptions": r.preemptions, "prefix_hit_tokens": r.prefix_hit_tokens,
        "ttft_s": None, "tpot_s": None, "e2e_s": None,
    }  # fmt: skip


def request_records(trace_reqs: Sequence[Any], raw: RawResult) -> list[dict[str, Any]]:
    """R-35 request records, in trace order (requests that never completed are left out)."""
    return [request_record(tr, r) for tr, r in zip(trace_reqs, raw.requests) if r.status != 0]


class RequestStats:
    """The R-35 aggregates of request records, collected as the records are made (bounded per request).

    ``rejected_by_reason`` counts rejections by kind (:data:`REJECT_KINDS`);
    ``first_rejection`` keeps the first record's reason of each kind.
    """

    def __init__(self) -> None:
        self.requests = self.finished = self.rejected = self.output_tokens = self.prefix_hit_tokens = 0
        self.ttft: array[float] = array("d")
        self.tpot: array[float] = array("d")
        self.e2e: array[float] = array("d")
        self.rejected_by_reason = dict.fromkeys(REJECT_KINDS.values(), 0)
        self.first_rejection: dict[str, str] = {}

    def add(self, rec: dict[str, Any], reject_code: int = 0) -> None:
        self.requests += 1
        self.output_tokens += rec["output_tokens"]
        self.prefix_hit_tokens += rec["prefix_hit_tokens"]
        if rec["status"] == "finished":
            self.finished += 1
            self.ttft.append(rec["ttft_s"])
            self.e2e.append(rec["e2e_s"])
            if rec["tpot_s"] is not None:
                self.tpot.append(rec["tpot_s"])
        else:
            self.rejected += 1
            self.add_rejection(reject_code, rec["reject_reason"])

    def add_rejection(self, reject_code: int, reason: str | None) -> None:
        """Count a rejected request's kind (the counts of requests are the caller's)."""
        kind = REJECT_KINDS.get(reject_code)
        if kind is not None:
            self.rejected_by_reason[kind] += 1
            if reason is not None:
                self.first_rejection.setdefault(kind, reason)


def nearest_rank(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile by nearest rank (06 R-35): ``sorted(values)[ceil(q n) − 1]`` (``values`` not empty)."""
    v = sorted(values)
    return v[max(math.ceil(q * len(v)) - 1, 0)]


def sorted_latencies(values: array[float]) -> Sequence[float]:
    """``sorted(values)``; sorted by the C library (``fpm_sort_doubles``) into an array, without a float object
    per value, when it is the backend."""
    from fpmcore.replay import native

    if native.BACKEND != "c" or len(values) < 2:
        return sorted(values)
    from fpmcore.replay._native import ffi, lib

    v = array("d", values)
    if lib.fpm_sort_doubles(ffi.from_buffer("double[]", v), len(v)) != lib.FPM_OK:
        return sorted(values)  # a NaN: sorted() places it as it does
    return v


def _stats(values: array[float]) -> dict[str, float | None]:
    if not values:
        return {"mean": None, "p50": None, "p90": None, "p99": None, "max": None}
    v = sorted_latencies(values)  # the mean sums in this order: the summary's bytes depend on it

    def rank(q: float) -> float:  # nearest_rank of v, sorted once
        return v[max(math.ceil(q * len(v)) - 1, 0)]

    return {"mean": sum(v) / len(v), "p50": rank(0.5), "p90": rank(0.9), "p99": rank(0.99), "max": v[-1]}


def _shape(g: Any) -> dict[str, Any]:
    """A replay group as :mod:`fpmcore.documents.blocks` takes it: block, window, state blocks."""
    if g.kind in (KIND_RING, KIND_MAMBA):
        return {"block": g.block, "state_blocks": g.blocks_per_request}
    if g.kind == KIND_CHUNK:
        return {"block": g.block, "chunk": g.window}
    return {"block": g.block, "window": None if g.kind == KIND_FULL else g.window}


def block_range(g: Any, computed: int, target: int) -> tuple[int, int]:
    """01 P-14: the logical block range a group holds during a forward ``computed → target``."""
    return blocks.block_range(computed, target, label=f"'{g.name}'", **_shape(g))


def peak_request_blocks(g: Any, context: int, max_num_tokens: int) -> int:
    """01 P-16 in blocks (R-10)."""
    return blocks.peak_blocks(context, max_num_tokens, **_shape(g))


def peak_request_bytes(cfg: ReplayConfig, context: int, max_num_tokens: int | None = None) -> int:
    """R-10: Σ over groups of P-16 ``peak_request_bytes(context, T)``, ``T`` = the token budget by default."""
    t = cfg.max_num_batched_tokens if max_num_tokens is None else max_num_tokens
    return sum(peak_request_blocks(g, context, t) * g.page for g in cfg.groups)


def occupancy_request_bytes(cfg: ReplayConfig, tokens: int) -> int:
    """R-10: Σ over groups of P-17 ``occupancy_request_bytes(tokens)`` (P-16 with ``T = 1``)."""
    return peak_request_bytes(cfg, tokens, 1)


def sizing(cfg: ReplayConfig) -> dict[str, Any]:
    """R-10 estimates at ``max_model_len``."""
    L = cfg.max_model_len
    T = cfg.max_num_batched_tokens
    peak = 0
    vllm_m = 0
    align_extra = 0
    for g in cfg.groups:
        n = peak_request_blocks(g, L, T)
        if g.kind == KIND_FULL:
            m = n
        elif g.kind in (KIND_WINDOW, KIND_CONV):
            m = cdiv(min(g.window - 1 + T, L), g.block) + 1
        elif g.kind == KIND_CHUNK:
            m = n
        else:
            m = n
            if g.kind == KIND_MAMBA and cfg.prefix_caching:
                align_extra += (1 + g.checkpoint_blocks) * g.page
                m = n + 1 + g.checkpoint_blocks
        peak += n * g.page
        vllm_m += m
    align_peak = peak + align_extra if cfg.prefix_caching else None
    if cfg.block_mode:
        eff = (align_peak if align_peak is not None else peak) // cfg.page
        mfc = cfg.usable_blocks // eff if eff else None
        conc = (cfg.usable_blocks + 1) / vllm_m if vllm_m else None
    else:
        eff = align_peak if align_peak is not None else peak
        mfc = cfg.capacity_bytes // eff if eff else None
        conc = None
    return {
        "peak_request_bytes_at_max_model_len": peak,
        "align_peak_request_bytes_at_max_model_len": align_peak,
        "max_full_context_requests": mfc,
        "kv_cache_max_concurrency": conc,
    }


def add_completed(
    stats: RequestStats, done: Iterable[Any], arrival_time: Sequence[float | None], request_id: Sequence[str]
) -> None:  # fmt: skip
    """Add completed requests (:class:`RawRequest` s, each with its index in the trace) to ``stats`` as their R-35
    records would (:func:`request_record`, :meth:`RequestStats.add`) without making them: the same values (a latency
    is the record's subtraction or division of the same doubles), in the same order.  ``arrival_time[i]`` and
    ``request_id[i]`` are request ``i``'s in the trace (:meth:`~fpmcore.replay.trace.Trace.arrival_times`,
    :meth:`~fpmcore.replay.trace.Trace.request_ids`; an id is read for a rejection only)."""
    done = done if isinstance(done, (list, tuple)) else list(done)
    if not done:
        return
    # a field of every request in one pass (a Python loop per request costs several times more on a large trace)
    (status, reason, reject_a, reject_b, raw_arrival, _first_scheduled, first_token, finish, output, _preempted,
     hits, index) = zip(*done)  # fmt: skip
    arrival: Sequence[Any] = [arrival_time[i] for i in index]
    if None in arrival:
        arrival = [raw if arr is None else arr for arr, raw in zip(arrival, raw_arrival)]
    stats.output_tokens += sum(output)
    stats.prefix_hit_tokens += sum(hits)
    finished = status.count(ST_FINISHED)
    if finished < len(done):
        kept = [st == ST_FINISHED for st in status]
        for i in compress(range(len(done)), [not k for k in kept]):
            code = reason[i]
            stats.add_rejection(code, reject_reason(code, reject_a[i], reject_b[i], request_id[index[i]]))
        arrival, first_token, finish, output = (
            tuple(compress(col, kept)) for col in (arrival, first_token, finish, output)
        )
    stats.ttft += array("d", [ft - arr for ft, arr in zip(first_token, arrival)])
    stats.e2e += array("d", [fin - arr for fin, arr in zip(finish, arrival)])
    stats.tpot += array("d", [(fin - ft) / (out - 1) for ft, fin, out in zip(first_token, finish, output) if out > 1])
    stats.requests += len(done)
    stats.finished += finished
    stats.rejected += len(done) - finished


def summary_of(cfg: ReplayConfig, stats: RequestStats, tot: Any, nsteps: int) -> dict[str, Any]:
    """R-35 summary from the request aggregates and the totals of ``nsteps`` steps."""
    makespan = (tot.last_t_end - tot.first_t_start) if nsteps else 0.0
    return {
        "schema": SUMMARY_SCHEMA,
        "requests": stats.requests,
        "finished": stats.finished,
        "rejected": stats.rejected,
        "steps": nsteps,
        "makespan_s": makespan,
        "preemptions_total": tot.preemptions,
        "prefix_hit_tokens": stats.prefix_hit_tokens,
        "peak_running": tot.peak_running,
        "peak_used_bytes": tot.peak_used_bytes,
        "peak_used_blocks": tot.peak_used_blocks if cfg.block_mode else None,
        "capacity_bytes": cfg.capacity_bytes,
        "usable_blocks": cfg.usable_blocks if cfg.block_mode else None,
        **sizing(cfg),
        "extrapolated_steps": tot.extrapolated_steps,
        "output_tokens_per_s": stats.output_tokens / makespan if makespan > 0 else None,
        "ttft_s": _stats(stats.ttft),
        "tpot_s": _stats(stats.tpot),
        "e2e_s": _stats(stats.e2e),
        "rejected_by_reason": dict(stats.rejected_by_reason),
    }
