#!/usr/bin/env python3
"""``make bench``: fpm replay against the reference's Rust replay on the anchor workload (issue 12 §4).

The anchor workload: N requests of 4,096 prompt and 512 output tokens arriving
at step 0; 48 full-attention and 16 sliding-window (1,024) layers as two cache
groups of 64-token blocks and 262,144-byte pages; 128,000 blocks;
``max_num_seqs`` 256, ``max_num_batched_tokens`` 8,192, ``max_model_len``
8,192.  For N = 2,000 and 20,000 this measures, best of three in one run:

* ``fpm replay``: :func:`fpmcore.replay.run_replay` (C engine; summary and
  request records, the step records not built), in ns per scheduled
  request-step (the sum over steps of the requests scheduled in the step);
* the reference's Rust replay (``aisimulate._runtime.run_replay_json`` of the
  ``aisimulate==0.13.0.dev202610200000000077`` wheel, installed by
  ``make bench-env`` in ``.venv-bench``) on the same workload
  (``tools/bench/aisim-state.spec.json`` with the anchor's groups), run in
  that interpreter;

and prints the ratio.  ``--peer-trace`` (``make bench``: the Mooncake FAST'25
conversation trace) adds the whole trace replayed by ``fpm replay`` on a plain
full-attention profile of block 16 and 62,560 usable blocks
(``examples/profiles/plain-llama70b-tp8.fpm-profile.json``), ``max_num_seqs``
256 and a budget of 8,192 tokens, prefix caching on and off, beside NVIDIA
Dynamo's mocker (``ai-dynamo-runtime==1.6.1``, installed by ``make
bench-env`` in ``.venv-mocker``: ``run_mocker_trace_replay`` offline
with the same pool and settings), each as whole-process CPU time of a fresh
process; the bench fails when the mocker's interpreter is missing or cannot
import it.  ``--scaling`` adds the scaling table: generated conversations
(:func:`write_conversations`) of 10**3 … 10**6 requests (10**7 with
``--scaling-max 7``), each replayed by ``fpm replay`` in its own process with
prefix caching on and off (the summary printed, no ``--json``), with its wall time, CPU time and peak RSS
(``--scaling-only``: the table alone; ``--scaling-min 7 --scaling-max 7``: the 10**7 row alone).
``--glm-only TRACE`` runs the GLM table alone (``--rounds`` rounds, default 9), with fpmcore imported from
``--src DIR`` (default this checkout's ``src``): run once per checkout, one after the other and more than
once, it compares two versions of the C engine on the same machine (each ``src`` with its extension built).

    .venv/bin/python tools/bench_replay.py [--rust-python .venv-bench/bin/python] [--scaling [--scaling-max 7]]
        [--peer-trace TRACE --mocker-python .venv-mocker/bin/python]
    .venv/bin/python tools/bench_replay.py --scaling-only [--scaling-min E] [--scaling-max 7]
    .venv/bin/python tools/bench_replay.py --glm-only TRACE [--rounds 15] [--src ../other/src]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "tools" / "bench" / "aisim-state.spec.json"
PAGE = 262_144
PLAIN70B = ROOT / "examples" / "profiles" / "plain-llama70b-tp8.fpm-profile.json"
#: Where fpmcore is imported from (``--src``).
SRC = ROOT / "src"
#: The peer's setting: the pool and scheduler of PLAIN70B, Mooncake's hash blocks of 512 tokens.
PEER = {"block_size": 16, "num_gpu_blocks": 62_560, "max_num_seqs": 256, "max_num_batched_tokens": 8192}


def anchor(n: int):
    """The anchor workload for ``fpm replay``: its configuration and trace."""
    sys.path.insert(0, str(SRC))
    from fpmcore.replay import make_config
    from fpmcore.replay.model import KIND_FULL, KIND_WINDOW, GroupSpec
    from fpmcore.replay.trace import Trace, TraceRequest

    cfg = make_config([GroupSpec("full", KIND_FULL, 64, PAGE), GroupSpec("swa", KIND_WINDOW, 64, PAGE, window=1024)],
                      128_000 * PAGE, max_num_batched_tokens=8192, max_num_seqs=256, max_model_len=8192,
                      fixed_step_seconds=1.0)  # fmt: skip
    trace = Trace(tuple(TraceRequest(f"r{i}", 4096, 512, arrival_step=0) for i in range(n)), "arrival_step")
    return cfg, trace


def scheduled_request_steps(cfg, trace) -> int:
    """The scheduled request-steps of a replay (the requests scheduled, summed over its steps), from its step records."""
    from fpmcore.replay import run_replay

    return len(run_replay(cfg, trace, backend="c").raw.steps.columns(keep=False).sched_req)


def request_steps(n: int) -> int:
    """Scheduled request-steps of the anchor workload with ``n`` requests."""
    return scheduled_request_steps(*anchor(n))


def best_of(fn, repeat: int) -> tuple[float, float]:
    """The best wall and CPU seconds of ``repeat`` calls (CPU time: the machine may be shared)."""
    wall = cpu = float("inf")
    for _ in range(repeat):
        t, c = time.perf_counter(), time.process_time()
        fn()
        wall, cpu = min(wall, time.perf_counter() - t), min(cpu, time.process_time() - c)
    return wall, cpu


def time_fpm(n: int, repeat: int = 5) -> tuple[float, float]:
    from fpmcore.replay import run_replay

    cfg, trace = anchor(n)

    def once() -> None:
        r = run_replay(cfg, trace, backend="c")
        assert r.summary["finished"] == n and r.error is None

    return best_of(once, repeat)


def rust_spec(n: int) -> str:
    """The reference's replay spec of the anchor workload (tools/bench/README of the shared bench notes)."""
    import aisimulate_core  # the reference's package, in the bench interpreter

    spec = json.loads(SPEC.read_text())
    rank = spec["spec"]["engine"]["rank"]
    for key in ("state_cache", "kv_cache_bytes_per_token", "num_gpu_blocks"):
        rank.pop(key, None)
    rank["kv_cache_groups"] = [
        {"name": "full", "kind": "attention", "num_layers": 48, "block_size_tokens": 64, "page_size_bytes": PAGE},
        {"name": "swa", "kind": "attention", "num_layers": 16, "block_size_tokens": 64, "page_size_bytes": PAGE,
         "sliding_window": 1024},
    ]  # fmt: skip
    rank["kv_cache_capacity_bytes"] = 4000 * 64 * 131072
    rank["timing_model"] = {"type": "fixed", "prefill_ms": 50.0, "decode_ms": 20.0}
    spec["traffic"].update(request_count=n, isl=4096, osl=512, concurrency=256)
    spec["spec"]["max_in_flight"] = 256
    systems = str(Path(aisimulate_core.__file__).parent / "systems")
    return json.dumps(spec).replace("AISIM_SYSTEMS", systems)


