"""Model-agnostic benchmark points: the grid ``fpm plan`` gives a model no plugin plans.

A model plugin's ``fpm_generate_points`` wins for its model; every other model
gets this grid, built from the profile deployment alone.  It is made to be
**what the FPM latency model interpolates** (06 R-27 … R-31):

* **prefill** rows ``(b, n, P)``: ``b`` requests, each with ``P`` tokens already
  in the KV cache (a prefix-cache hit on hash-block boundaries) and ``n`` new
  tokens.  The latency model reads a prefill step at ``(β, T = β n̄, K = β p̄)``
  for every batch slice ``β`` of the table, interpolating over ``T`` and, for
  each ``T``, over ``K`` (R-29).  So the grid is a full product: for every
  batch size, every new-token count at every prefix.
* **decode** rows ``(b, c)``: ``b`` requests decoding at context ``c``.  R-30
  reads ``(β, K = β c̄)``: for every batch size, every context.

The axes (every list ascending; ``B`` the plan's block, the growth block of
:func:`fpmcore.plan.planning.growth_block`; ``H`` the hash block; ``U`` the
context unit, ``H`` with prefix caching and ``B`` without (nothing is cached
then, and a hybrid's hash block is its scheduler block, the lcm of its
groups' blocks: 2,048 for Mamba 2,048 + attention 128, which would leave one
context); ``L`` ``max_model_len``, ``budget`` the token budget):

``batch``     ``1, 2, 4, …, 32`` (:data:`BATCH_CAP`, the reference's cap, 04 G-10);
``new``       powers of two from :data:`MIN_NEW_TOKENS` (16) up to the budget,
              the block times powers of two (``B, 2B, 4B, …``) and the largest
              whole number of blocks within the budget, so that the largest
              chunk a step can hold is a knot, not an extrapolation;
``prefix``    ``k × H`` for ``k`` in ``0, 1, 2, 4, 8, …`` and the longest
              prefix that still fits (``(L − n − 2) // H``); only ``0``
              without prefix caching (nothing can be seeded then);
``context``   ``m × U + 2`` for ``m`` in ``0, 1, 2, 4, …`` and the longest
              (``(L − 3) // U``): a decode request at context ``c`` has a
              prompt of ``c − 1`` tokens of which, with prefix caching, the
              largest hash-aligned prefix ``((c − 2) // H) × H`` is seeded, so
              these contexts leave an uncached tail of exactly one token and
              every repetition of a decode point prefills only ``b`` tokens.

Powers of two space the knots geometrically: the forward time of a tiny or a
large model is close to linear in the tokens of a step within each octave, so
linear interpolation (R-28) between neighbouring knots stays close, and the
longest chunk, prefix and context are knots so that nothing a deployment can
schedule is extrapolated beyond them.

The candidates go through five drop rules, in this order (the first rule a
candidate fails drops it and counts it once, like 04 G-16):

``max_model_len``  prefill ``P + n + 2 > L`` (the measured request may carry one
                   more prompt token, below, and generates one token); decode
                   ``c + 1 > L``;
``max_num_seqs``   ``b`` above the deployment's ``max_batch_size``;
``token_budget``   prefill ``b × n > budget``; decode ``b ≥ 2`` and
                   ``b × tail(c) > budget`` (04 G-18: the whole batch prefills
                   its tails in one step, to decode in lockstep);
``align_split``    (prefill; deployments in Mamba align mode only) the runtime
                   would not schedule the ``n`` tokens of every request in one
                   step (04 G-1 … G-6, the replay's rule).  A point whose prompt
                   of ``P + n`` tokens would split is kept when a prompt of
                   ``P + n + 1`` tokens schedules exactly ``n`` in its first
                   step (the ``n`` tokens then end a block as a non-final chunk);
                   the point records ``prompt_extension`` 1;
``capacity``       ``b ×`` the peak bytes of one request at ``P + n`` (prefill) or
                   ``c + 1`` (decode) tokens (01 P-16) above the pool.

The smoke subset is the template ``prefill (1, 64, 0)``, ``(1, 64, H)``,
``(1, 2H, H)``, ``decode (1, U + 2)``, ``(2, U + 2)`` intersected with the list,
in list order (like 04 G-24).  Order, encoding and digests are 04 G-21 … G-23;
the plan record is 04 G-25 with ``origin`` :data:`ORIGIN`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
import orjson

from fpmcore.documents.errors import FpmError
from fpmcore.host.stage_hooktypes import AlignStopQuery, PlanLimits, PointPlan

#: The execution identity of every cell the grid plans (05 §6.2), but the model configuration digest.
CELL_IDENTITY = {"execution_profile": "engine_steps", "engram_residency": "none", "input_modality": "text"}
#: G-25 ``origin`` of the model-agnostic grid.
ORIGIN = "fpmcore_grid_v1"
#: The largest batch of a point (the reference's cap, 04 G-10).
BATCH_CAP = 32
#: The smallest new-token count of a prefill point.
MIN_NEW_TOKENS = 16
#: The drop rules, in order.
RULES = ("max_model_len", "max_num_seqs", "token_budget", "align_split", "capacity")
#: Room a prefill request needs besides its ``P + n`` tokens: one extension token and one generated token.
PREFILL_HEADROOM = 2
LOG_PREFIX = "point grid"

#: ``align(query) -> tokens scheduled``: the runtime's align-stop rule (04 G-2 … G-6).
AlignFn = Callable[[AlignStopQuery], int]


@attrs.frozen(order=True)
class PrefillPoint:
    """``b`` requests, each with ``P`` cached tokens and ``n`` new ones; ordered ``(P, n, b)`` (04 G-21).

    ``extension`` is 1 when the measured requests carry one more prompt token
    than ``P + n`` (the ``align_split`` rule above); it is not part of the
    point's identity in the manifest.
    """

    prefix_tokens: int
    new_tokens: int
    batch_size: int
    extension: int = attrs.field(default=0, order=False, eq=False)

    def manifest_entry(self) -> dict[str, Any]:
        """04 G-22 prefill entry."""
        b, n, p = self.batch_size, self.new_tokens, self.prefix_tokens
        return {"batch_size": b, "total_prefill_tokens": b * n, "total_kv_read_tokens": b * p,
                "rows": [[n, p] for _ in range(b)]}  # fmt: skip

    def as_point(self, benchmark_id: int) -> dict[str, Any]:
        point = {"benchmark_id": benchmark_id, "phase": "prefill", "batch_size": self.batch_size,
                 "new_tokens": self.new_tokens, "prefix_tokens": self.prefix_tokens}  # fmt: skip
        if self.extension:
            point["prompt_extension"] = self.extension
        return point


@attrs.frozen(order=True)
class DecodePoint:
    """``b`` requests decoding at context ``c``; ordered ``(c, b)`` (04 G-21)."""

    context_tokens: int
    batch_size: int

    def manifest_entry(self) -> dict[str, Any]:
        return {"batch_size": self.batch_size, "total_kv_read_tokens": self.batch_size * self.context_tokens}

    def as_point(self, benchmark_id: int) -> dict[str, Any]:
        return {"benchmark_id": benchmark_id, "phase": "decode", "batch_size": self.batch_size,
                "context_tokens": self.context_tokens}  # fmt: skip


Point = PrefillPoint | DecodePoint


@attrs.frozen
class PlanPoint:
    """One point of a plan's list as ``as_point`` writes it and a collection reads it (its fields without
    default are required: the plan's JSON Schema is built from them)."""

    benchmark_id: int
    phase: str
    batch_size: int
    new_tokens: int = 0
    prefix_tokens: int = 0
    context_tokens: int = 0
    prompt_extension: int = 0

    @classmethod
    def from_plan(cls, point: Mapping[str, Any]) -> Any:
        """The point of a plan's list; refused (rule ``collect``) when it is not one a producer can measure."""
        keys = [a.name for a in attrs.fields(PlanPoint)]
        try:
            return cls(**{k: point[k] for k in keys if k in point})
        except TypeError as exc:
            raise FpmError("collect", f"the plan holds a point this producer cannot measure: {dict(point)}") from exc

    @property
    def is_prefill(self) -> bool:
        return self.phase == "prefill"


