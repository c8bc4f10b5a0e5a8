"""The cache budget of one deployment under a request (01 §8, P-40, P-41, P-80 … P-94).

A consumer (planner, replay, ``fpm budget``) asks :func:`cache_budget` for the
KV budget of the deployment that matches a :class:`BudgetRequest`.  With
runtime memory the budget is the recorded ``kv_cache_bytes``; with declared
bytes (legacy) it is what is left of the GPU after them.

Order of checks: P-80 … P-83, then the zero part of P-84, then the
deployment match (P-85, P-86), then the "above the profile's" part of P-84
(it needs the matched deployment's bounds), then P-87 and the runtime-memory
or declared-bytes checks.
"""

from __future__ import annotations

import math

import attrs

from fpmcore.documents.errors import FpmError
from fpmcore.documents.jsonio import is_finite_number
from fpmcore.documents.profile import FpmDeploymentProfile, FpmModelProfile, FpmResourceProfile
from fpmcore.documents.schema import MAX_EXACT

PENDING_MESSAGE = (
    "FPM memory is pending runtime profiling; collect and finalize runtime memory or provide "
    "all four declared non-KV resource values before simulation"
)


@attrs.frozen(kw_only=True)
class BudgetRequest:
    """What a consumer asks for (01 §8).  Deployment keys left ``None`` default to
    1 for ``pp``/``cp`` and 0 otherwise (P-85)."""

    total_gpu_capacity_bytes: int
    memory_fraction_kind: str
    memory_fraction_value: float
    max_num_tokens: int
    max_batch_size: int
    context_length: int | None = None
    request_occupancy_tokens: int | None = None
    cuda_graph_reserved_bytes: int = 0
    tolerance_fraction: float | None = None
    system: str | None = None
    backend: str | None = None
    backend_version: str | None = None
    tp: int | None = None
    pp: int | None = None
    dp: int | None = None
    moe_tp: int | None = None
    moe_ep: int | None = None
    cp: int | None = None

    def identity(self) -> tuple[object, ...]:
        def d(v: object, default: object) -> object:
            return default if v is None else v

        return (d(self.system, 0), d(self.backend, 0), d(self.backend_version, 0), d(self.tp, 0),
                d(self.pp, 1), d(self.dp, 0), d(self.moe_tp, 0), d(self.moe_ep, 0), d(self.cp, 1))  # fmt: skip


@attrs.frozen(kw_only=True)
class Budget:
    """The answer: total and tolerated budget, request peak and occupancy bytes."""

    total_bytes: int
    budget_bytes: int
    request_peak_cache_bytes: int | None
    request_occupancy_cache_bytes: int | None
    budget_tokens: int | None


def non_kv_breakdown(resources: FpmResourceProfile) -> dict[str, int]:
    """The declared non-KV bytes (P-41 for a runtime-memory profile, P-40 when pending)."""
    if resources.runtime_memory is not None:
        raise FpmError("P-41", "runtime memory records cache capacity, not a non-KV byte breakdown")
    if resources.memory_pending:
        raise FpmError("P-40", PENDING_MESSAGE)
    return resources.declared


