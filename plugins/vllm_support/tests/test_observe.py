"""The observer's building blocks on stand-in objects (no vLLM needed).

The real vLLM objects are read by the ``real`` tests of the runtime plugins
(``test_observe_real.py``, ``test_observe_real027.py``) and by the examples.
"""

from __future__ import annotations

import hashlib
import sys
import types
from fractions import Fraction
from types import SimpleNamespace as NS

import attrs
import pytest

from fpmcore.documents.record import ModelIdentity, Rank
from fpmcore_vllm_support import observe


@pytest.fixture
def fake_vllm(tmp_path, monkeypatch):
    """An installed ``vllm`` package of two source files (one unreadable) and a build commit."""
    pkg = tmp_path / "vllm"
    (pkg / "config").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "config" / "cache.py").write_bytes(b"cache = 1\n")
    module = types.ModuleType("vllm")
    module.__file__ = str(pkg / "__init__.py")
    module.__version__ = "9.9.9"
    module.__commit_id__ = "g" + "ab" * 20
    monkeypatch.setitem(sys.modules, "vllm", module)
    return module


def test_unresolved_keeps_each_path_once():
    u = observe.Unresolved()
    assert u.value("a", None) is None and u.value("b", 0) == 0
    u.add("a")
    u.add("c")
    assert u.paths == ["a", "c"]


def test_runtime_identity_marks_an_unreadable_source_file_unresolved(fake_vllm):
    """02 §3.3, §3.12: a file the observer cannot read is null and its path unresolved (every release)."""
    u = observe.Unresolved()
    rt = observe.runtime_identity({"image": "img@sha256:" + "0" * 64}, ("vllm/config/cache.py", "vllm/gone.py"), u)
    assert rt.source_files == {"vllm/config/cache.py": hashlib.sha256(b"cache = 1\n").hexdigest(), "vllm/gone.py": None}
    assert u.paths == ["runtime.source_files.vllm/gone.py"]
    assert (rt.framework, rt.version, rt.source_revision) == ("vllm", "9.9.9", "ab" * 20)  # the build commit
    given = observe.runtime_identity({"source_revision": "r" * 64}, (), observe.Unresolved())
    assert given.source_revision == "r" * 64 and given.image is None


def test_observer_identity_hashes_the_observer_and_the_shared_code():
    """``source_sha256`` covers the plugin's observer module and this library's modules, in that order."""
    import fpmcore_vllm_support.encode as encode

    ident = observe.observer_identity("fpmcore-vllm033", ("fpmcore_vllm033.observe", *observe.SHARED_MODULES))
    files = [sys.modules["fpmcore_vllm033.observe"].__file__, encode.__file__, observe.__file__]
    assert ident.plugin == "fpmcore-vllm033" and ident.version == "0.1.0"
    assert ident.source_sha256 == hashlib.sha256(b"".join(open(f, "rb").read() for f in files)).hexdigest()
    other = observe.observer_identity("fpmcore-vllm027", ("fpmcore_vllm027.observe", *observe.SHARED_MODULES))
    assert other.source_sha256 != ident.source_sha256


def _config(**cache):
    return NS(
        model_config=NS(max_model_len=4096, dtype="torch.bfloat16", enforce_eager=True, model="m", revision="r"),
        cache_config=NS(block_size=16, gpu_memory_utilization=0.9, enable_prefix_caching=True, mamba_cache_mode=None,
                        mamba_block_size=None, prefix_match_unit=None, cache_dtype="auto", kv_cache_layout=None,
                        num_gpu_blocks_override=None, prefix_cache_retention_interval=None, **cache),
        scheduler_config=NS(max_num_batched_tokens=8192, max_num_seqs=8, async_scheduling=False, enable_chunked_prefill=True),
        parallel_config=NS(tensor_parallel_size=1, pipeline_parallel_size=1, data_parallel_size=1,
                           decode_context_parallel_size=1, enable_expert_parallel=False, enable_eplb=False),
        compilation_config=NS(mode=3, cudagraph_mode="NONE", cudagraph_capture_sizes=None, max_cudagraph_capture_size=None),
        max_in_flight_tokens=8192,
        speculative_config={"num_speculative_tokens": 1, "acceptance": Fraction(2, 3), "cap": float("inf")},
        kv_transfer_config=None,
    )  # fmt: skip


def test_settings_with_and_without_hybrid_evidence():
    """02 §3.4: without hybrid evidence the ⁰ keys, the model runner and the in-flight tokens are null, unread."""
    u = observe.Unresolved()
    plain = observe.settings(_config(cpu_offload_gb=0), NS(), u, hybrid=False)
    assert plain["cache"]["hash_block_size"] is None and plain["model_runner"] is None
    assert plain["scheduler"]["max_in_flight_tokens"] is None and plain["cache"]["cpu_offload_gb"] == 0
    assert plain["speculative"] == {"num_speculative_tokens": 1, "acceptance": "2/3", "cap": "inf"}
    assert plain["compilation"]["cudagraph_capture_sizes"] == [] and u.paths == []
    hybrid = observe.settings(_config(), NS(hash_block_size=16), u, hybrid=True)
    assert (hybrid["cache"]["hash_block_size"], hybrid["model_runner"]) == (16, "v1")
    assert hybrid["scheduler"]["max_in_flight_tokens"] == 8192 and hybrid["cache"]["cpu_offload_gb"] is None
    assert u.paths == ["settings.cache.kv_cache_layout"]  # hybrid: a layout vLLM did not resolve is unresolved


def test_binding_lifecycle_model_and_hardware():
    manifest = {"configuration": "c", "attempt_id": "a"}
    assert observe.binding(manifest, phase="decode", kind="worker", dp=0, rank=3).rank == Rank(0, 3, 0)
    assert observe.binding(manifest, phase="decode", kind="scheduler", dp=1, rank=0).rank == Rank(1, None, None)
    dry = observe.worker_lifecycle({"lifecycle": {"measurement": "cache_planned", "cache_initialized": False}})
    assert (dry.measurement, dry.cache_initialized, dry.warmup_completed) == ("cache_planned", False, False)
    assert observe.worker_lifecycle({"kv_caches": {}}).cache_initialized is True
    assert observe.scheduler_lifecycle({}).measurement == "scheduler_initialized"
    u = observe.Unresolved()
    given = {"path": "p", "revision": None, "config_sha256": "c" * 64, "loaded_config_commit": None}
    assert observe.model_identity({"model": given}, None, u) == ModelIdentity("p", None, "c" * 64, None)
    hw = observe.hardware({"hardware": {"gpu": "H100", "sm": 90}}, u)
    assert (hw.gpu, hw.sm, hw.device_name) == ("H100", 90, None)
    assert u.paths == ["model.revision", "hardware.device_name", "hardware.total_memory_bytes"]


def test_a_release_observer_refuses_another_vllm(fake_vllm):
    release = observe.Release(version="9.9.8", distribution="fpmcore-x", observer=__name__, source_files=(),
                              hybrid=False, classify=lambda c: None, worker_cache=lambda s, u, r: None)  # fmt: skip
    with pytest.raises(RuntimeError, match="the fpmcore-x observer needs vLLM 9.9.8; this process runs vLLM 9.9.9"):
        observe.build_record({"launch": {}}, phase="prefill", rank=0, release=release)
    with pytest.raises(ValueError, match="source kind must be 'worker' or 'scheduler'; got 'engine'"):
        observe.build_record(
            {"kind": "engine"}, phase="prefill", rank=0, release=attrs.evolve(release, version="9.9.9")
        )
