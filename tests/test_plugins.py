"""The plugin host: loading, records, statuses, environment switches, selection."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest

from fpmcore import API_VERSION, PluginInfo, hookimpl
from fpmcore.documents.errors import FpmError
from fpmcore.testing import make_host, run_fpm

INSTALLED = {"vllm_027", "vllm_032", "vllm_033", "glm53flash", "dsv41"}


def _plugin(name: str, info: PluginInfo | None = None, **hooks: object) -> types.ModuleType:
    mod = types.ModuleType(name)
    if info is not None:
        mod.fpm_plugin_info = hookimpl(lambda: info)
    for hook_name, fn in hooks.items():
        setattr(mod, hook_name, hookimpl(fn))
    return mod


def _dist(tmp: Path, name: str, module_source: str, entry: str | None = None) -> Path:
    """A minimal installed distribution on a sys.path folder: metadata, entry point, module."""
    mod = f"{name}_mod"
    (tmp / f"{mod}.py").write_text(textwrap.dedent(module_source))
    info = tmp / f"{name}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[fpmcore.plugins]\n{entry or name} = {mod}\n")
    return tmp


BROKEN = """
raise ImportError("the vendored kernel library is missing")
"""


def test_the_five_plugins_are_listed_ok(run_fpm):
    result = run_fpm("plugins", "--json", env={"FPM_PLUGINS": None, "FPM_DISABLE_PLUGINS": None,
                                                "FPM_DISABLE_PLUGIN_AUTOLOAD": None})  # fmt: skip
    assert result.exit_code == 0, result.stderr
    doc = result.json()
    assert doc["schema"] == 1
    rows = {p["id"]: p for p in doc["plugins"]}
    assert set(rows) == INSTALLED
    assert all(p["status"] == "ok" and p["error"] is None for p in rows.values())
    assert rows["vllm_033"]["distribution"] == "fpmcore-vllm033"
    assert rows["vllm_033"]["kind"] == "runtime"
    assert rows["vllm_033"]["targets"] == ["vllm==0.33.0"]
    assert "fpm_classify_spec" in rows["vllm_033"]["hooks"]
    assert rows["glm53flash"]["targets"][0] == "glm53flash"
    assert set(doc["plugins"][0]) == {"id", "distribution", "version", "kind", "targets", "hooks", "status", "error"}


def test_builtins_only_with_all(run_fpm):
    assert "fpmcore" not in {p["id"] for p in run_fpm("plugins", "--json").json()["plugins"]}
    rows = {p["id"]: p for p in run_fpm("plugins", "--all", "--json").json()["plugins"]}
    assert rows["fpmcore"]["kind"] == "builtin"
    assert "fpm_cli_commands" in rows["fpmcore"]["hooks"]


def test_broken_entry_point_is_a_failed_row_and_the_command_still_works(tmp_path, monkeypatch, run_fpm):
    monkeypatch.syspath_prepend(str(_dist(tmp_path, "fpmcore_broken", BROKEN)))
    result = run_fpm("plugins", "--json")
    assert result.exit_code == 0
    rows = {p["id"]: p for p in result.json()["plugins"]}
    assert rows["fpmcore_broken"]["status"] == "failed"
    assert rows["fpmcore_broken"]["error"] == "ImportError: the vendored kernel library is missing"
    assert rows["fpmcore_broken"]["distribution"] == "fpmcore_broken"
    assert {k for k, v in rows.items() if v["status"] == "ok"} == INSTALLED
    human = run_fpm("plugins")
    assert human.exit_code == 0 and "failed" in human.stdout and "Traceback" not in human.stdout + human.stderr


def test_strict_plugins_reraises(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(_dist(tmp_path, "fpmcore_broken", BROKEN)))
    with pytest.raises(ImportError, match="vendored kernel library"):
        run_fpm("plugins", env={"FPM_STRICT_PLUGINS": "1"})


def test_broken_entry_point_through_the_real_command(tmp_path):
    path = _dist(tmp_path, "fpmcore_broken", BROKEN)
    env = {**os.environ, "PYTHONPATH": str(path)}
    ok = subprocess.run([sys.executable, "-m", "fpmcore", "plugins"], env=env, capture_output=True, text=True)
    assert ok.returncode == 0 and "fpmcore_broken" in ok.stdout and "Traceback" not in ok.stderr
    strict = subprocess.run([sys.executable, "-m", "fpmcore", "plugins"], env={**env, "FPM_STRICT_PLUGINS": "1"},
                            capture_output=True, text=True)  # fmt: skip
    assert strict.returncode != 0 and "ImportError: the vendored kernel library is missing" in strict.stderr


def test_entry_point_name_must_match_plugin_id(tmp_path, monkeypatch, run_fpm):
    src = """
    from fpmcore import API_VERSION, PluginInfo, hookimpl

    @hookimpl
    def fpm_plugin_info():
        return PluginInfo(id="other", kind="model", targets=("m",), api_version=API_VERSION)
    """
    monkeypatch.syspath_prepend(str(_dist(tmp_path, "fpmcore_named", src, entry="named")))
    rows = {p["id"]: p for p in run_fpm("plugins", "--json").json()["plugins"]}
    assert rows["named"]["status"] == "failed"
    assert rows["named"]["error"] == "PluginError: entry point 'named' names a plugin whose id is 'other'"


@pytest.mark.parametrize(
    ("env", "argv", "expected_ok", "reason"),
    [
        ({"FPM_PLUGINS": "vllm_033,glm53flash"}, (), {"vllm_033", "glm53flash"}, "not in the FPM_PLUGINS allow list"),
        (
            {"FPM_DISABLE_PLUGINS": "dsv41"},
            (),
            INSTALLED - {"dsv41"},
            "disabled by FPM_DISABLE_PLUGINS or --disable-plugin",
        ),
        (
            {},
            ("--disable-plugin", "dsv41", "--disable-plugin", "vllm_027"),
            INSTALLED - {"dsv41", "vllm_027"},
            "disabled by FPM_DISABLE_PLUGINS or --disable-plugin",
        ),
        (
            {"FPM_DISABLE_PLUGIN_AUTOLOAD": "1"},
            (),
            set(),
            "autoload is off (FPM_DISABLE_PLUGIN_AUTOLOAD=1); enable it with --plugin",
        ),
        (
            {"FPM_DISABLE_PLUGIN_AUTOLOAD": "1"},
            ("--plugin", "vllm_033"),
            {"vllm_033"},
            "autoload is off (FPM_DISABLE_PLUGIN_AUTOLOAD=1); enable it with --plugin",
        ),
        (
            {"FPM_DISABLE_PLUGIN_AUTOLOAD": "1", "FPM_PLUGINS": "dsv41"},
            (),
            {"dsv41"},
            "not in the FPM_PLUGINS allow list",
        ),
    ],
)
def test_environment_switches(run_fpm, env, argv, expected_ok, reason):
    result = run_fpm(*argv, "plugins", "--json", env=env)
    assert result.exit_code == 0
    rows = {p["id"]: p for p in result.json()["plugins"]}
    assert {k for k, v in rows.items() if v["status"] == "ok"} == expected_ok
    for k in INSTALLED - expected_ok:
        assert rows[k]["status"] == "disabled"
        assert rows[k]["error"] == reason


def test_incompatible_api_version_is_recorded_and_never_called():
    calls = []
    old = _plugin(
        "old_plugin",
        PluginInfo(id="old", kind="model", targets=("x",), api_version=API_VERSION + 1),
        fpm_align_stop=lambda model, query: calls.append(1) or 0,
    )
    host = make_host(old)
    rec = host.record("old")
    assert rec.status == "incompatible"
    assert rec.error == f"written for hook API {API_VERSION + 1}; this fpmcore provides API {API_VERSION}"
    assert host.pm.get_plugin("old") is None and calls == []


def test_unknown_hook_and_bad_info_fail_the_plugin_only():
    typo = _plugin("typo", PluginInfo(id="typo", kind="model", targets=("t",), api_version=API_VERSION),
                   fpm_align_stopp=lambda model, query: 0)  # fmt: skip
    no_info = _plugin("no_info")
    wrong_info = _plugin("wrong_info")
    wrong_info.fpm_plugin_info = hookimpl(lambda: {"id": "x"})
    host = make_host(typo, no_info, wrong_info)
    assert host.record("typo").status == "failed"
    assert host.record("typo").error == "PluginError: implements unknown hooks: fpm_align_stopp"
    assert host.record("no_info").error == "PluginError: does not implement fpm_plugin_info"
    assert host.record("wrong_info").error == "PluginError: fpm_plugin_info returned dict; expected PluginInfo"


def test_duplicate_plugin_id_fails_the_second():
    a = _plugin("a", PluginInfo(id="same", kind="model", targets=("a",), api_version=API_VERSION))
    b = _plugin("b", PluginInfo(id="same", kind="model", targets=("b",), api_version=API_VERSION))
    host = make_host(a, b)
    assert host.record("same").status == "ok" and host.record("same").targets == ("a",)


def test_select_runtime_by_exact_pin(fpm_host):
    host = fpm_host(entry_points=("vllm_027", "vllm_033"))
    assert host.select_runtime("vllm==0.33.0").id == "vllm_033"
    assert host.select_runtime("vllm==0.27.0").id == "vllm_027"
    for pin in ("vllm==0.33.1", "vllm==0.33", "vllm==0.33.0.post1", "vllm==v0.33.0"):
        with pytest.raises(FpmError) as info:
            host.select_runtime(pin)
        assert info.value.message == (
            f"no runtime plugin for {pin}; installed runtime plugins: vllm_027 (vllm==0.27.0), vllm_033 (vllm==0.33.0)"
        )


def test_two_plugins_claiming_one_runtime_is_an_error(fpm_host):
    twin = _plugin("twin", PluginInfo(id="twin", kind="runtime", targets=("vllm==0.33.0",), api_version=API_VERSION))
    host = fpm_host(twin, entry_points=("vllm_033",))
    with pytest.raises(FpmError) as info:
        host.select_runtime("vllm==0.33.0")
    assert info.value.message == "runtime vllm==0.33.0 is claimed by more than one plugin: twin, vllm_033"


def test_select_model_by_id_or_model_id(fpm_host):
    host = fpm_host(entry_points=("glm53flash", "dsv41"))
    assert host.select_model("glm53flash").id == "glm53flash"
    assert host.select_model("zai-org/GLM-5.3-Flash").id == "glm53flash"
    assert host.select_model("deepseek-ai/DeepSeek-V4.1").id == "dsv41"
    with pytest.raises(FpmError) as info:
        host.select_model("qwen3next")
    assert info.value.message.startswith("no model plugin for 'qwen3next'; installed model plugins: dsv41 (")


def test_plugins_show(run_fpm):
    result = run_fpm("plugins", "show", "vllm_033", "--json")
    assert result.exit_code == 0
    doc = result.json()["plugin"]
    assert doc["summary"].startswith("vLLM 0.33.0")
    assert doc["module"] == "fpmcore_vllm033:plugin"  # the entry point names the plugin object
    human = run_fpm("plugins", "show", "vllm_033")
    assert "fpmcore-vllm033" in human.stdout
    # piped: one line per field, nothing padded after its value
    lines = human.stdout.splitlines()
    assert lines[1] == "distribution   fpmcore-vllm033" and all(line == line.rstrip() for line in lines)
    missing = run_fpm("plugins", "show", "nope")
    assert missing.exit_code == 2
    # the built-in commands plugin is no plugin a user installed: not listed among them (show still knows it)
    assert missing.stderr.startswith("fpm: no plugin 'nope'; installed plugins: dsv41, glm53flash, vllm_027")
    typo = run_fpm("plugins", "show", "vllm033")
    assert typo.exit_code == 2 and "no plugin 'vllm033'; did you mean 'vllm_033'? installed plugins:" in typo.stderr
    assert run_fpm("plugins", "show", "fpmcore").exit_code == 0


def test_plugins_and_help_import_neither_vllm_nor_torch(tmp_path):
    # Tripwire packages: importing either fails loudly.
    for name in ("vllm", "torch"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text(f"raise SystemExit('{name} was imported')\n")
    code = (
        "import sys\n"
        "from fpmcore.cli import main\n"
        "assert main(['plugins']) == 0\n"
        "assert main(['plugins', '--json']) == 0\n"
        "assert main(['--help']) == 0\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('vllm', 'torch'))\n"
        "print('IMPORTED', bad)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "IMPORTED []" in out.stdout


def test_a_passed_plugin_object_stands_over_its_entry_point():
    """A plugin object passed to the host keeps its record: the entry point of the same id is not loaded over it."""
    import fpmcore_glm53flash
    from fpmcore.host.plugins import PluginHost

    host = PluginHost(autoload=False, plugins=[fpmcore_glm53flash], environ={})
    assert (host.record("glm53flash").status, host.record("dsv41").status) == ("ok", "disabled")
    assert host.select_model("zai-org/GLM-5.3-Flash").id == "glm53flash"


def _discovery_subjects() -> list[object]:
    """Plugins of every shape pluggy discovers hooks on: modules, objects, classes, with every kind of attribute."""
    from fpmcore.cli import commands
    from fpmcore.host.build import build_host

    def fpm_plugin_info() -> None: ...

    module = types.ModuleType("shapes")
    module.fpm_plugin_info = hookimpl(fpm_plugin_info)  # type: ignore[attr-defined]
    module.plain = fpm_plugin_info  # type: ignore[attr-defined]
    module.data = 3  # type: ignore[attr-defined]
    module.static = staticmethod(hookimpl(fpm_plugin_info))  # type: ignore[attr-defined]
    module.cls = type("C", (), {})  # type: ignore[attr-defined]
    module.builtin = len  # type: ignore[attr-defined]
    module.prop = property(lambda self: 1)  # type: ignore[attr-defined]

    class Base:
        @hookimpl
        def fpm_plugin_info(self) -> None: ...

    class Shapes(Base):
        __slots__ = ("slotted", "empty", "number_held")
        number = 1

        @hookimpl
        @staticmethod
        def fpm_trace_formats() -> list[object]:
            return []

        @hookimpl
        @classmethod
        def fpm_cli_commands(cls) -> list[object]:
            return []

        @property
        def fpm_rule_catalogue(self) -> list[object]:
            raise AssertionError("a property must never run")

    class WithDict:
        @hookimpl
        def fpm_plugin_info(self) -> None: ...

        @functools.cached_property
        def fpm_rule_catalogue(self) -> object:  # read below: its value is in the instance's __dict__
            return hookimpl(lambda: [])

        @functools.cached_property
        def fpm_model_profiles(self) -> object:
            raise AssertionError("a cached property must never run")

    slotted = Shapes()
    slotted.slotted = hookimpl(fpm_plugin_info)
    slotted.number_held = 7  # a slot that holds no function; 'empty' holds nothing
    own = WithDict()
    own.fpm_trace_formats = hookimpl(lambda: [])  # type: ignore[attr-defined]
    own.fpm_plugin_info = 5  # type: ignore[assignment]  # an instance attribute shadowing the class's
    assert own.fpm_rule_catalogue is own.fpm_rule_catalogue
    shipped = [plugin for _, plugin in build_host().pm.list_name_plugin()]
    return [commands, module, slotted, own, Shapes, *shipped]


def test_hook_discovery_reads_what_pluggy_reads():
    """The manager's quick discovery of hook implementations answers as pluggy's own for every name."""
    import pluggy

    from fpmcore.host.plugins import _PluginManager

    quick, reference = _PluginManager("fpmcore"), pluggy.PluginManager("fpmcore")
    names = 0
    for plugin in _discovery_subjects():
        for name in dir(plugin):
            assert quick.parse_hookimpl_opts(plugin, name) == reference.parse_hookimpl_opts(plugin, name), name
            names += 1
    assert names > 300
