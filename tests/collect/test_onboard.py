"""fpm onboard on the stand-in engine with a recorded probe: the stages, the manifest, resume, changed inputs
and twenty kills."""

from __future__ import annotations

import hashlib
import os
import random
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from fpmcore.campaign import onboard
from fpmcore.documents.jsonio import load_path
from fpmcore.testing import make_host, run_fpm
from fpmcore.validate.reader import validate_run
from tests.collect.conftest import PROBE, standin_host
from tests.collect.standin import StandinRuntime, recorded_probe
from tests.collect.test_kill import whole_files

ROOT = Path(__file__).resolve().parents[2]
FILES = ("onboard.json", "plan.json", "profile.json", "table.json", "validation.json")


@pytest.fixture
def stages(monkeypatch) -> StandinRuntime:
    monkeypatch.setitem(onboard.PROBE_STAGES, "recorded", recorded_probe(PROBE))
    return STANDIN


STANDIN = StandinRuntime()


def _onboard(model: Path, out: Path, *extra: str):
    host = standin_host(STANDIN)
    return run_fpm("onboard", str(model), "-o", str(out), "--probe", "recorded", *extra, host=host)


def test_onboard_runs_every_stage_and_records_their_digests(stages, model_dir, tmp_path):
    out = tmp_path / "campaign"
    r = _onboard(model_dir, out, "--smoke", "--json")
    assert r.exit_code == 0, r.stderr
    assert sorted(p.name for p in out.iterdir()) == [
        "onboard.json",
        "plan.json",
        "probe",
        "profile.json",
        "readiness.json",
        "run",
        "table.json",
        "validation.json",
    ]
    ready = load_path(out / "readiness.json")
    assert (ready["kind"], ready["ready_for_full_collection"], ready["blockers"]) == ("fpmcore.readiness", True, [])
    assert ready["smoke"] == {"run": "run", "points": 5, "measured_samples": 30, "contended_samples": 0}
    manifest = load_path(out / "onboard.json")
    assert [s["name"] for s in manifest["stages"]] == list(onboard.STAGES)
    sha = {n: hashlib.sha256((out / n).read_bytes()).hexdigest() for n in FILES}
    by = {s["name"]: s for s in manifest["stages"]}
    profile = by["import"]["outputs"]["profile"]["sha256"]
    assert profile == sha["profile.json"] == by["plan"]["inputs"]["profile"]["sha256"]
    assert by["plan"]["outputs"]["plan"]["sha256"] == sha["plan.json"] == by["collect"]["inputs"]["plan"]["sha256"]
    run_index = hashlib.sha256((out / "run" / "index.json").read_bytes()).hexdigest()
    assert by["collect"]["outputs"]["run"]["sha256"] == run_index == by["publish"]["inputs"]["run"]["sha256"]
    assert by["publish"]["outputs"]["table"]["sha256"] == sha["table.json"]
    assert (
        by["probe"]["inputs"]["model_config"]["sha256"]
        == hashlib.sha256((PROBE / "model-config.json").read_bytes()).hexdigest()
    )
    table = load_path(out / "table.json")
    plan = load_path(out / "plan.json")
    assert len(table["rows"]) == len(plan["smoke"]) == 5
    assert table["source"]["plan_sha256"] == plan["plan_sha256"]
    assert load_path(out / "validation.json")["status"] == "accepted"
    assert r.json()["manifest"] == manifest
    # the published table is the one fpm replay reads
    trace = tmp_path / "trace.jsonl"
    trace.write_text('{"request_id": "a", "arrival_time": 0.0, "prompt_len": 700, "output_len": 4}\n')
    rep = run_fpm(
        "replay",
        str(out / "profile.json"),
        "--trace",
        str(trace),
        "--fpm-table",
        str(out / "table.json"),
        "--prefix-caching",
        "on",
        "--json",
        host=make_host(entry_points=("vllm_033",)),
    )  # its replay rules
    assert rep.exit_code == 0, rep.stderr


