"""Speed of the replay engines (pytest-benchmark; disabled in the default run)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fpmcore.profile import load_profile
from fpmcore.replay import Trace, config_from_profile, load_table, load_trace, run_replay

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("backend,n", [("c", 120), ("python", 20)])
def test_bench_glm_mixed_trace(benchmark, backend, n):
    """GLM requests with a shared system prompt, prefix caching on, the example FPM table."""
    if backend == "c":
        pytest.importorskip("fpmcore._native")
    cfg = config_from_profile(load_profile(ROOT / "examples/profiles/glm53flash-tp4.fpm-profile.json"),
                              prefix_caching=True, table=load_table(ROOT / "examples/fpm_tables/glm53flash-tp4.json"))
    full = load_trace(ROOT / "examples/traces/glm-mixed-120.jsonl")
    trace = Trace(requests=full.requests[:n], arrival_field=full.arrival_field)
    result = benchmark(run_replay, cfg, trace, backend=backend)
    assert result.summary["finished"] == n