def time_rust(n: int, repeat: int = 5) -> tuple[float, float]:
    """Runs in the bench interpreter (``--rust N``)."""
    import aisimulate._runtime as runtime

    spec = rust_spec(n)

    def once() -> None:
        out = json.loads(runtime.run_replay_json(spec))
        assert out["completed_requests"] == n, out.get("completed_requests")

    return best_of(once, repeat)


GLM_PROFILE = ROOT / "examples" / "profiles" / "glm53flash-tp4.fpm-profile.json"
GLM_TABLE = ROOT / "examples" / "fpm_tables" / "glm53flash-tp4.json"


def c_advance_seconds(cfg: Any, reqs: Any, mode: int) -> float:
    """CPU seconds of the C engine alone on engine-form requests: ``fpm_replay_advance`` called until the replay
    ends, without step records (the requests marshalled and the replay opened before the clock starts)."""
    from fpmcore.replay.cengine import CReplay

    rp = CReplay(cfg, reqs, mode)
    c = time.process_time()
    while not rp._run(1 << 40, with_steps=False).ended:  # the engine's own advance calls, nothing unpacked
        pass
    return time.process_time() - c


def glm_table(trace: str, repeat: int = 9) -> None:
    """The whole Mooncake trace on the GLM-5.3-Flash TP4 example with its table, caching on and off: ns per
    scheduled request-step, in this process.

    Two times, each the best of ``repeat``: the C engine alone (``fpm_replay_advance`` until the replay ends,
    :func:`c_advance_seconds`: goal 1's C time), and the whole replay call by :class:`fpmcore.replay.ReplayRun`
    without step records (as ``fpm replay`` without ``--out`` runs it: the C engine and the Python that drives it
    by chunks and makes the completed requests' records).  The trace is read once (into the C reader's columns).
    The settings alternate, one run of each in turn, so that both bests come from the same spells of the
    machine's speed; even so the ratio of the bests moves with the machine, because caching on works on more
    memory (the block records and key map, about 0.6 MB, and the trace's origin pairs, several MB) and so
    depends more on how fast the machine serves it, and because each best may come from a different spell.  So
    the C engine's ratio is also given as the median over the rounds of each round's own ratio (caching on's C
    run over the caching off C run right after it, which share the machine's state; a round's two whole replay
    calls come after its two C runs).  The request-steps are counted from the step records of one more run.
    """
    sys.path.insert(0, str(SRC))
    from fpmcore.documents.profile import load_profile
    from fpmcore.replay import ReplayRun, config_from_profile, load_table
    from fpmcore.replay.engine import engine_requests
    from fpmcore.traces.mooncake import MOONCAKE
    from fpmcore.traces.reading import read_trace

    profile, table = load_profile(GLM_PROFILE), load_table(GLM_TABLE)
    tr, _provenance = read_trace([("fpmcore", MOONCAKE)], trace)
    n = len(tr.requests)
    print(f"\n{Path(trace).name} ({n:,} requests) on {GLM_PROFILE.name} with its table, best of {repeat} "
          f"alternating: CPU s and ns per request-step")  # fmt: skip
    print(f"{'prefix caching':>15} {'request-steps':>14} {'C engine':>18} {'replay call':>18}")
    cfgs = {caching: config_from_profile(profile, prefix_caching=caching, table=table) for caching in (True, False)}
    steps = {caching: scheduled_request_steps(cfg, tr) for caching, cfg in cfgs.items()}
    engine_form = {caching: engine_requests(cfg, tr) for caching, cfg in cfgs.items()}

    def once(cfg: Any) -> None:
        run = ReplayRun(cfg, tr, steps=False, backend="c")  # as fpm replay runs it without --out
        for _chunk in run:
            pass
        summary = run.summary()
        assert summary["finished"] + summary["rejected"] == n and run.error is None, summary

    c_best = dict.fromkeys(cfgs, float("inf"))
    call_best = dict.fromkeys(cfgs, float("inf"))
    round_ratios = []
    for _ in range(repeat):
        c_round = {}
        for caching, cfg in cfgs.items():  # the two C runs of a round back to back, then the two calls
            c_round[caching] = c_advance_seconds(cfg, *engine_form[caching])
            c_best[caching] = min(c_best[caching], c_round[caching])
        round_ratios.append(c_round[True] / steps[True] / (c_round[False] / steps[False]))
        for caching, cfg in cfgs.items():
            call_best[caching] = min(call_best[caching], best_of(lambda cfg=cfg: once(cfg), 1)[1])
    for caching in cfgs:
        rs = steps[caching]
        print(f"{'on' if caching else 'off':>15} {rs:>14,} {c_best[caching]:>7.3f} {c_best[caching] / rs * 1e9:>6.1f} ns"
              f" {call_best[caching]:>7.3f} {call_best[caching] / rs * 1e9:>6.1f} ns")  # fmt: skip
    ratio = {k: v[True] / steps[True] / (v[False] / steps[False]) for k, v in (("c", c_best), ("call", call_best))}
    print(f"{'on / off':>15} {'':>14} {ratio['c']:>14.2f}x {ratio['call']:>14.2f}x")
    print(f"{'on / off':>15} {'per round':>14} {statistics.median(round_ratios):>14.2f}x  (C engine: median of the "
          f"{repeat} rounds' ratios, {min(round_ratios):.2f}x ... {max(round_ratios):.2f}x)")  # fmt: skip


