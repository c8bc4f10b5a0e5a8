"""fpm assess: a fresh engine re-measures a seeded sample of a run's points (A-45), and fpm publish --assessment.

The stand-in engine's step times are a function of the prompts (5 % noise), and an assessment uses new prompt
content, so a quiet run re-measures within a few per cent; a *silent* burst (a slowdown no contention record
shows, :mod:`tests.collect.standin`) over every sample of one point of a one-pass run corrupts that knot by
75 %, which only a re-measurement can find.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from fpmcore.collect import assess, store
from fpmcore.documents.jsonio import load_path, loads
from fpmcore.testing import run_fpm
from tests.collect.conftest import standin_host
from tests.collect.standin import StandinConfig, StandinRuntime

ROOT = Path(__file__).resolve().parents[2]


def _fpm(runtime: StandinRuntime, *argv: str):
    return run_fpm(*argv, host=standin_host(runtime))


@pytest.fixture(scope="module")
def quiet_run(small_plan, model_dir, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("assess") / "run"
    r = _fpm(StandinRuntime(), "collect", str(small_plan), "--model-dir", str(model_dir), "-o", str(out),
             "--retake-pause", "0")  # fmt: skip
    assert r.exit_code == 0, r.stderr
    return out


def test_a_quiet_run_is_repeatable(quiet_run, small_plan, tmp_path):
    """Twelve of the 77 points re-measured on a fresh engine: every deviation within the stand-in's noise."""
    report = tmp_path / "assessment.json"
    r = _fpm(StandinRuntime(), "assess", str(quiet_run), "--plan", str(small_plan), "-o", str(report),
             "--points", "12", "--seed", "3", "--json")  # fmt: skip
    assert r.exit_code == 0, r.stderr
    doc = r.json()
    assert doc == load_path(report)
    assert (doc["schema"], doc["kind"], doc["repeatable"]) == (1, "fpmcore.assessment", True)
    assert doc["summary"]["points"] == 12 and len(doc["points"]) == 12
    assert [p["benchmark_id"] for p in doc["points"]] == assess.choose_points(range(1, 78), 12, 3)
    assert doc["summary"]["median"] < 0.05 and doc["summary"]["worst"] < 0.06 and doc["summary"]["over_bound"] == []
    for p in doc["points"]:
        assert p["deviation"] == pytest.approx((p["assessed_seconds"] - p["run_seconds"]) / p["run_seconds"])
    assert doc["bounds"] == {"median": 0.05, "p90": 0.15, "worst": 0.35}
    m = doc["machine"]  # the fastest canary after a visit, in the run and in the assessment
    assert 0 < m["run_canary_seconds"] < 0.1 and m["ratio"] == m["assessed_canary_seconds"] / m["run_canary_seconds"]
    assert (
        doc["run"]["index_sha256"] == __import__("hashlib").sha256((quiet_run / "index.json").read_bytes()).hexdigest()
    )
    table = tmp_path / "table.json"
    r = _fpm(StandinRuntime(), "publish", str(quiet_run), "--plan", str(small_plan), "-o", str(table),
             "--assessment", str(report))  # fmt: skip
    assert r.exit_code == 0, r.stderr
    src = load_path(table)["source"]["assessment"]
    assert (src["repeatable"], src["accepted_unrepeatable"]) == (True, False)


def test_a_machine_that_changed_speed_shows_as_a_shift_not_as_scatter(quiet_run, small_plan, tmp_path):
    """A fresh engine 12 % slower on every step (a machine state the counters cannot see): every point moves
    by about +12 %, so the median deviation is the shift and the points stay a few per cent around it; the run
    is not repeatable (its knots are 12 % from what this machine does now), and the message says how."""
    slower = StandinRuntime(StandinConfig(silent_bursts=((0, 10**9),), burst_slowdown=1.12))
    report = tmp_path / "assessment.json"
    r = _fpm(slower, "assess", str(quiet_run), "--plan", str(small_plan), "-o", str(report), "--points", "24",
             "--seed", "5")  # fmt: skip
    assert r.exit_code == 1, r.stderr
    s = load_path(report)["summary"]
    assert s["shift"] == pytest.approx(0.12, abs=0.03) and s["scatter"] < 0.04
    assert s["median"] == pytest.approx(abs(s["shift"]), abs=0.02)
    assert "every point moved a median +1" in r.stdout and "around that" in r.stdout
    quiet = _fpm(StandinRuntime(), "assess", str(quiet_run), "--plan", str(small_plan), "-o",
                 str(tmp_path / "quiet.json"), "--points", "24", "--seed", "5")  # fmt: skip
    q = load_path(tmp_path / "quiet.json")["summary"]
    assert quiet.exit_code == 0 and abs(q["shift"]) < 0.03 and q["scatter"] < 0.04