def test_resume_continues_at_the_first_unfinished_stage(stages, model_dir, tmp_path):
    out = tmp_path / "campaign"
    assert _onboard(model_dir, out, "--smoke").exit_code == 0
    table = (out / "table.json").read_bytes()
    manifest = load_path(out / "onboard.json")
    # as if killed during the collection: plan done, collect not recorded, three points measured
    manifest["stages"] = manifest["stages"][:3]
    (out / "onboard.json").write_text(__import__("json").dumps(manifest))
    for name in ("validation.json", "table.json"):
        (out / name).unlink()
    for name in ("r0.json", "index.json", "repetitions.jsonl"):
        (out / "run" / name).unlink()
    for p in sorted((out / "run" / "points").iterdir())[3:]:
        p.unlink()
    stages.engines.clear()
    r = _onboard(model_dir, out, "--smoke", "--resume")
    assert r.exit_code == 0, r.stderr
    assert "probe done before" in r.stderr and "collect running" in r.stderr
    assert len(stages.engines) == 1  # the collection resumed: one engine for the two missing points
    assert (out / "table.json").read_bytes().split(b'"rows"')[1] == table.split(b'"rows"')[1]


def test_a_changed_input_is_refused_naming_the_stage_and_the_digests(stages, model_dir, tmp_path):
    out = tmp_path / "campaign"
    assert _onboard(model_dir, out, "--smoke").exit_code == 0
    edited = tmp_path / "edited"
    shutil.copytree(out, edited)
    before = hashlib.sha256((edited / "plan.json").read_bytes()).hexdigest()
    (edited / "plan.json").write_bytes(
        (edited / "plan.json").read_bytes().replace(b'"stage": "smoke"', b'"stage": "full"')
    )
    after = hashlib.sha256((edited / "plan.json").read_bytes()).hexdigest()
    r = _onboard(model_dir, edited, "--smoke", "--resume")
    assert r.exit_code == 2
    assert (
        f"stage collect: its input plan (plan.json) changed since the stage ran: recorded sha256 {before}, "
        f"found {after}"
    ) in r.stderr
    reprobed = tmp_path / "reprobed"
    shutil.copytree(out, reprobed)
    obs = next((reprobed / "probe").rglob("runtime-observation-scheduler-dp0.json"))
    obs.write_bytes(obs.read_bytes() + b"\n")
    r = _onboard(model_dir, reprobed, "--smoke", "--resume")
    assert r.exit_code == 2 and "stage import: its input evidence (probe) changed since the stage ran" in r.stderr
    r = _onboard(model_dir, out, "--resume")  # without --smoke: other options than the campaign's
    assert r.exit_code == 2 and "--resume: the options differ from the campaign's" in r.stderr
    r = _onboard(model_dir, out, "--smoke")
    assert r.exit_code == 2 and "add --resume to continue it" in r.stderr


def test_onboard_refuses_a_folder_that_is_not_a_model(stages, tmp_path):
    r = _onboard(tmp_path, tmp_path / "campaign", "--smoke")
    assert r.exit_code == 2 and "not a model folder: cannot read config.json" in r.stderr
    assert not (tmp_path / "campaign").exists()


def _progress(out: Path) -> tuple[int, int]:
    stages = len(load_path(out / "onboard.json")["stages"]) if (out / "onboard.json").exists() else -1
    points = len(list((out / "run" / "points").glob("0*.json"))) if (out / "run" / "points").exists() else 0
    return stages, points


