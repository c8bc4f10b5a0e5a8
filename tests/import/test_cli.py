"""``fpm import DIR [-o PROFILE] [--json]``: exit codes, JSON document, the profile file, human tables."""

from __future__ import annotations

import json

import fpm_import_glm_fixture as G
import pytest

from fpmcore import API_VERSION, PluginInfo, hookimpl
from fpmcore.importer import import_command
from fpmcore.testing import make_host, run_fpm


class ImportCommand:
    """Registers ``import`` (fpmcore's built-in plugin keeps it if it registers the command itself)."""

    @hookimpl
    def fpm_plugin_info(self):
        return PluginInfo(id="import_cli_test", kind="model", targets=("import-cli-test",), api_version=API_VERSION)

    @hookimpl
    def fpm_cli_commands(self):
        return [import_command()]


@pytest.fixture(scope="module")
def cli_host():
    return make_host(ImportCommand(), entry_points=("vllm_027", "vllm_033"))


def test_command_value():
    cmd = import_command()
    assert cmd.name == "import" and callable(cmd.configure) and callable(cmd.run)


def test_complete_json_and_profile(evidence, tmp_path, cli_host):
    folder = evidence.write(tmp_path / "ev")
    out = tmp_path / "out" / "glm.fpm-profile.json"
    out.parent.mkdir()  # fpm never creates a missing folder (O-1)
    res = run_fpm("import", str(folder), "-o", str(out), "--json", host=cli_host)
    assert res.exit_code == 0, res.stderr
    doc = json.loads(res.stdout)
    assert (doc["schema"], doc["status"], doc["diagnostics"]) == (1, "complete", [])
    assert doc["profile"]["deployments"][0]["resources"]["runtime_memory"]["kv_cache_bytes"] == 185126092800
    from fpmcore.documents.profile import dumps_profile, load_profile

    profile = load_profile(out)
    assert out.read_bytes() == dumps_profile(profile)
    assert [g.kind for g in profile.deployments[0].resources.cache_groups] == ["state"] * 4 + ["attention", "state"]
    assert list(out.parent.iterdir()) == [out]  # written atomically: no temporary file left


def test_incomplete_json_writes_no_profile(evidence, tmp_path, cli_host):
    for r in evidence.all_records():
        r["runtime"]["version"] = "0.33.1"
    folder = evidence.write(tmp_path / "ev")
    out = tmp_path / "glm.fpm-profile.json"
    res = run_fpm("import", str(folder), "-o", str(out), "--json", host=cli_host)
    assert res.exit_code == 1
    doc = json.loads(res.stdout)
    assert doc["status"] == "incomplete" and doc["profile"] is None
    first = doc["diagnostics"][0]
    assert set(first) == {"rule", "message", "where"}
    assert first["rule"] == "I-22"
    assert first["message"] == "hybrid cache evidence requires vLLM 0.33.0; the record names vLLM 0.33.1"
    assert first["where"] == "glm53flash-tp4: prefill/runtime-observation-worker-dp0-tp0-pp0.json"
    assert not out.exists()


def test_unreadable_folder_exits_2(tmp_path, cli_host):
    res = run_fpm("import", str(tmp_path / "missing"), "--json", host=cli_host)
    assert res.exit_code == 2
    assert json.loads(res.stdout)["status"] == "error"
    res = run_fpm("import", str(tmp_path), "--json", host=cli_host)  # no observations.json: I-1
    assert res.exit_code == 2
    doc = json.loads(res.stdout)
    assert doc["status"] == "error" and doc["diagnostics"][0]["rule"] == "I-1"


def test_human_output(evidence, tmp_path, cli_host):
    folder = evidence.write(tmp_path / "ev")
    res = run_fpm("import", str(folder), host=cli_host)
    assert res.exit_code == 0
    for text in (
        "glm53flash-tp4: complete",
        "runtime_group_5",
        "13516800",
        "185126092800",
        "27.67070707070707",
        "1 / 16",
    ):
        assert text in res.stdout


def test_human_output_diagnostics(evidence, tmp_path, cli_host):
    evidence.scheduler("prefill")["cache"]["free_blocks"] = 13697
    folder = evidence.write(tmp_path / "ev")
    res = run_fpm("import", str(folder), host=cli_host)
    assert res.exit_code == 1
    assert "I-63" in res.stdout and "free_blocks 13697 of num_blocks 13697" in res.stdout
    assert "Traceback" not in res.stdout + res.stderr


def test_configuration_and_launch_options(evidence, tmp_path, cli_host):
    folder = evidence.write(tmp_path / "ev")
    launch = tmp_path / "launch.json"
    launch.write_text(json.dumps(G.launch()))
    res = run_fpm("import", str(folder), "--configuration", G.CONFIG, "--launch", str(launch), "--json", host=cli_host)
    assert res.exit_code == 0, res.stdout
    res = run_fpm("import", str(folder), "--configuration", "other", "--json", host=cli_host)
    assert res.exit_code == 1
    assert json.loads(res.stdout)["diagnostics"][0]["rule"] == "I-3"
