"""The measurement protocol of one point (05 §4, §7.1 in version-neutral form).

For every point of the staged list the producer:

1. **seeds** the prefix cache when the point reads cached tokens: for each of
   the point's ``b`` request slots one request whose prompt is the slot's
   ``P`` prefix tokens plus one more token, generating one token (each slot
   has its own prefix, :mod:`fpmcore.collect.content`).  The extra token makes the forward that covers the prefix end on
   the prefix boundary ``P`` as a non-final chunk, so that a runtime which
   keeps recurrent (Mamba) state only where a chunk ends on a block boundary
   keeps it at ``P`` (04 §8: a seed of exactly ``P`` tokens keeps it at
   ``P − H``).  A prefill point seeds ``P``; a decode point at context ``c``
   seeds ``((c − 2) // H) × H``, the hash-aligned part of its prompt.
2. runs **repetitions**: each admits the point's ``b`` requests at once —
   the seeded prefix, then tokens no other request of the run has — and steps
   the engine until they finish.  A prefill repetition generates one token
   and its first forward is measured; a decode repetition (prompt ``c − 1``)
   generates three: the forward that prefills the uncached tails, a decode
   step at ``c − 1`` (which must hold all ``b`` requests: the lockstep
   check), and the measured decode step at context ``c``.
3. **accepts** a repetition only when the measured forward computed exactly
   the point's workload (``b`` requests, ``b × n`` new tokens after ``b × P``
   cached for prefill; ``b`` decodes over ``b × c`` tokens for decode), every
   request's prefix-cache hit was the seeded prefix, and the repetition took
   exactly the expected forwards.  Otherwise it is **rejected** with its
   reason (``prefix_miss`` also re-seeds) and retried, at most
   ``max_rejected`` times per point; then the point fails the collection.
4. keeps ``warmups`` accepted repetitions as warm-ups, then ``repetitions``
   as the **raw samples** — with ``spacing`` seconds of pause before every
   repetition, so that the samples of a point spread over a longer stretch of
   a shared machine's load instead of one burst of it; the retained wall time is the upper median of
   samples ``1 … R−1`` (``adjacent_upper_median``: the first measurement is
   left out, 05 §4.2).

Every forward the engine runs counts in the process's forward index (05 §4.3),
the seeds and rejected repetitions included; the seeds, warm-ups and rejected
repetitions are recorded in the warm-up ledger (05 §4.4) and every repetition
in the repetition-evidence line of the point (05 §7.5).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from fpmcore.collect.content import TokenSource, prompt_sha256
from fpmcore.errors import FpmError
from fpmcore.hooktypes import EngineRun, EngineStep, MeasurementEngine, StepWorkload

#: The reduction of the raw samples (05 §4.2).
ESTIMATE_METHOD = "adjacent_upper_median"
#: Generated tokens of a prefill and of a decode repetition.
PREFILL_OUTPUT_TOKENS, DECODE_OUTPUT_TOKENS = 1, 3
#: Index of the measured forward within a decode repetition.
DECODE_MEASURED_STEP = 2


@attrs.frozen
class ProtocolSettings:
    """How many repetitions a point gets, and the content seed."""

    warmups: int
    repetitions: int
    max_rejected: int
    seed: int
    spacing: float = 0.0

    def __attrs_post_init__(self) -> None:
        if self.repetitions < 3:
            raise FpmError("collect", f"--repetitions must be at least 3 ({ESTIMATE_METHOD}); got {self.repetitions}")
        if self.warmups < 0 or self.max_rejected < 0 or not 0 <= self.spacing < 3600:
            raise FpmError("collect", f"--warmup, --spacing and the rejection budget must be >= 0; got "
                                      f"{self.warmups}, {self.spacing}, {self.max_rejected}")  # fmt: skip


@attrs.frozen
class PlannedPoint:
    """One point of a plan's list (:mod:`fpmcore.point_grid` form)."""

    benchmark_id: int
    phase: str
    batch_size: int
    new_tokens: int = 0
    prefix_tokens: int = 0
    context_tokens: int = 0
    prompt_extension: int = 0

    @classmethod
    def from_plan(cls, point: Mapping[str, Any]) -> PlannedPoint:
        keys = ("benchmark_id", "phase", "batch_size", "new_tokens", "prefix_tokens", "context_tokens",
                "prompt_extension")  # fmt: skip
        try:
            return cls(**{k: point[k] for k in keys if k in point})
        except TypeError as exc:
            raise FpmError("collect", f"the plan holds a point this producer cannot measure: {dict(point)}") from exc

    @property
    def is_prefill(self) -> bool:
        return self.phase == "prefill"

    def dynamo_point(self, graph_mode: str) -> dict[str, Any]:
        """The point of a rank artifact (05 §2.1)."""
        b = self.batch_size
        if self.is_prefill:
            n, p = self.new_tokens, self.prefix_tokens
            total, kv, rows = b * n, b * p, [[n, p] for _ in range(b)]
        else:
            total, kv, rows = 0, b * self.context_tokens, None
        return {
            "point_type": self.phase, "benchmark_id": self.benchmark_id, "batch_size": b,
            "total_prefill_tokens": total, "total_kv_read_tokens": kv, "rows": rows, "partition": None,
            "expected_cudagraph_mode": graph_mode, "expected_capture_size": None, "padding_tokens": None,
            "sample_reasons": ["planned"],
        }  # fmt: skip

    def kv_seed_regime(self) -> str:
        """05 §7.4: ``real_kv`` for decode and cached prefill, ``not_applicable`` for a prefill without prefix."""
        return "real_kv" if not self.is_prefill or self.prefix_tokens > 0 else "not_applicable"

    def seeded_prefix(self, hash_block: int, caching: bool) -> int:
        """Tokens seeded into the prefix cache before the repetitions (module docstring, step 1)."""
        if not caching:
            return 0
        if self.is_prefill:
            return self.prefix_tokens
        return (self.context_tokens - 2) // hash_block * hash_block

    def measured_workload(self) -> StepWorkload:
        b = self.batch_size
        if self.is_prefill:
            return StepWorkload(num_prefill_requests=b, sum_prefill_tokens=b * self.new_tokens,
                                sum_prefill_kv_tokens=b * self.prefix_tokens)  # fmt: skip
        return StepWorkload(num_decode_requests=b, sum_decode_kv_tokens=b * self.context_tokens)

    def shape(self) -> dict[str, int]:
        if self.is_prefill:
            return {"batch_size": self.batch_size, "new_tokens": self.new_tokens, "prefix_tokens": self.prefix_tokens}
        return {"batch_size": self.batch_size, "context_tokens": self.context_tokens}


