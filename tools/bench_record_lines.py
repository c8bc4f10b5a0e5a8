#!/usr/bin/env python3
"""CPU time of the records of ``fpm replay --out``, and the whole command's CPU and peak RSS.

The workload: ``tools/bench_replay.py``'s generated conversations (``write_conversations``,
N requests) on ``examples/profiles/plain-llama70b-tp8.fpm-profile.json`` with 256
sequences, 8,192 batched tokens and prefix caching on (or ``--caching off``).

In this process, three passes over the same replay in chunks of 1,024 steps (``fpm replay``'s
``CHUNK_STEPS``), timed with ``time.process_time``:

``engine``   the C engine alone, filling its step buffers (``fpm_replay_advance``);
``objects``  the record objects (``ReplayRun.advance``) serialised by ``dumps_output``;
``lines``    the JSON lines written by C (``ReplayRun.advance_lines``).

The records' own CPU is a pass's time less the time inside ``fpm_replay_advance``, per 10**4 steps; compressing the
lines (zstd level 1) is the same in both and timed apart.  ``--process`` also runs
``fpm replay … --out DIR`` in a child process (its CPU and its own peak RSS), with
``--src DIR`` another checkout's ``src`` first on the path (e.g. the code before a change)::

    .venv/bin/python tools/bench_record_lines.py 20000 100000 [--caching off] [--process [--src OLD/src]]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

from bench_replay import PLAIN70B, run_fpm, write_conversations  # noqa: E402

CHUNK = 1024


def _replay(trace: Path, caching: bool) -> tuple[object, object]:
    from fpmcore.documents.profile import load_profile
    from fpmcore.host.build import build_host
    from fpmcore.replay import config_from_profile, runtime_pin
    from fpmcore.traces.reading import read_trace

    host = build_host()
    profile = load_profile(str(PLAIN70B))
    rules = host.hooks.replay_rules(runtime_pin(profile, 0))
    cfg = config_from_profile(profile, 0, rules=rules, max_num_seqs=256, max_num_batched_tokens=8192,
                              prefix_caching=caching)  # fmt: skip
    trace_, _ = read_trace(host.hooks.trace_formats(), str(trace))
    return cfg, trace_


def passes(trace: Path, caching: bool) -> dict[str, float]:
    """CPU seconds of each pass, and of its records alone: the pass less the time inside ``fpm_replay_advance``."""
    from fpmcore.documents.jsonio import dumps_output
    from fpmcore.replay.cengine import CReplay
    from fpmcore.replay.engine import ReplayRun

    cfg, tr = _replay(trace, caching)
    inside = [0.0]
    advance = CReplay._run

    def timed(self: CReplay, max_steps: int, with_steps: bool) -> object:
        t = time.process_time()
        try:
            return advance(self, max_steps, with_steps)
        finally:
            inside[0] += time.process_time() - t

    CReplay._run = timed  # type: ignore[method-assign]
    out: dict[str, float] = {}
    run = ReplayRun(cfg, tr)  # type: ignore[arg-type]
    t0 = time.process_time()
    while not run._engine._run(CHUNK, True).ended:  # the engine alone
        pass
    out["engine"] = time.process_time() - t0
    inside[0] = 0.0
    run = ReplayRun(cfg, tr)  # type: ignore[arg-type]
    size = 0
    t0 = time.process_time()
    while not run.ended:
        c = run.advance(CHUNK)
        size += len(b"".join(map(dumps_output, c.steps))) + len(b"".join(map(dumps_output, c.requests)))
    out["objects"] = time.process_time() - t0 - inside[0]
    out["steps"] = run.steps_done
    inside[0] = 0.0
    run = ReplayRun(cfg, tr)  # type: ignore[arg-type]
    import zstandard

    z = zstandard.ZstdCompressor(level=1).compressobj()
    t0 = time.process_time()
    zt = 0.0
    size2 = 0
    while not run.ended:
        lines = run.advance_lines(CHUNK)
        size2 += len(lines.steps) + len(lines.requests)
        t1 = time.process_time()
        z.compress(lines.steps)
        zt += time.process_time() - t1
    out["lines"] = time.process_time() - t0 - zt - inside[0]
    out["zstd"] = zt
    CReplay._run = advance  # type: ignore[method-assign]
    assert size == size2, (size, size2)
    out["bytes"] = size
    return out


def process(trace: Path, caching: bool, src: str | None) -> tuple[float, float]:
    """``fpm replay … --out DIR`` in a child: CPU seconds (user + system) and its own peak RSS in MB
    (:func:`bench_replay.run_fpm`: this process, grown by the passes above, would otherwise be counted)."""
    with tempfile.TemporaryDirectory() as tmp:
        args = ["replay", str(PLAIN70B), "--trace", str(trace), "--max-num-seqs", "256",
                "--max-num-batched-tokens", "8192", "--prefix-caching", "on" if caching else "off",
                "--out", str(Path(tmp) / "out")]  # fmt: skip
        env = dict(os.environ)
        if src:
            env["PYTHONPATH"] = src
        code, cpu, peak_mb = run_fpm(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if code != 0:
            raise SystemExit(f"fpm {' '.join(args)} failed")
    return cpu, peak_mb


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sizes", type=int, nargs="+")
    ap.add_argument("--caching", choices=("on", "off"), default="on")
    ap.add_argument("--process", action="store_true")
    ap.add_argument("--src", help="run --process with this src folder first on PYTHONPATH")
    ap.add_argument("--no-passes", action="store_true")
    args = ap.parse_args()
    work = Path(tempfile.gettempdir()) / "fpm-bench-record-lines"
    work.mkdir(exist_ok=True)
    caching = args.caching == "on"
    for n in args.sizes:
        trace = work / f"conversations-{n}.jsonl"
        if not trace.exists():
            write_conversations(trace, n)
        if not args.no_passes:
            p = passes(trace, caching)
            per = 1e4 / p["steps"]
            print(f"{n:>9,} requests, {int(p['steps']):,} steps, {p['bytes'] / 1e6:,.1f} MB of records: engine "
                  f"{p['engine']:.2f} s; records per 10^4 steps: objects {p['objects'] * per:.3f} s, "
                  f"lines {p['lines'] * per:.3f} s; zstd {p['zstd'] * per:.3f} s")  # fmt: skip
        if args.process:
            cpu, rss = process(trace, caching, args.src)
            print(f"{n:>9,} requests: fpm replay --out: CPU {cpu:.2f} s, peak RSS {rss:,.0f} MB"
                  + (f" (src {args.src})" if args.src else ""))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
