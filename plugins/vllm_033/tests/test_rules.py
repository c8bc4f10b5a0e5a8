"""The import rules of vLLM 0.33.0 (``fpm_runtime_rules``), through the host.

The startup reservation is checked with the single-spec vectors of 03 §10.2
(S1 … S11: L 32,768, T 8,192, B 16 unless stated) and the GLM-5.3-Flash groups
of 02 §11 (L 1,048,576, B 2,176).
"""

from __future__ import annotations

import pytest

from fpmcore.host.stage_hooktypes import StartupLimits
from fpmcore.testing import make_host

RUNTIME = "vllm==0.33.0"
M = "vllm.v1.kv_cache_interface."
S = StartupLimits(max_model_len=32768, in_flight_tokens=8192)


@pytest.fixture(scope="module")
def rules():
    return make_host(entry_points=("vllm_033",)).hooks.runtime(RUNTIME).rules()


def test_identity_and_hybrid_evidence(rules):
    """02 §4: vLLM 0.33.0 imports hybrid evidence; other pins select no plugin, so none answers for them."""
    from fpmcore.documents.errors import FpmError

    assert (rules.version, rules.hybrid_evidence) == ("0.33.0", True)
    host = make_host(entry_points=("vllm_033",))
    for pin in ("vllm==0.33.1", "vllm==0.33.0.post1", "vllm==0.27.0"):
        with pytest.raises(FpmError, match="no runtime plugin for"):
            host.hooks.runtime(pin).rules()


def test_kv_dtype_labels(rules):
    """02 I-32 table: fp8 for every fp8 dtype, bfloat16, half; nvfp4 and the int dtypes have none."""
    labels = rules.kv_dtype_labels
    assert {k: labels[k] for k in ("bfloat16", "float16")} == {"bfloat16": "bfloat16", "float16": "half"}
    fp8 = ("fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc", "fp8_ds_mla", "fp8_per_token_head")
    assert [labels[k] for k in fp8] == ["fp8"] * 6
    assert len(labels) == 8
    for other in ("auto", "nvfp4", "nvfp4_ds_mla", "int4_per_token_head", "int8_per_token_head"):
        assert other not in labels


def test_plain_table(rules):
    """02 §5.1 applies to a vLLM 0.33.0 record without hybrid evidence: two classes, nothing else."""
    full, window = rules.classify_plain(M + "FullAttentionSpec"), rules.classify_plain(M + "SlidingWindowSpec")
    assert (full.kind, full.windowed, window.kind, window.windowed) == ("attention", False, "attention", True)
    for name in ("MambaSpec", "MLAAttentionSpec", "CircularBufferSpec", "UniformTypeKVCacheSpecs"):
        c = rules.classify_plain(M + name)
        assert (c.kind, c.reason) == (
            "unsupported",
            "records without hybrid evidence allow FullAttentionSpec and SlidingWindowSpec",
        )
    assert rules.classify_plain("other.module.FullAttentionSpec").kind == "unsupported"


@pytest.mark.parametrize(("name", "family"), [
    ("MambaSpec", "mamba"), ("CircularBufferSpec", "ring"), ("FullAttentionSpec", None),
    ("MLAAttentionSpec", None), ("SlidingWindowSpec", None),
])  # fmt: skip
def test_state_family(rules, name, family):
    assert rules.state_family(M + name) == family


@pytest.mark.parametrize(("name", "fields", "cacheable"), [
    ("CircularBufferSpec", {}, False),
    ("HiSparseHotSpec", {}, False),
    ("HiSparseResidentSpec", {}, False),
    ("SlidingWindowMLASpec", {"bounded_replay": True}, False),
    ("SlidingWindowMLASpec", {"bounded_replay": False}, True),
    ("MambaSpec", {}, True),
    ("MLAAttentionSpec", {"cache_role": "INDEXER"}, True),
])  # fmt: skip
def test_prefix_cacheable_class_rule(rules, name, fields, cacheable):
    """02 I-44: a ring never, ``SlidingWindowMLASpec`` iff not ``bounded_replay``, every other class.

    The HiSparse pools are never cacheable either (vLLM 0.33.0's properties; I-41 refuses them first).
    """
    assert rules.prefix_cacheable(M + name, fields) is cacheable