def test_twenty_kills_of_onboard_resume_to_the_uninterrupted_table(stages, model_dir, tmp_path):
    """fpm onboard --smoke killed at 20 random moments, resumed each time: the campaign validates and its table
    has the rows of an uninterrupted onboarding.  A stage that is killed restarts, so a kill that made no progress
    doubles the next delay (every stage finishes eventually); kills after the campaign finished hit its resume.
    The stand-in sleeps a little in each step, in the probe and before each stage is recorded, to widen those
    windows."""
    env = {
        **os.environ,
        "FPM_STANDIN_STEP_SLEEP": "0.006",
        "FPM_STANDIN_PROBE_SLEEP": "0.1",
        "FPM_STANDIN_RECORD_SLEEP": "0.2",
    }

    def cmd(out: Path) -> list[str]:
        return [sys.executable, "-m", "tests.collect.fpm_standin", "onboard", str(model_dir), "-o", str(out),
                "--probe", "recorded", "--smoke", "--repetitions", "7"]  # fmt: skip

    reference = tmp_path / "reference"
    done = subprocess.run(cmd(reference), cwd=ROOT, env=env, capture_output=True)
    assert done.returncode == 0, done.stderr.decode()
    out = tmp_path / "killed"
    rng = random.Random(1201)
    kills = attempts = stalls = 0
    stages_at_kill, finished = [], False
    while kills < 20:
        attempts += 1
        assert attempts < 100
        before = _progress(out)
        proc = subprocess.Popen(cmd(out) + (["--resume"] if out.exists() else []), cwd=ROOT, env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
        try:
            # a finished campaign's resume takes a fraction of a second: kill it within that fraction
            window = rng.uniform(0.05, 0.35) if finished else rng.uniform(0.3, 1.0) * 2**stalls
            _, err = proc.communicate(timeout=window)
            assert proc.returncode == 0, err.decode()
            finished, stalls = True, 0  # later kills hit the resume of a finished campaign
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
            proc.communicate()
            kills += 1
            stalls = stalls + 1 if _progress(out) == before and not finished else 0
            stages_at_kill.append(_progress(out)[0])
            if (out / "run").exists():
                whole_files(out / "run")
    final = subprocess.run(cmd(out) + ["--resume"], cwd=ROOT, env=env, capture_output=True)
    assert final.returncode == 0, final.stderr.decode()
    assert len(set(stages_at_kill)) >= 3, stages_at_kill  # the kills fell into several stages
    plan = load_path(out / "plan.json")
    (result,) = validate_run(standin_host(STANDIN), out / "run", plan)
    assert result.status == "accepted", result.diagnostics
    assert load_path(out / "table.json")["rows"] == load_path(reference / "table.json")["rows"]


def test_a_full_campaign_runs_every_stage_to_its_finalization(model_dir, tmp_path, monkeypatch):
    """Without --smoke (on the small grid of the finalize tests): the smoke subset into smoke/, readiness ready,
    the full collection, validation, a repeatable assessment (every point of the 77: at most 32 re-measured),
    the published table recording it, a passing verification against the served stand-in, and final.json
    pinning it all; a resume finds every stage done and starts no engine."""
    from tests.collect.test_finalize import _small_plan_stage

    monkeypatch.setitem(onboard.PROBE_STAGES, "recorded", recorded_probe(PROBE))
    monkeypatch.setitem(onboard.RUNNERS, "plan", _small_plan_stage)
    runtime = StandinRuntime()
    out = tmp_path / "campaign"
    r = run_fpm("onboard", str(model_dir), "-o", str(out), "--probe", "recorded", "--retake-pause", "0",
                host=standin_host(runtime))  # fmt: skip
    assert r.exit_code == 0, r.stderr
    manifest = load_path(out / "onboard.json")
    assert [s["name"] for s in manifest["stages"]] == list(onboard.FULL)
    assert sorted(p.name for p in out.iterdir()) == sorted([
        "onboard.json", "probe", "profile.json", "plan.json", "smoke", "readiness.json", "run", "validation.json",
        "assessment.json", "table.json", "verification.json", "final.json"])  # fmt: skip
    assert load_path(out / "readiness.json")["ready_for_full_collection"] is True
    assessment = load_path(out / "assessment.json")
    assert assessment["repeatable"] is True and assessment["summary"]["points"] == 32
    assert load_path(out / "table.json")["source"]["assessment"]["repeatable"] is True
    verification = load_path(out / "verification.json")
    assert verification["verdict"] == "pass" and verification["summary"]["noise_floor"]["makespan"] == 0.0
    final = load_path(out / "final.json")
    assert {a["path"] for a in final["artifacts"]} >= {"table.json", "assessment.json", "verification.json"}
    engines = len(runtime.engines)
    r = run_fpm("onboard", str(model_dir), "-o", str(out), "--probe", "recorded", "--retake-pause", "0",
                "--resume", host=standin_host(runtime))  # fmt: skip
    assert r.exit_code == 0 and r.stderr.count("done before") == len(onboard.FULL)
    assert len(runtime.engines) == engines
