"""fpm finalize on campaigns the stand-in onboards (``--probe recorded``), with hand-written reports of fpm assess
and fpm verify: the rules F-1 … F-8, final.json, idempotence, the readers' digest check and twenty kills.

The full campaign is onboarded on the grid at max_model_len 1,200 and a 600-token budget (77 points) so that it
takes a second: its plan stage is the onboard plan stage with those limits."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fpmcore.campaign import finalize, layout, onboard
from fpmcore.documents.errors import FpmError
from fpmcore.documents.jsonio import load_path, loads
from fpmcore.testing import make_host, run_fpm
from tests.collect.conftest import PROBE, standin_host
from tests.collect.standin import StandinRuntime, recorded_probe

ROOT = Path(__file__).resolve().parents[2]
STANDIN = StandinRuntime()

ASSESSMENT = {
    "schema": 1, "kind": "fpmcore.assessment", "run": "run", "repeatable": True, "accepted_unrepeatable": False,
    "summary": {"median": 0.004, "p90": 0.011, "worst": 0.02, "points": 77, "over_bound": []},
}  # fmt: skip
VERIFICATION = {"schema": 1, "verdict": "pass", "summary": {"runs": 2}, "runs": []}


def _small_plan_stage(ctx: Any, c: Any, o: Any) -> None:
    """onboard's plan stage on a small grid (max_model_len 1,200, token budget 600)."""
    from fpmcore.documents.profile import load_profile
    from fpmcore.plan.planning import generate, plan_document, resolve_limits, write_plan

    profile = load_profile(c.path(layout.PROFILE))
    limits = resolve_limits(profile, 0, token_budget=600, max_model_len=1200)
    plan = generate(ctx.host, profile.model, profile, 0, limits)
    doc = plan_document(model=profile.model, profile=profile, deployment=0, limits=limits, plan=plan,
                        smoke=o.smoke)  # fmt: skip
    write_plan(c.path(layout.PLAN), doc)
    c.record("plan", {"profile": ("file", layout.PROFILE)}, {"plan": ("file", layout.PLAN)})


def _report_stage(name: str, file: str, doc: Any) -> Any:
    """A stage that writes a hand-made report (the assessment, the verification) and records itself."""

    def stage(ctx: Any, c: Any, o: Any) -> None:
        index = c.path(layout.RUN_DIR) / "index.json"
        _write(c.path(file), {**doc, "run": {"path": str(c.path(layout.RUN_DIR)), "index_sha256": _sha(index)}}
               if doc.get("kind") == "fpmcore.assessment" else doc)  # fmt: skip
        c.record(name, {"run": ("run", layout.RUN_DIR)}, {"report": ("file", file)})

    return stage


