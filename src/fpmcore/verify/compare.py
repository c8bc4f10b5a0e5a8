"""What ``fpm verify`` computes: the errors of a prediction, the contention of a serving, the verdict.

**Timings.**  A side (the served engine, the replay, a second serving) is a
:class:`Side`: per request its arrival, first-token and finish times and its
output tokens, from which TTFT = first − arrival, TPOT = (finish − first) /
(tokens − 1) and E2E = finish − arrival; its makespan is the last finish
minus the first arrival (the same definition on both sides), its output
throughput the output tokens over the makespan.

**Errors** (:func:`compare`, of ``other`` against ``reference``):

* per request, ``|other − reference| / reference`` of TTFT, TPOT and E2E, and
  their median and P90 (nearest rank, 06 R-35) over the requests;
* signed relative errors ``(other − reference) / reference`` of the makespan
  and the throughput (+: the prediction is longer, faster);
* the distribution over the trace: the signed relative error of the p50, p90
  and mean of TTFT, TPOT and E2E (the shape a capacity study reads).

**Steps** (:func:`step_errors`): every served step against the latency model
at its coordinates (``step_time`` of the table), per kind — prefill only,
decode only, mixed — the count, served and predicted sums and the median
signed error.

**Contention** (:func:`contention_summary`).  Each served step carries what
the machine did to it (:mod:`fpmcore.collect.contention`); a step is contended by
:class:`~fpmcore.collect.contention.ContentionBound`.  A serving is **contended**
when more than :data:`MAX_CONTENDED_FRACTION` (5 %) of its served wall time
(the sum of its steps' wall times) is in contended steps.  Why 5 %: a
neighbour that holds a whole CPU slowed a step of this project's engine by
75 % on a 2-vCPU machine (:mod:`fpmcore.collect.contention`), so at most
0.75 / 1.75 ≈ 43 % of a contended step's time is the neighbour's, and 5 % of
the time in such steps bounds what a neighbour added to the serving at about
2 % — the makespan tolerance of the verdict.  Beyond it a serving's error
says more about the machine than about the prediction.  A run is contended
when either of its servings is (the second one of ``--noise-floor`` too).

**The verdict** (:func:`verdict`), over the runs that are not contended:
``pass`` when the medians over runs of the per-request median |error| of
TTFT, TPOT and E2E are each within the engine's noise floor (the same
figure of the second servings, ``--noise-floor``) plus
:data:`FLOOR_MARGIN` (2 points) — checked only when the floor was measured,
else stated only —, the medians over runs of every distribution figure are
within :data:`DISTRIBUTION_LIMIT` (10 %) and the median makespan error is
within :data:`MAKESPAN_LIMIT` (±2 %); ``fail`` otherwise; ``contended`` when
every run was contended (nothing to judge).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from fpmcore.collect.contention import Contention, ContentionBound
from fpmcore.host.engine_drivers import EngineStep, ServedRequest
from fpmcore.replay.records import nearest_rank

#: A serving with more of its served wall time in contended steps is contended (module docstring).
MAX_CONTENDED_FRACTION = 0.05
#: The verdict's limits (module docstring): points above the noise floor, distribution figures, makespan.
FLOOR_MARGIN = 0.02
DISTRIBUTION_LIMIT = 0.10
MAKESPAN_LIMIT = 0.02
METRICS = ("ttft", "tpot", "e2e")
FIGURES = ("p50", "p90", "mean")
VERDICTS = ("pass", "fail", "contended")


@attrs.frozen
class Timing:
    """One request's times (seconds from the start of the trace) and output tokens."""

    arrival: float
    first_token: float
    finish: float
    output_tokens: int

    def metric(self, name: str) -> float | None:
        if name == "ttft":
            return self.first_token - self.arrival
        if name == "e2e":
            return self.finish - self.arrival
        n = self.output_tokens
        return (self.finish - self.first_token) / (n - 1) if n > 1 else None

    def as_json(self) -> dict[str, Any]:
        return {"ttft_s": self.metric("ttft"), "tpot_s": self.metric("tpot"), "e2e_s": self.metric("e2e"),
                "output_tokens": self.output_tokens}  # fmt: skip


