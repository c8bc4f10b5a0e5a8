"""The GLM-5.3-Flash benchmark point list (04 G-9 … G-25).

Candidates come from the reconstruction of 04 §5 (G-13 prefill shapes, G-14
planned prefixes, G-15 decode contexts); the drop rules of §6 run in the
spec's order (G-16: ``align_split``, ``token_budget``, ``capacity``); the
survivors are ordered, encoded as a Dynamo ``schema_version`` 3 manifest and
digested (G-21 … G-23); the smoke subset is G-24 and the plan record G-25.

:func:`plan_points` is the whole pipeline on :class:`DeploymentFacts`;
:func:`generate_points` is the ``fpm_generate_points`` answer for a profile.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from fpmcore.plugin_api import (
    DecodePoint,
    FpmError,
    PlanLimits,
    PointPlan,
    PrefillPoint,
    block_range,
    cdiv,
    decode_tail,
    manifest_digest,
    point_manifest,
)
from fpmcore_glm53flash.align import AlignSplit, align_split
from fpmcore_glm53flash.plan_inputs import (
    DeploymentFacts,
    GroupFacts,
    check_deployments,
    deployment_facts,
)

#: G-25 ``origin`` of a generated GLM list.
ORIGIN = "glm53flash_grid_v1"
#: G-10: the measured context is at most this many tokens.
MEASURED_CONTEXT = 131072
#: G-10: GLM reserves seven internal positions of ``max_model_len``.
INTERNAL_POSITIONS = 7
#: G-10: the largest batch of a point.
BATCH_CAP = 32
#: G-14: planned prefixes in hash blocks, besides the longest one that fits.
PREFIX_BLOCKS = (0, 1, 2, 4, 8, 16, 32)
#: G-16: the drop rules, in order.
RULES = ("align_split", "token_budget", "capacity")
#: G-20 log line prefix.
LOG_PREFIX = "glm-5.3-flash point list"

#: A split function: ``(prefix, new_tokens) -> tokens vLLM schedules in the first step``.
SplitFn = Callable[[int, int], int]


#: A benchmark point: the host's point types (04 G-21, G-22), shared with the model-agnostic grid.
Point = PrefillPoint | DecodePoint


# ---------------------------------------------------------------------------
# candidates (04 §5, [RECONSTRUCTION])
# ---------------------------------------------------------------------------


def measured_context(max_model_len: int) -> int:
    """G-10 ``C = min(131072, L − 7)``."""
    return min(MEASURED_CONTEXT, max_model_len - INTERNAL_POSITIONS)


def _powers(lo: int, hi: int) -> list[int]:
    out, v = [], lo
    while v <= hi:
        out.append(v)
        v *= 2
    return out


def batch_sizes(batch_cap: int) -> list[int]:
    """``{2^j : 2^j ≤ batch_cap}`` (G-13, G-15)."""
    return _powers(1, batch_cap)


def prefill_shapes(
    budget: int, hash_block: int, batch_cap: int, max_new_tokens: int | None = None
) -> list[tuple[int, int]]:
    """G-13: the ``(b, n)`` shapes, power-of-two family ∪ whole-block family, sorted.

    ``max_new_tokens`` leaves out the shapes with more new tokens (no prefix
    fits them, G-14), so that the work follows the list, not the budget: a
    budget of 2**32 tokens costs what 131,072 does.
    """
    limit = budget if max_new_tokens is None else min(budget, max_new_tokens)
    shapes = {(b, n) for n in _powers(4, limit) for b in batch_sizes(batch_cap) if b * n <= budget}
    m = 1
    while m * hash_block < budget and (m * hash_block <= limit or m <= batch_cap):
        if m * hash_block <= limit:
            shapes.add((1, m * hash_block))
        if m <= batch_cap:
            shapes.add((m, hash_block))
        m += 1
    return sorted(shapes)


def prefix_blocks(new_tokens: int, hash_block: int, context: int) -> list[int]:
    """G-14: planned prefixes in hash blocks for ``n`` new tokens, ascending."""
    longest = (context - new_tokens) // hash_block
    return sorted(k for k in {*PREFIX_BLOCKS, longest} if k >= 0 and k * hash_block + new_tokens <= context)


def prefill_candidates(budget: int, hash_block: int, context: int, batch_cap: int) -> list[PrefillPoint]:
    """G-13 × G-14, in canonical order."""
    rows = sorted(
        (k * hash_block, n, b)
        for b, n in prefill_shapes(budget, hash_block, batch_cap, max_new_tokens=context)
        for k in prefix_blocks(n, hash_block, context)
    )
    return [PrefillPoint(*row) for row in rows]


def decode_candidates(hash_block: int, context: int, batch_cap: int) -> list[DecodePoint]:
    """G-15: 16 power-of-two contexts × batch sizes, plus the ``(1, H + 1)`` slot."""
    rows = {(c, b) for c in _powers(4, context) for b in batch_sizes(batch_cap)}
    if hash_block + 1 <= context:
        rows.add((hash_block + 1, 1))
    return [DecodePoint(*row) for row in sorted(rows)]


# ---------------------------------------------------------------------------
# capacity (04 G-19, 03 C-15, C-15x)
# ---------------------------------------------------------------------------


def estimate_blocks(groups: Sequence[GroupFacts], tokens: int, checkpoint: bool) -> int:
    """03 C-15 ``est(t)`` of one request (windowed groups count full history)."""
    total = 0
    for g in groups:
        if g.kind == "state":
            total += g.blocks_per_request or 0
        else:
            total += cdiv(tokens, g.block_size_tokens)
    if checkpoint:
        total += sum(1 for g in groups if g.is_mamba)
    return total


def exact_blocks(groups: Sequence[GroupFacts], computed: int, target: int, checkpoint_taken: bool) -> int:
    """03 C-15x: blocks one request holds during a forward ``computed → target``.

    Attention and convolution groups hold ``block_range`` (01 P-14); ring
    groups their ``blocks_per_request``; a Mamba group its state, the previous
    state block when the forward crosses a block boundary after a held state,
    and the checkpoint block when the chunk takes it (03 C-13).
    """
    total = 0
    for g in groups:
        B = g.block_size_tokens
        if g.kind != "state":
            first, end = block_range(computed, target, block=B, window=g.sliding_window)
            total += end - first
        elif not g.is_mamba:
            total += g.blocks_per_request or 0
        else:
            total += g.blocks_per_request or 1
            total += int(computed > 0 and cdiv(target, B) > cdiv(computed, B))
            total += int(checkpoint_taken)
    return total


# ---------------------------------------------------------------------------
# the plan
# ---------------------------------------------------------------------------


@attrs.frozen
class Settings:
    """The resolved planner inputs of G-9/G-10 over the accepted deployments."""

    budget: int
    block_size: int
    hash_block: int
    max_model_len: int
    alignment: int | None
    batch_cap: int
    free_blocks: int
    groups: tuple[GroupFacts, ...]
    _growing: tuple[int, ...] = attrs.field(init=False, repr=False, eq=False)
    _fixed: int = attrs.field(init=False, repr=False, eq=False)

    def __attrs_post_init__(self) -> None:
        # est(t) = Σ cdiv(t, B_g) over the growing groups + a fixed part (C-15)
        object.__setattr__(self, "_growing", tuple(g.block_size_tokens for g in self.groups if g.kind != "state"))
        object.__setattr__(self, "_fixed", estimate_blocks(self.groups, 0, self.checkpoint))

    @property
    def checkpoint(self) -> bool:
        return self.alignment is not None

    @property
    def context(self) -> int:
        return measured_context(self.max_model_len)

    def split(self, prefix: int, new_tokens: int) -> int:
        """G-17: what vLLM schedules of one fresh request ``[P, P + n)`` in one step."""
        return self.evaluate(prefix, new_tokens).tokens

    def evaluate(self, prefix: int, new_tokens: int) -> AlignSplit:
        """The align-stop rule (G-2 … G-6) for ``[P, P + n)`` of a fresh request, no junction."""
        return align_split(
            start=prefix,
            num_new_tokens=new_tokens,
            prompt_len=prefix + new_tokens,
            num_tokens=prefix + new_tokens,
            block_size=self.block_size,
            hash_block_size=self.hash_block,
            max_num_batched_tokens=self.budget,
            checkpoint_alignment=self.alignment,
        )

    def estimate(self, point: Point) -> int:
        """``b × est(t)`` (G-19): ``t = P + n`` for prefill, ``c + 1`` for decode."""
        if isinstance(point, PrefillPoint):
            t = point.prefix_tokens + point.new_tokens
        else:
            t = point.context_tokens + 1
        return point.batch_size * (self._fixed + sum(cdiv(t, b) for b in self._growing))

    def exact(self, point: Point, taken: bool | None = None) -> int:
        """``b × exact(...)`` (G-19, 03 C-15x); ``taken``: whether the prefill chunk
        takes the internal checkpoint, evaluated here when not given."""
        if isinstance(point, PrefillPoint):
            p, n = point.prefix_tokens, point.new_tokens
            if taken is None:
                taken = self.checkpoint and self.evaluate(p, n).internal_checkpoint
            per = exact_blocks(self.groups, p, p + n, taken)
        else:
            c = point.context_tokens
            per = exact_blocks(self.groups, c, c + 1, False)
        return point.batch_size * per


def settings_for(deployments: Sequence[DeploymentFacts], limits: PlanLimits) -> Settings:
    """G-10 derived values (after :func:`check_deployments`)."""
    first = deployments[0]
    caps = [d.max_batch_size for d in deployments if d.max_batch_size is not None]
    return Settings(
        budget=limits.token_budget,
        block_size=limits.block_size,
        hash_block=limits.hash_block_size,
        max_model_len=limits.max_model_len,
        alignment=first.checkpoint_alignment,
        batch_cap=min([BATCH_CAP, *caps]),
        free_blocks=min(d.free_blocks for d in deployments),
        groups=first.groups,
    )


def smoke_template(hash_block: int) -> tuple[Point, ...]:
    """G-24: the five template points, in template order."""
    H = hash_block
    return (
        PrefillPoint(0, 64, 1),
        PrefillPoint(H, 64, 1),
        PrefillPoint(H, 2 * H, 1),
        DecodePoint(4096, 1),
        DecodePoint(4096, 2),
    )


@attrs.frozen
class GlmPlan:
    """Everything the planner decided; :meth:`point_plan` gives the hook's answer."""

    settings: Settings
    candidates: Mapping[str, int]
    evaluated: Mapping[str, int]
    dropped: Mapping[str, int]
    prefill: tuple[PrefillPoint, ...]
    decode: tuple[DecodePoint, ...]
    smoke_prefill: tuple[PrefillPoint, ...]
    smoke_decode: tuple[DecodePoint, ...]
    capacity_estimate: int
    exact_holding: int
    over_free: int

    @property
    def points(self) -> tuple[Point, ...]:
        return (*self.prefill, *self.decode)

    @property
    def manifest(self) -> dict[str, Any]:
        return point_manifest(self.prefill, self.decode)

    @property
    def smoke_manifest(self) -> dict[str, Any]:
        return point_manifest(self.smoke_prefill, self.smoke_decode)

    @property
    def checkpoint_record(self) -> dict[str, Any]:
        """G-25 ``checkpoint``."""
        a = self.settings.alignment
        return {"blocks": a is not None, "alignment": a}

    def log_lines(self) -> list[str]:
        """G-20: one line per rule, then the capacity report."""
        lines = [
            f"{LOG_PREFIX}: {rule} dropped {self.dropped[rule]} of {self.evaluated[rule]} candidates" for rule in RULES
        ]
        lines.append(
            f"{LOG_PREFIX}: capacity estimate {self.capacity_estimate} blocks, exact holding "
            f"{self.exact_holding} blocks, free {self.settings.free_blocks} blocks, "
            f"{self.over_free} kept points hold more than the free blocks"
        )
        return lines

    def record(self) -> dict[str, Any]:
        """G-25: the plan record stored under ``options.benchmark_points``."""
        man = self.manifest
        return {
            "origin": ORIGIN,
            "checkpoint": self.checkpoint_record,
            "candidates": dict(self.candidates),
            "dropped": dict(self.dropped),
            "manifest_sha256": manifest_digest(man),
            "smoke_manifest_sha256": manifest_digest(self.smoke_manifest),
            "planned_point_count": len(self.prefill) + len(self.decode),
            "manifest": man,
        }

    def point_plan(self) -> PointPlan:
        """The :class:`~fpmcore.host.stage_hooktypes.PointPlan` of ``fpm_generate_points``."""
        record = self.record()
        smoke = (*self.smoke_prefill, *self.smoke_decode)
        return PointPlan(
            points=[p.as_point(i) for i, p in enumerate(self.points, start=1)],
            counts={"prefill": len(self.prefill), "decode": len(self.decode)},
            dropped=dict(self.dropped),
            digest=record["manifest_sha256"],
            smoke=[p.as_point(i) for i, p in enumerate(smoke, start=1)],
            report={
                "origin": ORIGIN,
                "checkpoint": self.checkpoint_record,
                "candidates": dict(self.candidates),
                "evaluated": dict(self.evaluated),
                "smoke_digest": record["smoke_manifest_sha256"],
                "capacity_estimate_blocks": self.capacity_estimate,
                "exact_holding_blocks": self.exact_holding,
                "free_blocks": self.settings.free_blocks,
                "over_free_points": self.over_free,
                "log": self.log_lines(),
                "plan_record": record,
            },
        )


