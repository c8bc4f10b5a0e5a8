"""The FPM profile (01-profile.md): data model, validation rules, block arithmetic.

Objects, bottom-up::

    FpmModelProfile                      one model at one pinned revision
     └─ deployments[]: FpmDeploymentProfile
         └─ resources: FpmResourceProfile
             ├─ runtime_memory?: FpmRuntimeMemory
             └─ cache_groups[]: FpmCacheGroup

Every class is ``attrs`` frozen; attribute names are the JSON field names, in
declaration order, and an absent optional field is ``None``.  Reading goes
strict JSON (:mod:`fpmcore.documents.jsonio`) → structural rules P-S1 … P-S4
(:func:`fpmcore.documents.schema.check_structure`) → the object rules of each class in
the spec's order → the object.  The first failing rule is raised as
:class:`~fpmcore.documents.errors.FpmError` with its rule id and the JSON path of the
object (01 §1.3).  Writing gives the file form (01 §9.1); a file in file
form loads and saves to the same bytes (P-95).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from typing import Any, Literal, cast

import attrs

from fpmcore.documents import blocks, jsonio
from fpmcore.documents.blocks import cdiv
from fpmcore.documents.errors import FpmError
from fpmcore.documents.runtime_pin import FRAMEWORK
from fpmcore.documents.schema import (
    MAX_EXACT,
    field,
    json_schema,
    quote,
    render_opt,
    structure_checked,
    unstructure,
)

CacheKindName = Literal["attention", "convolution", "state"]

QUANT_LABELS = ("bfloat16", "half", "float32", "fp8", "fp8_block", "fp8_static", "nvfp4", "int8")
FMHA_LABELS = ("bfloat16", "half", "float32", "fp8", "int8")
KV_LABELS = ("bfloat16", "half", "float32", "fp8", "int8")

#: 01 §7 P-62: mutable placeholders a model revision may not be (case-insensitive).
REVISION_PLACEHOLDERS = frozenset({"main", "master", "head", "latest", "current", "unknown", "tbd", "unpinned"})
#: 01 §6.2 P-54: placeholders a backend version may not be (case-insensitive).
VERSION_PLACEHOLDERS = frozenset({"previous", "next", "latest", "current", "unknown"})


def _blank(s: str) -> bool:
    return not s.strip()


# ---------------------------------------------------------------------------
# FpmCacheGroup (01 §3)
# ---------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class FpmCacheGroup:
    """One KV cache group on one TP rank; all groups share one block pool (01 §3)."""

    name: str = field("str", description="unique within the deployment")
    kind: CacheKindName = field("enum", values=("attention", "convolution", "state"))
    num_layers: int = field("u32")
    block_size_tokens: int = field("u32")
    page_size_bytes: int = field("u64", description="bytes one block ID reserves")
    sliding_window: int | None = field("u32", required=False, nullable=True)
    attention_chunk_size: int | None = field(
        "u32", required=False, omit=True, description="chunked-local attention: tokens of one attention chunk"
    )
    blocks_per_request: int | None = field("u32", required=False, omit=True)
    prefill_checkpoint_blocks: int | None = field("u32", required=False, omit=True)
    prefill_checkpoint_alignment: int | None = field("u32", required=False, omit=True)

    @property
    def label(self) -> str:
        return quote(self.name)

    def problem(self) -> tuple[str, str] | None:
        """The first failing rule of P-1 … P-13 and P-18 as ``(rule, message)``, or ``None``."""
        n = self.label
        if _blank(self.name):
            return "P-1", f"cache group name must be non-blank; got {n}"
        if self.num_layers == 0:
            return "P-2", f"cache group {n}: num_layers must be positive; got 0"
        if self.block_size_tokens == 0:
            return "P-3", f"cache group {n}: block_size_tokens must be positive; got 0"
        if self.page_size_bytes == 0:
            return "P-4", f"cache group {n}: page_size_bytes must be in 1..2**53; got 0"
        if self.sliding_window == 0:
            return "P-5", f"cache group {n}: sliding_window must be positive or null; got 0"
        if self.kind == "convolution" and self.sliding_window is None:
            return "P-6", f"cache group {n}: convolution cache groups require a sliding_window"
        if self.kind == "state" and not self.blocks_per_request:
            return (
                "P-7",
                f"cache group {n}: state cache groups require a positive blocks_per_request; "
                f"got {render_opt(self.blocks_per_request)}",
            )
        if self.kind == "state" and self.sliding_window is not None:
            return (
                "P-8",
                f"cache group {n}: state cache groups cannot have a sliding_window; got {self.sliding_window}",
            )
        if self.kind != "state" and self.blocks_per_request is not None:
            return (
                "P-9",
                f"cache group {n}: blocks_per_request is only valid for state cache groups; "
                f"got {self.blocks_per_request} on kind {self.kind}",
            )
        c, a = self.prefill_checkpoint_blocks, self.prefill_checkpoint_alignment
        if c is not None and self.kind != "state":
            return (
                "P-10",
                f"cache group {n}: prefill_checkpoint_blocks is only valid for state cache groups; "
                f"got {c} on kind {self.kind}",
            )
        if c is not None and c not in (0, 1):
            return "P-11", f"cache group {n}: prefill_checkpoint_blocks must be 0 or 1; got {c}"
        if a is not None and a <= 0:
            return "P-12", f"cache group {n}: prefill_checkpoint_alignment must be positive; got {a}"
        if a is not None and not c:
            return (
                "P-13",
                f"cache group {n}: prefill_checkpoint_alignment requires prefill_checkpoint_blocks 1; got {a}",
            )
        chunk = self.attention_chunk_size
        if chunk is not None and (chunk == 0 or self.kind != "attention" or self.sliding_window is not None):
            return (
                "P-18",
                f"cache group {n}: attention_chunk_size must be positive, on an attention group without a "
                f"sliding_window; got {chunk} on kind {self.kind}, sliding_window {render_opt(self.sliding_window)}",
            )
        return None

    # -- block arithmetic (01 §3.5) -------------------------------------------------

    def _shape(self) -> dict[str, Any]:
        """The group as :mod:`fpmcore.documents.blocks` takes it."""
        if self.kind == "state":
            return {"block": self.block_size_tokens, "state_blocks": self.blocks_per_request or 0}
        if self.attention_chunk_size is not None:
            return {"block": self.block_size_tokens, "chunk": self.attention_chunk_size}
        return {"block": self.block_size_tokens, "window": self.sliding_window}

    def block_range(self, computed: int, target: int) -> range:
        """P-14: logical blocks held during a forward computing ``computed .. target``."""
        return range(*blocks.block_range(computed, target, label=self.label, **self._shape()))

    def bytes_for_forward(self, computed: int, target: int) -> int:
        """P-15: ``len(block_range) × page_size_bytes``, at most 2**53."""
        total = len(self.block_range(computed, target)) * self.page_size_bytes
        if total > MAX_EXACT:
            raise FpmError("P-15", f"cache group {self.label}: cache allocation exceeds 2**53 bytes")
        return total

    def peak_pages(self, context: int, max_num_tokens: int) -> int:
        """P-16 pages: the most one request can hold in this group (admission bound)."""
        if context <= 0 or max_num_tokens <= 0:
            raise FpmError(
                "P-16",
                f"cache group {self.label}: context and max_num_tokens must be positive; "
                f"got {context}, {max_num_tokens}",
            )
        return blocks.peak_blocks(context, max_num_tokens, **self._shape())

    def peak_request_bytes(self, context: int, max_num_tokens: int) -> int:
        """P-16: ``peak_pages × page_size_bytes``, at most 2**53."""
        total = self.peak_pages(context, max_num_tokens) * self.page_size_bytes
        if total > MAX_EXACT:
            raise FpmError("P-16", f"cache group {self.label}: cache request allocation exceeds 2**53 bytes")
        return total

    def occupancy_request_bytes(self, tokens: int, context: int) -> int:
        """P-17: the steady one-token-decode footprint ``peak_request_bytes(tokens, 1)``."""
        if tokens <= 0 or tokens > context:
            raise FpmError("P-17", f"request_occupancy_tokens must be positive and within context_length; got {tokens}")
        return self.peak_request_bytes(tokens, 1)


# ---------------------------------------------------------------------------
# FpmRuntimeMemory (01 §4)
# ---------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class FpmRuntimeMemory:
    """Cache capacity observed for the exact deployment and scheduler settings of a probe (01 §4)."""

    kv_cache_bytes: int = field("u64", description="bytes of pool blocks free at engine start")
    gpu_memory_utilization: float = field("float")
    max_model_len: int = field("u32")
    provenance: str = field("str")
    enable_prefix_caching: bool | None = field("bool", required=False, omit=True)
    mamba_cache_mode: str | None = field("str", required=False, omit=True)
    hash_block_size_tokens: int | None = field("u32", required=False, omit=True)

    def problem(self) -> tuple[str, str] | None:
        """The first failing rule of P-20 … P-26."""
        if self.kv_cache_bytes == 0:
            return "P-20", "runtime memory: kv_cache_bytes must be in 1..2**53; got 0"
        g = self.gpu_memory_utilization
        if not math.isfinite(g) or g <= 0 or g > 1:
            return "P-21", f"runtime memory: gpu_memory_utilization must be finite and in (0, 1]; got {g!r}"
        if self.max_model_len == 0:
            return "P-22", "runtime memory: max_model_len must be positive; got 0"
        if _blank(self.provenance):
            return "P-23", "runtime memory: provenance must be non-blank"
        mode = self.mamba_cache_mode
        if mode is not None and mode not in ("none", "align"):
            return "P-24", f"runtime memory: mamba_cache_mode must be none or align; got {quote(mode)}"
        if mode == "align" and self.enable_prefix_caching is not True:
            return (
                "P-25",
                "runtime memory: mamba_cache_mode align requires enable_prefix_caching=true; "
                f"got {render_opt(self.enable_prefix_caching)}",
            )
        h = self.hash_block_size_tokens
        if h is not None and h <= 0:
            return "P-26", f"runtime memory: hash_block_size_tokens must be positive; got {h}"
        return None


# ---------------------------------------------------------------------------
# FpmResourceProfile (01 §5)
# ---------------------------------------------------------------------------

DECLARED_FIELDS = ("weights_bytes", "activations_bytes", "runtime_overhead_bytes", "comm_overhead_bytes")


#: The scheduler bounds a profile records under names of its own (01 §5): the
#: runtime's engine argument → the field of :class:`FpmResourceProfile`.  The
#: one place the two vocabularies meet: the import reads a record's settings
#: through it, the plan and the replay give the profile's values back as the
#: runtime's (:meth:`FpmResourceProfile.runtime_settings`).
RUNTIME_SETTINGS: Mapping[str, str] = {"max_num_batched_tokens": "max_num_tokens", "max_num_seqs": "max_batch_size"}


def resources_of_runtime(settings: Mapping[str, Any]) -> dict[str, Any]:
    """The profile's resource fields of the runtime's settings (``max_num_seqs`` → ``max_batch_size``, …)."""
    return {field: settings[name] for name, field in RUNTIME_SETTINGS.items()}


@attrs.frozen(kw_only=True)
class FpmResourceProfile:
    """Scheduler bounds and the KV cache description of one deployment (01 §5)."""

    weights_bytes: int | None = field("u64", required=False, omit=True)
    activations_bytes: int | None = field("u64", required=False, omit=True)
    runtime_overhead_bytes: int | None = field("u64", required=False, omit=True)
    comm_overhead_bytes: int | None = field("u64", required=False, omit=True)
    runtime_memory: FpmRuntimeMemory | None = field("obj", cls=FpmRuntimeMemory, required=False, omit=True)
    kv_bytes_per_token: int | None = field("u64", required=False, omit=True)
    cache_layout: Literal["linear", "grouped"] = field("enum", values=("linear", "grouped"))
    cache_groups: tuple[FpmCacheGroup, ...] = field("list", cls=FpmCacheGroup, required=False, omit=True)
    max_num_tokens: int = field("u32", description="rank-local token budget (max_num_batched_tokens)")
    max_batch_size: int = field("u32", description="rank-local running-request limit (max_num_seqs)")
    provenance: str = field("str")

    def runtime_settings(self) -> dict[str, int]:
        """The scheduler bounds under the runtime's names (:data:`RUNTIME_SETTINGS`)."""
        return {name: getattr(self, field) for name, field in RUNTIME_SETTINGS.items()}

    @property
    def declared(self) -> dict[str, int]:
        """The declared non-KV byte fields that are present, in declaration order."""
        return {k: getattr(self, k) for k in DECLARED_FIELDS if getattr(self, k) is not None}

    @property
    def memory_pending(self) -> bool:
        """Valid but pending: neither runtime memory nor all four declared fields (P-40)."""
        return self.runtime_memory is None and len(self.declared) < len(DECLARED_FIELDS)

    def problem(self) -> tuple[str, str, str] | None:
        """The first failing rule of P-30 … P-39 as ``(rule, message, sub-location)``."""
        if self.max_num_tokens == 0:
            return "P-30", "resources: max_num_tokens must be positive; got 0", ""
        if self.max_batch_size == 0:
            return "P-31", "resources: max_batch_size must be positive; got 0", ""
        if _blank(self.provenance):
            return "P-32", "resources: provenance must be non-blank", ""
        declared = self.declared
        total = sum(declared.values())
        if total > MAX_EXACT:
            return "P-33", f"resources: total non-KV resource bytes must not exceed 2**53; got {total}", ""
        if self.runtime_memory is not None:
            inner = self.runtime_memory.problem()
            if inner is not None:
                return inner[0], inner[1], "runtime_memory"
            if declared:
                return (
                    "P-35",
                    "resources: runtime_memory cannot be combined with declared non-KV resource bytes: "
                    + ", ".join(declared),
                    "",
                )
        if self.cache_layout == "linear" and (self.cache_groups or not self.kv_bytes_per_token):
            return "P-36", "resources: linear cache requires kv_bytes_per_token in 1..2**53 and no cache_groups", ""
        if self.cache_layout == "grouped" and (self.kv_bytes_per_token is not None or not self.cache_groups):
            return "P-37", "resources: grouped cache requires cache_groups and no kv_bytes_per_token", ""
        for i, group in enumerate(self.cache_groups):
            inner = group.problem()
            if inner is not None:
                return inner[0], inner[1], f"cache_groups[{i}]"
        seen: set[str] = set()
        for group in self.cache_groups:
            if group.name in seen:
                return "P-39", f"resources: cache group names must be unique; {group.label} repeats", ""
            seen.add(group.name)
        return None

    def fixed_state_bytes(self) -> int:
        """The state bytes one request is charged once (01 §3.2)."""
        return sum((g.blocks_per_request or 0) * g.page_size_bytes for g in self.cache_groups if g.kind == "state")

    def request_peak_cache_bytes(self, context: int, max_num_tokens: int | None = None) -> int:
        """Σ over groups of :meth:`FpmCacheGroup.peak_request_bytes` (grouped) or the linear rate (01 §8)."""
        if self.cache_layout == "linear":
            return context * (self.kv_bytes_per_token or 0)
        m = self.max_num_tokens if max_num_tokens is None else max_num_tokens
        return sum(g.peak_request_bytes(context, m) for g in self.cache_groups)


