"""fpm verify on the live vLLM 0.32.0 CPU engine (marked live: tox -e vllm032-live).

The tiny plain model and the tiny Mamba2 hybrid are onboarded (``--smoke``:
probe, import, plan, collect, validate, publish) and a short Poisson trace is served on the engine with the
campaign's deployment and replayed with its table.  The test checks that the
report is well formed and that the serving was measured — request times,
steps with their workload and contention, the load average — not the size of
the errors, which depend on what else the machine runs.  One engine at a
time, one OpenMP thread.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fpmcore.documents.jsonio import loads
from fpmcore.testing import make_host, run_fpm

pytestmark = pytest.mark.live


@pytest.fixture(scope="module", params=["llama", "granite-hybrid"])
def campaign(request, tiny_models, tmp_path_factory) -> Path:
    kind = request.param
    model = Path(tiny_models.write_model(kind, tmp_path_factory.mktemp("models") / kind, seed=0)["dir"])
    out = tmp_path_factory.mktemp("campaign") / kind
    caching = ("--caching", "off") if kind == "granite-hybrid" else ()  # its Mamba2 layers need it (D-L12)
    r = run_fpm("onboard", str(model), "-o", str(out), "--smoke", "--max-model-len", "512", "--dtype", "float32",
                "--kv-cache-space", "0.25", "--repetitions", "3", "--warmup", "1", *caching,
                host=make_host(entry_points=("vllm_032",)))  # fmt: skip
    assert r.exit_code == 0, r.stderr
    return out


def test_verify_serves_a_poisson_trace_and_reports_it(campaign, tmp_path):
    report = tmp_path / "report.json"
    r = run_fpm("verify", str(campaign), "--rate", "4", "--requests", "5", "--prompt", "16:96", "--output", "2:8",
                "--runs", "1", "--warmup-requests", "1", "--json", "-o", str(report),
                host=make_host(entry_points=("vllm_032",)))  # fmt: skip
    assert r.exit_code in (0, 1), r.stderr
    doc = json.loads(r.stdout)
    assert loads(report.read_bytes()) == doc
    assert (doc["schema"], doc["runtime"], doc["plugin"]) == (1, "vllm==0.32.0", "vllm_032")
    assert doc["verdict"] in ("pass", "fail", "contended") and r.exit_code == (0 if doc["verdict"] == "pass" else 1)
    assert doc["deployment_differences"] == []
    (run,) = doc["runs"]
    assert run["requests"] == 5 and len(run["request_timings"]) == 5
    for t in run["request_timings"]:
        s = t["served"]
        assert 0 < s["ttft_s"] <= s["e2e_s"] and 2 <= s["output_tokens"] <= 8
        assert t["predicted"]["output_tokens"] == s["output_tokens"]
    steps = run["served_steps"]
    assert steps and len(steps) == run["served"]["steps"]
    # random prompts share no block: every prompt token is prefilled once, every later token decoded once
    timings = run["request_timings"]
    assert sum(st["scheduled"]["sum_prefill_tokens"] for st in steps) == sum(t["prompt_len"] for t in timings)
    assert sum(st["scheduled"]["num_decode_requests"] for st in steps) == sum(t["output_len"] - 1 for t in timings)
    assert all(st["wall_s"] > 0 and st["contention"] is not None for st in steps)  # Linux: every step measured
    assert all(st["contention"]["cpu_seconds"] > 0 for st in steps)  # the calling thread's own clock
    c = run["contention"]
    assert c["steps"] == len(steps) and c["unmeasured_steps"] == 0 and 0 <= c["contended_time_fraction"] <= 1
    assert len(run["load_average"]["start"]) == 3 and len(run["load_average"]["end"]) == 3
    assert {"decode", "prefill"} & set(run["steps"])
    for m in ("ttft", "tpot", "e2e"):
        assert set(doc["summary"][m]) == {"median", "p90"}
    assert isinstance(doc["summary"]["makespan"], float)
