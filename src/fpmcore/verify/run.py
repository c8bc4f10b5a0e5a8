"""``verify_campaign``: serve, replay and compare, as one function of a host (the command and ``fpm onboard`` call it).

The order of work: read the campaign (V-2), find the serving engine of the
plan's runtime (V-1), the replay rules of the profile's runtime (R-1), the
traces of every run (V-3) — all before the engine starts —; then start the
engine with the plan's deployment (:func:`fpmcore.collect.run.engine_options`),
serve the warm-up requests (not measured) and one step of every token count
the replay predicts for the traces
(:func:`fpmcore.verify.traces.shape_warmup_traces`: a deployment's engine has
seen them), and per run serve the run's trace
(twice with the noise floor), replay it and compare
(:mod:`fpmcore.verify.compare`).  The engine is closed however the work ends.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from fpmcore.collect.contention import ContentionBound
from fpmcore.documents.errors import FpmError
from fpmcore.host.engine_drivers import EngineStep, ServingDriver, ServingEngine
from fpmcore.replay.trace import Trace
from fpmcore.verify import compare as cmp
from fpmcore.verify.traces import (
    PoissonSpec,
    check_servable,
    poisson_trace,
    prompts,
    serve_requests,
    shape_warmup_traces,
    step_token_counts,
    warmup_trace,
)

#: ``progress(done, total, what)``: called before each serving (``done`` servings of ``total`` finished).
Progress = Callable[[int, int, str], None]


@attrs.frozen
class VerifyOptions:
    """What ``fpm verify`` serves: a trace file (``trace``) or a Poisson trace (``poisson``), ``runs`` times
    (run ``k`` seeds its token ids, and a generated trace, with ``seed + k``), after ``warmup_requests``
    unmeasured requests; ``noise_floor`` serves each trace twice."""

    trace: str | None = None
    poisson: PoissonSpec = PoissonSpec(1.0, 20, (64, 512), (8, 64))
    #: How ``trace`` is read: its format (``None``: sniffed), the tokens per content-block id, the row filters.
    trace_format: str | None = None
    hash_block_tokens: int = 512
    trace_filters: tuple[tuple[str, str], ...] = ()
    seed: int = 1
    runs: int = 3
    warmup_requests: int = 4
    noise_floor: bool = False

    def as_json(self) -> dict[str, Any]:
        return {"trace": self.trace, "poisson": None if self.trace else self.poisson.as_json(), "seed": self.seed,
                "runs": self.runs, "warmup_requests": self.warmup_requests,
                "noise_floor": self.noise_floor}  # fmt: skip


@attrs.frozen
class Campaign:
    """The files of a finished ``fpm onboard`` campaign that a verification reads."""

    root: Path
    model_dir: str
    dtype: str | None
    plan: Mapping[str, Any]
    profile: Any
    table: Any

    @property
    def runtime(self) -> str:
        return str(self.plan["engine"]["runtime"])

    def inputs(self) -> list[Path]:
        return [self.root / n for n in ("onboard.json", "profile.json", "plan.json", "table.json")]


def read_campaign(root: str | os.PathLike[str]) -> Campaign:
    """The campaign at ``root``, or V-2 naming the file that is missing or wrong."""
    from fpmcore.campaign.layout import MANIFEST, PLAN, PROFILE, TABLE
    from fpmcore.documents.jsonio import load_path
    from fpmcore.documents.profile import load_profile
    from fpmcore.replay.table import load_table

    base = Path(root)
    if not base.is_dir():
        raise FpmError("V-2", "not a campaign folder of fpm onboard: no such folder", str(base))
    for name in (MANIFEST, PROFILE, PLAN, TABLE):
        if not (base / name).is_file():
            raise FpmError("V-2", f"not a finished campaign of fpm onboard: {name} is missing", str(base / name))
    manifest = load_path(base / MANIFEST)
    options = manifest.get("options") if isinstance(manifest, dict) else None
    model_dir = options.get("model_dir") if isinstance(options, dict) else None
    if not isinstance(model_dir, str) or not model_dir:
        raise FpmError("V-2", "the manifest names no model folder (options.model_dir)", str(base / MANIFEST))
    probe = options.get("probe") if isinstance(options, dict) else None
    dtype = probe.get("dtype") if isinstance(probe, dict) else None
    plan = load_path(base / PLAN)
    engine = plan.get("engine") if isinstance(plan, dict) else None
    if not isinstance(engine, dict) or not isinstance(engine.get("runtime"), str):
        raise FpmError("V-2", "the plan names no engine runtime (engine.runtime)", str(base / PLAN))
    profile = load_profile(base / PROFILE)
    table = load_table(base / TABLE)
    return Campaign(base, model_dir, dtype if isinstance(dtype, str) else None, plan, profile, table)


def serving_driver(host: Any, runtime: str) -> ServingDriver:
    """The serving engine of the runtime plugin selected for ``runtime``, or V-1 naming the plugins that serve."""
    hooks = host.hooks.runtime(runtime)
    driver = hooks.serving_engine()
    if driver is None:
        names = set(host.hooks.implementers("fpm_serving_engine"))
        have = ", ".join(f"{r.id} ({', '.join(r.targets)})" for r in host.active("runtime") if r.id in names)
        raise FpmError("V-1", f"runtime plugin '{hooks.plugin}' serves no engine for {runtime} (no "
                              f"fpm_serving_engine); plugins that serve one: {have or 'none installed'}")  # fmt: skip
    return driver  # type: ignore[no-any-return]


def run_traces(options: VerifyOptions, max_model_len: int, formats: Sequence[tuple[str, Any]]) -> list[Trace]:
    """The trace of every run (V-3 checked): the trace file read in one of ``formats`` as ``fpm replay`` reads
    it (its format named or sniffed), or the seeded Poisson traces."""
    from fpmcore.traces.reading import read_trace

    if options.trace is not None:
        trace, _provenance = read_trace(formats, options.trace, name=options.trace_format,
                                        hash_block_tokens=options.hash_block_tokens, filters=options.trace_filters)  # fmt: skip
        check_servable(trace, max_model_len, options.trace)
        return [trace] * options.runs
    out = []
    for k in range(options.runs):
        trace = poisson_trace(options.poisson, options.seed + k)
        check_servable(trace, max_model_len, f"--prompt/--output (run {k + 1})")
        out.append(trace)
    return out


def _engine_call(plugin: str, what: str, fn: Callable[[], Any]) -> Any:
    """V-5 for anything but a refusal (:class:`FpmError`) or an interrupt raised by the plugin's engine."""
    try:
        return fn()
    except FpmError:
        raise
    except Exception as exc:
        raise FpmError("V-5", f"the engine of runtime plugin '{plugin}' failed {what}: "
                              f"{type(exc).__name__}: {exc}") from exc  # fmt: skip