def run_mocker(trace: str, caching: bool) -> None:
    """The Dynamo mocker on ``trace`` (runs in the mocker's interpreter, ``--mocker``)."""
    from dynamo._core import run_mocker_trace_replay

    engine = {**PEER, "enable_prefix_caching": caching, "enable_chunked_prefill": True, "speedup_ratio": 1.0,
              "preemption_mode": "lifo"}  # fmt: skip
    res = run_mocker_trace_replay([trace], extra_engine_args={"engine": engine}, replay_mode="offline",
                                  trace_format="mooncake", trace_block_size=512)  # fmt: skip
    print(json.dumps({k: v for k, v in dict(res.summary).items() if isinstance(v, (int, float, str))}))


def child_cpu(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    """Whole-process CPU (user + system) and wall seconds of a fresh process; it must succeed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t
    if proc.returncode != 0:
        raise SystemExit(f"bench: {' '.join(argv[:3])} ... failed ({proc.returncode}): {proc.stderr.strip()[-600:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, wall


def peer_table(trace: str, mocker_python: str) -> int:
    """The whole trace: fpm replay and the Dynamo mocker, caching on and off, whole-process CPU (one run)."""
    import gzip
    import shutil
    import tempfile

    probe = subprocess.run([mocker_python, "-c", "import dynamo._core"], capture_output=True, text=True) \
        if Path(mocker_python).exists() else None  # fmt: skip
    if probe is None or probe.returncode != 0:
        why = "does not exist" if probe is None else probe.stderr.strip().splitlines()[-1]
        print(f"bench: the Dynamo mocker peer is missing: {mocker_python} {why}; run make bench-env",
              file=sys.stderr)  # fmt: skip
        return 2
    if not Path(trace).is_file():
        print(f"bench: the peer trace {trace} does not exist (PEER_TRACE=...)", file=sys.stderr)
        return 2
    fpm = str(Path(sys.executable).parent / "fpm")
    with tempfile.TemporaryDirectory() as tmp:
        plain = Path(tmp) / "trace.jsonl"  # both read it uncompressed
        with gzip.open(trace, "rb") if trace.endswith(".gz") else open(trace, "rb") as src, plain.open("wb") as dst:
            shutil.copyfileobj(src, dst)
        n = sum(1 for _ in plain.open())
        print(f"\n{Path(trace).name} ({n:,} requests), whole trace: block 16, 62,560 blocks, max_num_seqs 256, "
              "budget 8,192; whole-process CPU s (wall s), one run each")  # fmt: skip
        print(f"{'prefix caching':>15} {'fpm replay':>16} {'Dynamo mocker':>16} {'mocker / fpm':>13}")
        for caching in (True, False):
            on = "on" if caching else "off"
            fpm_cpu, fpm_wall = child_cpu([fpm, "replay", str(PLAIN70B), "--trace", str(plain), "--max-num-seqs", "256",
                                           "--max-num-batched-tokens", "8192", "--prefix-caching", on, "--json"])  # fmt: skip
            m_cpu, m_wall = child_cpu([mocker_python, __file__, "--mocker", on, "--peer-trace", str(plain)],
                                      env={**os.environ, "PYTHONPATH": ""})  # fmt: skip
            print(f"{on:>15} {fpm_cpu:>7.2f} ({fpm_wall:.2f}) {m_cpu:>7.2f} ({m_wall:.2f}) {m_cpu / fpm_cpu:>12.1f}x")
    return 0


#: Arrivals of the scaling table's generated conversations, per second (one second per step without a table).
SCALING_RATE = 1.0
#: The scaling table's sizes: 10**3 ... 10**6, and 10**7 with --scaling-max 7.
SCALING_SIZES = (1_000, 10_000, 100_000, 1_000_000, 10_000_000)


def write_conversations(path: Path, n: int, seed: int = 25) -> None:
    """``n`` requests of generated conversations in the Mooncake format (seeded).

    Poisson arrivals at :data:`SCALING_RATE` per second; each request opens a
    conversation (40 %) or continues one of the last 64 open ones: a turn repeats
    the conversation's prompt and adds 1-3 content blocks of 512 tokens (the last
    one partial), every conversation starts with block 0 (a system prompt shared
    by all) and ends past 16 blocks; outputs of 16-512 tokens.  Prefix caching
    finds the earlier turns' blocks.
    """
    rng = random.Random(seed)
    t, next_id = 0.0, 1
    open_: list[list[int]] = []
    with open(path, "w") as f:
        for _ in range(n):
            t += rng.expovariate(SCALING_RATE)
            if open_ and rng.random() < 0.6:
                k = rng.randrange(len(open_))
            else:
                open_.append([0])
                if len(open_) > 64:
                    open_.pop(0)
                k = len(open_) - 1
            ids = open_[k]
            add = rng.randint(1, 3)
            ids.extend(range(next_id, next_id + add))
            next_id += add
            prompt = (len(ids) - 1) * 512 + rng.randint(1, 512)
            f.write(f'{{"timestamp": {int(t * 1000)}, "input_length": {prompt}, '
                    f'"output_length": {rng.randint(16, 512)}, "hash_ids": {ids}}}\n')  # fmt: skip
            if len(ids) > 16:
                open_.pop(k)


#: A row of the summary table ``fpm replay`` prints: its quantity and value.
_SUMMARY_ROW = re.compile(r"^\W*([a-z_]+)\s*\W\s*([0-9,.]+)\s*\W*$")


#: ``fpm`` with the arguments after ``-c``'s, as the ``fpm`` script runs it, that at its very end (its first
#: exit handler, so the last to run) writes its own peak resident memory to the file ``$FPM_BENCH_PEAK_FILE``:
#: ``VmHWM`` of /proc/self/status, the high-water mark of this program's own memory.  A child's ``ru_maxrss``
#: (``wait4``) is not that: Linux keeps across ``exec`` the peak of the memory the child had before it, which is
#: its parent's when it is forked, so that a child of a bench grown to gigabytes (the anchor workload or a
#: replay measured in process) would report the bench's own peak.
_PEAK_REPORTING_FPM = """
import atexit, os, sys
def _peak():
    with open("/proc/self/status") as f:
        kb = next(line.split()[1] for line in f if line.startswith("VmHWM:"))
    with open(os.environ["FPM_BENCH_PEAK_FILE"], "w") as f:
        f.write(kb)
