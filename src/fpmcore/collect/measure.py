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
   seeds ``((c − w − 1) // H) × H``, the hash-aligned part of its prompt
   (``w`` below).
2. runs **repetitions**: each admits the point's ``b`` requests at once —
   the seeded prefix, then tokens no other request of the run has — and steps
   the engine until they finish.  A prefill repetition generates one token
   and its first forward is measured; a decode repetition (prompt ``c − w``)
   generates ``w + 2``: the forward that prefills the uncached tails, ``w``
   *lead-in* decode steps at contexts ``c − w … c − 1`` (each must hold all
   ``b`` requests: the lockstep check), and the measured decode step at
   context ``c``.  The lead-in (:func:`decode_lead_in`, ``w`` up to
   ``ProtocolSettings.decode_lead_in``, 16 by default) is there because a
   CPU engine's decode steps right after a prefill run slower than in a
   stream — on this project's tiny models the 1st, 2nd, 3rd … 24th decodes
   after a prefill took 4.2, 3.7, 3.3 … 2.9 ms (a Mamba2 hybrid) and 2.6,
   2.2, 2.1 … 1.6 ms (a llama), settling after about ten — and a served
   request spends most of its decode steps in such a stream.
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
   a shared machine's load instead of one burst of it; the retained wall time is the trimmed mean of
   samples ``1 … R−1`` (``adjacent_trimmed_mean``: the first measurement is
   left out as in 05 §4.2; :func:`fpmcore.validate.measured_values.trimmed_mean` says
   why a mean and not the format's upper median).

Every forward the engine runs counts in the process's forward index (05 §4.3),
the seeds and rejected repetitions included; the seeds, warm-ups and rejected
repetitions are recorded in the warm-up ledger (05 §4.4) and every repetition
in the repetition-evidence line of the point (05 §7.5).
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from fpmcore.collect.content import TokenSource, prompt_sha256
from fpmcore.collect.contention import ContentionBound, canary
from fpmcore.documents.errors import FpmError
from fpmcore.documents.jsonio import one_line
from fpmcore.host.engine_drivers import EngineRun, EngineStep, MeasurementEngine, StepWorkload
from fpmcore.plan.point_grid import PlanPoint, decode_tail
from fpmcore.validate.measured_values import PRODUCER_REDUCTIONS, TRIMMED_MEAN, UPPER_MEDIAN

#: Generated tokens of a prefill repetition; a decode repetition generates its lead-in plus two.
PREFILL_OUTPUT_TOKENS = 1
#: Decode steps before the measured one (at most; :func:`decode_lead_in`) of a repetition of this protocol, and of
#: a run collected before the lead-in existed (the measured decode was the second after the prefill).
DEFAULT_DECODE_LEAD_IN, LEGACY_DECODE_LEAD_IN, MAX_DECODE_LEAD_IN = 16, 1, 256
#: Contended samples a point's visit may retake before the point fails (A-43), and the first pause before a
#: retake (doubled for each contended sample in a row, at most :data:`MAX_RETAKE_PAUSE`).
DEFAULT_MAX_CONTENDED, DEFAULT_RETAKE_PAUSE, MAX_RETAKE_PAUSE = 20, 0.5, 16.0
#: Passes whose values spread more than this fraction of the point's value disagree (A-44).
PASS_DISAGREEMENT = 0.15
#: Seconds the engine idles before each prefill repetition (:attr:`ProtocolSettings.prefill_idle`).
DEFAULT_PREFILL_IDLE = 0.1


@attrs.frozen
class ProtocolSettings:
    """How a point is measured: warm-ups per visit, measured samples over the passes, the content seed,
    and what makes a sample contended (:mod:`fpmcore.collect.contention`) and how often one is retaken.

    ``prefill_idle``: seconds the engine idles before every prefill repetition.  A served step that only
    prefills runs when no request is decoding, that is after the engine idled (or drained), and a CPU
    engine's first forward after a pause runs slower than back to back: on the tiny llama of this project a
    132-token prefill took 6.1 ms back to back and 6.8–7.4 ms after pauses of 10 ms to 1 s (sleeping or
    spinning: the caches and branch predictors cool), and served prefill-only steps were 14–17 % above
    knots measured back to back.  So a prefill point is measured as it is served.  Decode repetitions run
    back to back (a served decode follows another step); ``spacing`` pauses before every repetition.

    ``decode_lead_in``: decode steps a decode repetition runs before its measured one (at most: see
    :func:`decode_lead_in`), so that the measured step is a decode in a stream, as served (module docstring).

    ``reduction``: how a point's samples become its retained wall time — the trimmed mean of every sample but
    the first (:func:`fpmcore.validate.measured_values.trimmed_mean`, which says why), or the upper median of the
    format (05 §4.2; a run collected before the mean existed)."""

    warmups: int
    repetitions: int
    max_rejected: int
    seed: int
    spacing: float = 0.0
    passes: int = 1
    bound: ContentionBound = ContentionBound()
    max_contended: int = DEFAULT_MAX_CONTENDED
    retake_pause: float = DEFAULT_RETAKE_PAUSE
    disagreement: float = PASS_DISAGREEMENT
    prefill_idle: float = 0.0
    decode_lead_in: int = DEFAULT_DECODE_LEAD_IN
    reduction: str = TRIMMED_MEAN

    def __attrs_post_init__(self) -> None:
        if self.repetitions < 3:
            raise FpmError("collect", f"--repetitions must be at least 3 (every sample but the first is "
                                      f"reduced); got {self.repetitions}")  # fmt: skip
        if self.reduction not in PRODUCER_REDUCTIONS:
            raise FpmError("collect", f"unknown reduction {self.reduction!r}: one of {sorted(PRODUCER_REDUCTIONS)}")
        if not 1 <= self.passes <= self.repetitions:
            raise FpmError("collect", f"--passes must be between 1 and --repetitions ({self.repetitions}): every "
                                      f"pass measures at least one sample; got {self.passes}")  # fmt: skip
        if self.warmups < 0 or self.max_rejected < 0 or not 0 <= self.spacing < 3600:
            raise FpmError("collect", f"--warmup, --spacing and the rejection budget must be >= 0; got "
                                      f"{self.warmups}, {self.spacing}, {self.max_rejected}")  # fmt: skip
        if not 0 <= self.prefill_idle < 3600:
            raise FpmError("collect", f"--prefill-idle must be >= 0; got {self.prefill_idle}")
        if not 1 <= self.decode_lead_in <= MAX_DECODE_LEAD_IN:
            raise FpmError("collect", f"the decode lead-in must be 1 … {MAX_DECODE_LEAD_IN} steps; got "
                                      f"{self.decode_lead_in}")  # fmt: skip
        if self.max_contended < 0 or not 0 <= self.retake_pause < 3600:
            raise FpmError("collect", f"--max-contended and --retake-pause must be >= 0; got {self.max_contended}, "
                                      f"{self.retake_pause}")  # fmt: skip

    def share(self, visit: int) -> int:
        """Measured samples of visit ``visit``: the repetitions spread evenly over the passes (the earlier
        passes take the remainder); the re-measuring visit (``visit == passes``) takes the largest share
        (:func:`fpmcore.validate.repetition_evidence.pass_share`, which A-39 checks)."""
        from fpmcore.validate.repetition_evidence import pass_share

        return pass_share(self.repetitions, self.passes, visit)

    def as_json(self) -> dict[str, Any]:
        """The run's ``settings`` (``collect.json``)."""
        return {"warmups": self.warmups, "repetitions": self.repetitions, "max_rejected": self.max_rejected,
                "seed": self.seed, "spacing": self.spacing, "passes": self.passes,
                "contention_bound": self.bound.as_json(), "max_contended": self.max_contended,
                "retake_pause": self.retake_pause, "pass_disagreement": self.disagreement,
                "prefill_idle": self.prefill_idle, "decode_lead_in": self.decode_lead_in,
                "reduction": self.reduction}  # fmt: skip

    @classmethod
    def from_json(cls, s: Mapping[str, Any]) -> ProtocolSettings:
        """The settings of a run's ``collect.json`` (a run collected before passes existed has one pass, one
        before the prefill idle none, one before the decode lead-in one decode step before the measured one, one
        before the trimmed mean the upper median)."""
        bound = ContentionBound.from_json(s.get("contention_bound")) or ContentionBound()
        integers = ("warmups", "repetitions", "max_rejected", "seed", "passes", "max_contended", "decode_lead_in")
        numbers = ("spacing", "retake_pause", "pass_disagreement", "prefill_idle")
        for key in integers + numbers:
            if key not in s and key in ("warmups", "repetitions", "max_rejected", "seed", "spacing"):
                raise FpmError("collect", f"the run's settings are unreadable: {key} is missing")
            v = s.get(key, 0)
            kinds = (int,) if key in integers else (int, float)
            if isinstance(v, bool) or not isinstance(v, kinds) or (isinstance(v, float) and not math.isfinite(v)):
                what = "an integer" if key in integers else "a finite number"
                raise FpmError("collect", f"the run's settings are unreadable: {key} must be {what}, found "
                                          f"{one_line(repr(v))[:80]}")  # fmt: skip
        try:
            return cls(s["warmups"], s["repetitions"], s["max_rejected"], s["seed"], s["spacing"],
                       s.get("passes", 1), bound, s.get("max_contended", DEFAULT_MAX_CONTENDED),
                       s.get("retake_pause", DEFAULT_RETAKE_PAUSE),
                       s.get("pass_disagreement", PASS_DISAGREEMENT), s.get("prefill_idle", 0.0),
                       s.get("decode_lead_in", LEGACY_DECODE_LEAD_IN), s.get("reduction", UPPER_MEDIAN))  # fmt: skip
        except (KeyError, TypeError) as exc:
            raise FpmError("collect", f"the run's settings are unreadable: {exc}") from None


@attrs.frozen
class PlannedPoint(PlanPoint):
    """One point of a plan's list (:class:`fpmcore.plan.point_grid.PlanPoint`), as the collection measures it."""

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

    def seeded_prefix(self, hash_block: int, caching: bool, lead_in: int = 1) -> int:
        """Tokens seeded into the prefix cache before the repetitions (module docstring, step 1); a decode
        point's prompt is ``c − lead_in`` tokens."""
        if not caching:
            return 0
        if self.is_prefill:
            return self.prefix_tokens
        prompt = self.context_tokens - lead_in
        return prompt - decode_tail(self.context_tokens, hash_block, caching, lead_in)

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


def decode_lead_in(point: PlannedPoint, want: int, hash_block: int, caching: bool, budget: int | None) -> int:
    """The decode steps a repetition of decode ``point`` runs before its measured one: the most, up to ``want``,
    that leave a prompt of at least one token and, for ``b ≥ 2`` requests, uncached tails that fit one forward of
    the token budget (``b × tail ≤ budget``: split tails would not decode in lockstep; the plan's rule, 04 G-15,
    keeps the points whose tails fit at a lead-in of one, so one always does)."""
    b, c = point.batch_size, point.context_tokens
    for w in range(min(want, c - 2), 1, -1):
        if b == 1 or budget is None or b * decode_tail(c, hash_block, caching, w) <= budget:
            return w
    return 1


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
    #: the engine's token budget (``max_num_batched_tokens``): bounds a decode repetition's lead-in
    budget: int | None = None

    def lead_in(self, point: PlannedPoint) -> int:
        """The decode steps before the measured one of a repetition of ``point`` (:func:`decode_lead_in`; 0 for a
        prefill point)."""
        if point.is_prefill:
            return 0
        return decode_lead_in(point, self.settings.decode_lead_in, self.hash_block, self.caching, self.budget)

    def _run(self, prompts: Sequence[Sequence[int]], max_tokens: int) -> tuple[EngineRun, int]:
        start = self.forward_index
        run = self.engine.run([list(p) for p in prompts], max_tokens)
        self.forward_index += len(run.steps)
        return run, start

    def _seed(self, prefix: int, point: PlannedPoint, ledger: list[dict[str, Any]], visit: int) -> None:
        bid, n = point.benchmark_id, len(ledger)
        key: tuple[object, ...] = ("seed", bid, n) if not visit else ("seed", bid, f"pass{visit}", n)
        prompts = [self.tokens.prefix(prefix, slot) + self.tokens.fresh(1, *key, slot)
                   for slot in range(point.batch_size)]  # fmt: skip
        run, start = self._run(prompts, 1)
        ledger.append(_ledger_record("real_prefix_seed", "completed", None, start, run,
                                     {"batch_size": point.batch_size, "prefix_tokens": prefix}))  # fmt: skip

    def _prompts(self, point: PlannedPoint, rep: int, seeded: int, visit: int, lead_in: int) -> list[list[int]]:
        if point.is_prefill:
            length = point.prefix_tokens + point.new_tokens + point.prompt_extension
        else:
            length = point.context_tokens - lead_in
        key: tuple[object, ...] = (point.benchmark_id, rep) if not visit else (point.benchmark_id, f"pass{visit}", rep)
        return [self.tokens.prefix(seeded, slot) + self.tokens.fresh(length - seeded, *key, slot)
                for slot in range(point.batch_size)]  # fmt: skip

    def check(
        self, point: PlannedPoint, run: EngineRun, seeded: int, lead_in: int = 1
    ) -> tuple[EngineStep | None, str | None]:
        """The measured forward of an accepted repetition, or the reason it is rejected (a decode repetition
        runs ``lead_in`` decode steps before its measured one)."""
        b = point.batch_size
        if tuple(run.cached_tokens) != (seeded,) * b:
            return None, "prefix_miss:" + ",".join(map(str, run.cached_tokens))
        steps = run.steps
        if point.is_prefill:
            expected = 1 + point.prompt_extension
            measured = steps[0] if steps else None
        else:
            # the prompts' uncached tails may take more than one forward (a deployment without prefix caching
            # prefills a whole c − w prompt, which the token budget can split): the lockstep lead-in decodes and
            # the measured one follow the last forward that prefills
            tails = 1
            while tails < len(steps) - 1 and steps[tails].scheduled.num_prefill_requests:
                tails += 1
            expected = tails + lead_in + 1
            measured = steps[expected - 1] if len(steps) >= expected else None
            for i, step in enumerate(steps[tails : tails + lead_in]):
                context = point.context_tokens - lead_in + i
                lockstep = StepWorkload(num_decode_requests=b, sum_decode_kv_tokens=b * context)
                diff = workload_difference(step.scheduled, lockstep)
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

    def measure(self, point: PlannedPoint, visit: int = 0, samples: int | None = None) -> dict[str, Any]:
        """Measure ``samples`` clean samples of ``point`` in pass ``visit`` (all repetitions: one pass); the
        JSON-ready record of the visit a run keeps (:mod:`fpmcore.collect.store`).

        A repetition whose measured forward is contended under the settings' bound is kept as a
        ``contended`` repetition and retaken after a pause (doubling from ``retake_pause`` for each contended
        sample in a row, back to ``retake_pause`` after a clean one: the pause waits out a neighbour that stays,
        not one that came and went); more than ``max_contended`` of them fail the point (A-43)."""
        s = self.settings
        want = s.repetitions if samples is None else samples
        t0 = time.monotonic()
        first_forward = self.forward_index
        lead = self.lead_in(point)
        seeded = point.seeded_prefix(self.hash_block, self.caching, lead)
        ledger: list[dict[str, Any]] = []
        if seeded:
            self._seed(seeded, point, ledger, visit)
        reps: list[dict[str, Any]] = []
        raw: list[dict[str, Any]] = []
        prompts_evidence: list[dict[str, Any]] = []
        rejected = warm = contended = streak = 0
        worst = ""
        shape_kind = "real_prefix_shape" if point.kv_seed_regime() == "real_kv" else "eager_shape"
        max_tokens = PREFILL_OUTPUT_TOKENS if point.is_prefill else lead + 2
        while len(raw) < want:
            if s.spacing:
                time.sleep(s.spacing)
            if point.is_prefill and s.prefill_idle:
                time.sleep(s.prefill_idle)
            prompts = self._prompts(point, len(reps), seeded, visit, lead)
            run, start = self._run(prompts, max_tokens)
            measured, reason = self.check(point, run, seeded, lead)
            digest = prompt_sha256([t for p in prompts for t in p])
            entry: dict[str, Any] = {"index": len(reps), "fpm_count": len(run.steps), "prompts_sha256": digest}
            if s.passes > 1:
                entry["pass"] = visit
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
                    self._seed(seeded, point, ledger, visit)
                continue
            if warm < s.warmups:
                warm += 1
                entry["role"] = "warmup"
                ledger.append(_ledger_record(shape_kind, "completed", None, start, run, point.shape()))
                reps.append(entry)
                continue
            position = next(i for i, step in enumerate(run.steps) if step is measured)
            wall = measured.end - measured.start
            seen = measured.contention.as_json() if measured.contention is not None else None
            if s.bound.contended(measured.contention, wall):
                contended += 1
                streak += 1
                worst = s.bound.describe(measured.contention, wall)
                entry.update(role="contended", wall_time=wall, contention=seen, reason=worst)
                ledger.append(_ledger_record(shape_kind, "failed", "contended", start, run, point.shape()))
                reps.append(entry)
                if contended > s.max_contended:
                    raise PointFailed(
                        "A-43",
                        f"point {point.benchmark_id} {point.phase} {point.shape()}: {contended} samples were "
                        f"contended (at most {s.max_contended} retakes; last {worst}; bound: wait "
                        f"{s.bound.max_wait_fraction:.0%}, others' CPU {s.bound.max_foreign_fraction:.0%} of a "
                        "sample's wall time): the machine is busy; stop other work on it, or raise --max-contended",
                    )
                if s.retake_pause:
                    time.sleep(min(MAX_RETAKE_PAUSE, s.retake_pause * 2 ** (streak - 1)))
                continue
            streak = 0
            entry.update(role="measured", raw_sample_index=len(raw), wall_time=wall, contention=seen)
            if not raw:
                prompts_evidence = [{"slot": i, "num_tokens": len(p), "sha256": prompt_sha256(p)}
                                    for i, p in enumerate(prompts)]  # fmt: skip
            raw.append({
                "wall_time": wall, "start": measured.start, "end": measured.end,
                "forward_index": start + position,
                "scheduled": measured.scheduled.as_json(), "queued": measured.queued.as_json(),
            })  # fmt: skip
            reps.append(entry)
        record = {
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
            # the machine's speed right after the visit, on a CPU still busy (fpmcore.collect.contention.canary): runs and
            # assessments on different engines compare it (fpm assess)
            "canary_seconds": canary(),
        }
        if s.passes > 1:
            record["pass"] = visit
        return record


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
