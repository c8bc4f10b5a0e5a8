"""Step records built on demand and the R-35 totals counted by the engine (06 R-34, R-35)."""

from __future__ import annotations

import json

import pytest
from helpers import full, run, trace, window

from fpmcore.replay import make_config, records, run_replay
from fpmcore.replay.engine import RequestRecords, StepRecords
from fpmcore.replay.model import LazySteps, RawTotals, columns_of


def _rv3(backend):
    """RV-3: A and B contend, B is preempted at step 1 and recomputed (R-15)."""
    return run([full(4, 4), window(4, 4, 4)], 24, 8, trace(("A", 4, 6), ("B", 4, 6)), backend)


def test_rv3_summary_aggregates(backend):
    """R-35 on RV-3: 11 one-second steps, one preemption, both running at step 0, 20 bytes = 5 blocks at peak."""
    r = _rv3(backend)
    s = r.summary
    assert (s["steps"], s["makespan_s"], s["preemptions_total"], s["peak_running"]) == (11, 11.0, 1, 2)
    assert (s["peak_used_bytes"], s["peak_used_blocks"], s["extrapolated_steps"]) == (20, 5, 0)
    assert r.raw.totals == RawTotals(first_t_start=0.0, last_t_end=11.0, preemptions=1, peak_running=2,
                                     peak_used_bytes=20, peak_used_blocks=5, extrapolated_steps=0)  # fmt: skip


def test_step_records_are_built_on_first_use(backend):
    """The summary needs no step record; reading ``steps`` builds all R-34 records once."""
    r = _rv3(backend)
    assert isinstance(r.steps, StepRecords)
    assert len(r.steps) == 11 and "not built yet" in repr(r.steps)
    first = r.steps[0]
    assert "not built yet" not in repr(r.steps)
    assert first["scheduled"] == [["A", 4, 0], ["B", 4, 0]] and first["running"] == 2
    assert r.steps[1]["preempted"] == ["B"] and r.steps[-1]["finished"] == ["B"]
    assert r.steps[1:3] == list(r.steps)[1:3]
    assert r.steps == list(r.steps) and list(r.steps) == r.steps
    assert json.loads(json.dumps(list(r.steps))) == list(r.steps)


def test_request_records_are_built_on_first_use_and_the_summary_needs_none(backend):
    """RV-3 with a third request too long for the model (rejected, R-13) and a fourth arriving at 2.5 s with one
    token: the summary is made from the raw results; its aggregates equal those of the records, which are built
    when ``requests`` is read."""
    tr = trace(("A", 4, 6), ("B", 4, 6), ("C", 40, 2), ("D", 4, 1, 2.5), timed=True)
    cfg = make_config([full(4, 4), window(4, 4, 4)], 24, max_num_batched_tokens=8, max_num_seqs=3, max_model_len=32,
                      reserve_full_isl=False, fixed_step_seconds=1.0)  # fmt: skip
    r = run_replay(cfg, tr, backend=backend)
    assert isinstance(r.requests, RequestRecords)
    assert len(r.requests) == 4 and "not built yet" in repr(r.requests)
    stats = records.RequestStats()
    for rec, raw in zip(r.requests, [q for q in r.raw.requests if q.status]):
        stats.add(rec, raw.reject_reason)
    assert "not built yet" not in repr(r.requests)
    assert [q["status"] for q in r.requests] == ["finished", "finished", "rejected", "finished"]
    assert r.requests[3]["arrival_time"] == 2.5 and r.requests[3]["tpot_s"] is None  # the trace's time, one token
    assert records.summary_of(cfg, stats, r.raw.totals, len(r.steps)) == r.summary
    assert (r.summary["finished"], r.summary["rejected"], r.summary["rejected_by_reason"]["prompt_too_long"]) == (
        3, 1, 1)  # fmt: skip
    assert r.requests == list(r.requests) and list(r.requests) == r.requests


def test_c_steps_are_read_from_exactly_sized_buffers():
    """The C backend: one sizing call, then the recorded steps equal the reference's, step by step (RV-3)."""
    c, py = _rv3("c"), _rv3("python")
    assert isinstance(c.raw.steps, LazySteps) and len(c.raw.steps) == 11
    assert tuple(c.raw.steps) == py.raw.steps
    assert c.raw.steps[-1] == py.raw.steps[-1] and c.raw.steps[2:4] == py.raw.steps[2:4]
    with pytest.raises(IndexError):
        c.raw.steps[11]
    assert c.raw.steps.columns() == columns_of(py.raw.steps, 2)


def test_stopped_run_counts_only_completed_steps(backend):
    """RV-5 (R-9): the replay stops in step 1; the totals cover step 0 only (8 bytes held, A running)."""
    r = run([window(4, 4, 4)], 8, 8, trace(("A", 16, 2)), backend)
    assert r.error is not None and r.error.rule == "R-9"
    assert len(r.steps) == 1 and r.steps[0]["scheduled"] == [["A", 8, 0]]
    s = r.summary
    assert (s["steps"], s["makespan_s"], s["peak_used_bytes"], s["peak_running"], s["preemptions_total"]) == (
        1, 1.0, 8, 1, 0)  # fmt: skip