def test_a_corrupted_knot_is_found_and_its_run_is_not_published(small_plan, model_dir, tmp_path):
    """A one-pass run whose point 2 ran entirely during a slowdown the counters could not see: the assessment
    finds point 2 off by about −43 % (1 / 1.75 − 1) and calls the run not repeatable (exit 1); fpm publish
    refuses it naming the report (exit 1, A-45) unless --accept-unrepeatable, which the table records."""
    ref = tmp_path / "ref"
    r = _fpm(StandinRuntime(), "collect", str(small_plan), "--model-dir", str(model_dir), "-o", str(ref),
             "--passes", "1", "--retake-pause", "0")  # fmt: skip
    assert r.exit_code == 0, r.stderr
    rec = load_path(ref / "points" / store.record_name(2))
    slow = StandinRuntime(StandinConfig(silent_bursts=((rec["forward_start"], rec["forward_end"]),)))
    run = tmp_path / "run"
    r = _fpm(slow, "collect", str(small_plan), "--model-dir", str(model_dir), "-o", str(run), "--passes", "1",
             "--retake-pause", "0")  # fmt: skip
    assert r.exit_code == 0, r.stderr
    report = tmp_path / "assessment.json"
    r = _fpm(StandinRuntime(), "assess", str(run), "--plan", str(small_plan), "-o", str(report), "--points", "77")
    assert r.exit_code == 1
    assert "NOT repeatable [A-45]" in r.stdout and "points beyond 15%: 2" in r.stdout
    doc = load_path(report)
    (bad,) = [p for p in doc["points"] if p["benchmark_id"] == 2]
    assert bad["deviation"] == pytest.approx(1 / 1.75 - 1, abs=0.05)
    assert doc["summary"]["over_bound"] == [2] and doc["summary"]["median"] < 0.05 and doc["repeatable"] is False
    table = tmp_path / "table.json"
    r = _fpm(StandinRuntime(), "publish", str(run), "--plan", str(small_plan), "-o", str(table), "--assessment",
             str(report))  # fmt: skip
    assert r.exit_code == 1 and not table.exists()
    assert "the run is not repeatable: median deviation" in r.stderr and str(report) in r.stderr
    assert r.stderr.rstrip().endswith("[A-45]")
    r = _fpm(StandinRuntime(), "publish", str(run), "--plan", str(small_plan), "-o", str(table), "--assessment",
             str(report), "--accept-unrepeatable")  # fmt: skip
    assert r.exit_code == 0, r.stderr
    src = load_path(table)["source"]["assessment"]
    assert (src["repeatable"], src["accepted_unrepeatable"], src["summary"]["over_bound"]) == (False, True, [2])


def test_assess_refusals(quiet_run, small_plan, model_dir, tmp_path):
    """A smoke run is no source; a report of another run is refused by publish; an unfinished run is refused."""
    smoke = tmp_path / "smoke"
    assert _fpm(StandinRuntime(), "collect", str(small_plan), "--model-dir", str(model_dir), "-o", str(smoke),
                "--smoke").exit_code == 0  # fmt: skip
    r = _fpm(StandinRuntime(), "assess", str(smoke), "--plan", str(small_plan), "-o", str(tmp_path / "a.json"))
    assert r.exit_code == 2 and "a smoke run is no source for an assessment" in r.stderr and "[A-45]" in r.stderr
    report = tmp_path / "q.json"
    assert _fpm(StandinRuntime(), "assess", str(quiet_run), "--plan", str(small_plan), "-o", str(report),
                "--points", "3").exit_code == 0  # fmt: skip
    r = _fpm(StandinRuntime(), "publish", str(smoke), "--plan", str(small_plan), "-o", str(tmp_path / "t.json"),
             "--assessment", str(report))  # fmt: skip
    assert r.exit_code == 2 and "the assessment is of another run" in r.stderr
    (smoke / "index.json").unlink()
    r = _fpm(StandinRuntime(), "assess", str(smoke), "--plan", str(small_plan), "-o", str(tmp_path / "b.json"))
    assert r.exit_code == 2 and "smoke" in r.stderr


def test_kills_of_assess_leave_no_partial_report(quiet_run, small_plan, tmp_path):
    """fpm assess killed at random moments: the report is absent or whole, never partial; the last run writes it."""
    report = tmp_path / "assessment.json"
    cmd = [sys.executable, "-m", "tests.collect.fpm_standin", "assess", str(quiet_run), "--plan", str(small_plan),
           "-o", str(report), "--points", "12"]  # fmt: skip
    env = {**os.environ, "FPM_STANDIN_STEP_SLEEP": "0.01"}
    rng = random.Random(1202)
    kills = 0
    for _ in range(8):
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            proc.communicate(timeout=rng.uniform(0.3, 1.5))
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
            proc.communicate()
            kills += 1
        if report.exists():
            assert loads(report.read_bytes())["kind"] == "fpmcore.assessment"
    done = subprocess.run(cmd, cwd=ROOT, env={**env, "FPM_STANDIN_STEP_SLEEP": "0"}, capture_output=True)
    assert done.returncode == 0, done.stderr.decode()
    assert kills >= 4 and loads(report.read_bytes())["repeatable"] is True
