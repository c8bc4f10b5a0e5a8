"""The import rules of vLLM 0.27.0 (``fpm_runtime_rules``), through the host: no hybrid evidence (02 §3.14)."""

from __future__ import annotations

import pytest

from fpmcore.host.stage_hooktypes import StartupLimits
from fpmcore.testing import make_host

RUNTIME = "vllm==0.27.0"
M = "vllm.v1.kv_cache_interface."
REASON = "records without hybrid evidence allow FullAttentionSpec and SlidingWindowSpec"


@pytest.fixture(scope="module")
def host():
    return make_host(entry_points=("vllm_027",))


@pytest.fixture(scope="module")
def rules(host):
    return host.hooks.runtime(RUNTIME).rules()


def test_no_hybrid_evidence(host, rules):
    """02 §4: vLLM 0.27.0 never imports hybrid evidence; another pin selects no plugin, so none answers for it."""
    from fpmcore.documents.errors import FpmError

    assert (rules.version, rules.hybrid_evidence) == ("0.27.0", False)
    with pytest.raises(FpmError, match=r"no runtime plugin for vllm==0\.33\.0"):
        host.hooks.runtime("vllm==0.33.0").rules()


@pytest.mark.parametrize(
    "name",
    [
        "FullAttentionSpec",
        "SlidingWindowSpec",
        "MambaSpec",
        "MLAAttentionSpec",
        "CircularBufferSpec",
        "UniformTypeKVCacheSpecs",
    ],
)
def test_plain_table_is_the_class_table(host, rules, name):
    """02 §5.1 is both the plain table and ``fpm_classify_spec``'s answer."""
    plain = rules.classify_plain(M + name)
    assert plain == host.hooks.runtime(RUNTIME).classify_spec(spec_class=M + name, spec={})
    if name in ("FullAttentionSpec", "SlidingWindowSpec"):
        assert (plain.kind, plain.windowed) == ("attention", name == "SlidingWindowSpec")
    else:
        assert (plain.kind, plain.reason) == ("unsupported", REASON)


def test_kv_dtype_labels(rules):
    """02 I-32: the one table of the spec."""
    assert rules.kv_dtype_labels["float16"] == "half" and rules.kv_dtype_labels["fp8_e5m2"] == "fp8"
    assert "nvfp4" not in rules.kv_dtype_labels and "auto" not in rules.kv_dtype_labels


def test_hybrid_only_rules_are_the_defaults(rules):
    """State families, the cacheable rule and C-1 are read from hybrid evidence only: none are given."""
    assert rules.state_family(M + "MambaSpec") is None
    assert rules.prefix_cacheable(M + "CircularBufferSpec", {}) is True
    assert rules.startup_blocks(M + "FullAttentionSpec", {}, 16, StartupLimits(32768, 8192)) is None