def select_points(settings: Settings, split: SplitFn | None = None) -> GlmPlan:
    """Generate the candidates and apply the drop rules (G-13 … G-24).

    ``split(P, n)`` answers G-17; it defaults to the align-stop rule of
    :mod:`fpmcore_glm53flash.align` and exists so that a test can put vLLM's
    own split function in its place.
    """
    # one evaluation per (P, n): the batch sizes of a shape share it
    evaluations: dict[tuple[int, int], AlignSplit] = {}

    def evaluate(prefix: int, new_tokens: int) -> AlignSplit:
        key = (prefix, new_tokens)
        if key not in evaluations:
            evaluations[key] = settings.evaluate(prefix, new_tokens)
        return evaluations[key]

    if split is None:

        def split(prefix: int, new_tokens: int) -> int:
            return evaluate(prefix, new_tokens).tokens

    budget, H, C = settings.budget, settings.hash_block, settings.context
    prefill_cand = prefill_candidates(budget, H, C, settings.batch_cap)
    decode_cand = decode_candidates(H, C, settings.batch_cap)
    dropped = dict.fromkeys(RULES, 0)
    evaluated = dict.fromkeys(RULES, 0)

    # G-17 align_split (prefill only)
    evaluated["align_split"] = len(prefill_cand)
    prefill_kept = []
    for p in prefill_cand:
        if split(p.prefix_tokens, p.new_tokens) < p.new_tokens:
            dropped["align_split"] += 1
        else:
            prefill_kept.append(p)

    # G-18 token_budget
    def over_budget(point: Point) -> bool:
        if isinstance(point, PrefillPoint):
            return point.batch_size * point.new_tokens > budget
        return point.batch_size >= 2 and point.batch_size * decode_tail(point.context_tokens, H) > budget

    survivors: list[Point] = [*prefill_kept, *decode_cand]
    evaluated["token_budget"] = len(survivors)
    dropped["token_budget"] = sum(map(over_budget, survivors))
    survivors = [p for p in survivors if not over_budget(p)]

    # G-19 capacity (the estimate decides; a need of exactly free_blocks fits, 03 C-16)
    evaluated["capacity"] = len(survivors)
    need = [settings.estimate(p) for p in survivors]
    kept = [p for p, e in zip(survivors, need) if e <= settings.free_blocks]
    dropped["capacity"] = len(survivors) - len(kept)

    prefill = tuple(p for p in kept if isinstance(p, PrefillPoint))
    decode = tuple(p for p in kept if isinstance(p, DecodePoint))
    holding: dict[tuple[int, int], int] = {}

    def exact_of(point: Point) -> int:
        if isinstance(point, DecodePoint):
            return settings.exact(point)
        key = (point.prefix_tokens, point.new_tokens)
        if key not in holding:
            taken = settings.checkpoint and evaluate(*key).internal_checkpoint
            holding[key] = settings.exact(PrefillPoint(*key, 1), taken)
        return point.batch_size * holding[key]

    exact = [exact_of(p) for p in kept]
    template = set(smoke_template(H))
    return GlmPlan(
        settings=settings,
        candidates={"prefill": len(prefill_cand), "decode": len(decode_cand)},
        evaluated=evaluated,
        dropped=dropped,
        prefill=prefill,
        decode=decode,
        smoke_prefill=tuple(p for p in prefill if p in template),
        smoke_decode=tuple(p for p in decode if p in template),
        capacity_estimate=max((e for e in need if e <= settings.free_blocks), default=0),
        exact_holding=max(exact, default=0),
        over_free=sum(1 for x in exact if x > settings.free_blocks),
    )


def plan_points(
    deployments: Sequence[DeploymentFacts],
    limits: PlanLimits,
    model_revision: str,
    warmup_iterations: int = 0,
    split: SplitFn | None = None,
) -> GlmPlan:
    """G-12 refusals, then the list for the accepted ``deployments``."""
    check_deployments(deployments, limits, model_revision, warmup_iterations)
    return select_points(settings_for(deployments, limits), split)


def generate_points(profile: Any, deployment: int, limits: PlanLimits) -> PointPlan:
    """The ``fpm_generate_points`` answer for an accepted profile.

    The accepted deployments of the campaign are all deployments of the
    profile, in profile order (G-9); ``deployment`` names the one the limits
    were resolved from and must exist.  ``limits`` apply to every deployment.
    """
    if not 0 <= deployment < len(profile.deployments):
        raise FpmError(
            "G-9",
            f"glm-5.3-flash collection has no deployment {deployment}: the profile has {len(profile.deployments)}",
            "deployments",
        )
    facts = [deployment_facts(d, i) for i, d in enumerate(profile.deployments)]
    return plan_points(facts, limits, profile.model_revision).point_plan()