@contextlib.contextmanager
def _seams() -> Iterator[None]:
    """The recorded probe, the small grid's plan stage and hand-made reports in place of the assess and verify
    stages (their verdicts are what these tests vary), and no finalize stage (these tests run fpm finalize), for
    the time of the context only."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(onboard.PROBE_STAGES, "recorded", recorded_probe(PROBE))
        mp.setitem(onboard.RUNNERS, "plan", _small_plan_stage)
        mp.setitem(onboard.RUNNERS, "assess", _report_stage("assess", layout.ASSESSMENT, ASSESSMENT))
        mp.setitem(onboard.RUNNERS, "verify", _report_stage("verify", layout.VERIFICATION, VERIFICATION))
        mp.setitem(onboard.RUNNERS, "finalize", lambda ctx, c, o: None)
        yield


@pytest.fixture
def seams() -> Iterator[None]:
    with _seams():
        yield


def _onboard(model: Path, out: Path, *extra: str):
    return run_fpm("onboard", str(model), "-o", str(out), "--probe", "recorded", *extra, host=standin_host(STANDIN))


def _write(path: Path, doc: Any) -> None:
    path.write_text(json.dumps(doc))


@pytest.fixture(scope="session")
def onboarded(model_dir, tmp_path_factory) -> dict[str, Path]:
    """A full and a smoke campaign, each with a passing assessment and verification."""
    out = {}
    for name, extra in (("full", ()), ("smoke", ("--smoke",))):
        folder = tmp_path_factory.mktemp("campaigns") / name
        with _seams():
            r = _onboard(model_dir, folder, *extra)
        assert r.exit_code == 0, r.stderr
        if name == "smoke":  # the full campaign's assess and verify stages wrote them
            _write(folder / layout.ASSESSMENT, ASSESSMENT)
            _write(folder / layout.VERIFICATION, VERIFICATION)
        out[name] = folder
    return out


@pytest.fixture
def full(onboarded, tmp_path) -> Path:
    return Path(shutil.copytree(onboarded["full"], tmp_path / "full"))


@pytest.fixture
def smoke(onboarded, tmp_path) -> Path:
    return Path(shutil.copytree(onboarded["smoke"], tmp_path / "smoke"))


def _finalize(campaign: Path, *extra: str):
    return run_fpm("finalize", str(campaign), *extra, host=make_host())


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _refused(r, rule: str, text: str, code: int = 1) -> None:
    """Exit ``code`` and the refusal on one line of stderr, its last (onboard reports its stages before)."""
    assert r.exit_code == code, (r.exit_code, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert lines[-1].endswith(f"[{rule}]") and text in lines[-1], r.stderr
    assert lines[-1].startswith("fpm") and not any(line.startswith(("fpm", "Traceback")) for line in lines[:-1])


def _one_byte_changed(path: Path) -> None:
    """One digit of the first wall time replaced by another: still a table, one byte different."""
    data = bytearray(path.read_bytes())
    i = data.index(b'"wall_time_seconds": ') + len(b'"wall_time_seconds": ') + 3
    assert chr(data[i]).isdigit()
    data[i] = ord("1") if data[i] != ord("1") else ord("2")
    path.write_bytes(bytes(data))


# ---------------------------------------------------------------------------
# acceptance, final.json, idempotence
# ---------------------------------------------------------------------------


def test_a_full_campaign_is_finalized_with_every_artifact_and_its_digest(full):
    r = _finalize(full, "--json")
    assert r.exit_code == 0, r.stderr
    doc = r.json()  # only JSON on stdout
    assert (doc["command"], doc["status"]) == ("finalize", "finalized")
    final = load_path(full / layout.FINAL)
    assert doc["final"] == final
    assert final["schema"] == finalize.FINAL_SCHEMA
    assert [(a["role"], a["path"]) for a in final["artifacts"]] == list(finalize.ARTIFACTS)
    for a in final["artifacts"]:
        assert a["sha256"] == _sha(full / a["path"]), a
    paths = {a["path"] for a in final["artifacts"]}
    assert {"profile.json", "plan.json", "run/index.json", "run/r0.json", "table.json", "validation.json",
            "assessment.json", "verification.json"} <= paths  # fmt: skip
    run = load_path(full / "run" / "collect.json")
    assert final["producer"] == load_path(full / "run" / "r0.json")["producer"]
    assert final["producer"]["name"] == "standin_engine_steps"
    assert (final["runtime"], final["point_set"], final["cell"]) == (run["runtime"], "full", run["cell_id"])
    assert final["runtime"] == "vllm==0.33.0"
    assert final["options"] == load_path(full / "onboard.json")["options"]
    assert final["verdicts"] == {
        "validation": "accepted",
        "assessment": {"repeatable": True, "accepted_unrepeatable": False, "summary": ASSESSMENT["summary"]},
        "verification": {"verdict": "pass", "summary": VERIFICATION["summary"]},
    }
    assert final["created_at"].endswith("Z")
    finalize.check_finalized(full)
    finalize.check_finalized(full, required=True)


def test_finalizing_again_an_unchanged_campaign_changes_nothing(full):
    assert _finalize(full).exit_code == 0
    before = (full / layout.FINAL).read_bytes()
    r = _finalize(full)
    assert r.exit_code == 0, r.stderr
    assert "already finalized, unchanged" in r.stdout
    r = _finalize(full, "--json")
    assert r.exit_code == 0 and r.json()["status"] == "unchanged"
    assert (full / layout.FINAL).read_bytes() == before


# ---------------------------------------------------------------------------
# refusals
# ---------------------------------------------------------------------------


def test_a_smoke_campaign_is_refused(smoke):
    r = _finalize(smoke)
    _refused(r, "F-3", "the campaign is a smoke campaign (fpm onboard --smoke)")
    assert not (smoke / layout.FINAL).exists()
    r = _finalize(smoke, "--json")
    assert r.exit_code == 1
    doc = r.json()
    assert (doc["status"], doc["diagnostics"][0]["rule"]) == ("refused", "F-3")


def test_a_run_of_the_smoke_subset_is_refused_whatever_the_options_say(smoke):
    manifest = load_path(smoke / "onboard.json")
    manifest["options"]["smoke"] = False
    _write(smoke / "onboard.json", manifest)
    _refused(_finalize(smoke), "F-3", "the plan is a smoke plan (stage smoke)")


def test_a_campaign_without_a_passing_assessment_is_refused(full):
    (full / layout.ASSESSMENT).unlink()
    _refused(_finalize(full), "F-6", "no assessment.json: the run's repeatability was not assessed")
    failing = {**ASSESSMENT, "repeatable": False,
               "summary": {**ASSESSMENT["summary"], "worst": 0.4, "over_bound": [{"point": 3}, {"point": 9}]}}  # fmt: skip
    _write(full / layout.ASSESSMENT, failing)
    _refused(_finalize(full), "F-6", "the repeatability report does not pass: repeatable false, 2 of 77 points over "
                                     "the bound, worst 0.4")  # fmt: skip
    _write(full / layout.ASSESSMENT, {**failing, "accepted_unrepeatable": True})
    _refused(_finalize(full), "F-6", "repeatable false")  # passing means repeatable
    _write(full / layout.ASSESSMENT, {**ASSESSMENT, "kind": "something.else"})
    _refused(_finalize(full), "F-6", "is not a repeatability report of fpm assess", code=2)
    (full / layout.ASSESSMENT).write_bytes(b'{"schema": 1,')
    _refused(_finalize(full), "F-6", "the repeatability report assessment.json cannot be read", code=2)
    assert not (full / layout.FINAL).exists()


@pytest.mark.parametrize(
    ("report", "code", "text"),
    [
        (None, 1, "no verification.json: the serving validation did not run"),
        ({**VERIFICATION, "verdict": "fail"}, 1, "the serving validation did not pass: verdict fail"),
        ({**VERIFICATION, "verdict": "contended"}, 1, "the serving validation did not pass: verdict contended"),
        ({**VERIFICATION, "verdict": "maybe"}, 2, "is not a serving validation of fpm verify"),
        ({**VERIFICATION, "schema": 2}, 2, "is not a serving validation of fpm verify"),
    ],
)
def test_a_campaign_without_a_passing_serving_validation_is_refused(full, report, code, text):
    if report is None:
        (full / layout.VERIFICATION).unlink()
    else:
        _write(full / layout.VERIFICATION, report)
    _refused(_finalize(full), "F-7", text, code=code)
    assert not (full / layout.FINAL).exists()


def test_an_unfinished_or_changed_onboarding_is_refused(full):
    manifest = load_path(full / "onboard.json")
    _write(full / "onboard.json", {**manifest, "stages": [s for s in manifest["stages"] if s["name"] != "publish"]})
    _refused(_finalize(full), "F-4", "stage publish has not finished; fpm onboard --resume continues it")
    _write(full / "onboard.json", manifest)
    before = _sha(full / "profile.json")
    (full / "profile.json").write_bytes((full / "profile.json").read_bytes() + b"\n")
    _refused(_finalize(full), "F-4", f"stage plan: its input profile (profile.json) changed since the stage ran: "
                                     f"recorded sha256 {before}, found {_sha(full / 'profile.json')}")  # fmt: skip


def test_a_refused_validation_is_refused(full):
    verdict = load_path(full / "validation.json")
    verdict["status"] = "refused"
    _write(full / "validation.json", verdict)
    manifest = load_path(full / "onboard.json")  # as if the stage had recorded this verdict
    for s in manifest["stages"]:
        if s["name"] == "validate":
            s["outputs"]["verdict"]["sha256"] = _sha(full / "validation.json")
    _write(full / "onboard.json", manifest)
    _refused(_finalize(full), "F-5", "the collection is not validated: validation.json status refused")


def test_a_folder_that_is_not_a_campaign_is_refused_with_exit_2(tmp_path):
    _refused(_finalize(tmp_path / "nothing"), "F-1", "not a campaign folder of fpm onboard: no such folder", code=2)
    _refused(_finalize(tmp_path), "F-1", "not a campaign folder of fpm onboard: no onboard.json", code=2)
    (tmp_path / "onboard.json").write_text('{"schema": "fpmcore.onboard/v1", "stages": []}')
    _refused(_finalize(tmp_path), "F-1", "onboard.json: options expected an object, found null", code=2)
    r = _finalize(tmp_path, "--json")
    assert r.exit_code == 2 and r.json()["diagnostics"][0]["rule"] == "F-1"


# ---------------------------------------------------------------------------
# one byte changed after finalization: finalize and every reader refuse, naming the file
# ---------------------------------------------------------------------------


def _replay(campaign: Path, trace: Path, *table: str):
    return run_fpm("replay", str(campaign / "profile.json"), "--trace", str(trace), *table, "--prefix-caching",
                   "on", "--json", host=make_host(entry_points=("vllm_033",)))  # fmt: skip


@pytest.fixture
def trace(tmp_path) -> Path:
    path = tmp_path / "trace.jsonl"
    path.write_text('{"request_id": "a", "arrival_time": 0.0, "prompt_len": 700, "output_len": 4}\n')
    return path


def test_a_changed_byte_of_the_table_is_refused_by_finalize_and_replay(full, trace, tmp_path):
    assert _finalize(full).exit_code == 0
    table = str(full / "table.json")
    assert _replay(full, trace, "--fpm-table", table).exit_code == 0  # unchanged: read
    r = _replay(full, trace, "--campaign", str(full))
    assert r.exit_code == 0, r.stderr
    assert r.json()["latency"]["table"] == table
    recorded = _sha(full / "table.json")
    _one_byte_changed(full / "table.json")
    found = _sha(full / "table.json")
    named = f"the finalized campaign's table.json changed since fpm finalize: final.json records sha256 {recorded}, " \
            f"found {found}"  # fmt: skip
    _refused(_finalize(full), "F-2", named)
    for r in (_replay(full, trace, "--fpm-table", table), _replay(full, trace, "--campaign", str(full)),
              _replay(full, trace, "--campaign", str(full), "--fpm-table", table)):  # fmt: skip
        _refused(r, "F-2", named, code=2)
        assert r.json()["diagnostics"][0]["where"] == table
    # the profile of the campaign is checked too, with a table from elsewhere or none
    elsewhere = tmp_path / "elsewhere.json"
    shutil.copy(full / "table.json", elsewhere)
    _refused(_replay(full, trace, "--fpm-table", str(elsewhere)), "F-2", named, code=2)
    _refused(_replay(full, trace), "F-2", named, code=2)
    with pytest.raises(FpmError) as exc:
        finalize.check_finalized(full)
    assert exc.value.rule == "F-2" and named in exc.value.message and exc.value.where == table


def test_a_missing_artifact_of_a_finalized_campaign_is_named(full):
    assert _finalize(full).exit_code == 0
    recorded = _sha(full / "run" / "r0.json")
    (full / "run" / "r0.json").unlink()
    _refused(_finalize(full), "F-2", f"the finalized campaign's run/r0.json changed since fpm finalize: final.json "
                                     f"records sha256 {recorded}, found no file")  # fmt: skip


def test_replay_campaign_needs_a_finalized_campaign_and_its_own_table(full, trace, tmp_path):
    _refused(_replay(full, trace, "--campaign", str(full)), "F-8", "not a finalized campaign: no final.json", code=2)
    assert _finalize(full).exit_code == 0
    other = tmp_path / "other.json"
    shutil.copy(full / "table.json", other)
    _refused(_replay(full, trace, "--campaign", str(full), "--fpm-table", str(other)), "F-8",
             f"--fpm-table {other} is not the campaign's table", code=2)  # fmt: skip


def test_a_sweep_refuses_a_changed_finalized_campaign(full, trace, tmp_path):
    assert _finalize(full).exit_code == 0
    grid = tmp_path / "grid.json"
    _write(grid, {"profiles": [str(full)], "traces": [str(trace)], "settings": {"max_num_seqs": [4]}})
    host = make_host(entry_points=("vllm_033",))
    r = run_fpm("sweep", str(grid), "-o", str(tmp_path / "r.jsonl"), "--engine", "serial", host=host)
    assert r.exit_code == 0, r.stderr
    _one_byte_changed(full / "table.json")
    r = run_fpm("sweep", str(grid), "-o", str(tmp_path / "r2.jsonl"), "--engine", "serial", host=host)
    _refused(r, "F-2", "the finalized campaign's table.json changed since fpm finalize", code=2)


# ---------------------------------------------------------------------------
# onboard: --resume of a finalized campaign, and the finalize stage
# ---------------------------------------------------------------------------


def test_onboard_resume_of_a_finalized_campaign_checks_its_digests(seams, full, model_dir):
    assert _finalize(full).exit_code == 0
    r = _onboard(model_dir, full, "--resume")
    assert r.exit_code == 0, r.stderr
    assert "publish done before" in r.stderr
    _one_byte_changed(full / "table.json")
    r = _onboard(model_dir, full, "--resume")
    _refused(r, "F-2", "the finalized campaign's table.json changed since fpm finalize", code=2)


def test_the_finalize_stage_of_onboard(seams, full, model_dir, monkeypatch):
    monkeypatch.setitem(onboard.RUNNERS, "finalize", onboard._stage_finalize)
    r = _onboard(model_dir, full, "--resume")
    assert r.exit_code == 0, r.stderr
    assert "finalize done" in r.stderr
    final = load_path(full / layout.FINAL)
    entry = next(s for s in load_path(full / "onboard.json")["stages"] if s["name"] == "finalize")
    assert entry["outputs"]["final"]["sha256"] == _sha(full / layout.FINAL)
    assert {v["path"]: v["sha256"] for v in entry["inputs"].values()} == {
        a["path"]: a["sha256"] for a in final["artifacts"]
    }
    r = _onboard(model_dir, full, "--resume")
    assert r.exit_code == 0 and "finalize done before" in r.stderr
    assert _finalize(full).exit_code == 0  # the finalize stage's own record is consistent
    (full / layout.FINAL).unlink()  # knowingly finalized again: the finalize stage's record is no refusal
    assert _finalize(full).exit_code == 0
    (full / layout.VERIFICATION).write_text(json.dumps({**VERIFICATION, "verdict": "fail"}))
    (full / layout.FINAL).unlink()
    manifest = load_path(full / "onboard.json")
    stages = [s for s in manifest["stages"] if s["name"] != "finalize"]
    for s in stages:  # as if the verify stage had recorded this verdict
        if s["name"] == "verify":
            s["outputs"]["report"]["sha256"] = _sha(full / layout.VERIFICATION)
    _write(full / "onboard.json", {**manifest, "stages": stages})
    r = _onboard(model_dir, full, "--resume")  # a negative verdict of the finalize stage: exit 1
    _refused(r, "F-7", "stage finalize: the serving validation did not pass: verdict fail", code=1)


# ---------------------------------------------------------------------------
# kills
# ---------------------------------------------------------------------------

KILLS = 20


def _state(campaign: Path) -> str:
    """``absent`` (no final.json, no temporary file), ``temporary`` (no final.json, a whole temporary file left by a
    kill inside the write) or ``whole`` (final.json whole and its digests hold)."""
    temps = list(campaign.glob(f".{layout.FINAL}.*.tmp"))
    if not (campaign / layout.FINAL).exists():
        return "temporary" if temps else "absent"
    loads((campaign / layout.FINAL).read_bytes(), "final.json")  # whole, strict JSON
    finalize.check_finalized(campaign, required=True)
    return "whole"


def test_twenty_kills_of_finalize_leave_final_json_absent_or_whole(onboarded, tmp_path):
    """fpm finalize killed (SIGKILL) at 20 random moments, half of them on a campaign finalized before: final.json
    is then absent or whole and valid (an earlier one byte for byte), and a new fpm finalize succeeds.  The
    stand-in sleeps 0.6 s inside the atomic write (between the whole temporary file and its rename) to widen
    that window."""
    env = {**os.environ, "FPM_STANDIN_WRITE_SLEEP": "0.6"}

    def cmd(campaign: Path) -> list[str]:
        return [sys.executable, "-m", "tests.collect.fpm_standin", "finalize", str(campaign)]

    source = onboarded["full"]
    started = time.monotonic()
    done = subprocess.run(cmd(Path(shutil.copytree(source, tmp_path / "timed"))), cwd=ROOT, env=env,
                          capture_output=True)  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()
    duration = time.monotonic() - started  # of an uninterrupted fpm finalize: the kills fall within it
    rng = random.Random(20261202)
    kills = attempts = 0
    states: list[str] = []
    while kills < KILLS:
        attempts += 1
        assert attempts < 60, f"only {kills} kills in {attempts} attempts"
        campaign = Path(shutil.copytree(source, tmp_path / f"c{attempts}"))
        earlier = None
        if attempts % 2 == 0:  # a campaign finalized before: the kill must leave its final.json as it is
            assert _finalize(campaign).exit_code == 0
            earlier = (campaign / layout.FINAL).read_bytes()
        proc = subprocess.Popen(cmd(campaign), cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            _, err = proc.communicate(timeout=rng.uniform(0.1, 1.05) * duration)
            assert proc.returncode == 0, err.decode()
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
            proc.communicate()
            kills += 1
        state = _state(campaign)
        if earlier is not None:
            assert state == "whole" and (campaign / layout.FINAL).read_bytes() == earlier
        else:
            states.append(state)
        r = _finalize(campaign)  # finalizing again after any kill succeeds
        assert r.exit_code == 0, r.stderr
        assert _state(campaign) == "whole"
        assert not list(campaign.glob(".*.tmp"))  # a temporary file a kill left is removed
        if earlier is not None:
            assert (campaign / layout.FINAL).read_bytes() == earlier
        shutil.rmtree(campaign)
    assert {"absent", "temporary"} <= set(states), states  # kills fell before and inside the write