def cache_budget(profile: FpmModelProfile, request: BudgetRequest) -> Budget:
    """Compute the KV budget of the matching deployment (raises :class:`FpmError`)."""
    r = request
    if r.memory_fraction_kind != "of_total":
        raise FpmError("P-80", "vLLM FPM resources require memory_fraction_kind='of_total'")
    f = r.memory_fraction_value
    if not is_finite_number(f) or not 0 <= f <= 1:
        raise FpmError("P-81", f"memory_fraction_value must be finite and in [0, 1]; got {f!r}")
    t = r.tolerance_fraction
    if t is not None and (not is_finite_number(t) or not 0 <= t < 1):
        raise FpmError("P-82", f"tolerance_fraction must be finite and in [0, 1); got {t!r}")
    cap = r.total_gpu_capacity_bytes
    if cap <= 0 or cap > MAX_EXACT:
        raise FpmError("P-83", f"GPU capacity must be positive and no greater than 2**53; got {cap}")
    envelope = FpmError(
        "P-84",
        "FPM resource envelope exceeded: provide bounds for the requested positive rank-local scheduler envelope",
    )
    if r.max_num_tokens <= 0 or r.max_batch_size <= 0:
        raise envelope
    matches: list[FpmDeploymentProfile] = [d for d in profile.deployments if d.identity == r.identity()]
    if not matches:
        raise FpmError("P-85", "no matching FPM deployment resources")
    if len(matches) > 1:
        raise FpmError("P-86", "duplicate FPM deployment resources")
    res = matches[0].resources
    if r.max_num_tokens > res.max_num_tokens or r.max_batch_size > res.max_batch_size:
        raise envelope
    ctx = r.context_length
    if ctx is not None and (ctx <= 0 or ctx > profile.context_length):
        raise FpmError("P-87", f"context_length must be positive and within the FPM profile context bound; got {ctx}")

    rm = res.runtime_memory
    if rm is not None:
        if r.max_num_tokens != res.max_num_tokens or r.max_batch_size != res.max_batch_size:
            raise FpmError(
                "P-88",
                "runtime memory requires the exact recorded rank-local scheduler settings; "
                "collect new runtime memory for changed settings",
            )
        if ctx is not None and ctx > rm.max_model_len:
            raise FpmError(
                "P-89", f"context_length exceeds runtime memory max_model_len; got {ctx} > {rm.max_model_len}"
            )
        if f != rm.gpu_memory_utilization:
            raise FpmError(
                "P-90",
                f"memory_fraction_value must match runtime memory gpu_memory_utilization; "
                f"got {f!r}, recorded {rm.gpu_memory_utilization!r}",
            )
        if r.cuda_graph_reserved_bytes != 0:
            raise FpmError(
                "P-91", "runtime memory already includes graph reservations; cuda_graph_reserved_bytes must be 0"
            )
        avail = math.floor(cap * f)
        if avail < rm.kv_cache_bytes:
            raise FpmError(
                "P-92",
                "GPU memory budget is smaller than the recorded runtime KV cache allocation: "
                f"floor({cap} x {f!r}) = {avail} < {rm.kv_cache_bytes}",
            )
        total = rm.kv_cache_bytes
    else:
        declared = non_kv_breakdown(res)
        non_kv = sum(declared.values()) + r.cuda_graph_reserved_bytes
        if non_kv > MAX_EXACT:
            raise FpmError("P-93", "total FPM non-KV bytes including CUDA graphs must not exceed 2**53")
        total = math.floor(cap * f - non_kv)
        if total < 1:
            raise FpmError("P-94", "no KV budget after non-KV resources and CUDA graphs")

    budget = math.floor(total * (1 - t)) if t is not None else total
    peak = occ = None
    if ctx is not None:
        peak = res.request_peak_cache_bytes(ctx, r.max_num_tokens)
        if r.request_occupancy_tokens is not None:
            if res.cache_layout == "linear":
                occ_tokens = r.request_occupancy_tokens
                if occ_tokens <= 0 or occ_tokens > ctx:
                    raise FpmError(
                        "P-17",
                        f"request_occupancy_tokens must be positive and within context_length; got {occ_tokens}",
                    )
                occ = occ_tokens * (res.kv_bytes_per_token or 0)
            else:
                occ = sum(g.occupancy_request_bytes(r.request_occupancy_tokens, ctx) for g in res.cache_groups)
    tokens = budget // res.kv_bytes_per_token if res.cache_layout == "linear" and res.kv_bytes_per_token else None
    return Budget(
        total_bytes=total,
        budget_bytes=budget,
        request_peak_cache_bytes=peak,
        request_occupancy_cache_bytes=occ,
        budget_tokens=tokens,
    )