def manifest_digest(manifest: Mapping[str, Any]) -> str:
    """04 G-23 ``digest``: a manifest holds ASCII keys and integers, whose sorted orjson bytes are canonical."""
    return hashlib.sha256(orjson.dumps(manifest, option=orjson.OPT_SORT_KEYS)).hexdigest()


def manifest(prefill: Sequence[PrefillPoint], decode: Sequence[DecodePoint]) -> dict[str, Any]:
    """04 G-22: the benchmark-point manifest, ``schema_version`` 3."""
    return {"schema_version": 3, "prefill": [p.manifest_entry() for p in prefill],
            "decode": [d.manifest_entry() for d in decode]}  # fmt: skip


def decode_tail(context_tokens: int, hash_block: int, caching: bool = True, lead_in: int = 1) -> int:
    """The uncached tail of a decode request at context ``c`` (prompt ``c − 1``, 04 G-15); all of it without caching.

    ``lead_in``: the decode steps before the one at context ``c`` (the prompt is ``c − lead_in`` tokens; the plan's
    rule reads one, a collection's decode repetition more: :func:`fpmcore.collect.measure.decode_lead_in`).  With
    caching the hash-aligned part of the prompt but its last token is cached, ``((c − lead_in − 1) // H) × H``."""
    prompt = context_tokens - lead_in
    if not caching:
        return prompt
    return prompt - (prompt - 1) // hash_block * hash_block


