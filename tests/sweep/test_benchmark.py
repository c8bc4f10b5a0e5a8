"""Speed of fpm sweep: 1,000 replays of the 120-request GLM trace (pytest-benchmark; ``make bench``).

The tasks differ only in ``max_num_seqs`` (32 … 1,031): the pool never admits
more than 26 of these requests at once, so every task is the same replay and
the time per task is the replay plus the engine's overhead.  With benchmarks
disabled (the default suite) each function runs once on 8 tasks.
"""

from __future__ import annotations

import pytest

from fpmcore.sweep.engines import run_tasks
from fpmcore.sweep.grid import expand
from tests.sweep.support import GLM, GLM_TABLE, GLM_TRACE, write_grid


def _sweep(tmp_path, n):
    grid = {
        "profiles": [str(GLM)],
        "traces": [str(GLM_TRACE)],
        "tables": [str(GLM_TABLE)],
        "settings": {"max_num_seqs": list(range(32, 32 + n))},
    }
    return expand(write_grid(tmp_path / "grid.json", grid))


def _size(benchmark) -> int:
    return 8 if benchmark.disabled else 1000


def _run(sweep, **kw):
    rows = list(run_tasks(sweep, sweep.tasks, **kw))
    assert len(rows) == len(sweep.tasks)
    assert all(r["error"] is None and r["summary"]["finished"] == 120 for r in rows)
    assert len({r["summary"]["makespan_s"] for r in rows}) == 1
    return rows


def test_bench_sweep_serial(benchmark, tmp_path):
    """The in-process path: the replays alone, the baseline of the overhead per task."""
    sweep = _sweep(tmp_path, _size(benchmark))
    benchmark.pedantic(_run, args=(sweep,), kwargs={"engine": "serial"}, rounds=1 if benchmark.disabled else 3)


@pytest.mark.parametrize("workers", [1, 2])
def test_bench_sweep_local(benchmark, tmp_path, workers):
    """The local process pool, pool start-up included."""
    sweep = _sweep(tmp_path, _size(benchmark))
    benchmark.pedantic(
        _run, args=(sweep,), kwargs={"engine": "local", "workers": workers}, rounds=1 if benchmark.disabled else 3
    )


@pytest.mark.ray
def test_bench_sweep_ray(benchmark, tmp_path):
    """A local Ray instance with 2 CPUs, its start-up included."""
    sweep = _sweep(tmp_path, _size(benchmark))
    benchmark.pedantic(
        _run, args=(sweep,), kwargs={"engine": "ray", "workers": 2}, rounds=1 if benchmark.disabled else 3
    )
