#!/usr/bin/env python3
"""Digests of ``fpm replay`` outputs: the ``--json`` documents and the ``--out`` record files (decompressed).

Runs every example profile × example trace (with and without the profile's
example latency table, prefix caching on and off, a few scheduler settings
that reject or stop), ``--json`` and ``--out DIR --out-format jsonl.gz``,
and the Mooncake conversation trace (its first 3,000 requests with
``--out``, in both record formats; the whole trace with ``--json``).  Each
output is reduced to the SHA-256 of its bytes (record files decompressed),
so that two builds can be compared::

    .venv/bin/python tools/record_digests.py --write before.json --src OLD/src   # e.g. git archive of the base
    .venv/bin/python tools/record_digests.py --write after.json
    .venv/bin/python tools/record_digests.py --compare before.json after.json
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
MOONCAKE = Path(os.environ.get("FPM_MOONCAKE_TRACE", "/work/shared/traces/mooncake-conversation.jsonl.gz"))
#: Profile stem -> its example latency table.
TABLES = {"plain-llama8b-like": "plain-llama8b-like.json", "glm53flash-tp4": "glm53flash-tp4.json"}
#: Extra settings run on every example trace besides the defaults: rejections and a stopped replay.
#: Another checkout's ``src`` to run first on the path (``--src``: the code before a change).
SRC = ""
VARIANTS: tuple[tuple[str, ...], ...] = ((), ("--max-num-queued-reqs", "6"), ("--max-steps", "40"))


def _cases() -> list[tuple[str, list[str], bool]]:
    """(name, arguments after ``fpm replay``, whether the run writes ``--out``) of every case."""
    cases: list[tuple[str, list[str], bool]] = []
    traces = sorted(EXAMPLES.glob("traces/*.jsonl")) + sorted(EXAMPLES.glob("traces/public/*.jsonl"))
    for profile in sorted(EXAMPLES.glob("profiles/*.fpm-profile.json")):
        stem = profile.name.removesuffix(".fpm-profile.json")
        tables = [None] + ([EXAMPLES / "fpm_tables" / TABLES[stem]] if stem in TABLES else [])
        for trace in traces:
            for table in tables:
                for caching in ("on", "off"):
                    for variant in VARIANTS:
                        args = [str(profile), "--trace", str(trace), "--prefix-caching", caching, *variant]
                        if table is not None:
                            args += ["--fpm-table", str(table)]
                        name = f"{stem}|{trace.name}|{table.name if table else '-'}|{caching}|{' '.join(variant)}"
                        cases.append((name + "|json", [*args, "--json"], False))
                        cases.append((name + "|out", args, True))
                        if table is not None and stem == "plain-llama8b-like":  # both outputs of one run
                            cases.append((name + "|out+json", [*args, "--json"], True))
    if MOONCAKE.exists():
        llama70 = str(EXAMPLES / "profiles" / "plain-llama70b-tp8.fpm-profile.json")
        base = [llama70, "--trace", str(MOONCAKE), "--max-num-seqs", "256", "--max-num-batched-tokens", "8192"]
        for caching in ("on", "off"):
            cases.append((f"mooncake|whole|{caching}|json", [*base, "--prefix-caching", caching, "--json"], False))
            cases.append((f"mooncake|3000|{caching}|out+json", [*base, "--prefix-caching", caching, "--limit", "3000",
                                                                "--json"], True))  # fmt: skip
            for fmt in ("jsonl.gz", "jsonl.zst"):
                cases.append((f"mooncake|3000|{caching}|out-{fmt}",
                              [*base, "--prefix-caching", caching, "--limit", "3000", "--out-format", fmt], True))  # fmt: skip
    return cases


def _decompressed(path: Path) -> bytes:
    data = path.read_bytes()
    if path.name.endswith(".gz"):
        return gzip.decompress(data)
    if path.name.endswith(".zst"):
        import zstandard

        return zstandard.ZstdDecompressor().stream_reader(data).read()
    return data


def _run(case: tuple[str, list[str], bool], work: Path) -> tuple[str, dict[str, str]]:
    name, args, with_out = case
    fpm = str(Path(sys.executable).parent / "fpm")
    out = work / hashlib.sha256(name.encode()).hexdigest()[:16]
    cmd = [fpm, "replay", *args]
    if with_out:
        cmd += ["--out", str(out)]
        if "--out-format" not in args:
            cmd += ["--out-format", "jsonl.gz"]
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    if SRC:
        env["PYTHONPATH"] = SRC
    p = subprocess.run(cmd, capture_output=True, env=env, check=False)
    result = {"exit": str(p.returncode), "stdout": hashlib.sha256(p.stdout).hexdigest()}
    if p.returncode:  # the rule the run stopped with (the message may name the temporary folder)
        result["rules"] = " ".join(re.findall(r"\[([A-Z]-\d+)\]", p.stderr.decode(errors="replace")))
    if with_out and out.is_dir():
        for f in sorted(out.iterdir()):
            if f.name.startswith("replay-"):
                result[f.name] = hashlib.sha256(_decompressed(f)).hexdigest()
    return name, result


def write(path: Path, jobs: int, only: str | None = None) -> None:
    cases = [c for c in _cases() if only is None or c[0].startswith(only)]
    work = Path(tempfile.gettempdir()) / "fpm-record-digests"  # one path for every run: --json names the folder
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    try:
        with ThreadPoolExecutor(jobs) as pool:
            results = dict(pool.map(lambda c: _run(c, work), cases))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    path.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")
    print(f"{len(results)} cases, {sum(len(v) for v in results.values())} digests -> {path}")


def compare(a: Path, b: Path) -> int:
    da, db = json.loads(a.read_text()), json.loads(b.read_text())

    def same(x: dict[str, str] | None, y: dict[str, str] | None) -> bool:
        """Equal digests (``rules`` is compared only when both runs noted it)."""
        if x is None or y is None:
            return x is y
        if "rules" not in x or "rules" not in y:
            x, y = {k: v for k, v in x.items() if k != "rules"}, {k: v for k, v in y.items() if k != "rules"}
        return x == y

    bad = sorted(k for k in da.keys() | db.keys() if not same(da.get(k), db.get(k)))
    for k in bad:
        print(f"differs: {k}\n  {da.get(k)}\n  {db.get(k)}")
    print(f"{len(da)} / {len(db)} cases, {sum(len(v) for v in da.values())} digests: "
          f"{'all equal' if not bad else f'{len(bad)} differ'}")  # fmt: skip
    return 1 if bad else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--write", type=Path, metavar="FILE.json")
    ap.add_argument("--compare", type=Path, nargs=2, metavar="FILE.json")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--only", metavar="PREFIX", help="only the cases whose name starts with PREFIX")
    ap.add_argument("--src", help="run with this src folder first on PYTHONPATH (another checkout's code)")
    args = ap.parse_args()
    global SRC
    SRC = args.src or ""
    if args.compare:
        return compare(*args.compare)
    if args.write is None:
        ap.error("--write FILE.json or --compare A B")
    write(args.write, args.jobs, args.only)
    return 0


if __name__ == "__main__":
    sys.exit(main())