# ---------------------------------------------------------------------------
# the deployment facts the grid reads
# ---------------------------------------------------------------------------


@attrs.frozen
class GridInputs:
    """What the grid reads of one profile deployment, with the plan limits applied.

    ``request_bytes(t)`` is the peak bytes of one request holding ``t`` tokens
    (01 P-16); ``pool_bytes`` the pool (``runtime_memory.kv_cache_bytes``).
    ``align_mode`` is true when the runtime splits prefill chunks at Mamba
    block boundaries (a state group and ``mamba_cache_mode`` ``align``);
    ``checkpoint_alignment`` is ``A`` when every Mamba group has a prefill
    checkpoint block (04 G-11), else ``None``.
    """

    budget: int
    block_size: int
    hash_block: int
    max_model_len: int
    max_num_seqs: int
    caching: bool
    align_mode: bool
    checkpoint_alignment: int | None
    pool_bytes: int | None
    request_bytes: Callable[[int], int] = attrs.field(eq=False, repr=False)


def grid_inputs(profile: Any, deployment: int, limits: PlanLimits) -> GridInputs:
    """The :class:`GridInputs` of ``profile.deployments[deployment]`` under ``limits``."""
    if not 0 <= deployment < len(profile.deployments):
        raise FpmError("G-9", f"the profile has no deployment {deployment}; it has {len(profile.deployments)}",
                       "deployments")  # fmt: skip
    res = profile.deployments[deployment].resources
    rm = res.runtime_memory
    caching = bool(rm is not None and rm.enable_prefix_caching)
    states = [g for g in res.cache_groups if g.kind == "state"]
    mambas = [g for g in states if g.prefill_checkpoint_blocks is not None]
    align = caching and bool(states) and rm is not None and rm.mamba_cache_mode == "align"
    ckpt = None
    if mambas and all(g.prefill_checkpoint_blocks == 1 for g in mambas):
        ckpt = mambas[0].prefill_checkpoint_alignment
    return GridInputs(
        budget=limits.token_budget,
        block_size=limits.block_size,
        hash_block=limits.hash_block_size,
        max_model_len=limits.max_model_len,
        max_num_seqs=res.runtime_settings()["max_num_seqs"],
        caching=caching,
        align_mode=align,
        checkpoint_alignment=ckpt,
        pool_bytes=rm.kv_cache_bytes if rm is not None else None,
        request_bytes=lambda t: res.request_peak_cache_bytes(t, limits.token_budget),
    )


# ---------------------------------------------------------------------------
# axes and candidates
# ---------------------------------------------------------------------------


def _powers(lo: int, hi: int) -> list[int]:
    out, v = [], lo
    while v <= hi:
        out.append(v)
        v *= 2
    return out


def batch_axis() -> list[int]:
    return _powers(1, BATCH_CAP)


