"""03 C-1 of ``fpm_runtime_rules`` against the real vLLM 0.33.0 spec objects.

Each spec is built with vLLM's own dataclasses and recorded with the
observer's ``spec_fields``; the plugin's ``startup_blocks`` on the record must
equal vLLM's ``cdiv(spec.max_memory_usage_bytes(vllm_config), spec.page_size_bytes)``
(03 §1 ``blocks(spec)``), and ``prefix_cacheable`` / ``state_family`` must
agree with the class's own ``prefix_cacheable`` and its ``isinstance``.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from fpmcore.host.stage_hooktypes import StartupLimits

pytestmark = pytest.mark.real

L, T = 32768, 8192


def _config(mode: str, *, L: int = L, dcp: int = 1):
    return SimpleNamespace(
        model_config=SimpleNamespace(max_model_len=L),
        parallel_config=SimpleNamespace(decode_context_parallel_size=dcp),
        cache_config=SimpleNamespace(mamba_cache_mode=mode),
        max_in_flight_tokens=T,
    )


def _specs():
    """03 §10.2's single specs (S1 … S10) and the other classes with a C-1 formula."""
    import torch
    from vllm.v1 import kv_cache_interface as k

    att = dict(block_size=16, num_kv_heads=2, head_size=128, dtype=torch.bfloat16)
    mamba = dict(block_size=16, shapes=((4, 64),), dtypes=(torch.float32,))
    return [
        ("S1", k.FullAttentionSpec(**att), "none", 1),
        ("S2", k.SlidingWindowSpec(**att, sliding_window=4096, extra_retained_tokens=3), "none", 1),
        ("S3", k.SlidingWindowSpec(**att, sliding_window=32768), "none", 1),
        ("S4", k.SlidingWindowSpec(**att, sliding_window=1), "none", 1),
        ("S5", k.ChunkedLocalAttentionSpec(**att, attention_chunk_size=32768), "none", 1),
        ("S6 none", k.MambaSpec(**mamba), "none", 1),
        ("S6 align", k.MambaSpec(**mamba), "align", 1),
        ("S7 none", k.MambaSpec(**mamba, num_speculative_blocks=1, num_prefill_checkpoint_blocks=1,
                                prefill_checkpoint_alignment=16), "none", 1),
        ("S7 align", k.MambaSpec(**mamba, num_speculative_blocks=1, num_prefill_checkpoint_blocks=1,
                                 prefill_checkpoint_alignment=16), "align", 1),
        ("S8 align", k.MambaSpec(**mamba, num_speculative_blocks=2), "align", 1),
        ("S9", k.CircularBufferSpec(block_size=4, num_kv_heads=1, head_size=64, dtype=torch.bfloat16), "none", 1),
        ("S10", k.MLAAttentionSpec(block_size=2176, num_kv_heads=1, head_size=132, dtype=torch.uint8), "none", 1),
        ("window MLA", k.SlidingWindowMLASpec(block_size=64, num_kv_heads=1, head_size=576, dtype=torch.bfloat16,
                                              sliding_window=128), "none", 1),
        ("dcp-sharded full", k.FullAttentionSpec(**att), "none", 2),
        ("encoder-only", k.EncoderOnlyAttentionSpec(**att), "none", 1),
        ("HiSparse hot", k.HiSparseHotSpec(block_size=16, page_size=4096, blocks_per_request=7), "none", 1),
        ("HiSparse resident", k.HiSparseResidentSpec(block_size=16, page_size=4096), "none", 1),
    ]  # fmt: skip


@pytest.fixture(scope="module")
def cases():
    pytest.importorskip("vllm")
    from fpmcore_vllm033 import probe

    probe.prepare_environment()
    return {name: (spec, mode, dcp) for name, spec, mode, dcp in _specs()}


@pytest.fixture(scope="module")
def rules():
    from fpmcore.testing import make_host

    return make_host(entry_points=("vllm_033",)).hooks.runtime("vllm==0.33.0").rules()


NAMES = ["S1", "S2", "S3", "S4", "S5", "S6 none", "S6 align", "S7 none", "S7 align", "S8 align", "S9", "S10",
         "window MLA", "dcp-sharded full", "encoder-only", "HiSparse hot", "HiSparse resident"]  # fmt: skip


@pytest.mark.parametrize("name", NAMES)
def test_startup_blocks_is_vllms(cases, rules, name):
    from vllm.utils.math_utils import cdiv
    from vllm.v1.kv_cache_interface import MambaSpec

    from fpmcore_vllm_support.encode import class_name, spec_fields

    spec, mode, dcp = cases[name]
    want = cdiv(spec.max_memory_usage_bytes(_config(mode, dcp=dcp)), spec.page_size_bytes)
    limits = StartupLimits(max_model_len=L, in_flight_tokens=T, dcp=dcp, mamba_cache_mode=mode)
    got = rules.startup_blocks(class_name(spec), spec_fields(spec), spec.block_size, limits)
    assert got is not None and got[0] == want
    assert rules.prefix_cacheable(class_name(spec), spec_fields(spec)) is bool(spec.prefix_cacheable)
    assert (rules.state_family(class_name(spec)) == "mamba") is isinstance(spec, MambaSpec)


def test_the_vectors_of_03(cases, rules):
    """03 §10.2 S1 … S10: the table's numbers, from vLLM itself."""
    from vllm.utils.math_utils import cdiv

    want = {"S1": 2048, "S2": 770, "S3": 2049, "S4": 513, "S5": 2048, "S6 none": 1, "S6 align": 2, "S7 none": 2,
            "S7 align": 4, "S8 align": 4, "S9": 1, "S10": 16}  # fmt: skip
    got = {}
    for name in want:
        spec, mode, dcp = cases[name]
        got[name] = cdiv(spec.max_memory_usage_bytes(_config(mode, dcp=dcp)), spec.page_size_bytes)
    assert got == want
