"""The fpm command line: exit codes, --json documents, diagnostics without tracebacks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

import fpmcore

ROOT = Path(__file__).resolve().parents[1]
GLM = ROOT / "examples" / "profiles" / "glm53flash-tp4.fpm-profile.json"


def test_version(run_fpm):
    result = run_fpm("--version")
    assert (result.exit_code, result.stdout.strip()) == (0, f"fpm {fpmcore.__version__}")


def test_python_dash_m_is_fpm():
    out = subprocess.run([sys.executable, "-m", "fpmcore", "--version"], capture_output=True, text=True)
    assert (out.returncode, out.stdout.strip()) == (0, f"fpm {fpmcore.__version__}")


def test_no_command_and_bad_usage_exit_2(run_fpm):
    assert run_fpm().exit_code == 2
    bad = run_fpm("frobnicate")
    assert bad.exit_code == 2 and "invalid choice: 'frobnicate'" in bad.stderr


def test_profile_check_valid(run_fpm):
    result = run_fpm("profile", "check", str(GLM))
    assert result.exit_code == 0
    assert (
        "valid" in result.stdout and "ee1b2e6fcc941447a19229af9200477cc380af1128db99166037d1ded96e3a25" in result.stdout
    )
    doc = run_fpm("profile", "check", str(GLM), "--json").json()
    assert doc == {
        "schema": 1, "file": str(GLM), "status": "valid", "diagnostics": [],
        "summary": {"model": "zai-org/GLM-5.3-Flash", "model_revision": "04c4e9e95c5da8862dced7e5056455116f83a7e0",
                    "deployments": 1, "cache_groups": 6,
                    "profile_sha256": "ee1b2e6fcc941447a19229af9200477cc380af1128db99166037d1ded96e3a25"},
    }  # fmt: skip


def test_profile_check_invalid_exits_1_with_the_rule(run_fpm, tmp_path):
    doc = json.loads(GLM.read_text())
    doc["deployments"][0]["resources"]["cache_groups"][2]["prefill_checkpoint_blocks"] = 2
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    result = run_fpm("profile", "check", str(bad), "--json")
    assert result.exit_code == 1
    assert result.json()["diagnostics"] == [{
        "rule": "P-11",
        "message": "cache group 'runtime_group_2': prefill_checkpoint_blocks must be 0 or 1; got 2",
        "where": "deployments[0].resources.cache_groups[2]",
    }]  # fmt: skip
    human = run_fpm("profile", "check", str(bad))
    assert human.exit_code == 1 and "P-11" in human.stdout and "Traceback" not in human.stdout + human.stderr


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "cannot read: No such file or directory"),
        (b"{not json", "invalid JSON: Expecting property name enclosed in double quotes at line 1 column 2"),
        (b'{"a": NaN}', "NaN is not allowed at a, line 1 column 7"),
    ],
)
def test_profile_check_unreadable_exits_2(run_fpm, tmp_path, content, message):
    path = tmp_path / "p.json"
    if content is not None:
        path.write_bytes(content)
    result = run_fpm("profile", "check", str(path), "--json")
    assert result.exit_code == 2
    # --json: exactly one JSON document on stdout, an error too (issue 13 §5); the line on stderr
    assert json.loads(result.stdout) == {
        "schema": 1, "status": "error", "diagnostics": [{"rule": "JSON", "message": message, "where": str(path)}],
    }  # fmt: skip
    assert result.stderr == f"fpm: {path}: {message} [JSON]\n"


def test_debug_shows_the_traceback(run_fpm, tmp_path):
    with pytest.raises(fpmcore.documents.errors.FpmError):
        run_fpm("--debug", "profile", "check", str(tmp_path / "missing.json"))


def test_schema_profile_and_record(run_fpm):
    profile_schema = json.loads(run_fpm("schema", "profile").stdout)
    jsonschema.Draft202012Validator.check_schema(profile_schema)
    jsonschema.validate(json.loads(GLM.read_text()), profile_schema)
    record_schema = json.loads(run_fpm("schema", "record").stdout)
    jsonschema.Draft202012Validator.check_schema(record_schema)
    assert record_schema["title"] == "fpmcore-runtime-observation/v1"


def test_native_backend_is_c_and_matches_the_package():
    from fpmcore.replay import native

    assert native.BACKEND == "c"
    assert native.version() == fpmcore.__version__


@pytest.mark.parametrize("env,backend", [
    ({"FPM_PUREPYTHON": "1"}, "python"),
    ({"FPM_PUREPYTHON": "0"}, "c"),
    ({"FPM_PUREPYTHON": ""}, "c"),
    ({"FPMCORE_PUREPYTHON": "1"}, "c"),  # no other name selects the reference
])  # fmt: skip
def test_reference_switch(env, backend):
    code = "from fpmcore.replay import native; print(native.BACKEND, native.version())"
    base = {k: v for k, v in os.environ.items() if k != "FPM_PUREPYTHON"}
    out = subprocess.run([sys.executable, "-c", code], env={**base, **env}, capture_output=True, text=True,
                         check=False)  # fmt: skip
    assert out.stdout.split() == [backend, fpmcore.__version__]


def test_a_stale_build_is_refused(monkeypatch):
    import importlib

    from fpmcore.replay import native

    monkeypatch.setattr(fpmcore, "__version__", "0.0.0-stale")
    monkeypatch.delenv("FPM_PUREPYTHON", raising=False)
    with pytest.raises(ImportError, match="built for 0.1.0, the package is 0.0.0-stale"):
        importlib.reload(native)
    monkeypatch.undo()
    importlib.reload(native)
    assert native.BACKEND == "c"