# ---------------------------------------------------------------------------
# FpmDeploymentProfile (01 §6)
# ---------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class FpmDeploymentProfile:
    """One (system, backend version, topology, precision) of the model (01 §6)."""

    system: str = field("str")
    backend: Literal["vllm"] = field(
        "enum", values=(FRAMEWORK,)
    )  # the Literal is FRAMEWORK (tests/test_runtime_pin.py)
    backend_version: str = field("str")
    tp: int = field("u32", minimum=1)
    pp: int = field("u32")
    dp: int = field("u32", minimum=1)
    moe_tp: int = field("u32", minimum=1)
    moe_ep: int = field("u32", minimum=1)
    cp: int = field("u32")
    gemm_quant_mode: str = field("enum", values=QUANT_LABELS)
    moe_quant_mode: str = field("enum", values=QUANT_LABELS)
    fmha_quant_mode: str = field("enum", values=FMHA_LABELS)
    comm_quant_mode: str = field("enum", values=("half",))
    kv_cache_dtype: str = field("enum", values=KV_LABELS)
    moe_backend: str = field("str", required=False, default="auto")
    attention_backend: str = field("str", required=False, default="auto")
    enable_wideep: bool = field("enum", values=(False,), required=False, default=False)
    enable_eplb: bool = field("enum", values=(False,), required=False, default=False)
    resources: FpmResourceProfile = field("obj", cls=FpmResourceProfile)

    @property
    def identity(self) -> tuple[Any, ...]:
        """The deployment identity (01 §6.2)."""
        return (self.system, self.backend, self.backend_version, self.tp, self.pp, self.dp,
                self.moe_tp, self.moe_ep, self.cp)  # fmt: skip

    def problem(self, num_experts: int) -> tuple[str, str, str] | None:
        """The first failing rule of P-50 … P-55 as ``(rule, message, sub-location)``."""
        if self.pp != 1 or self.cp != 1:
            return "P-50", f"deployment: FPM deployments support PP1 and CP1; got pp={self.pp}, cp={self.cp}", ""
        tp, dp, mtp, mep = self.tp, self.dp, self.moe_tp, self.moe_ep
        if num_experts == 0:
            if not (dp == 1 and mep == 1 and mtp in (1, tp)):
                return (
                    "P-51",
                    "deployment: dense models require dp=1, moe_ep=1 and moe_tp in {1, tp}; "
                    f"got dp={dp}, moe_tp={mtp}, moe_ep={mep}",
                    "",
                )
        else:
            tp_ok = dp == 1 and mep == 1 and mtp == tp
            dep_ok = tp == 1 and mtp == 1 and mep == dp
            tep_ok = dp == 1 and mtp == 1 and mep == tp
            if not (tp_ok or dep_ok or tep_ok):
                return (
                    "P-52",
                    f"deployment: MoE topology must be TP, DEP or TEP; got tp={tp}, dp={dp}, moe_tp={mtp}, moe_ep={mep}",
                    "",
                )
        if mep > 1 and num_experts % mep != 0:
            return "P-53", f"deployment: num_experts {num_experts} is not divisible by moe_ep {mep}", ""
        v = self.backend_version
        if _blank(v) or any(ch.isspace() for ch in v) or v.lower() in VERSION_PLACEHOLDERS:
            return "P-54", f"deployment: backend_version must be an exact runtime version; got {quote(v)}", ""
        inner = self.resources.problem()
        if inner is not None:
            rule, message, sub = inner
            return rule, message, "resources" + (f".{sub}" if sub else "")
        return None


