#!/usr/bin/env python3
"""``fpm replay --out`` on generated traces: wall time, peak RSS and file sizes (issue 12 §5, issue 13 §12).

The workload: the example profile ``examples/profiles/plain-llama8b-like.fpm-profile.json``
(256 sequences, 8,192 batched tokens, prefix caching as the profile records it)
with its latency table ``examples/fpm_tables/plain-llama8b-like.json``, and a
generated trace of N requests (seeded): prompts uniform in [64, 1024] tokens,
outputs uniform in [8, 128] tokens, Poisson arrivals at 60 requests/s, which
keeps about 100-200 requests running.  Each size runs ``fpm replay … --out DIR``
in its own process (``bench_replay.run_fpm``: that child's CPU and its own peak RSS).

    .venv/bin/python tools/bench_replay_out.py 1000 10000 100000 1000000 [--format jsonl.zst|jsonl.gz|parquet] [--plot]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

from bench_replay import run_fpm  # noqa: E402

PROFILE = ROOT / "examples" / "profiles" / "plain-llama8b-like.fpm-profile.json"
TABLE = ROOT / "examples" / "fpm_tables" / "plain-llama8b-like.json"
RATE = 60.0


def write_trace(path: Path, n: int, seed: int = 12) -> None:
    """N requests: prompts U[64, 1024], outputs U[8, 128], Poisson arrivals at RATE per second."""
    rng = random.Random(seed)
    t = 0.0
    with open(path, "w") as f:
        for i in range(n):
            t += rng.expovariate(RATE)
            f.write(
                json.dumps(
                    {
                        "request_id": f"r{i}",
                        "arrival_time": round(t, 6),
                        "prompt_len": rng.randint(64, 1024),
                        "output_len": rng.randint(8, 128),
                    }
                )
                + "\n"
            )


def measure(n: int, fmt: str, plot: bool, work: Path) -> dict:
    trace = work / f"trace-{n}.jsonl"
    if not trace.exists():
        write_trace(trace, n)
    out = work / f"out-{n}-{fmt}"
    shutil.rmtree(out, ignore_errors=True)
    args = ["replay", str(PROFILE), "--trace", str(trace), "--fpm-table", str(TABLE), "--out", str(out),
            "--out-format", fmt]  # fmt: skip
    if plot:
        args += ["--plot", str(work / f"plot-{n}.png")]
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as so, tempfile.TemporaryFile() as se:
        code, cpu, peak_mb = run_fpm(args, stdout=so, stderr=se)  # its own CPU and peak RSS
        wall = time.perf_counter() - t0
        if code != 0:
            se.seek(0)
            raise SystemExit(se.read().decode())
    summary = json.loads((out / "replay-summary.json").read_bytes())
    sizes = {p.name: p.stat().st_size for p in out.iterdir()}
    shutil.rmtree(out)
    return {"requests": n, "format": fmt, "steps": summary["steps"], "wall_s": round(wall, 2),
            "cpu_s": round(cpu, 2),
            "peak_rss_mb": round(peak_mb, 1),
            "sizes": sizes}  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sizes", nargs="+", type=int)
    ap.add_argument("--format", default="jsonl.zst", choices=("jsonl.zst", "jsonl.gz", "parquet"))
    ap.add_argument("--plot", action="store_true", help="also --plot")
    ap.add_argument("--work", help="folder for traces and outputs (default: a temporary folder)")
    args = ap.parse_args()
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="fpm-bench-out-"))
    work.mkdir(exist_ok=True)
    for n in args.sizes:
        print(json.dumps(measure(n, args.format, args.plot, work)), flush=True)
    if not args.work:
        shutil.rmtree(work)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    raise SystemExit(main())