atexit.register(_peak)
sys.argv[0] = "fpm"
from fpmcore.cli import main
sys.exit(main())
"""


def run_fpm(args: list[str], *, env: dict[str, str] | None = None, stdout: Any = None,
            stderr: Any = None) -> tuple[int, float, float]:  # fmt: skip
    """``fpm *args`` in a fresh process of this interpreter (``env``: its environment, default this one's; its
    output to ``stdout`` and ``stderr``): its exit code, its CPU seconds (user + system) and its own peak
    resident memory in MB (:data:`_PEAK_REPORTING_FPM`; ``nan`` when it ended before writing it)."""
    with tempfile.TemporaryDirectory() as tmp:
        peak_file = Path(tmp) / "peak-kb"
        env = {**(os.environ if env is None else env), "FPM_BENCH_PEAK_FILE": str(peak_file)}
        proc = subprocess.Popen([sys.executable, "-c", _PEAK_REPORTING_FPM, *args], stdout=stdout, stderr=stderr,
                                env=env)  # fmt: skip
        _pid, status, usage = os.wait4(proc.pid, 0)  # this child's own CPU
        peak_mb = int(peak_file.read_text()) / 1024 if peak_file.exists() else float("nan")
    return os.waitstatus_to_exitcode(status), usage.ru_utime + usage.ru_stime, peak_mb


def scaling_point(trace: Path, caching: bool) -> dict:
    """``fpm replay`` of a generated trace on PLAIN70B in its own process: wall, CPU (user + system) and peak RSS.

    The replay prints its summary (no ``--json``: the document's request records, a dict each, would be most of
    the memory, some 19 GB at 10**7 requests); the steps and prefix-hit tokens are read from its table.  The peak
    resident memory is the process's own (:func:`run_fpm`)."""
    args = ["replay", str(PLAIN70B), "--trace", str(trace),
            "--max-num-seqs", "256", "--max-num-batched-tokens", "8192", "--prefix-caching", "on" if caching else "off"]  # fmt: skip
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as so, tempfile.TemporaryFile() as se:
        env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
        code, cpu, peak_mb = run_fpm(args, env=env, stdout=so, stderr=se)
        wall = time.perf_counter() - t0
        if code != 0:
            se.seek(0)
            raise SystemExit(f"bench: fpm {' '.join(args)} failed: {se.read().decode()[-600:]}")
        so.seek(0)
        rows = dict(m.groups() for m in map(_SUMMARY_ROW.match, so.read().decode().splitlines()) if m)
    return {"steps": int(rows["steps"].replace(",", "")), "hit_tokens": int(rows["prefix_hit_tokens"].replace(",", "")),
            "seconds": wall, "cpu_seconds": cpu, "peak_rss_mb": peak_mb}  # fmt: skip