# ---------------------------------------------------------------------------
# FpmModelProfile (01 §7)
# ---------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class FpmModelProfile:
    """One model at one pinned revision, with its deployments (01 §7)."""

    schema_version: int = field("int")
    model: str = field("str")
    model_revision: str = field("str", description="pinned: a 40-character lowercase hex commit is recommended")
    architecture: str = field("str")
    context_length: int = field("u32")
    num_experts: int = field("u32", description="0 for a dense model")
    provenance: str = field("str")
    deployments: tuple[FpmDeploymentProfile, ...] = field("list", cls=FpmDeploymentProfile)

    def problem(self) -> tuple[str, str, str] | None:
        """The first failing rule of P-60 … P-68 as ``(rule, message, location)``."""
        if self.schema_version != 1:
            return "P-60", f"profile: unsupported schema_version {self.schema_version}; expected 1", ""
        if _blank(self.model):
            return "P-61", "profile: model must be non-blank", ""
        r = self.model_revision
        if _blank(r) or any(ch.isspace() for ch in r) or r.lower() in REVISION_PLACEHOLDERS:
            return "P-62", f"profile: model_revision must be pinned; got {quote(r)}", ""
        if _blank(self.architecture):
            return "P-63", "profile: architecture must be non-blank", ""
        if self.context_length == 0:
            return "P-64", "profile: context_length must be positive; got 0", ""
        if _blank(self.provenance):
            return "P-65", "profile: provenance must be non-blank", ""
        if not self.deployments:
            return "P-66", "profile: fpm_profile requires deployments", ""
        for i, dep in enumerate(self.deployments):
            inner = dep.problem(self.num_experts)
            if inner is not None:
                rule, message, sub = inner
                return rule, message, f"deployments[{i}]" + (f".{sub}" if sub else "")
        seen: set[tuple[Any, ...]] = set()
        for dep in self.deployments:
            if dep.identity in seen:
                return (
                    "P-68",
                    f"profile: duplicate FPM deployment resources for {dep.system} vllm {dep.backend_version} "
                    f"tp={dep.tp} pp={dep.pp} dp={dep.dp} moe_tp={dep.moe_tp} moe_ep={dep.moe_ep} cp={dep.cp}",
                    "",
                )
            seen.add(dep.identity)
        return None


