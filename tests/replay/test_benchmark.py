"""Speed of the replay engines (pytest-benchmark; disabled in the default run)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fpmcore.documents.profile import load_profile
from fpmcore.replay import Trace, config_from_profile, load_table, load_trace, run_replay

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("backend,n", [("c", 120), ("python", 20)])
def test_bench_glm_mixed_trace(benchmark, backend, n):
    """GLM requests with a shared system prompt, prefix caching on, the example FPM table."""
    cfg = config_from_profile(
        load_profile(ROOT / "examples/profiles/glm53flash-tp4.fpm-profile.json"),
        prefix_caching=True,
        table=load_table(ROOT / "examples/fpm_tables/glm53flash-tp4.json"),
    )
    full = load_trace(ROOT / "examples/traces/glm-mixed-120.jsonl")
    trace = Trace(requests=full.requests[:n], arrival_field=full.arrival_field)
    result = benchmark(run_replay, cfg, trace, backend=backend)
    assert result.summary["finished"] == n


def _pressure_trace(n: int) -> Trace:
    """``n`` requests, prompts 1..8,192 and outputs 16..512 tokens, 4 arrivals per step: the pool fills and preempts."""
    import random

    from fpmcore.replay.trace import TraceRequest

    rng = random.Random(20261130)
    reqs = tuple(
        TraceRequest(request_id=f"r{i}", prompt_len=rng.randint(1, 8192), output_len=rng.randint(16, 512),
                     arrival_step=i // 4)
        for i in range(n)
    )  # fmt: skip
    return Trace(requests=reqs, arrival_field="arrival_step")


def test_bench_plain_10k_requests_under_pressure(benchmark):
    """The throughput figure of the README and docs/performance.md: 10,000 requests on the plain example, C engine."""
    cfg = config_from_profile(load_profile(ROOT / "examples/profiles/plain-llama8b-like.fpm-profile.json"))
    trace = _pressure_trace(10_000)
    result = benchmark.pedantic(run_replay, args=(cfg, trace), kwargs={"backend": "c"}, rounds=3, iterations=1)
    assert result.summary["finished"] == 10_000
    assert result.summary["preemptions_total"] > 0
    benchmark.extra_info["steps"] = result.summary["steps"]


def test_bench_plain_10k_step_records(benchmark):
    """The same run with every R-34 step record built (``--steps``, ``--out``, ``--plot``)."""
    cfg = config_from_profile(load_profile(ROOT / "examples/profiles/plain-llama8b-like.fpm-profile.json"))
    trace = _pressure_trace(10_000)

    def run_with_steps():
        result = run_replay(cfg, trace, backend="c")
        return result, list(result.steps)

    result, steps = benchmark.pedantic(run_with_steps, rounds=3, iterations=1)
    assert len(steps) == result.summary["steps"]
    assert sum(len(s["preempted"]) for s in steps) == result.summary["preemptions_total"] > 0