def new_token_axis(budget: int, block: int) -> list[int]:
    """Powers of two from 16 to the budget, ``B × 2^j`` within it, and the largest whole-block chunk."""
    values = set(_powers(MIN_NEW_TOKENS, budget))
    if block <= budget:
        values |= {block * m for m in _powers(1, budget // block)}
        values.add(budget // block * block)
    return sorted(values)


def prefix_axis(new_tokens: int, inputs: GridInputs) -> list[int]:
    """``k × H`` for ``k`` in ``0, 1, 2, 4, …`` below ``L``, and the longest prefix that fits ``n``."""
    if not inputs.caching:
        return [0]
    H, L = inputs.hash_block, inputs.max_model_len
    ks = {0, *(k for k in _powers(1, L) if k * H < L)}
    longest = (L - new_tokens - PREFILL_HEADROOM) // H
    if longest >= 0:
        ks.add(longest)
    return sorted(k * H for k in ks)


def context_unit(inputs: GridInputs) -> int:
    """``U``: the step of the context axis, the hash block with prefix caching, else the plan's block."""
    return inputs.hash_block if inputs.caching else inputs.block_size


def context_axis(inputs: GridInputs) -> list[int]:
    """``m × U + 2`` for ``m`` in ``0, 1, 2, 4, …`` below ``L``, and the longest that leaves a decode step."""
    H, L = context_unit(inputs), inputs.max_model_len
    ms = {0, *(m for m in _powers(1, L) if m * H + 2 < L)}
    longest = (L - 3) // H
    if longest >= 0:
        ms.add(longest)
    return sorted(m * H + 2 for m in ms)


def prefill_candidates(inputs: GridInputs) -> list[PrefillPoint]:
    rows = {(p, n, b) for n in new_token_axis(inputs.budget, inputs.block_size)
            for p in prefix_axis(n, inputs) for b in batch_axis()}  # fmt: skip
    return [PrefillPoint(*row) for row in sorted(rows)]


def decode_candidates(inputs: GridInputs) -> list[DecodePoint]:
    return [DecodePoint(c, b) for c in context_axis(inputs) for b in batch_axis()]


# ---------------------------------------------------------------------------
# drop rules
# ---------------------------------------------------------------------------


def _align_default() -> AlignFn:
    from fpmcore.replay.align import align_stop

    return align_stop


def one_step_extension(point: PrefillPoint, inputs: GridInputs, align: AlignFn) -> int | None:
    """``align_split``: ``0`` when the runtime schedules ``n`` tokens of every request of the point in one
    step, ``1`` when it does so for prompts one token longer, ``None`` when neither (04 G-2 … G-6)."""
    if not inputs.align_mode:
        return 0
    for extension in (0, 1):
        prompt = point.prefix_tokens + point.new_tokens + extension
        left, ok = inputs.budget, True
        for _ in range(point.batch_size):
            k = min(point.new_tokens + extension, left)
            q = AlignStopQuery(
                start=point.prefix_tokens, num_new_tokens=k, prompt_len=prompt, num_tokens=prompt,
                block_size=inputs.block_size, hash_block_size=inputs.hash_block,
                max_num_batched_tokens=inputs.budget, checkpoint_alignment=inputs.checkpoint_alignment,
            )  # fmt: skip
            if k <= 0 or align(q) != point.new_tokens:
                ok = False
                break
            left -= point.new_tokens
        if ok:
            return extension
    return None


@attrs.frozen
class GridPlan:
    """Everything the grid decided; :meth:`point_plan` is the answer ``fpm plan`` uses."""

    inputs: GridInputs
    candidates: Mapping[str, int]
    evaluated: Mapping[str, int]
    dropped: Mapping[str, int]
    prefill: tuple[PrefillPoint, ...]
    decode: tuple[DecodePoint, ...]
    smoke_prefill: tuple[PrefillPoint, ...]
    smoke_decode: tuple[DecodePoint, ...]
    largest_bytes: int

    @property
    def manifest(self) -> dict[str, Any]:
        return manifest(self.prefill, self.decode)

    @property
    def smoke_manifest(self) -> dict[str, Any]:
        return manifest(self.smoke_prefill, self.smoke_decode)

    def log_lines(self) -> list[str]:
        lines = [f"{LOG_PREFIX}: {rule} dropped {self.dropped[rule]} of {self.evaluated[rule]} candidates"
                 for rule in RULES]  # fmt: skip
        pool = self.inputs.pool_bytes
        lines.append(f"{LOG_PREFIX}: largest point holds {self.largest_bytes} bytes of a {pool}-byte pool")
        return lines

    def record(self) -> dict[str, Any]:
        """04 G-25: the plan record stored under ``options.benchmark_points``."""
        man = self.manifest
        return {
            "origin": ORIGIN,
            "candidates": dict(self.candidates),
            "dropped": dict(self.dropped),
            "manifest_sha256": manifest_digest(man),
            "smoke_manifest_sha256": manifest_digest(self.smoke_manifest),
            "planned_point_count": len(self.prefill) + len(self.decode),
            "manifest": man,
        }

    def point_plan(self) -> PointPlan:
        record = self.record()
        points: tuple[Point, ...] = (*self.prefill, *self.decode)
        smoke: tuple[Point, ...] = (*self.smoke_prefill, *self.smoke_decode)
        return PointPlan(
            points=tuple(p.as_point(i) for i, p in enumerate(points, start=1)),
            counts={"prefill": len(self.prefill), "decode": len(self.decode)},
            dropped=dict(self.dropped),
            digest=record["manifest_sha256"],
            smoke=tuple(p.as_point(i) for i, p in enumerate(smoke, start=1)),
            report={
                "origin": ORIGIN,
                "candidates": dict(self.candidates),
                "evaluated": dict(self.evaluated),
                "smoke_digest": record["smoke_manifest_sha256"],
                "log": self.log_lines(),
                "plan_record": record,
                "cell_identity": dict(CELL_IDENTITY),
            },
        )


def smoke_template(hash_block: int, context_unit: int | None = None) -> tuple[Point, ...]:
    """The smoke template of the module docstring (``context_unit`` ``U``, default ``H``)."""
    H = hash_block
    U = H if context_unit is None else context_unit
    return (PrefillPoint(0, 64, 1), PrefillPoint(H, 64, 1), PrefillPoint(H, 2 * H, 1),
            DecodePoint(U + 2, 1), DecodePoint(U + 2, 2))  # fmt: skip


def select_points(inputs: GridInputs, align: AlignFn | None = None) -> GridPlan:
    """The candidates through the five drop rules (module docstring), the smoke subset, the record."""
    align = align or _align_default()
    budget, L, H = inputs.budget, inputs.max_model_len, inputs.hash_block
    prefill_cand, decode_cand = prefill_candidates(inputs), decode_candidates(inputs)
    dropped = dict.fromkeys(RULES, 0)
    evaluated = dict.fromkeys(RULES, 0)

    def tokens(p: Point) -> int:
        return p.prefix_tokens + p.new_tokens if isinstance(p, PrefillPoint) else p.context_tokens + 1

    def too_long(p: Point) -> bool:
        if isinstance(p, PrefillPoint):
            return p.prefix_tokens + p.new_tokens + PREFILL_HEADROOM > L
        return p.context_tokens + 1 > L

    def over_budget(p: Point) -> bool:
        if isinstance(p, PrefillPoint):
            return p.batch_size * p.new_tokens > budget
        return p.batch_size >= 2 and p.batch_size * decode_tail(p.context_tokens, H, inputs.caching) > budget

    def apply(rule: str, points: list[Point], drop: Callable[[Point], bool]) -> list[Point]:
        evaluated[rule] = len(points)
        kept = [p for p in points if not drop(p)]
        dropped[rule] = len(points) - len(kept)
        return kept

    survivors: list[Point] = [*prefill_cand, *decode_cand]
    survivors = apply("max_model_len", survivors, too_long)
    survivors = apply("max_num_seqs", survivors, lambda p: p.batch_size > inputs.max_num_seqs)
    survivors = apply("token_budget", survivors, over_budget)
    # align_split: prefill only; a point kept with an extension records it
    prefill_now = [p for p in survivors if isinstance(p, PrefillPoint)]
    evaluated["align_split"] = len(prefill_now)
    extended: list[Point] = []
    for p in survivors:
        if isinstance(p, PrefillPoint):
            ext = one_step_extension(p, inputs, align)
            if ext is None:
                dropped["align_split"] += 1
                continue
            p = attrs.evolve(p, extension=ext)
        extended.append(p)
    pool = inputs.pool_bytes
    need = {id(p): p.batch_size * inputs.request_bytes(tokens(p)) for p in extended}
    kept = apply("capacity", extended, lambda p: pool is not None and need[id(p)] > pool)
    prefill = tuple(sorted(p for p in kept if isinstance(p, PrefillPoint)))
    decode = tuple(sorted(p for p in kept if isinstance(p, DecodePoint)))
    template = set(smoke_template(H, context_unit(inputs)))
    return GridPlan(
        inputs=inputs,
        candidates={"prefill": len(prefill_cand), "decode": len(decode_cand)},
        evaluated=evaluated,
        dropped=dropped,
        prefill=prefill,
        decode=decode,
        smoke_prefill=tuple(p for p in prefill if p in template),
        smoke_decode=tuple(p for p in decode if p in template),
        largest_bytes=max((need[id(p)] for p in kept), default=0),
    )


def generate_points(profile: Any, deployment: int, limits: PlanLimits, align: AlignFn | None = None) -> PointPlan:
    """The model-agnostic :class:`~fpmcore.host.stage_hooktypes.PointPlan` of ``profile.deployments[deployment]``."""
    return select_points(grid_inputs(profile, deployment, limits), align).point_plan()
