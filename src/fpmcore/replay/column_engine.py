"""The C engine's inputs made from a trace of columns (:class:`~fpmcore.replay.columns.TraceColumns`).

:func:`column_inputs` is what :func:`fpmcore.replay.cengine._marshal` makes of the engine-form
requests (:func:`fpmcore.replay.engine.iter_engine_requests`), made by the C library from the columns
instead: the R-36 origins of the content-block ids (``fpm_hash_origins``, the keys of
:func:`fpmcore.replay.engine.hash_breakpoints`) and the requests with their R-25 arrival steps
(``fpm_trace_requests``).  A request beyond the engine's bounds is refused by the reference path,
with its diagnostic.
"""

from __future__ import annotations

from typing import Any

from fpmcore.replay.columns import TraceColumns
from fpmcore.replay.model import ARRIVE_STEP, ReplayConfig


def column_origins(ffi: Any, lib: Any, cols: TraceColumns, first_key: int) -> tuple[Any, Any, int]:
    """R-36 breakpoints of every request's ids, flattened as ``hash_off`` lays them out: the ``upto`` and
    ``key`` arrays (cdata) and the number of distinct chains (keys ``first_key`` … on)."""
    nids = len(cols.hash_ids)
    upto = ffi.new("int64_t[]", max(nids, 1))
    key = ffi.new("int64_t[]", max(nids, 1))
    nkeys = ffi.new("int64_t *")
    ids = ffi.from_buffer("int64_t[]", cols.hash_ids) if nids else ffi.NULL
    st = lib.fpm_hash_origins(len(cols), ffi.from_buffer("int64_t[]", cols.prompt_len),
                              ffi.from_buffer("int64_t[]", cols.hash_off), ids, cols.hash_block_tokens, first_key,
                              upto, key, nkeys)  # fmt: skip
    if st != lib.FPM_OK:
        raise RuntimeError(f"fpm_hash_origins failed with status {st}")
    return upto, key, int(nkeys[0])


def column_inputs(
    ffi: Any, lib: Any, cfg: ReplayConfig, trace: Any, mode: int, max_arrival_step: int
) -> tuple[Any, Any, list[Any]] | None:
    """The C config, the request array and the cdata to keep alive, for a trace of columns; ``None`` when a
    request is beyond the engine's bounds (the reference path then refuses it)."""
    from fpmcore.replay.cengine import _marshal

    cols: TraceColumns = trace.columns
    n = len(cols)
    c, _none, keep = _marshal(ffi, cfg, (), 0)
    keep.append(cols)
    with_origins = cfg.prefix_caching and cols.hash_block_tokens is not None
    hash_off = ffi.from_buffer("int64_t[]", cols.hash_off) if with_origins else ffi.NULL
    if with_origins:  # own keys 0 … n-1, the chains' keys from n on (engine.origins)
        keep.append(hash_off)
        upto, key, _nkeys = column_origins(ffi, lib, cols, n)
        c.origin_upto, c.origin_key, c.norigin = upto, key, len(cols.hash_ids)
        keep += [upto, key]
    rq = ffi.new("fpm_replay_request[]", max(n, 1))
    bad = ffi.new("int64_t *")
    step_seconds = cfg.fixed_step_seconds if mode == ARRIVE_STEP and cfg.fixed_step_seconds is not None else 0.0
    st = lib.fpm_trace_requests(n, ffi.from_buffer("int64_t[]", cols.prompt_len),
                                ffi.from_buffer("int64_t[]", cols.output_len),
                                ffi.from_buffer("double[]", cols.arrival_time), hash_off, step_seconds,
                                max_arrival_step, rq, bad)  # fmt: skip
    if st != lib.FPM_OK:
        raise RuntimeError(f"fpm_trace_requests failed with status {st}")
    if bad[0] >= 0:
        return None
    return c, rq, keep