@attrs.frozen
class Side:
    """The timings of every request of one side (module docstring), by request id."""

    requests: Mapping[str, Timing]

    @classmethod
    def served(cls, requests: Iterable[ServedRequest], prefix: str = "") -> Side:
        return cls({r.request_id.removeprefix(prefix): Timing(r.arrival_time, r.first_token, r.finish,
                                                              r.output_tokens) for r in requests})  # fmt: skip

    @classmethod
    def replayed(cls, records: Iterable[Mapping[str, Any]]) -> Side:
        """From the replay's R-35 request records (finished ones)."""
        return cls({r["request_id"]: Timing(r["arrival_time"], r["first_token_time"], r["finish_time"],
                                            r["output_tokens"]) for r in records if r["status"] == "finished"})  # fmt: skip

    @property
    def makespan(self) -> float:
        ts = self.requests.values()
        return max(t.finish for t in ts) - min(t.arrival for t in ts) if ts else 0.0

    @property
    def throughput(self) -> float | None:
        span = self.makespan
        return sum(t.output_tokens for t in self.requests.values()) / span if span > 0 else None

    def summary(self) -> dict[str, Any]:
        return {"requests": len(self.requests), "makespan_s": self.makespan, "output_tokens_per_s": self.throughput}


def _signed(other: float | None, reference: float | None) -> float | None:
    if other is None or reference is None or reference <= 0:
        return None
    return (other - reference) / reference


def _figures(values: Sequence[float]) -> dict[str, float | None]:
    if not values:
        return dict.fromkeys(FIGURES)
    return {"p50": nearest_rank(values, 0.5), "p90": nearest_rank(values, 0.9), "mean": statistics.fmean(values)}


def compare(reference: Side, other: Side) -> dict[str, Any]:
    """The errors of ``other`` against ``reference`` (module docstring), JSON-ready.

    ``{"ttft": {"median", "p90", "n"}, "tpot": …, "e2e": …, "makespan", "throughput",
    "distribution": {"ttft": {"p50", "p90", "mean"}, …}}``; a figure without
    requests to compute it is ``None``.
    """
    out: dict[str, Any] = {}
    dist: dict[str, Any] = {}
    for m in METRICS:
        errs, ref_values, other_values = [], [], []
        for rid, ref in reference.requests.items():
            got = other.requests.get(rid)
            a, b = ref.metric(m), got.metric(m) if got is not None else None
            if a is None or b is None:
                continue
            ref_values.append(a)
            other_values.append(b)
            if a > 0:
                errs.append(abs(b - a) / a)
        out[m] = {"median": statistics.median(errs) if errs else None,
                  "p90": nearest_rank(errs, 0.9) if errs else None, "n": len(errs)}  # fmt: skip
        fa, fb = _figures(ref_values), _figures(other_values)
        dist[m] = {f: _signed(fb[f], fa[f]) for f in FIGURES}
    out["makespan"] = _signed(other.makespan, reference.makespan)
    out["throughput"] = _signed(other.throughput, reference.throughput)
    out["distribution"] = dist
    return out


def step_kind(step: EngineStep) -> str:
    w = step.scheduled
    if w.num_prefill_requests and w.num_decode_requests:
        return "mixed"
    return "prefill" if w.num_prefill_requests else "decode"


def step_errors(table: Any, steps: Sequence[EngineStep]) -> tuple[dict[str, Any], list[float | None]]:
    """Per step kind the count, served and predicted sums and median signed error (module docstring), and the
    predicted time of every step (``None`` where the table has no row of a phase the step has)."""
    from fpmcore.replay.latency import step_time

    kinds: dict[str, dict[str, Any]] = {}
    predicted: list[float | None] = []
    for s in steps:
        w = s.scheduled
        got = step_time(table, w.num_prefill_requests, w.sum_prefill_tokens, w.sum_prefill_kv_tokens,
                        w.num_decode_requests, w.sum_decode_kv_tokens)  # fmt: skip
        if not isinstance(got, tuple):
            predicted.append(None)
            continue
        predicted.append(got[0])
        k = kinds.setdefault(step_kind(s), {"n": 0, "served_s": 0.0, "predicted_s": 0.0, "errors": []})
        k["n"] += 1
        k["served_s"] += s.wall_time
        k["predicted_s"] += got[0]
        if s.wall_time > 0:
            k["errors"].append((got[0] - s.wall_time) / s.wall_time)
    for k in kinds.values():
        errs = k.pop("errors")
        k["median_error"] = statistics.median(errs) if errs else None
    return dict(sorted(kinds.items())), predicted