# ---------------------------------------------------------------------------
# reading and writing
# ---------------------------------------------------------------------------


def _raise(problem: tuple[str, ...] | None, base: str) -> None:
    if problem is None:
        return
    rule, message = problem[0], problem[1]
    sub = problem[2] if len(problem) > 2 else ""
    where = ".".join(p for p in (base, sub) if p)
    raise FpmError(rule, message, where)


def from_data(data: Any, cls: type = None) -> Any:  # type: ignore[assignment]
    """Validate parsed JSON ``data`` as ``cls`` (default :class:`FpmModelProfile`) and build it.

    Runs P-S1 … P-S4 over the whole tree, then the object rules; raises
    :class:`FpmError` at the first failure.
    """
    cls = FpmModelProfile if cls is None else cls
    obj = structure_checked(data, cls)
    validate(obj)
    return obj


def validate(obj: Any) -> None:
    """Run the object rules of a model object (raises :class:`FpmError`)."""
    if isinstance(obj, FpmDeploymentProfile):
        raise TypeError("validate a deployment through its profile (P-51 needs num_experts)")
    _raise(obj.problem(), "")


def parse_profile(data: bytes | str, where: str = "") -> FpmModelProfile:
    """Parse and validate a profile from JSON text."""
    obj = jsonio.loads(data, where=where)
    try:
        return cast(FpmModelProfile, from_data(obj))
    except FpmError as exc:
        from fpmcore.documents.kinds import not_a

        other = not_a("an FPM profile", obj)
        if other is not None:  # a plan, a table, a report given as the profile: say what it is
            raise FpmError(exc.rule, other, where) from None
        if where and exc.rule != "JSON":
            exc.where = f"{where}: {exc.where}" if exc.where else where
        raise


