"""fpm verify end to end on the stand-in engine, on a campaign made by fpm onboard --probe recorded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fpmcore.collect import onboard
from fpmcore.jsonio import load_path, loads
from fpmcore.replay.table import load_table
from fpmcore.testing import make_host, run_fpm
from tests.collect.conftest import PROBE, standin_host
from tests.collect.standin import StandinConfig, StandinRuntime, recorded_probe


@pytest.fixture(scope="module")
def campaign(model_dir, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("verify") / "campaign"
    saved = dict(onboard.PROBE_STAGES)
    onboard.PROBE_STAGES["recorded"] = recorded_probe(PROBE)
    try:
        r = run_fpm("onboard", str(model_dir), "-o", str(out), "--probe", "recorded", "--smoke",
                    host=standin_host(StandinRuntime()))  # fmt: skip
    finally:
        onboard.PROBE_STAGES.clear()
        onboard.PROBE_STAGES.update(saved)
    assert r.exit_code == 0, r.stderr
    return out


def verify(campaign: Path, *extra: str, runtime: StandinRuntime | None = None):
    return run_fpm("verify", str(campaign), *extra, host=standin_host(runtime or StandinRuntime()))


LIGHT = ("--rate", "0.5", "--requests", "6", "--prompt", "64:400", "--output", "2:12", "--runs", "2",
         "--warmup-requests", "2")  # fmt: skip


def test_a_served_trace_equal_to_its_prediction_has_no_error(campaign):
    """The stand-in timed by the campaign's own table is the engine the replay predicts: every error is ~0."""
    runtime = StandinRuntime(StandinConfig(serve_table=load_table(campaign / "table.json")))
    r = verify(campaign, *LIGHT, "--json", runtime=runtime)
    assert r.exit_code == 0, r.stderr
    doc = r.json()
    assert doc["schema"] == 1 and doc["verdict"] == "pass" and doc["runtime"] == "vllm==0.33.0"
    for run in doc["runs"]:
        e = run["errors"]
        for m in ("ttft", "tpot", "e2e"):
            assert e[m]["n"] >= 5 and e[m]["median"] == pytest.approx(0, abs=1e-9), (m, e[m])
            assert e[m]["p90"] == pytest.approx(0, abs=1e-9)
            for f in ("p50", "p90", "mean"):
                assert e["distribution"][m][f] == pytest.approx(0, abs=1e-9)
        assert e["makespan"] == pytest.approx(0, abs=1e-9) and e["throughput"] == pytest.approx(0, abs=1e-9)
        for kind in run["steps"].values():
            assert kind["median_error"] == pytest.approx(0, abs=1e-9)
            assert kind["served_s"] == pytest.approx(kind["predicted_s"])
        assert not run["contended"] and run["contention"]["contended_steps"] == 0
        assert run["served"]["steps"] == run["predicted"]["steps"]
    s = doc["summary"]
    assert s["ttft"]["median"] == pytest.approx(0, abs=1e-9) and s["makespan"] == pytest.approx(0, abs=1e-9)
