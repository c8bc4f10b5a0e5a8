"""The mutation campaign over the state files ``--resume`` reads (``tests/fuzz/README.md``).

A smoke campaign of the stand-in engine (``tests/collect/standin.py``: the recorded probe of
``examples/probes/gdn-hybrid-tp4``, the stand-in's measurement driver) is onboarded once per module; each
example copies it and mutates

* the campaign's manifest ``onboard.json`` (or puts a folder, a link or nothing in its place), then runs
  ``fpm onboard MODEL -o CAMPAIGN --probe recorded --smoke --resume --json``;
* the run's manifest ``run/collect.json`` (sometimes a point record of ``run/points/``), then runs
  ``fpm collect PLAN --smoke --model-dir MODEL -o RUN --resume --json``.

Every input asserts what :func:`tests.fuzz.running.run_json` asserts (exit 0, 1 or 2, no traceback, one JSON
document, named rules, no hang); a refusal before any stage ran leaves the folder as it was; a resumed
campaign or run is whole (its manifest reads back, every stage or point recorded) with no temporary file left.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, seed
from hypothesis import strategies as st

from fpmcore.campaign import onboard
from fpmcore.probe import live as probe
from tests.collect.standin import StandinRuntime, fake_model_dir, recorded_probe
from tests.fuzz.conftest import count, work_dir
from tests.fuzz.mutations import encode, mutate_bytes, mutate_document, snapshot
from tests.fuzz.running import SEED, campaign, run_json

ROOT = Path(__file__).resolve().parents[2]
PROBE = ROOT / "examples" / "probes" / "gdn-hybrid-tp4"


@pytest.fixture(scope="module")
def host():
    from tests.collect.conftest import standin_host

    return standin_host(StandinRuntime())


@pytest.fixture(scope="module")
def smoke_campaign(host):
    """``(model folder, campaign folder)`` of one finished smoke campaign, read-only: each example edits a copy.
    The recorded probe stays registered for the module (a resumed campaign may re-run its probe)."""
    from fpmcore.collect import run as collect_run

    mp = pytest.MonkeyPatch()
    mp.setitem(onboard.PROBE_STAGES, "recorded", recorded_probe(PROBE))
    mp.setattr(collect_run, "DEFAULT_PREFILL_IDLE", 0.0)  # the stand-in has no caches to cool
    # the installed packages do not change during the module: read their metadata once, not once per example
    mp.setattr(probe, "installed_runtime", functools.cache(probe.installed_runtime))
    with tempfile.TemporaryDirectory(prefix="fpm-fuzz-", dir=work_dir()) as tmp:
        model = fake_model_dir(Path(tmp) / "model", (PROBE / "model-config.json").read_bytes())
        out = Path(tmp) / "campaign"
        res, _doc = run_json("onboard", str(model), "-o", str(out), "--probe", "recorded", "--smoke", "--json",
                             host=host)  # fmt: skip
        assert res.exit_code == 0, res.stderr
        yield model, out
    mp.undo()


def _temporaries(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob(".*"))


def _replace_file(data, path: Path) -> None:
    """The file itself changed: gone, a folder, a link to a copy elsewhere, or a FIFO."""
    kind = data.draw(st.sampled_from(["delete", "dir", "symlink", "fifo"]), label="file op")
    copy = path.with_name(f"copy-of-{path.name}")
    shutil.copy(path, copy)
    path.unlink()
    if kind == "dir":
        path.mkdir()
    elif kind == "symlink":
        path.symlink_to(copy)
    elif kind == "fifo":
        os.mkfifo(path)


def _mutate_json_file(data, path: Path) -> None:
    doc = json.loads(path.read_bytes())
    path.write_bytes(mutate_bytes(data, encode(mutate_document(data, doc)).encode("utf-8", "surrogatepass")))


@seed(SEED)
@campaign("onboard")
@given(data=st.data())
def test_mutated_onboard_manifests(host, smoke_campaign, data):
    """``fpm onboard --resume`` on a campaign whose ``onboard.json`` is mutated."""
    from fpmcore.campaign.layout import MANIFEST, manifest_problem

    model, base = smoke_campaign
    with tempfile.TemporaryDirectory(prefix="fpm-fuzz-", dir=work_dir()) as tmp:
        out = Path(tmp) / "campaign"
        shutil.copytree(base, out, symlinks=True)
        if data.draw(st.integers(0, 9), label="file?") == 0:
            _replace_file(data, out / MANIFEST)
        else:
            _mutate_json_file(data, out / MANIFEST)
        before = snapshot(Path(tmp))
        res, doc = run_json("onboard", str(model), "-o", str(out), "--probe", "recorded", "--smoke", "--resume",
                            "--json", host=host)  # fmt: skip
        if "running" not in res.stderr:  # refused, or nothing left to do: nothing written
            assert snapshot(Path(tmp)) == before, sorted(set(snapshot(Path(tmp)).items()) ^ set(before.items()))
        if res.exit_code == 0:  # the campaign whole: its manifest reads back with every stage done
            manifest = json.loads((out / MANIFEST).read_bytes())
            assert manifest_problem(manifest) is None and manifest == doc["manifest"]
            assert {s["name"] for s in manifest["stages"]} >= {"probe", "import", "plan", "collect", "publish"}
        assert _temporaries(out) == [], _temporaries(out)
    count("onboard manifests")


@seed(SEED)
@campaign("collect")
@given(data=st.data(), what=st.sampled_from(["manifest"] * 4 + ["point", "file"]))
def test_mutated_collect_manifests(host, smoke_campaign, data, what):
    """``fpm collect --resume`` on a run whose ``collect.json`` (or a point record) is mutated."""
    model, base = smoke_campaign
    with tempfile.TemporaryDirectory(prefix="fpm-fuzz-", dir=work_dir()) as tmp:
        run, plan = Path(tmp) / "run", Path(tmp) / "plan.json"
        shutil.copytree(base / "run", run, symlinks=True)
        shutil.copy(base / "plan.json", plan)
        points = sorted((run / "points").iterdir())
        if what == "point":
            _mutate_json_file(data, points[data.draw(st.integers(0, len(points) - 1), label="point")])
        elif what == "file":
            _replace_file(data, run / "collect.json")
        else:
            _mutate_json_file(data, run / "collect.json")
        before = snapshot(Path(tmp))
        res, doc = run_json("collect", str(plan), "--smoke", "--model-dir", str(model), "-o", str(run), "--resume",
                            "--json", host=host)  # fmt: skip
        if res.exit_code == 2:  # refused: the run as it was
            assert snapshot(Path(tmp)) == before, sorted(set(snapshot(Path(tmp)).items()) ^ set(before.items()))
        if res.exit_code == 0:  # the run whole: its manifest, artifact and index read back, a record per visit
            state = json.loads((run / "collect.json").read_bytes())
            assert isinstance(state, dict) and doc["cell"] == state["cell_id"]
            artifact = json.loads((run / "r0.json").read_bytes())
            assert artifact["run_id"] == state["run_id"] and len(artifact["results"]) == doc["points"]
            json.loads((run / "index.json").read_bytes())
            assert len(list((run / "points").iterdir())) >= len(points)
        assert _temporaries(run) == [], _temporaries(run)
        assert plan.read_bytes() == (base / "plan.json").read_bytes()
    count("collect manifests" if what != "point" else "point records")