def contention_summary(steps: Sequence[EngineStep], bound: ContentionBound) -> dict[str, Any]:
    """What the machine did to a serving: sums, fractions of the served wall time, contended steps and their share
    of the served wall time, and whether the serving is contended (module docstring)."""
    total = Contention(0.0, 0.0, 0.0)
    served = contended_time = 0.0
    contended = unmeasured = 0
    for s in steps:
        wall = s.wall_time
        served += wall
        if s.contention is None:
            unmeasured += 1
        else:
            total = total + s.contention
        if bound.contended(s.contention, wall):
            contended += 1
            contended_time += wall
    frac = contended_time / served if served > 0 else 0.0
    span = max(served, 1e-9)
    return {
        "served_seconds": served, "steps": len(steps), "contended_steps": contended, "unmeasured_steps": unmeasured,
        "contended_time_fraction": frac, **total.as_json(),
        "wait_fraction": total.wait_seconds / span, "foreign_fraction": total.foreign_seconds / span,
        "contended": frac > MAX_CONTENDED_FRACTION,
    }  # fmt: skip


def _median(values: Iterable[float | None]) -> float | None:
    got = [v for v in values if v is not None]
    return statistics.median(got) if got else None


def summarize(runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Medians over the runs that are not contended (all runs when every one is): ``ttft``/``tpot``/``e2e``
    ``{median, p90}``, ``makespan``, ``throughput``, ``distribution`` and, with ``--noise-floor``,
    ``noise_floor`` (the medians of the second servings' per-request median errors and makespan)."""
    counted = [r for r in runs if not r["contended"]] or list(runs)
    out: dict[str, Any] = {"runs": len(runs), "runs_counted": sum(not r["contended"] for r in runs)}
    for m in METRICS:
        out[m] = {s: _median(r["errors"][m][s] for r in counted) for s in ("median", "p90")}
    out["makespan"] = _median(r["errors"]["makespan"] for r in counted)
    out["throughput"] = _median(r["errors"]["throughput"] for r in counted)
    out["distribution"] = {m: {f: _median(r["errors"]["distribution"][m][f] for r in counted) for f in FIGURES}
                           for m in METRICS}  # fmt: skip
    floors = [r["noise_floor"] for r in counted if r.get("noise_floor") is not None]
    out["noise_floor"] = None if not floors else {
        **{m: _median(f[m]["median"] for f in floors) for m in METRICS},
        "makespan": _median(f["makespan"] for f in floors),
    }  # fmt: skip
    return out


def verdict(runs: Sequence[Mapping[str, Any]], summary: Mapping[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    """The verdict and its checks (module docstring): ``(verdict, [{"check", "value", "limit", "signed", "ok"}])``;
    a signed check compares ``|value|`` with its limit."""
    if not runs or all(r["contended"] for r in runs):
        return "contended", []
    checks: list[dict[str, Any]] = []

    def check(name: str, value: float | None, limit: float, signed: bool = False) -> None:
        ok = value is not None and (abs(value) if signed else value) <= limit
        checks.append({"check": name, "value": value, "limit": limit, "signed": signed, "ok": ok})

    floor = summary.get("noise_floor")
    for m in METRICS:
        if floor is not None and floor[m] is not None:
            check(f"{m} median error within the noise floor + {FLOOR_MARGIN:.0%}", summary[m]["median"],
                  floor[m] + FLOOR_MARGIN)  # fmt: skip
    for m in METRICS:
        for f in FIGURES:
            value = summary["distribution"][m][f]
            if value is not None or m != "tpot":  # a trace of single-token outputs has no TPOT
                check(f"{m} {f} within ±{DISTRIBUTION_LIMIT:.0%}", value, DISTRIBUTION_LIMIT, signed=True)
    check(f"makespan within ±{MAKESPAN_LIMIT:.0%}", summary["makespan"], MAKESPAN_LIMIT, signed=True)
    return ("pass" if all(c["ok"] for c in checks) else "fail"), checks
