#!/usr/bin/env python3
"""Predictions against the live engine: a trace served by vLLM 0.32.0, and the same trace replayed by fpmcore.

Runs in the live env (``tox -e vllm032-live``'s interpreter)::

    python tools/predict_vs_engine.py CAMPAIGN --rate 2 --requests 40 --runs 3 [--seed 1]
        [--prompt 64:512] [--output 8:64] [--label light] [-o RESULT.json]

``CAMPAIGN`` is a folder of ``fpm onboard`` (``profile.json``, ``plan.json``,
``table.json``, ``onboard.json`` naming the model folder).  For each run:

1. a trace of ``--requests`` requests with Poisson arrivals at ``--rate``
   requests per second (exponential gaps), prompt and output lengths uniform
   in the given ranges, no shared prefixes (seeded: run ``k`` uses seed
   ``seed + k``), written as an 06 R-32 trace with ``arrival_time``;
2. **serve** it on the live engine in this process, open loop in wall-clock
   time: the engine is started once with the deployment of the plan (the
   same settings ``fpm collect`` measured with), each request is added with
   real token ids when its arrival time has passed, ``LLMEngine.step()`` runs
   whenever a request is unfinished, and the loop sleeps until the next
   arrival when none is; each request's first-token and finish times are the
   wall-clock ends of the steps that returned them, taken from its arrival
   time (TTFT, E2E; TPOT = (finish − first token) / (tokens − 1)); the prefix
   cache is reset between runs, and a few requests are served first, unmeasured;
3. **replay** it with fpmcore (``config_from_profile`` of the campaign's
   profile with its prefix caching and vLLM 0.32.0's replay rules, the
   published table, the C engine);
4. **compare**: per request the relative errors ``|predicted − served| /
   served`` of TTFT, TPOT and E2E (their median and P90), and the signed
   relative errors of the makespan (last finish − first arrival) and the
   output throughput.

With ``--noise-floor`` every trace is served twice and the second serving is
compared with the first like the replay is: the error the engine makes in
predicting itself on this machine, the floor no model can go below.

Per run it also compares every served step with the latency model at the
step's FPM coordinates (read from the scheduler's output): per step kind —
prefill only, decode only, mixed — the count, the served and predicted sums
and the median signed error, which tells a table knot, the mixed-step rule
and time outside the steps apart; and it records the load average
(``os.getloadavg``), since other work on the machine slows the engine.

Printed per run; ``-o`` writes every run's numbers as JSON (the served steps
included); ``tools/prediction_table.py`` makes the README's table of them.
The medians over runs are reported with their spread (min … max).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def poisson_trace(seed: int, n: int, rate: float, prompt: tuple[int, int], output: tuple[int, int]) -> list[dict]:
    """``n`` requests with exponential inter-arrival gaps of mean ``1 / rate`` (06 R-32 lines)."""
    rng = random.Random(seed)
    t, lines = 0.0, []
    for i in range(n):
        if i:
            t += rng.expovariate(rate)
        lines.append(
            {
                "request_id": f"q{i}",
                "arrival_time": round(t, 6),
                "prompt_len": rng.randint(*prompt),
                "output_len": rng.randint(*output),
            }
        )
    return lines


def prompts_for(trace: list[dict], vocab: int, excluded: set[int], seed: int) -> dict[str, list[int]]:
    allowed = [t for t in range(vocab) if t not in excluded]
    out = {}
    for r in trace:
        rng = random.Random(f"{seed}:{r['request_id']}")
        out[r["request_id"]] = [allowed[rng.randrange(len(allowed))] for _ in range(r["prompt_len"])]
    return out


def serve(live: Any, trace: list[dict], prompts: dict[str, list[int]]) -> dict[str, Any]:
    """Open-loop serving in wall-clock time (module docstring, step 2); every step's FPM coordinates and wall time
    are kept (``step_log``) for :func:`step_errors`."""
    from fpmcore_vllm032.measure import workload

    engine = live.llm.llm_engine
    sched = live.scheduler
    original = sched.schedule
    last: list[Any] = []

    def schedule(*args: Any, **kwargs: Any) -> Any:  # the step's FPM coordinates, read from the scheduler's output
        out = original(*args, **kwargs)
        computed = {nr.req_id: nr.num_computed_tokens for nr in out.scheduled_new_reqs}
        cr = out.scheduled_cached_reqs
        computed.update(zip(cr.req_ids, cr.num_computed_tokens, strict=False))
        last.append(workload([(n, computed[rid], sched.requests[rid].num_prompt_tokens)
                              for rid, n in out.num_scheduled_tokens.items()]))  # fmt: skip
        return out

    sched.schedule = schedule
    try:
        return _serve(engine, trace, prompts, last)
    finally:
        sched.schedule = original


def _serve(engine: Any, trace: list[dict], prompts: dict[str, list[int]], last: list[Any]) -> dict[str, Any]:
    from vllm import SamplingParams

    pending = sorted(trace, key=lambda r: r["arrival_time"])
    arrival = {r["request_id"]: r["arrival_time"] for r in trace}
    first: dict[str, float] = {}
    finish: dict[str, float] = {}
    tokens: dict[str, int] = {}
    steps = busy = 0.0
    step_log: list[list[float]] = []  # per step: prefill requests, tokens, kv tokens, decode requests, kv, wall s
    t0 = time.monotonic()
    k = 0
    while len(finish) < len(trace):
        now = time.monotonic() - t0
        while k < len(pending) and pending[k]["arrival_time"] <= now:
            r = pending[k]
            engine.add_request(
                r["request_id"],
                {"prompt_token_ids": prompts[r["request_id"]]},
                SamplingParams(max_tokens=r["output_len"], ignore_eos=True, temperature=0.0),
            )
            k += 1
        if not engine.has_unfinished_requests():
            if k < len(pending):
                time.sleep(max(0.0, pending[k]["arrival_time"] - (time.monotonic() - t0)))
            continue
        last.clear()
        s0 = time.monotonic()
        outs = engine.step()
        s1 = time.monotonic()
        end = s1 - t0
        steps += 1
        busy += s1 - s0
        if last and (last[0].num_prefill_requests or last[0].num_decode_requests):
            w = last[0]
            step_log.append([w.num_prefill_requests, w.sum_prefill_tokens, w.sum_prefill_kv_tokens,
                             w.num_decode_requests, w.sum_decode_kv_tokens, s1 - s0])  # fmt: skip
        for o in outs:
            rid = o.request_id
            n = len(o.outputs[0].token_ids) if o.outputs else 0
            if n and rid not in first:
                first[rid] = end
            if o.finished:
                finish[rid] = end
                tokens[rid] = n
    requests = {}
    for rid, a in arrival.items():
        n = tokens[rid]
        requests[rid] = {
            "ttft_s": first[rid] - a,
            "e2e_s": finish[rid] - a,
            "tpot_s": (finish[rid] - first[rid]) / (n - 1) if n > 1 else None,
            "output_tokens": n,
        }
    makespan = max(finish.values()) - min(arrival.values())
    return {
        "requests": requests,
        "makespan_s": makespan,
        "steps": steps,
        "busy_s": busy,
        "output_tokens_per_s": sum(tokens.values()) / makespan,
        "step_log": step_log,
    }


def replay(campaign: Path, trace: list[dict]) -> dict[str, Any]:
    from fpmcore.profile import load_profile
    from fpmcore.replay import config_from_profile, load_table, run_replay
    from fpmcore.replay.trace import parse_trace_lines
    from fpmcore_vllm032.envelope import REPLAY_RULES

    profile = load_profile(campaign / "profile.json")
    caching = bool(profile.deployments[0].resources.runtime_memory.enable_prefix_caching)
    cfg = config_from_profile(
        profile, 0, prefix_caching=caching, table=load_table(campaign / "table.json"), rules=REPLAY_RULES
    )
    result = run_replay(cfg, parse_trace_lines([json.dumps(r) for r in trace]))
    if result.error is not None:
        raise RuntimeError(f"the replay stopped: {result.error}")
    reqs = {r["request_id"]: r for r in result.requests}
    return {
        "requests": reqs,
        "makespan_s": result.summary["makespan_s"],
        "output_tokens_per_s": result.summary["output_tokens_per_s"],
        "steps": result.summary["steps"],
        "extrapolated_steps": result.summary["extrapolated_steps"],
    }


def step_errors(campaign: Path, step_log: list[list[float]]) -> dict[str, Any]:
    """The latency model against every served step: per kind (prefill only, decode only, mixed), the count, the
    median signed relative error of the predicted step time and the sums of served and predicted step times."""
    from fpmcore.replay.latency import step_time
    from fpmcore.replay.table import load_table

    table = load_table(campaign / "table.json")
    kinds: dict[str, dict[str, Any]] = {}
    for npre, pt, pkv, ndec, dkv, wall in step_log:
        kind = "mixed" if npre and ndec else "prefill" if npre else "decode"
        got = step_time(table, int(npre), int(pt), int(pkv), int(ndec), int(dkv))
        assert isinstance(got, tuple)
        k = kinds.setdefault(kind, {"n": 0, "served_s": 0.0, "predicted_s": 0.0, "errors": []})
        k["n"] += 1
        k["served_s"] += wall
        k["predicted_s"] += got[0]
        k["errors"].append((got[0] - wall) / wall)
    for k in kinds.values():
        errs = k.pop("errors")
        k["median_error"] = statistics.median(errs)
    return kinds


def load_average() -> list[float]:
    """The machine's 1, 5 and 15 minute load averages (``uptime``): other work competes for the two cores."""
    import os

    return [round(x, 2) for x in os.getloadavg()]


