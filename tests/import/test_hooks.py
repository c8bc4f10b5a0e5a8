"""The import asks the runtime plugins through the host's hooks (normalize, classify, runtime selection)."""

from __future__ import annotations

import pytest

import fpm_import_glm_fixture as G


@pytest.mark.parametrize("pin,other", [("vllm==0.33.0", "vllm==0.27.0"), ("vllm==0.27.0", "vllm==0.33.0")])
def test_normalize_record_hook(host, pin, other):
    """``fpm_normalize_record``: a new mapping with the record's content; another plugin's pin is not answered."""
    record = G.record("prefill", "worker", 0)
    out = host.hooks.normalize_record(runtime=pin, record=record)
    assert out == record and out is not record
    assert host.hooks.normalize_record(runtime="vllm==0.33.1", record=record) is None


def test_services_select_runtime_by_exact_version(services):
    """I-25's plugin gate: exact strings, no PEP 440 normalization."""
    assert services.has_runtime("vllm==0.33.0") and services.has_runtime("vllm==0.27.0")
    for version in ("0.33", "0.33.0.post1", "0.33.1", "v0.33.0", "0.33.0 "):
        assert not services.has_runtime(f"vllm=={version}")
    assert services.installed() == "vllm_027 (0.27.0), vllm_033 (0.33.0)"


def test_normalization_is_applied(evidence, run_import, host):
    """Every record goes through its plugin's normalization before stage D (02 §3.14)."""
    from fpmcore import hookimpl
    from fpmcore.importer import HostServices
    from fpmcore.testing import make_host

    class Marker:
        """A normalization that breaks the records: the import must then refuse them."""

        @hookimpl(tryfirst=True)
        def fpm_normalize_record(self, runtime, record):
            out = dict(record)
            out["settings"] = dict(record["settings"], speculative={"num_speculative_tokens": 1})
            return out

        @hookimpl
        def fpm_plugin_info(self):
            from fpmcore import API_VERSION, PluginInfo

            return PluginInfo(id="marker", kind="model", targets=("marker",), api_version=API_VERSION)

    marked = HostServices(make_host(Marker(), entry_points=("vllm_027", "vllm_033")))
    result = run_import(evidence, services=marked)
    assert ("I-30", "speculative or transferred cache semantics are unsupported") in [
        (d.rule, d.message) for d in result.diagnostics]
