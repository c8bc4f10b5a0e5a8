"""The vLLM 0.33.0 cache spec class table (02 §5.2), through the host."""

from __future__ import annotations

import re

import pytest

from fpmcore.testing import make_host

RUNTIME = "vllm==0.33.0"
M = "vllm.v1.kv_cache_interface."

ROWS = [
    ("FullAttentionSpec", "attention", False, None),
    ("MLAAttentionSpec", "attention", False, None),
    ("HiddenStateCacheSpec", "attention", False, None),
    ("SinkFullAttentionSpec", "attention", False, None),
    ("SlidingWindowSpec", "attention", True, None),
    ("SlidingWindowMLASpec", "attention", True, None),
    ("MambaSpec", "state", False, None),
    ("CircularBufferSpec", "state", False, None),
    (
        "RSWASpec",
        "unsupported",
        False,
        "its manager frees the blocks between the prompt and the decode window, which no cache kind models",
    ),
    ("ChunkedLocalAttentionSpec", "attention", False, None),
    ("CrossAttentionSpec", "unsupported", False, "encoder-decoder cross-attention is not modelled"),
    ("EncoderOnlyAttentionSpec", "unsupported", False, "vLLM 0.33.0 registers no cache manager for it"),
    ("HiSparseHotSpec", "unsupported", False, "HiSparse placement uses a host pool that the profile does not model"),
    (
        "HiSparseResidentSpec",
        "unsupported",
        False,
        "HiSparse placement uses a host pool that the profile does not model",
    ),
    ("KpoolTailSpec", "unsupported", False, "not a vLLM 0.33.0 class"),
    ("AttentionSpec", "unsupported", False, "abstract spec class"),
    ("KVCacheSpec", "unsupported", False, "abstract spec class"),
    ("NoSuchSpec", "unsupported", False, "class unknown to vLLM 0.33.0"),
]


@pytest.fixture(scope="module")
def host():
    return make_host(entry_points=("vllm_033",))


@pytest.mark.parametrize(("name", "kind", "windowed", "reason"), ROWS)
def test_class_table(host, name, kind, windowed, reason):
    c = host.hooks.runtime(RUNTIME).classify_spec(spec_class=M + name, spec={})
    assert (c.kind, c.windowed, c.reason) == (kind, windowed, reason)
    assert not c.composite
    assert c.chunked == (name == "ChunkedLocalAttentionSpec")


def test_uniform_group_defers_to_its_inner_specs(host):
    c = host.hooks.runtime(RUNTIME).classify_spec(spec_class=M + "UniformTypeKVCacheSpecs", spec={})
    assert c.composite


def test_a_known_name_in_another_module_is_unknown(host):
    c = host.hooks.runtime(RUNTIME).classify_spec(spec_class="vllm.models.glm5next.KpoolTailSpec", spec={})
    assert (c.kind, c.reason) == ("unsupported", "class unknown to vLLM 0.33.0")
    c = host.hooks.runtime(RUNTIME).classify_spec(spec_class="MambaSpec", spec={})
    assert c.reason == "class unknown to vLLM 0.33.0"


@pytest.mark.parametrize("runtime", ["vllm==0.33.1", "vllm==0.33.0.post1", "vllm==0.33", "vllm==0.34.0"])
def test_other_versions_are_not_answered(host, runtime):
    """02 §4: exact pins; the host selects no plugin for another version, so vllm_033 is never asked."""
    from fpmcore.documents.errors import FpmError

    with pytest.raises(
        FpmError,
        match=f"no runtime plugin for {re.escape(runtime)}; installed runtime plugins: "
        r"vllm_033 \(vllm==0\.33\.0\)$",
    ):
        host.hooks.runtime(runtime)
