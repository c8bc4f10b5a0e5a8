"""A tampered onboard.json or collect.json on --resume: one line naming the file and the value, exit 2; a run's
point records are its own regular files."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from fpmcore.campaign import onboard
from fpmcore.testing import run_fpm
from tests.collect.conftest import PROBE, standin_host
from tests.collect.standin import StandinRuntime, recorded_probe

STANDIN = StandinRuntime()


@pytest.fixture(scope="module")
def campaign(model_dir, tmp_path_factory):
    """One finished smoke campaign (module-wide, read-only: each test edits a copy)."""
    mp = pytest.MonkeyPatch()
    mp.setitem(onboard.PROBE_STAGES, "recorded", recorded_probe(PROBE))
    out = tmp_path_factory.mktemp("campaign") / "campaign"
    r = _onboard(model_dir, out)
    mp.undo()
    assert r.exit_code == 0, r.stderr
    return out


def _onboard(model: Path, out: Path, *extra: str):
    host = standin_host(STANDIN)
    return run_fpm("onboard", str(model), "-o", str(out), "--probe", "recorded", "--smoke", *extra, host=host)


@pytest.mark.parametrize("edit, problem", [
    (lambda m: m.pop("stages"), "stages expected a list, found nothing"),
    (lambda m: m.__setitem__("stages", None), "stages expected a list, found null"),
    (lambda m: m["stages"][0].pop("name"), "stages[0].name expected one of probe, import, plan, smoke, readiness, "
                                           "collect, validate, assess, publish, verify, finalize, found nothing"),
    (lambda m: m["stages"][0].__setitem__("name", []), "stages[0].name expected one of probe, import, plan, smoke, "
                                                        "readiness, collect, validate, assess, publish, verify, "
                                                        "finalize, found []"),
    (lambda m: m["stages"][1].__setitem__("name", "probe"), "stages[1].name expected a stage recorded twice, "
                                                            "found \"probe\""),
    (lambda m: m["stages"][1].__setitem__("inputs", []), "stages[1] (import).inputs expected an object, found []"),
    (lambda m: m["stages"][3]["inputs"]["plan"].pop("sha256"),
     "stages[3] (collect).inputs.plan: sha256 is missing (a 64-hex digest, or null for an item that was missing)"),
    (lambda m: m["stages"][1]["outputs"]["profile"].__setitem__("path", 5),
     "stages[1] (import).outputs.profile: path expected a non-empty string, found 5"),
    (lambda m: m["stages"][1]["outputs"]["profile"].__setitem__("path", "../elsewhere.json"),
     "stages[1] (import).outputs.profile: path expected a name inside the campaign folder, found \"../elsewhere.json\""),
    (lambda m: m["stages"][3].__setitem__("status", "failed"),
     "stages[3] (collect).status expected \"done\" (only finished stages are recorded), found \"failed\""),
])  # fmt: skip
def test_a_tampered_campaign_manifest_is_refused_on_resume(campaign, model_dir, tmp_path, monkeypatch, edit, problem):
    monkeypatch.setitem(onboard.PROBE_STAGES, "recorded", recorded_probe(PROBE))
    out = tmp_path / "campaign"
    shutil.copytree(campaign, out, symlinks=True)
    manifest = json.loads((out / "onboard.json").read_text())
    edit(manifest)
    (out / "onboard.json").write_text(json.dumps(manifest))
    before = (out / "table.json").read_bytes()
    r = _onboard(model_dir, out, "--resume")
    assert r.exit_code == 2
    problem = problem.replace("found nothing", "found null")  # an absent key reads as null
    assert r.stderr == (
        f"fpm: {out / 'onboard.json'}: not a campaign folder of fpm onboard: onboard.json: {problem}; "
        "start a new campaign [onboard]\n"
    )
    assert (out / "table.json").read_bytes() == before


def test_finalize_reads_the_manifest_as_resume_does(campaign, tmp_path):
    out = tmp_path / "campaign"
    shutil.copytree(campaign, out, symlinks=True)
    manifest = json.loads((out / "onboard.json").read_text())
    manifest["stages"][1]["outputs"]["profile"]["path"] = 5
    (out / "onboard.json").write_text(json.dumps(manifest))
    r = run_fpm("finalize", str(out))
    assert r.exit_code == 2
    assert r.stderr == (
        f"fpm: {out / 'onboard.json'}: not a campaign folder of fpm onboard: onboard.json: "
        "stages[1] (import).outputs.profile: path expected a non-empty string, found 5 [F-1]\n"
    )


@pytest.mark.parametrize("edit, message", [
    (lambda r: r.pop("settings"), "collect.json is damaged: settings must be an object, found nothing; "
                                  "start a new run folder"),
    (lambda r: r.__setitem__("cell_id", 5), "collect.json is damaged: cell_id must be a string, found 5; "
                                            "start a new run folder"),
    (lambda r: r.__setitem__("runtime", None), "collect.json is damaged: runtime must be a string, found null; "
                                               "start a new run folder"),
    (lambda r: r.__setitem__("runtime", "fp8"), "collect.json is damaged: runtime must be a runtime pin "
                                                '(framework==version), found "fp8"; start a new run folder'),
    (lambda r: r.pop("limits"), "collect.json is damaged: limits must be an object, found nothing; "
                                "start a new run folder"),
    (lambda r: r["settings"].__setitem__("repetitions", "x"),
     "--resume: the run's settings are unreadable: repetitions must be an integer, found 'x'"),
    (lambda r: r["settings"].pop("seed"), "--resume: the run's settings are unreadable: seed is missing"),
])  # fmt: skip
def test_a_tampered_run_file_is_refused_on_resume(campaign, model_dir, tmp_path, edit, message):
    run = tmp_path / "run"
    shutil.copytree(campaign / "run", run, symlinks=True)
    doc = json.loads((run / "collect.json").read_text())
    edit(doc)
    (run / "collect.json").write_text(json.dumps(doc))
    r = run_fpm("collect", str(campaign / "plan.json"), "--smoke", "--model-dir", str(model_dir), "-o", str(run),
                "--resume", host=standin_host(STANDIN))  # fmt: skip
    assert (r.exit_code, r.stderr) == (2, f"fpm: {run / 'collect.json'}: {message} [collect]\n")


def test_a_run_file_value_beyond_64_bits_reaches_the_artifacts_whole_and_validation_refuses_it(
    campaign, model_dir, tmp_path
):
    run = tmp_path / "run"
    shutil.copytree(campaign / "run", run, symlinks=True)
    doc = json.loads((run / "collect.json").read_text())
    doc["execution_identity"]["model_config_sha256"] = 2**64
    (run / "collect.json").write_text(json.dumps(doc))
    r = run_fpm("collect", str(campaign / "plan.json"), "--smoke", "--model-dir", str(model_dir), "-o", str(run),
                "--resume", "--json", host=standin_host(STANDIN))  # fmt: skip
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["points"] == 5
    artifact = json.loads((run / "r0.json").read_text())
    assert artifact["execution_identity"]["model_config_sha256"] == 2**64
    v = run_fpm("validate", str(run), "--plan", str(campaign / "plan.json"), host=standin_host(STANDIN))
    assert v.exit_code == 1
    assert "A-15 native execution identity differs from the frozen cell: model_config_sha256 expected" in v.stdout
    assert "found 18446744073709551616: r0.json" in v.stdout


@pytest.mark.parametrize("edit, problem", [
    (lambda r: r.pop("point"), "point must be an object, found nothing"),
    (lambda r: r.__setitem__("raw", []), "raw must be a non-empty list, found []"),
    (lambda r: r["raw"][0].__setitem__("wall_time", "x"), "raw[0].wall_time must be a number, found \"x\""),
    (lambda r: r["raw"][0].__setitem__("wall_time", 10**400), "raw[0].wall_time must be a number, found 1" + "0" * 79),  # shown to 80 digits
    (lambda r: r["repetitions"][1].__setitem__("raw_sample_index", 99),
     "repetitions[1].raw_sample_index must be the index of a raw sample, found 99"),
    (lambda r: r["warmups"][0].pop("forward_index_end"),
     "warmups[0] must be an object with integer forward_index_start and forward_index_end"),
])  # fmt: skip
def test_a_damaged_point_record_is_refused_on_resume(campaign, model_dir, tmp_path, edit, problem):
    run = tmp_path / "run"
    shutil.copytree(campaign / "run", run, symlinks=True)
    first = sorted((run / "points").iterdir())[0]
    record = json.loads(first.read_text())
    assert record["repetitions"][1]["role"] == "measured"
    edit(record)
    first.write_text(json.dumps(record))
    r = run_fpm("collect", str(campaign / "plan.json"), "--smoke", "--model-dir", str(model_dir), "-o", str(run),
                "--resume", host=standin_host(STANDIN))  # fmt: skip
    assert (r.exit_code, r.stderr) == (
        2,
        f"fpm: {first}: a point record is damaged: {first.name}: {problem}; start a new run folder [collect]\n",
    )


def test_a_point_record_that_is_a_link_is_refused(campaign, model_dir, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(campaign / "run", run, symlinks=True)
    first = sorted((run / "points").iterdir())[0]
    outside = tmp_path / "outside.json"
    outside.write_bytes(first.read_bytes())
    first.unlink()
    first.symlink_to(outside)
    r = run_fpm("collect", str(campaign / "plan.json"), "--smoke", "--model-dir", str(model_dir), "-o", str(run),
                "--resume", host=standin_host(STANDIN))  # fmt: skip
    assert r.exit_code == 2
    assert r.stderr == f"fpm: {first}: a point record is not a regular file of the run: {first.name} [collect]\n"
    first.unlink()
    (run / "points").rename(tmp_path / "points")
    (run / "points").symlink_to(tmp_path / "points")
    r = run_fpm("collect", str(campaign / "plan.json"), "--smoke", "--model-dir", str(model_dir), "-o", str(run),
                "--resume", host=standin_host(STANDIN))  # fmt: skip
    assert r.exit_code == 2
    assert r.stderr == (
        f"fpm: {run / 'points'}: the run's points folder is a symbolic link; a run keeps its own records [collect]\n"
    )