def load_profile(path: str | os.PathLike[str]) -> FpmModelProfile:
    """Read and validate a profile file (``*.fpm-profile.json``)."""
    return parse_profile(jsonio.read_bytes(path), where=str(path))


def to_data(obj: Any) -> dict[str, Any]:
    """The file-form dict of a model object (declaration order, absent optionals omitted)."""
    return cast(dict[str, Any], unstructure(obj))


profile_to_dict = to_data


def dumps_profile(obj: Any) -> bytes:
    """File form bytes (01 §9.1)."""
    return jsonio.file_form_bytes(to_data(obj))


def save_profile(obj: FpmModelProfile, path: str | os.PathLike[str]) -> None:
    """Write a profile atomically in file form (:func:`fpmcore.documents.output_files.write_file`)."""
    from fpmcore.documents.output_files import write_file

    write_file(path, dumps_profile(obj))


def profile_digest(obj: Any) -> str:
    """``profile_sha256``: SHA-256 of the canonical form (01 §9.2)."""
    return jsonio.digest(to_data(obj))


def profile_json_schema() -> dict[str, Any]:
    """JSON Schema of the profile file (structural rules only)."""
    return json_schema(FpmModelProfile, "https://fpmcore.invalid/schema/fpm-profile/v1")


__all__ = [
    "FpmCacheGroup",
    "FpmDeploymentProfile",
    "FpmModelProfile",
    "FpmResourceProfile",
    "FpmRuntimeMemory",
    "cdiv",
    "dumps_profile",
    "from_data",
    "load_profile",
    "parse_profile",
    "profile_digest",
    "profile_json_schema",
    "profile_to_dict",
    "save_profile",
    "to_data",
    "validate",
]