_WORKLOAD_FIELDS = ("num_prefill_requests", "sum_prefill_tokens", "sum_prefill_kv_tokens", "num_decode_requests",
                    "sum_decode_kv_tokens")  # fmt: skip


def workload_difference(got: StepWorkload, want: StepWorkload) -> str | None:
    """The first count in which a forward's workload differs from the wanted one, as ``field=got!=want``."""
    for f in _WORKLOAD_FIELDS:
        a, b = getattr(got, f), getattr(want, f)
        if a != b:
            return f"{f}={a}!={b}"
    return None


class PointFailed(FpmError):
    """A point exhausted its rejection budget; the collection stops (finished points stay)."""


@attrs.define
class Measurer:
    """Runs the protocol for one point after another on one engine; keeps the forward index."""

    engine: MeasurementEngine
    tokens: TokenSource
    settings: ProtocolSettings
    hash_block: int
    caching: bool
    graph_mode: str = "NONE"
    forward_index: int = 0

    def _run(self, prompts: Sequence[Sequence[int]], max_tokens: int) -> tuple[EngineRun, int]:
        start = self.forward_index
        run = self.engine.run([list(p) for p in prompts], max_tokens)
        self.forward_index += len(run.steps)
        return run, start

    def _seed(self, prefix: int, point: PlannedPoint, ledger: list[dict[str, Any]]) -> None:
        bid, n = point.benchmark_id, len(ledger)
        prompts = [self.tokens.prefix(prefix, slot) + self.tokens.fresh(1, "seed", bid, n, slot)
                   for slot in range(point.batch_size)]  # fmt: skip
        run, start = self._run(prompts, 1)
        ledger.append(_ledger_record("real_prefix_seed", "completed", None, start, run,
                                     {"batch_size": point.batch_size, "prefix_tokens": prefix}))  # fmt: skip

    def _prompts(self, point: PlannedPoint, rep: int, seeded: int) -> list[list[int]]:
        if point.is_prefill:
            length = point.prefix_tokens + point.new_tokens + point.prompt_extension
        else:
            length = point.context_tokens - 1
        return [self.tokens.prefix(seeded, slot) + self.tokens.fresh(length - seeded, point.benchmark_id, rep, slot)
                for slot in range(point.batch_size)]  # fmt: skip

    def check(self, point: PlannedPoint, run: EngineRun, seeded: int) -> tuple[EngineStep | None, str | None]:
        """The measured forward of an accepted repetition, or the reason it is rejected."""
        b = point.batch_size
        if tuple(run.cached_tokens) != (seeded,) * b:
            return None, "prefix_miss:" + ",".join(map(str, run.cached_tokens))
        steps = run.steps
        if point.is_prefill:
            expected = 1 + point.prompt_extension
            measured = steps[0] if steps else None
        else:
            expected = DECODE_MEASURED_STEP + 1
            measured = steps[DECODE_MEASURED_STEP] if len(steps) > DECODE_MEASURED_STEP else None
            if len(steps) >= 2:
                lockstep = StepWorkload(num_decode_requests=b, sum_decode_kv_tokens=b * (point.context_tokens - 1))
                diff = workload_difference(steps[1].scheduled, lockstep)
                if diff is not None:
                    return None, f"no_lockstep:{diff}"
        if measured is None or len(steps) != expected:
            return None, f"split_into_{len(steps)}_forwards"
        diff = workload_difference(measured.scheduled, point.measured_workload())
        if diff is not None:
            return None, f"workload:{diff}"
        if not measured.end > measured.start:
            return None, "no_timing"
        return measured, None

    def measure(self, point: PlannedPoint) -> dict[str, Any]:
        """Measure ``point``; the JSON-ready record a run keeps for it (:mod:`fpmcore.collect.store`)."""
        s = self.settings
        t0 = time.monotonic()
        first_forward = self.forward_index
        seeded = point.seeded_prefix(self.hash_block, self.caching)
        ledger: list[dict[str, Any]] = []
        if seeded:
            self._seed(seeded, point, ledger)
        reps: list[dict[str, Any]] = []
        raw: list[dict[str, Any]] = []
        prompts_evidence: list[dict[str, Any]] = []
        rejected = warm = 0
        shape_kind = "real_prefix_shape" if point.kv_seed_regime() == "real_kv" else "eager_shape"
        max_tokens = PREFILL_OUTPUT_TOKENS if point.is_prefill else DECODE_OUTPUT_TOKENS
        while len(raw) < s.repetitions:
            if s.spacing:
                time.sleep(s.spacing)
            prompts = self._prompts(point, len(reps), seeded)
            run, start = self._run(prompts, max_tokens)
            measured, reason = self.check(point, run, seeded)
            digest = prompt_sha256([t for p in prompts for t in p])
            entry: dict[str, Any] = {"index": len(reps), "fpm_count": len(run.steps), "prompts_sha256": digest}
            if measured is None:
                rejected += 1
                entry.update(role="rejected", reason=reason)
                ledger.append(_ledger_record(shape_kind, "failed", reason, start, run, point.shape()))
                reps.append(entry)
                if rejected > s.max_rejected:
                    raise PointFailed(
                        "collect",
                        f"point {point.benchmark_id} {point.phase} {point.shape()} was rejected {rejected} times "
                        f"(at most {s.max_rejected}); last reason {reason}",
                    )
                if reason is not None and reason.startswith("prefix_miss") and seeded:
                    self._seed(seeded, point, ledger)
                continue
            if warm < s.warmups:
                warm += 1
                entry["role"] = "warmup"
                ledger.append(_ledger_record(shape_kind, "completed", None, start, run, point.shape()))
                reps.append(entry)
                continue
            position = DECODE_MEASURED_STEP if not point.is_prefill else 0
            wall = measured.end - measured.start
            entry.update(role="measured", raw_sample_index=len(raw), wall_time=wall)
            if not raw:
                prompts_evidence = [{"slot": i, "num_tokens": len(p), "sha256": prompt_sha256(p)}
                                    for i, p in enumerate(prompts)]  # fmt: skip
            raw.append({
                "wall_time": wall, "start": measured.start, "end": measured.end,
                "forward_index": start + position,
                "scheduled": measured.scheduled.as_json(), "queued": measured.queued.as_json(),
            })  # fmt: skip
            reps.append(entry)
        return {
            "benchmark_id": point.benchmark_id,
            "point": point.dynamo_point(self.graph_mode),
            "kv_seed_regime": point.kv_seed_regime(),
            "raw": raw,
            "repetitions": reps,
            "warmups": ledger,
            "prompts": prompts_evidence,
            "forward_start": first_forward,
            "forward_end": self.forward_index,
            "elapsed_seconds": time.monotonic() - t0,
            "finished_at": _now(),
        }


def _now() -> str:
    import datetime

    return datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _ledger_record(
    kind: str, status: str, reason: str | None, start: int, run: EngineRun, shape: Mapping[str, int]
) -> dict[str, Any]:
    """One warm-up ledger record (05 §4.4) of a seed, a warm-up or a rejected repetition."""
    steps = run.steps
    validation: dict[str, Any] = {"status": "failed", "reason": reason} if reason else {"status": "not_performed"}
    return {
        "kind": kind, "status": status, "validation": validation,
        "forward_index_start": start, "forward_index_end": start + len(steps),
        "observed_forward_count": len(steps), "requested_shape": dict(shape),
        "first_scheduled_requests": steps[0].scheduled.as_json() if steps else None,
        "last_scheduled_requests": steps[-1].scheduled.as_json() if steps else None,
    }  # fmt: skip
