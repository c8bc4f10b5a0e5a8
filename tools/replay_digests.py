#!/usr/bin/env python3
"""Digests of the replay's outputs, to show that a change of the engine changes none of them.

    .venv/bin/python tools/replay_digests.py OUT.json [--mooncake PATH] [--fpm PATH]

Runs ``fpm replay … --json`` and ``fpm replay … --out DIR --out-format jsonl.gz``
on every example profile × example trace, caching on and off, and on a
Mooncake trace (when given: whole with ``--json`` on every example profile,
the GLM example with its table; its first 3,000 requests with ``--out``),
and writes the SHA-256 of each output (the ``--json`` document as printed,
each ``--out`` record file decompressed, the messages with the ``--out``
folder's name left out) to OUT.json.  Two such files are
compared with ``cmp`` or ``diff``.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROFILES = sorted((ROOT / "examples" / "profiles").glob("*.fpm-profile.json"))
TRACES = sorted(p for p in (ROOT / "examples" / "traces").rglob("*.jsonl") if p.is_file())
TABLES = {"glm53flash-tp4": ROOT / "examples" / "fpm_tables" / "glm53flash-tp4.json"}


def table_args(profile: Path) -> list[str]:
    name = profile.name.removesuffix(".fpm-profile.json")
    return ["--fpm-table", str(TABLES[name])] if name in TABLES else []


def run(fpm: str, args: list[str]) -> tuple[int, bytes, bytes]:
    proc = subprocess.run([fpm, "replay", *args], capture_output=True, cwd=ROOT)
    return proc.returncode, proc.stdout, proc.stderr


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def out_digests(fpm: str, args: list[str]) -> dict[str, str]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out"
        rc, _, err = run(fpm, [*args, "--out", str(out), "--out-format", "jsonl.gz"])
        result = {"rc": str(rc), "stderr": sha(err.replace(str(out).encode(), b"OUT"))}
        if rc == 0:
            for f in sorted(out.rglob("*")):
                if f.is_file():
                    data = f.read_bytes()
                    result[str(f.relative_to(out))] = sha(gzip.decompress(data) if f.suffix == ".gz" else data)
        return result


def json_digest(fpm: str, args: list[str]) -> dict[str, str]:
    rc, stdout, err = run(fpm, [*args, "--json"])
    return {"rc": str(rc), "stdout": sha(stdout), "stderr": sha(err)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--mooncake", type=Path, help="a Mooncake trace (jsonl or jsonl.gz)")
    ap.add_argument("--fpm", default=str(ROOT / ".venv" / "bin" / "fpm"))
    ns = ap.parse_args()
    digests: dict[str, dict[str, str]] = {}
    for profile in PROFILES:
        for trace in TRACES:
            for caching in ("on", "off"):
                base = [str(profile), "--trace", str(trace), "--prefix-caching", caching, *table_args(profile)]
                key = f"{profile.name} {trace.relative_to(ROOT)} {caching}"
                digests[f"{key} json"] = json_digest(ns.fpm, base)
                digests[f"{key} out"] = out_digests(ns.fpm, base)
                print(key, file=sys.stderr)
    if ns.mooncake:
        for profile in PROFILES:
            for caching in ("on", "off"):
                base = [str(profile), "--trace", str(ns.mooncake), "--prefix-caching", caching, *table_args(profile)]
                if profile.name.startswith("plain-llama70b"):
                    base += ["--max-num-seqs", "256", "--max-num-batched-tokens", "8192"]
                key = f"{profile.name} mooncake {caching}"
                digests[f"{key} json"] = json_digest(ns.fpm, base)
                digests[f"{key} out 3000"] = out_digests(ns.fpm, [*base, "--limit", "3000"])
                print(key, file=sys.stderr)
    ns.out.write_text(json.dumps(digests, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
