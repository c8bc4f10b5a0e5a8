"""Shared builders for the replay tests (06 §10 notation)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fpmcore.replay import make_config, run_replay
from fpmcore.replay.model import KIND_CONV, KIND_FULL, KIND_MAMBA, KIND_RING, KIND_WINDOW, GroupSpec
from fpmcore.replay.trace import parse_trace_lines

DATA = Path(__file__).parent / "data"


def full(b: int, page: int, name: str = "full") -> GroupSpec:
    return GroupSpec(name, KIND_FULL, b, page)


def window(b: int, page: int, w: int, name: str = "window") -> GroupSpec:
    return GroupSpec(name, KIND_WINDOW, b, page, window=w)


def conv(b: int, page: int, w: int, name: str = "conv") -> GroupSpec:
    return GroupSpec(name, KIND_CONV, b, page, window=w)


def state(n: int, page: int, name: str = "state") -> GroupSpec:
    return GroupSpec(name, KIND_RING, 1, page, blocks_per_request=n)


def mamba(b: int, page: int, ckpt: int = 1, align: int = 0, name: str = "mamba") -> GroupSpec:
    return GroupSpec(
        name, KIND_MAMBA, b, page, blocks_per_request=1, checkpoint_blocks=ckpt, checkpoint_alignment=align
    )


def trace(*reqs: tuple[Any, ...], timed: bool = False):
    """Requests ``(id, P, O[, arrival[, extra dict]])``; arrival is a step unless ``timed``."""
    lines = []
    for r in reqs:
        d: dict[str, Any] = {"request_id": r[0], "prompt_len": r[1], "output_len": r[2]}
        arr = r[3] if len(r) > 3 else 0
        d["arrival_time" if timed else "arrival_step"] = arr
        if len(r) > 4:
            d.update(r[4])
        lines.append(json.dumps(d))
    return parse_trace_lines(lines)


def run(groups, capacity, budget, tr, backend, **kw):
    kw.setdefault("max_num_seqs", 3)
    kw.setdefault("max_model_len", 1 << 20)
    kw.setdefault("reserve_full_isl", False)
    cfg = make_config(groups, capacity, max_num_batched_tokens=budget, **kw)
    return run_replay(cfg, tr, backend=backend)


def sched(res) -> list[list[str]]:
    """Scheduled entries per step as ``"A8"`` strings."""
    return [[f"{rid}{n}" for rid, n, _c in s["scheduled"]] for s in res.steps]


def col(res, key: str) -> list[Any]:
    return [s[key] for s in res.steps]


def same_trace_as_reference(fast: Any, ref: Any) -> tuple[Any, Any] | None:
    """Assert that a trace read into columns (``fast``: ``(trace, provenance)`` or a refusal) is the reference
    reader's ``ref``: the same refusal, or the same provenance, requests, ids and column fields.  Returns
    ``(trace, reference trace)`` when both read the file, ``None`` when both refused it."""
    from hypothesis import event

    if isinstance(ref, tuple) and isinstance(ref[0], str):
        event("refused")
        assert fast == ref
        return None
    (trace, prov), (ref_trace, ref_prov) = fast, ref
    event("read into columns" if trace.columns is not None else "read by the reference reader")
    assert prov == ref_prov
    assert trace.arrival_field == ref_trace.arrival_field
    assert list(trace.requests) == list(ref_trace.requests)
    assert list(trace.request_ids()) == [r.request_id for r in ref_trace.requests]
    if trace.columns is not None:
        assert [trace.columns.fields(i) for i in range(len(trace.requests))] == [
            (r.request_id, r.arrival_time, r.prompt_len, r.output_len) for r in ref_trace.requests
        ]
        for i, r in enumerate(ref_trace.requests):
            assert trace.request_ids().index(r.request_id) == i
    return trace, ref_trace
