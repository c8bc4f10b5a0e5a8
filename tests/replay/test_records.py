"""Step records built on demand and the R-35 totals counted by the engine (06 R-34, R-35)."""

from __future__ import annotations

import json

import pytest
from helpers import full, run, trace, window

from fpmcore.replay.engine import StepRecords
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