def quantile(values: list[float], q: float) -> float:
    """Nearest rank (06 R-35): ``sorted[ceil(q n) − 1]``."""
    s = sorted(values)
    return s[max(0, math.ceil(q * len(s)) - 1)]


def compare(served: dict[str, Any], predicted: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for metric in ("ttft_s", "tpot_s", "e2e_s"):
        errs = []
        for rid, m in served["requests"].items():
            p = predicted["requests"][rid][metric]
            if m[metric] is None or p is None or m[metric] <= 0:
                continue
            errs.append(abs(p - m[metric]) / m[metric])
        out[metric] = {"median": statistics.median(errs), "p90": quantile(errs, 0.9), "n": len(errs)}
    for key in ("makespan_s", "output_tokens_per_s"):
        out[key] = (predicted[key] - served[key]) / served[key]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="predict_vs_engine.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("campaign", type=Path)
    ap.add_argument("--rate", type=float, required=True, help="arrivals per second (Poisson)")
    ap.add_argument("--requests", type=int, default=40)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--prompt", default="64:512", help="prompt length range LO:HI (uniform)")
    ap.add_argument("--output", default="8:64", help="output length range LO:HI (uniform)")
    ap.add_argument("--label", default="", help="a name for this load in the report")
    ap.add_argument("--warmup-requests", type=int, default=8, help="requests served first and not measured")
    ap.add_argument(
        "--noise-floor",
        action="store_true",
        help="serve every trace twice and report how far the engine is from itself",
    )
    ap.add_argument("-o", "--out", type=Path, help="write every run's numbers as JSON")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT / "src"))
    from fpmcore.cli import build_host
    from fpmcore.collect.run import engine_options
    from fpmcore.jsonio import load_path

    plan = load_path(args.campaign / "plan.json")
    manifest = load_path(args.campaign / "onboard.json")
    model_dir = manifest["options"]["model_dir"]
    dtype = manifest["options"]["probe"]["dtype"]
    prompt = tuple(int(x) for x in args.prompt.split(":"))
    output = tuple(int(x) for x in args.output.split(":"))
    host = build_host()
    driver = host.hooks.runtime(plan["engine"]["runtime"]).measurement_driver()
    engine = driver.start(model_dir, engine_options(plan, dtype=dtype))
    runs = []
    try:
        live = engine.live
        vocab, excluded = engine.facts.vocab_size, set(engine.facts.excluded_token_ids)
        warm = poisson_trace(args.seed - 1, args.warmup_requests, args.rate, prompt, output)
        serve(live, warm, prompts_for(warm, vocab, excluded, -1))  # the engine's first forwards, not measured
        for k in range(args.runs):
            seed = args.seed + k
            trace = poisson_trace(seed, args.requests, args.rate, prompt, output)
            live.llm.reset_prefix_cache()
            served = serve(live, trace, prompts_for(trace, vocab, excluded, seed))
            predicted = replay(args.campaign, trace)
            errors = compare(served, predicted)
            errors["steps"] = step_errors(args.campaign, served["step_log"])
            run = {"seed": seed, "uptime": load_average(), "served": served, "predicted": predicted,
                   "errors": errors}  # fmt: skip
            if args.noise_floor:  # the same trace served again: how far the engine is from itself
                live.llm.reset_prefix_cache()
                again = serve(live, trace, prompts_for(trace, vocab, excluded, seed))
                run["again"] = again
                run["noise_floor"] = compare(served, again)
            runs.append(run)
            e = errors
            print(f"{args.label} run {k + 1}: TTFT median {e['ttft_s']['median']:.1%} p90 {e['ttft_s']['p90']:.1%} | "
                  f"TPOT median {e['tpot_s']['median']:.1%} p90 {e['tpot_s']['p90']:.1%} | E2E median "
                  f"{e['e2e_s']['median']:.1%} p90 {e['e2e_s']['p90']:.1%} | makespan {e['makespan_s']:+.1%} | "
                  f"throughput {e['output_tokens_per_s']:+.1%} | served makespan {served['makespan_s']:.2f} s, "
                  f"{served['steps']:.0f} steps; replay {predicted['steps']} steps; load {run['uptime']}",
                  file=sys.stderr, flush=True)  # fmt: skip
            for kind, st in sorted(e["steps"].items()):
                print(f"{args.label} run {k + 1} {kind} steps: {st['n']}, served {st['served_s']:.2f} s, "
                      f"predicted {st['predicted_s']:.2f} s, median step error {st['median_error']:+.1%}",
                      file=sys.stderr, flush=True)  # fmt: skip
            if args.noise_floor:
                f = run["noise_floor"]
                print(
                    f"{args.label} run {k + 1} served again: TTFT median {f['ttft_s']['median']:.1%} | TPOT median "
                    f"{f['tpot_s']['median']:.1%} | E2E median {f['e2e_s']['median']:.1%} | makespan "
                    f"{f['makespan_s']:+.1%}",
                    file=sys.stderr,
                    flush=True,
                )
    finally:
        engine.close()
    summary: dict[str, Any] = {}
    for metric in ("ttft_s", "tpot_s", "e2e_s"):
        for stat in ("median", "p90"):
            vals = [r["errors"][metric][stat] for r in runs]
            summary[f"{metric}_{stat}"] = {"median": statistics.median(vals), "min": min(vals), "max": max(vals)}
    for key in ("makespan_s", "output_tokens_per_s"):
        vals = [r["errors"][key] for r in runs]
        summary[key] = {"median": statistics.median(vals), "min": min(vals), "max": max(vals)}
    if args.noise_floor:
        for metric in ("ttft_s", "tpot_s", "e2e_s"):
            vals = [r["noise_floor"][metric]["median"] for r in runs]
            summary[f"noise_floor_{metric}_median"] = {
                "median": statistics.median(vals),
                "min": min(vals),
                "max": max(vals),
            }
        vals = [r["noise_floor"]["makespan_s"] for r in runs]
        summary["noise_floor_makespan_s"] = {"median": statistics.median(vals), "min": min(vals), "max": max(vals)}
    doc = {
        "campaign": str(args.campaign),
        "label": args.label,
        "rate": args.rate,
        "requests": args.requests,
        "prompt": prompt,
        "output": output,
        "summary": summary,
        "runs": runs,
    }
    if args.out:
        args.out.write_text(json.dumps(doc, indent=1) + "\n")
    print(json.dumps({"label": args.label, "summary": summary}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