def scaling_table(max_exp: int, min_exp: int = 3) -> None:
    """The scaling table: generated conversations of 10**min_exp ... 10**max_exp requests, prefix caching on and
    off.  Each trace is written line by line (:func:`write_conversations` holds only the open conversations) and
    removed after its rows."""
    print(f"\nscaling: generated conversations (Mooncake format, {SCALING_RATE:g} request/s, shared prefixes) on "
          f"{PLAIN70B.name}, max_num_seqs 256, budget 8,192; whole-process fpm replay (summary), one run each")  # fmt: skip
    print(f"{'requests':>10} {'caching':>8} {'steps':>11} {'hit tokens':>13} {'wall s':>9} {'CPU s':>9} "
          f"{'peak RSS MB':>12}")  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        for n in (n for n in SCALING_SIZES if 10**min_exp <= n <= 10**max_exp):
            trace = Path(tmp) / f"conversations-{n}.jsonl"
            write_conversations(trace, n)
            for caching in (True, False):
                p = scaling_point(trace, caching)
                print(f"{n:>10,} {'on' if caching else 'off':>8} {p['steps']:>11,} {p['hit_tokens']:>13,} "
                      f"{p['seconds']:>9.2f} {p['cpu_seconds']:>9.2f} {p['peak_rss_mb']:>12.0f}", flush=True)  # fmt: skip
            trace.unlink()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--rust-python",
        default=str(ROOT / ".venv-bench" / "bin" / "python"),
        help="the interpreter with the reference's wheel (make bench-env)",
    )
    ap.add_argument("--sizes", default="2000,20000")
    ap.add_argument("--scaling", action="store_true", help="also the scaling table: 10**3 ... 10**6 requests")
    ap.add_argument("--scaling-max", type=int, default=6, choices=range(3, 8), metavar="E",
                    help="the scaling table's largest size, 10**E requests (3 ... 7; default 6)")  # fmt: skip
    ap.add_argument("--scaling-min", type=int, default=3, choices=range(3, 8), metavar="E",
                    help="the scaling table's smallest size, 10**E requests (3 ... 7; default 3)")  # fmt: skip
    ap.add_argument("--scaling-only", action="store_true", help="the scaling table alone (no peer runs)")
    ap.add_argument("--rust", type=int, metavar="N", help=argparse.SUPPRESS)
    ap.add_argument("--peer-trace", metavar="TRACE", help="a Mooncake trace (.jsonl or .jsonl.gz) for the mocker table")
    ap.add_argument(
        "--mocker-python",
        default=str(ROOT / ".venv-mocker" / "bin" / "python"),
        help="the interpreter with ai-dynamo-runtime (make bench-env)",
    )
    ap.add_argument("--mocker", choices=("on", "off"), help=argparse.SUPPRESS)
    ap.add_argument("--glm-only", metavar="TRACE", help="the GLM table alone, on this Mooncake trace")
    ap.add_argument("--rounds", type=int, default=9, help="--glm-only: rounds (default 9)")
    ap.add_argument("--src", type=Path, default=ROOT / "src", help="--glm-only: import fpmcore from this src folder")
    args = ap.parse_args()
    if args.glm_only:
        global SRC  # the one setting of the import path, before fpmcore is imported
        SRC = args.src.resolve()
        glm_table(args.glm_only, args.rounds)
        import fpmcore

        print(f"fpmcore from {Path(fpmcore.__file__).parent}")
        return 0
    if args.mocker is not None:  # inside the mocker's interpreter
        run_mocker(args.peer_trace, args.mocker == "on")
        return 0
    if args.rust is not None:  # inside the bench interpreter
        wall, cpu = time_rust(args.rust)
        print(json.dumps({"seconds": wall, "cpu_seconds": cpu}))
        return 0
    if args.scaling_only:
        scaling_table(args.scaling_max, args.scaling_min)
        return 0
    if not Path(args.rust_python).exists():
        print(f"bench: {args.rust_python} does not exist; run make bench-env", file=sys.stderr)
        return 2
    print(
        "anchor workload: N x 4096/512 tokens, 48 full + 16 sliding-window(1024) layers, block 64, "
        "128,000 blocks, max_num_seqs 256; best of 5, CPU time (wall time)"
    )
    print(
        f"{'N':>8} {'request-steps':>14} {'fpm replay s':>16} {'ns/req-step':>14} {'Rust replay s':>16} "
        f"{'Rust ns/req-step':>17} {'ratio':>7}"
    )
    for n in (int(x) for x in args.sizes.split(",")):
        rs = request_steps(n)
        wall, cpu = time_fpm(n)
        proc = subprocess.run([args.rust_python, __file__, "--rust", str(n)], capture_output=True, text=True,
                              check=True, env={**os.environ, "PYTHONPATH": ""})  # fmt: skip
        rust = json.loads(proc.stdout.strip().splitlines()[-1])
        print(
            f"{n:>8,} {rs:>14,} {cpu:>7.4f} ({wall:.4f}) {cpu / rs * 1e9:>6.1f} ({wall / rs * 1e9:.1f}) "
            f"{rust['cpu_seconds']:>7.3f} ({rust['seconds']:.3f}) {rust['cpu_seconds'] / rs * 1e9:>9.1f} "
            f"{rust['cpu_seconds'] / cpu:>6.1f}x"
        )
    if args.scaling:
        scaling_table(args.scaling_max, args.scaling_min)
    if args.peer_trace:
        glm_table(args.peer_trace)
        return peer_table(args.peer_trace, args.mocker_python)
    return 0


if __name__ == "__main__":
    sys.exit(main())