def _load() -> list[float]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


class _Server:
    """One started engine: serves traces with their token ids, and records the load average around each."""

    def __init__(self, engine: ServingEngine, plugin: str) -> None:
        self.engine = engine
        self.plugin = plugin

    def serve(self, trace: Trace, seed: int, prefix: str) -> tuple[cmp.Side, list[EngineStep], dict[str, Any]]:
        f = self.engine.facts
        tokens = prompts(trace.requests, f.vocab_size, f.excluded_token_ids, seed)
        reqs = serve_requests(trace, tokens, prefix=prefix)
        start = _load()
        got = _engine_call(self.plugin, "while serving", lambda: self.engine.serve(reqs))
        load = {"start": start, "end": _load()}
        side = cmp.Side.served(got.requests, prefix)
        missing = [r.request_id for r in trace.requests if r.request_id not in side.requests]
        if missing:
            raise FpmError("V-5", f"the engine of runtime plugin '{self.plugin}' did not serve request {missing[0]} "
                                  f"({len(missing)} of {len(trace.requests)} missing)")  # fmt: skip
        return side, list(got.steps), load


def _served_steps(
    steps: Sequence[EngineStep], predicted: Sequence[float | None], bound: ContentionBound
) -> list[dict[str, Any]]:
    return [{"start_s": s.start, "wall_s": s.wall_time, "kind": cmp.step_kind(s), "predicted_s": p,
             "scheduled": s.scheduled.as_json(), "contention": None if s.contention is None else s.contention.as_json(),
             "contended": bound.contended(s.contention, s.wall_time)}
            for s, p in zip(steps, predicted, strict=True)]  # fmt: skip


