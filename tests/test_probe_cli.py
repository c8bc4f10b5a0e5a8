"""``fpm probe --dry-run``: the host side (runtime found by its installed version, plugin by exact pin)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fpmcore import API_VERSION, PluginInfo, hookimpl
from fpmcore import probe as host_probe
from fpmcore.testing import make_host, run_fpm

ROOT = Path(__file__).resolve().parent.parent
GLM = ROOT / "tools" / "probe_models" / "glm53flash_tp4.json"


class _ProbeCommand:
    """Registers ``fpm probe`` the way the built-in commands do."""

    @hookimpl
    def fpm_plugin_info(self):
        return PluginInfo(id="probe-cli-test", kind="model", targets=("probe-cli-test",), api_version=API_VERSION)

    @hookimpl
    def fpm_cli_commands(self):
        return [host_probe.probe_command()]


def _host(*entry_points):
    return make_host(_ProbeCommand(), entry_points=entry_points)


def test_probe_command_is_named_probe():
    cmd = host_probe.probe_command()
    assert cmd.name == "probe" and cmd.help


def test_without_the_runtime_it_says_what_to_install(monkeypatch, tmp_path):
    monkeypatch.setattr(host_probe, "installed_runtime", lambda framework="vllm": None)
    res = run_fpm("probe", "--dry-run", str(GLM), "-o", str(tmp_path / "ev"), host=_host("vllm_033"))
    assert res.exit_code == 2
    assert "vllm is not installed" in res.stderr and "pip install" in res.stderr
    assert "vllm==0.33.0" in res.stderr  # the pin the installed runtime plugin targets
    assert "Traceback" not in res.stderr + res.stdout
    assert not (tmp_path / "ev").exists()


def test_a_runtime_version_no_plugin_targets_is_refused(monkeypatch, tmp_path):
    monkeypatch.setattr(host_probe, "installed_runtime", lambda framework="vllm": "0.33.0.post1")
    res = run_fpm("probe", "--dry-run", str(GLM), "-o", str(tmp_path / "ev"), host=_host("vllm_033", "vllm_027"))
    assert res.exit_code == 2
    assert "no runtime plugin for vllm==0.33.0.post1" in res.stderr  # exact pins, no PEP 440 normalization
    assert "Traceback" not in res.stderr


def test_only_dry_run_is_offered(tmp_path):
    res = run_fpm("probe", str(GLM), "-o", str(tmp_path / "ev"), host=_host("vllm_033"))
    assert res.exit_code == 2 and "--dry-run" in res.stderr


def test_tp_must_be_positive(tmp_path):
    res = run_fpm("probe", "--dry-run", str(GLM), "-o", str(tmp_path / "ev"), "--tp", "0", host=_host("vllm_033"))
    assert res.exit_code == 2 and "--tp must be at least 1" in res.stderr


@pytest.mark.real
def test_dry_probe_end_to_end_prints_vllm_numbers(tmp_path):
    """The GLM TP 4 fixture through the CLI: the summary holds vLLM's numbers of 02 §11."""
    out = tmp_path / "ev"
    res = run_fpm("probe", "--dry-run", str(GLM), "-o", str(out), "--tp", "4", "--json", host=_host("vllm_033", "vllm_027"))
    assert res.exit_code == 0, res.stderr
    doc = json.loads(res.stdout)
    assert (doc["runtime"], doc["plugin"]) == ("vllm==0.33.0", "vllm_033")
    for phase in ("prefill", "decode"):
        s = doc["phases"][phase]
        assert (s["pool_page_bytes"], s["num_blocks"], s["scheduler_block_size"]) == (13516800, 13697, 2176)
        assert s["kv_cache_max_concurrency"] == 27.67070707070707
    index = json.loads((out / "observations.json").read_text())
    assert list(index["configurations"]) == ["glm53flash_tp4"]
    again = run_fpm("probe", "--dry-run", str(GLM), "-o", str(out), host=_host("vllm_033"))
    assert again.exit_code == 2 and "never overwrites" in again.stderr and "Traceback" not in again.stderr


@pytest.mark.real
def test_unreadable_model_json_exits_2_without_traceback(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    res = run_fpm("probe", "--dry-run", str(bad), "-o", str(tmp_path / "ev"), host=_host("vllm_033"))
    assert res.exit_code == 2 and str(bad) in res.stderr and "Traceback" not in res.stderr
