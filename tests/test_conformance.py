"""The conformance suite finds what is wrong with a plugin (fpmcore.testing.check_plugin)."""

from __future__ import annotations

import sys
import textwrap

import pytest

from fpmcore.host.hooktypes import API_VERSION
from fpmcore.testing import check_plugin

GOOD = """
from fpmcore import API_VERSION, AlignStopQuery, CliCommand, ExecutionIdentity, PluginInfo, ProducerContract, hookimpl

CONTRACT = ProducerContract(name="conf_eager", execution_mode="eager", residency="host_offload")


@hookimpl
def fpm_plugin_info():
    return PluginInfo(id="conf", kind="model", targets=("conf-model",), api_version=API_VERSION,
                      summary="a plugin of the conformance tests")


@hookimpl
def fpm_align_stop(model, query):
    if model != "conf-model":
        return None
    return query.num_new_tokens


@hookimpl
def fpm_producer_contracts():
    return [CONTRACT]


@hookimpl
def fpm_choose_producer_contract(identity):
    return CONTRACT if identity.engram_residency == "host_offload" else None


@hookimpl
def fpm_cli_commands():
    def configure(p):
        p.add_argument("--greeting", help="what to say")
    return [CliCommand("conf-hello", "say hello", configure, lambda args, ctx: 0)]
"""


@pytest.fixture
def plugin_module(tmp_path, monkeypatch):
    """Write a plugin module from source (GOOD with replacements) and return its import name."""
    monkeypatch.syspath_prepend(str(tmp_path))
    count = [0]

    def make(*replacements: tuple[str, str], prefix: str = "") -> str:
        count[0] += 1
        name = f"conf_plugin_{count[0]}"
        source = prefix + GOOD
        for old, new in replacements:
            assert old in source, old
            source = source.replace(old, new)
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
        return name

    yield make
    for name in [m for m in sys.modules if m.startswith("conf_plugin_")]:
        del sys.modules[name]


def test_a_good_plugin_conforms(plugin_module):
    assert check_plugin(plugin_module()) == []


@pytest.mark.parametrize("replacements,problem", [
    ([('summary="a plugin of the conformance tests"', 'summary=""')],
     "plugin info: no summary (fpm plugins show prints it)"),
    ([("api_version=API_VERSION", "api_version=API_VERSION + 1")],
     f"plugin info: hook API {API_VERSION + 1} is not supported; this fpmcore provides {API_VERSION}"),
    ([('kind="model", targets=("conf-model",)', 'kind="runtime", targets=("vllm-0.33",)')],
     "plugin info: runtime target 'vllm-0.33' is not an exact pin name==version"),
    ([("return query.num_new_tokens", "return query.num_new_tokens + 1")],
     "returned 2 from fpm_align_stop; expected 0..1"),
    ([("return query.num_new_tokens", "return True")],
     "returned bool from fpm_align_stop; expected int"),
    ([("return query.num_new_tokens", "return query.nope")],
     "plugin 'conf' failed in fpm_align_stop: AttributeError"),
    ([("return [CONTRACT]", "return []")],
     "fpm_choose_producer_contract('host_offload'): chose conf_eager, which the plugin does not register"),
    ([('help="what to say"', 'help=""')], "fpm_cli_commands: option --greeting of 'conf-hello' has no help"),
    ([('p.add_argument("--greeting", help="what to say")',
       'p.add_argument_group("g").add_mutually_exclusive_group().add_argument("--loud", action="store_true")')],
     "fpm_cli_commands: option --loud of 'conf-hello' has no help"),
    ([("def fpm_plugin_info", "def fpm_plugin_info_")], "fpm_plugin_info: not implemented"),
])  # fmt: skip
def test_each_kind_of_problem_is_found(plugin_module, replacements, problem):
    problems = check_plugin(plugin_module(*replacements))
    assert any(problem in p for p in problems), problems


def test_a_plugin_that_imports_torch_at_module_level_is_found(plugin_module, tmp_path):
    (tmp_path / "torch.py").write_text("")  # even an importable torch must not be imported by the plugin
    problems = check_plugin(plugin_module(prefix="import torch  # noqa\n"))
    assert problems == [
        ("import without vLLM and torch failed: ImportError: conformance: torch must not be imported at module level")
    ]


def test_the_shared_profiles_are_the_examples():
    """The conformance profiles are copies of the example profiles (one hybrid, one plain)."""
    from pathlib import Path

    from fpmcore.host.conformance import DATA

    root = Path(__file__).resolve().parents[1] / "examples" / "profiles"
    assert (DATA / "conformance-hybrid.fpm-profile.json").read_bytes() == (
        root / "glm53flash-tp4.fpm-profile.json"
    ).read_bytes()
    assert (DATA / "conformance-plain.fpm-profile.json").read_bytes() == (
        root / "plain-llama8b-like.fpm-profile.json"
    ).read_bytes()
