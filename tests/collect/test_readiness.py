"""Readiness after the smoke collection (fpmcore.campaign.readiness): blockers with their rule and fix, gaps, and a
full campaign that does not start its full collection while blocked — not even on --resume."""

from __future__ import annotations

from pathlib import Path

import pytest

from fpmcore.campaign import onboard
from fpmcore.campaign.readiness import dtype_label, readiness
from fpmcore.documents.jsonio import load_path
from fpmcore.documents.profile import load_profile
from fpmcore.testing import run_fpm
from tests.collect.conftest import PROBE, plan_of, standin_host
from tests.collect.standin import StandinConfig, StandinRuntime, recorded_probe


@pytest.fixture
def probe_stage(monkeypatch) -> None:
    monkeypatch.setitem(onboard.PROBE_STAGES, "recorded", recorded_probe(PROBE))


def _onboard(runtime: StandinRuntime, model: Path, out: Path, *extra: str):
    return run_fpm("onboard", str(model), "-o", str(out), "--probe", "recorded", "--retake-pause", "0", *extra,
                   host=standin_host(runtime))  # fmt: skip


def test_a_busy_machine_blocks_the_full_collection(probe_stage, model_dir, tmp_path):
    """A neighbour that never stops: the smoke's first point cannot get clean samples (A-43), readiness says
    not ready with that blocker and its fix, the full collection never starts (exit 1); --resume reports the
    same blocker without starting an engine."""
    busy = StandinRuntime(StandinConfig(bursts=((0, 10**9),)))
    out = tmp_path / "campaign"
    r = _onboard(busy, model_dir, out, "--max-contended", "2")
    assert r.exit_code == 1
    assert "fpm: not ready for the full collection: a smoke point was rejected: point" in r.stderr
    assert "samples were contended" in r.stderr and "fix: the full collection would stop" in r.stderr
    doc = load_path(out / "readiness.json")
    assert doc["ready_for_full_collection"] is False
    assert [b["rule"] for b in doc["blockers"]] == ["A-43"]
    assert not (out / "run").exists() and (out / "smoke").is_dir()
    stages = [s["name"] for s in load_path(out / "onboard.json")["stages"]]
    assert stages == ["probe", "import", "plan", "smoke", "readiness"]
    engines = len(busy.engines)
    r = _onboard(busy, model_dir, out, "--max-contended", "2", "--resume")
    assert r.exit_code == 1 and "not ready for the full collection" in r.stderr
    assert len(busy.engines) == engines and not (out / "run").exists()


def test_an_engine_that_falls_back_to_another_dtype_blocks(probe_stage, model_dir, tmp_path):
    """--dtype float32 asked, the engine says it runs bfloat16: blocker A-46 naming both."""
    runtime = StandinRuntime(StandinConfig(dtype="torch.bfloat16"))
    out = tmp_path / "campaign"
    r = _onboard(runtime, model_dir, out, "--dtype", "float32")
    assert r.exit_code == 1
    doc = load_path(out / "readiness.json")
    (b,) = doc["blockers"]
    assert b["rule"] == "A-46" and b["message"] == "the engine ran the model in bfloat16, not in the float32 asked for"
    assert doc["smoke"]["points"] == 5 and doc["smoke"]["contended_samples"] == 0


def test_a_plan_made_for_another_capacity_blocks(gdn_profile, small_plan, model_dir, tmp_path):
    """G-26: the plan of the campaign regenerated from the profile at the plan's own limits (max_model_len 1,200,
    a 600-token budget) must give its drop counters and its staged list; a plan whose capacity rule dropped
    five more candidates, or whose list is another, blocks, each with its fix.  The plan as made is ready."""
    smoke = tmp_path / "smoke"
    assert run_fpm("collect", str(small_plan), "--model-dir", str(model_dir), "-o", str(smoke), "--smoke",
                   host=standin_host(StandinRuntime())).exit_code == 0  # fmt: skip
    host, profile = standin_host(StandinRuntime()), load_profile(gdn_profile)
    plan = plan_of(small_plan)
    assert readiness(smoke, plan, host=host, profile=profile)["blockers"] == []
    plan["dropped"]["capacity"] += 5
    plan["options"]["benchmark_points"]["manifest_sha256"] = "0" * 64
    doc = readiness(smoke, plan, host=host, profile=profile)
    assert doc["ready_for_full_collection"] is False
    assert [b["rule"] for b in doc["blockers"]] == ["G-26", "G-26"]
    assert "the plan's drop counters" in doc["blockers"][0]["message"]
    assert doc["blockers"][1]["fix"] == "plan again from the campaign's profile"


def test_dtype_labels():
    assert [dtype_label(x) for x in ("torch.float32", "half", "bf16", "bfloat16", None, "")] == [
        "float32", "float16", "bfloat16", "bfloat16", None, None]  # fmt: skip
