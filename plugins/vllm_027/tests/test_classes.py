"""The class table of records without hybrid evidence (02 §5.1), through the host."""

from __future__ import annotations

import pytest

from fpmcore.testing import make_host

M = "vllm.v1.kv_cache_interface."
REASON = "records without hybrid evidence allow FullAttentionSpec and SlidingWindowSpec"


@pytest.fixture(scope="module")
def host():
    return make_host(entry_points=("vllm_027",))


def test_full_and_sliding_window_are_attention(host):
    full = host.hooks.runtime("vllm==0.27.0").classify_spec(spec_class=M + "FullAttentionSpec", spec={})
    window = host.hooks.runtime("vllm==0.27.0").classify_spec(spec_class=M + "SlidingWindowSpec", spec={})
    assert (full.kind, full.windowed) == ("attention", False)
    assert (window.kind, window.windowed) == ("attention", True)


@pytest.mark.parametrize(
    "name",
    ["MambaSpec", "MLAAttentionSpec", "CircularBufferSpec", "UniformTypeKVCacheSpecs", "ChunkedLocalAttentionSpec"],
)
def test_every_other_class_is_unsupported(host, name):
    c = host.hooks.runtime("vllm==0.27.0").classify_spec(spec_class=M + name, spec={})
    assert (c.kind, c.reason) == ("unsupported", REASON)


def test_only_its_exact_version(host):
    from fpmcore.documents.errors import FpmError

    with pytest.raises(FpmError, match=r"no runtime plugin for vllm==0\.28\.0; installed runtime plugins: vllm_027"):
        host.hooks.runtime("vllm==0.28.0").classify_spec(spec_class=M + "FullAttentionSpec", spec={})
    assert host.select_runtime("vllm==0.27.0").id == "vllm_027"
    assert host.hooks.runtime("vllm==0.27.0").plugin == "vllm_027"