@pytest.mark.parametrize(("vector", "name", "fields", "block", "limits", "want"), [
    ("S1", "FullAttentionSpec", {}, 16, S, (2048, "cdiv(32768, 16)")),
    ("S2", "SlidingWindowSpec", {"sliding_window": 4096, "extra_retained_tokens": 3}, 16, S,
     (770, "cdiv(min(4096 - 1 + 3 + 8192, 32768), 16) + 1")),
    ("S3", "SlidingWindowSpec", {"sliding_window": 32768}, 16, S,
     (2049, "cdiv(min(32768 - 1 + 0 + 8192, 32768), 16) + 1")),
    ("S4", "SlidingWindowSpec", {"sliding_window": 1}, 16, S, (513, "cdiv(min(1 - 1 + 0 + 8192, 32768), 16) + 1")),
    ("S5", "ChunkedLocalAttentionSpec", {"attention_chunk_size": 32768}, 16, S,
     (2048, "cdiv(min(32768 + 8192, 32768), 16)")),
    ("S6 none", "MambaSpec", {"num_speculative_blocks": 0, "num_prefill_checkpoint_blocks": 0}, 16,
     StartupLimits(32768, 8192, mamba_cache_mode="none"), (1, "mode none: 1 + 0 speculative")),
    ("S6 align", "MambaSpec", {"num_speculative_blocks": 0, "num_prefill_checkpoint_blocks": 0}, 16,
     StartupLimits(32768, 8192, mamba_cache_mode="align"), (2, "align mode: 2 + 0 speculative + 0 checkpoint")),
    ("S7 none", "MambaSpec", {"num_speculative_blocks": 1, "num_prefill_checkpoint_blocks": 1}, 16,
     StartupLimits(32768, 8192, mamba_cache_mode="none"), (2, "mode none: 1 + 1 speculative")),
    ("S7 align", "MambaSpec", {"num_speculative_blocks": 1, "num_prefill_checkpoint_blocks": 1}, 16,
     StartupLimits(32768, 8192, mamba_cache_mode="align"), (4, "align mode: 2 + 1 speculative + 1 checkpoint")),
    ("S8 none", "MambaSpec", {"num_speculative_blocks": 2, "num_prefill_checkpoint_blocks": 0}, 16,
     StartupLimits(32768, 8192, mamba_cache_mode="none"), (3, "mode none: 1 + 2 speculative")),
    ("S8 align", "MambaSpec", {"num_speculative_blocks": 2, "num_prefill_checkpoint_blocks": 0}, 16,
     StartupLimits(32768, 8192, mamba_cache_mode="align"), (4, "align mode: 2 + 2 speculative + 0 checkpoint")),
    ("S9", "CircularBufferSpec", {}, 4, S, (1, "ring buffer: 1")),
    ("S10", "MLAAttentionSpec", {"cache_role": "INDEXER", "tokens_per_state": 4}, 2176, S, (16, "cdiv(32768, 2176)")),
    ("S11 (each inner spec)", "MLAAttentionSpec", {}, 2176, StartupLimits(1048576, 8192),
     (482, "cdiv(1048576, 2176)")),
    ("GLM KDA, align", "MambaSpec", {"num_speculative_blocks": 0, "num_prefill_checkpoint_blocks": 1}, 2176,
     StartupLimits(1048576, 8192, mamba_cache_mode="align"), (3, "align mode: 2 + 0 speculative + 1 checkpoint")),
    ("dcp-sharded full", "FullAttentionSpec", {"dcp_sharded": True}, 16, StartupLimits(32768, 8192, dcp=2),
     (1024, "cdiv(16384, 16)")),
    ("not dcp-sharded", "FullAttentionSpec", {"dcp_sharded": False}, 16, StartupLimits(32768, 8192, dcp=2),
     (2048, "cdiv(32768, 16)")),
    ("encoder-only", "EncoderOnlyAttentionSpec", {}, 16, S, (0, "encoder-only: 0")),
    ("HiSparse hot", "HiSparseHotSpec", {"blocks_per_request": 7}, 16, S, (7, "hot pool: 7")),
    ("HiSparse resident", "HiSparseResidentSpec", {}, 16, S, (512, "cdiv(min(8192, 32768), 16)")),
])  # fmt: skip
def test_startup_blocks_c1(rules, vector, name, fields, block, limits, want):
    """03 C-1 with the formula text I-61 prints."""
    assert rules.startup_blocks(M + name, fields, block, limits) == want


@pytest.mark.parametrize(("name", "fields", "block"), [
    ("CrossAttentionSpec", {}, 16),  # the encoder budget is not recorded
    ("UniformTypeKVCacheSpecs", {}, 16),  # C-3: the import takes the maximum over the layer specs
    ("FullAttentionSpec", {}, 0),
    ("FullAttentionSpec", {}, True),
    ("SlidingWindowSpec", {"sliding_window": None}, 16),
    ("ChunkedLocalAttentionSpec", {"attention_chunk_size": "x"}, 16),
    ("MambaSpec", {"num_speculative_blocks": 1.0}, 16),
    ("HiSparseHotSpec", {"blocks_per_request": None}, 16),
    ("NoSuchSpec", {}, 16),
])  # fmt: skip
def test_startup_blocks_unknown(rules, name, fields, block):
    """``None`` when the record does not give what C-1 needs, or the class has no formula."""
    assert rules.startup_blocks(M + name, fields, block, S) is None