def verify_campaign(
    host: Any, campaign_dir: str | os.PathLike[str], options: VerifyOptions, *, progress: Progress | None = None
) -> dict[str, Any]:
    """Serve, replay and compare (module docstring); the report, JSON-ready (``"schema": 1``).

    Raises :class:`FpmError` (V-1 … V-5, R-1, R-33, a JSON reader's rule) for
    what cannot be verified; a negative verdict is the report's ``verdict``.
    """
    from fpmcore.campaign.finalize import check_finalized
    from fpmcore.collect.run import engine_options
    from fpmcore.replay import config_from_profile, run_replay, runtime_pin
    from fpmcore.replay.config import profile_prefix_caching

    check_finalized(campaign_dir)  # a finalized campaign: its files unchanged (F-2)
    c = read_campaign(campaign_dir)
    driver = serving_driver(host, c.runtime)
    plugin = host.hooks.runtime(c.runtime).plugin
    rules = host.hooks.replay_rules(runtime_pin(c.profile, 0))
    cfg = config_from_profile(c.profile, 0, prefix_caching=profile_prefix_caching(c.profile, 0), table=c.table,
                              rules=rules)  # fmt: skip
    traces = run_traces(options, int(c.plan["engine"]["max_model_len"]), host.hooks.trace_formats())
    bound = ContentionBound()
    per_run = 2 if options.noise_floor else 1
    total = 1 + per_run * options.runs
    done = 0

    def step(what: str) -> None:
        nonlocal done
        if progress is not None:
            progress(done, total, what)
        done += 1

    predictions = []
    counts: set[int] = set()
    for k, trace in enumerate(traces):
        result = run_replay(cfg, trace)
        pred = cmp.Side.replayed(result.requests)
        if result.error is not None or len(pred.requests) != len(trace.requests):
            rejected = next((r for r in result.requests if r["status"] != "finished"), None)
            why = (result.error.message if result.error is not None
                   else f"request {rejected['request_id']} rejected: {rejected['reject_reason']}" if rejected
                   else "a request never finished")  # fmt: skip
            raise FpmError("V-4", f"the replay of run {k + 1}'s trace did not finish every request: {why}")
        predictions.append((pred, result.summary))
        counts |= step_token_counts(result.steps)
    shapes = shape_warmup_traces(counts, int(c.plan["engine"]["max_model_len"]))

    engine = _engine_call(plugin, "to start", lambda: driver.start(c.model_dir, engine_options(c.plan, dtype=c.dtype)))
    runs = []
    try:
        server = _Server(engine, plugin)
        from fpmcore.collect.run import deployment_differences

        differences = deployment_differences(engine.facts, c.plan)
        step("warm-up")
        if options.warmup_requests:
            server.serve(warmup_trace(traces[0], options.warmup_requests), options.seed - 1, "w:")
        for shape in shapes:
            server.serve(shape, options.seed - 1, "w:")
        for k, trace in enumerate(traces):
            seed = options.seed + k
            step(f"run {k + 1}")
            served, steps, load = server.serve(trace, seed, f"r{k + 1}:")
            pred, psummary = predictions[k]
            kinds, predicted_steps = cmp.step_errors(c.table, steps)
            contention = cmp.contention_summary(steps, bound)
            run: dict[str, Any] = {
                "run": k + 1, "seed": seed, "requests": len(trace.requests), "load_average": load,
                "contention": contention, "contended": contention["contended"],
                "served": {**served.summary(), "steps": len(steps), "busy_s": contention["served_seconds"]},
                "predicted": {**pred.summary(), "steps": psummary["steps"],
                              "extrapolated_steps": psummary["extrapolated_steps"]},
                "errors": cmp.compare(served, pred), "steps": kinds,
                "request_timings": [{"request_id": q.request_id, "prompt_len": q.prompt_len, "output_len": q.output_len,
                                     "served": served.requests[q.request_id].as_json(),
                                     "predicted": pred.requests[q.request_id].as_json()} for q in trace.requests],
                "served_steps": _served_steps(steps, predicted_steps, bound),
            }  # fmt: skip
            if options.noise_floor:
                step(f"run {k + 1} again")
                again, again_steps, again_load = server.serve(trace, seed, f"r{k + 1}b:")
                again_contention = cmp.contention_summary(again_steps, bound)
                run["noise_floor"] = cmp.compare(served, again)
                run["again"] = {"served": {**again.summary(), "steps": len(again_steps)},
                                "contention": again_contention, "load_average": again_load}  # fmt: skip
                run["contended"] = run["contended"] or again_contention["contended"]
            runs.append(run)
    finally:
        _engine_call(plugin, "to shut down", engine.close)
    if progress is not None:
        progress(total, total, "done")
    summary = cmp.summarize(runs)
    verdict, checks = cmp.verdict(runs, summary)
    return {
        "schema": 1, "command": "verify", "campaign": str(c.root), "model_dir": c.model_dir,
        "runtime": c.runtime, "plugin": plugin, "options": options.as_json(),
        "deployment_differences": differences, "warmed_step_token_counts": len(shapes),
        "bound": {"max_contended_time_fraction": cmp.MAX_CONTENDED_FRACTION, "step": bound.as_json()},
        "summary": summary, "verdict": verdict, "checks": checks, "runs": runs,
    }  # fmt: skip
