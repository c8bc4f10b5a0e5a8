#!/usr/bin/env python3
"""Digests of ``fpm replay`` outputs, to show that a change leaves every replay as it was.

The cases: every example profile × example trace (``examples/traces`` and ``examples/traces/public``),
without and with the profile's example latency table, prefix caching on and off, with the default
scheduler settings, a queue limit that rejects (``--max-num-queued-reqs 6``) and a step limit that stops
(``--max-steps 40``), each with ``--json`` and with ``--out DIR`` (``jsonl.gz``; both outputs of one run
on ``plain-llama8b-like`` with its table); the trace transforms (``--start``, ``--limit``,
``--max-prompt-len``, ``--over-long clip``, ``--time-scale``, ``--rate``, ``--hash-block-tokens``) on the
public Mooncake excerpt with ``plain-llama70b-tp8``; and the Mooncake conversation trace (``FPM_MOONCAKE_TRACE``,
else ``shared/traces/mooncake-conversation.jsonl.gz`` beside the checkout): the whole trace with ``--json``,
its first 3,000 requests with ``--out`` in both record formats (``jsonl.gz``, ``jsonl.zst``) and with
``--out`` and ``--json`` together.

Each run is reduced to its exit status, the SHA-256 of its stdout and of its stderr (the temporary
folder's path replaced by ``WORK``), the rule ids its refusal names, and the SHA-256 of every ``--out``
record file, decompressed.  Two ways to compare::

    # a saved digest file: write it before the change, compare after it
    .venv/bin/python tools/replay_digests.py --write out/digests-before.json
    .venv/bin/python tools/replay_digests.py --compare out/digests-before.json

    # a base checkout: its code (src and the plugins' src first on PYTHONPATH, its built C extension)
    # runs beside this checkout's, then the two are compared
    .venv/bin/python tools/replay_digests.py --src ../main [--write out/digests-after.json]

``--compare A B`` compares two saved files without running anything; ``--only PREFIX`` keeps the cases
whose name starts with PREFIX (names are ``profile|trace|table|caching|settings|output``).  Exit 0 when
every digest is the same, 1 when one differs, 2 for bad usage.
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
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
FPM = str(Path(sys.executable).parent / "fpm")
#: The Mooncake conversation trace: FPM_MOONCAKE_TRACE, else the shared folder beside the checkout (or beside
#: the folder of its worktrees).
_SHARED = [d / "shared" / "traces" / "mooncake-conversation.jsonl.gz" for d in ROOT.parents]
MOONCAKE = Path(os.environ.get("FPM_MOONCAKE_TRACE") or next((p for p in _SHARED if p.exists()), _SHARED[0]))
#: Profile stem -> its example latency table.
TABLES = {"plain-llama8b-like": "plain-llama8b-like.json", "glm53flash-tp4": "glm53flash-tp4.json"}
#: Scheduler settings run on every example trace besides the defaults: rejections and a stopped replay.
SETTINGS: tuple[tuple[str, ...], ...] = ((), ("--max-num-queued-reqs", "6"), ("--max-steps", "40"))
#: The trace transforms, run on the public Mooncake excerpt.
TRANSFORMED_PROFILE = EXAMPLES / "profiles" / "plain-llama70b-tp8.fpm-profile.json"
TRANSFORMED_TRACE = EXAMPLES / "traces" / "public" / "mooncake-conversation-40.jsonl"
TRANSFORMS: tuple[tuple[str, ...], ...] = (
    ("--start", "5", "--limit", "20"),
    ("--max-prompt-len", "2000"),
    ("--max-prompt-len", "2000", "--over-long", "clip"),
    ("--time-scale", "2"),
    ("--rate", "3"),
    ("--hash-block-tokens", "256"),
    ("--start", "3", "--max-prompt-len", "9000", "--over-long", "clip", "--rate", "0.5"),
)
#: The record formats of ``--out`` (the first is the one every other ``--out`` case writes).
OUT_FORMATS = ("jsonl.gz", "jsonl.zst")

#: ``(name, arguments after fpm replay, whether the run writes --out)``.
Case = tuple[str, list[str], bool]
#: ``case name -> its digests``.
Digests = dict[str, dict[str, str]]


def _stem(profile: Path) -> str:
    return profile.name.removesuffix(".fpm-profile.json")


def _outputs(name: str, args: list[str], with_json_and_out: bool = False) -> list[Case]:
    """The ``--json`` and the ``--out`` case of one replay (and the two together when asked)."""
    cases = [(f"{name}|json", [*args, "--json"], False), (f"{name}|out", args, True)]
    if with_json_and_out:
        cases.append((f"{name}|out+json", [*args, "--json"], True))
    return cases


def cases() -> list[Case]:
    """Every case, in a fixed order (see the module docstring)."""
    found: list[Case] = []
    traces = sorted(EXAMPLES.glob("traces/*.jsonl")) + sorted(EXAMPLES.glob("traces/public/*.jsonl"))
    for profile in sorted(EXAMPLES.glob("profiles/*.fpm-profile.json")):
        stem = _stem(profile)
        tables = [None] + ([EXAMPLES / "fpm_tables" / TABLES[stem]] if stem in TABLES else [])
        for trace in traces:
            for table in tables:
                for caching in ("on", "off"):
                    for settings in SETTINGS:
                        args = [str(profile), "--trace", str(trace), "--prefix-caching", caching, *settings]
                        if table is not None:
                            args += ["--fpm-table", str(table)]
                        name = f"{stem}|{trace.name}|{table.name if table else '-'}|{caching}|{' '.join(settings)}"
                        found += _outputs(name, args, table is not None and stem == "plain-llama8b-like")
    for caching in ("on", "off"):
        for transform in TRANSFORMS:
            args = [str(TRANSFORMED_PROFILE), "--trace", str(TRANSFORMED_TRACE), "--prefix-caching", caching]
            name = f"{_stem(TRANSFORMED_PROFILE)}|{TRANSFORMED_TRACE.name}|-|{caching}|{' '.join(transform)}|json"
            found.append((name, [*args, *transform, "--json"], False))
    if MOONCAKE.exists():
        base = [str(TRANSFORMED_PROFILE), "--trace", str(MOONCAKE), "--max-num-seqs", "256",
                "--max-num-batched-tokens", "8192"]  # fmt: skip
        for caching in ("on", "off"):
            whole = [*base, "--prefix-caching", caching]
            found.append((f"mooncake|whole|{caching}|json", [*whole, "--json"], False))
            found.append((f"mooncake|3000|{caching}|out+json", [*whole, "--limit", "3000", "--json"], True))
            for fmt in OUT_FORMATS:
                found.append((f"mooncake|3000|{caching}|out-{fmt}", [*whole, "--limit", "3000", "--out-format", fmt], True))  # fmt: skip
    return found


def _decompressed(path: Path) -> bytes:
    data = path.read_bytes()
    if path.name.endswith(".gz"):
        return gzip.decompress(data)
    if path.name.endswith(".zst"):
        import zstandard

        return bytes(zstandard.ZstdDecompressor().stream_reader(data).read())
    return data


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def run_case(case: Case, work: Path, env: Mapping[str, str]) -> tuple[str, dict[str, str]]:
    """One ``fpm replay`` in ``env``: its digests (see the module docstring)."""
    name, args, with_out = case
    out = work / _sha(name.encode())[:16]
    cmd = [FPM, "replay", *args]
    if with_out:
        cmd += ["--out", str(out)]
        if "--out-format" not in args:
            cmd += ["--out-format", OUT_FORMATS[0]]
    p = subprocess.run(cmd, capture_output=True, env=dict(env), cwd=ROOT, check=False)
    where = str(work).encode()
    result = {
        "exit": str(p.returncode),
        "stdout": _sha(p.stdout.replace(where, b"WORK")),
        "stderr": _sha(p.stderr.replace(where, b"WORK")),
    }
    if p.returncode:
        result["rules"] = " ".join(re.findall(r"\[([A-Z]-\d+)\]", p.stderr.decode(errors="replace")))
    if with_out and out.is_dir():
        for f in sorted(out.iterdir()):
            if f.name.startswith("replay-"):
                result[f.name] = _sha(_decompressed(f))
    return name, result


def base_env(checkout: Path) -> dict[str, str]:
    """The environment that runs ``checkout``'s code: its ``src`` and its plugins' ``src`` first on
    ``PYTHONPATH`` (the installed distributions' entry points name the same modules), with its own
    built C extension."""
    src = checkout / "src" if (checkout / "src" / "fpmcore").is_dir() else checkout
    if not (src / "fpmcore").is_dir():
        raise SystemExit(f"replay_digests: no fpmcore source in {checkout} (give a checkout or its src folder)")
    if not list((src / "fpmcore" / "replay").glob("_native*.so")):
        raise SystemExit(f"replay_digests: {checkout} has no built C extension: run make env there first")
    plugins = sorted(str(p) for p in (src.parent / "plugins").glob("*/src") if p.is_dir())
    return {**_env(), "PYTHONPATH": os.pathsep.join([str(src), *plugins])}


def _env() -> dict[str, str]:
    """This checkout's environment, with a fixed terminal width and no colour."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return {**env, "COLUMNS": "200", "NO_COLOR": "1"}


def digests(selected: Sequence[Case], env: Mapping[str, str], jobs: int) -> Digests:
    """The digests of every case in ``env``, ``jobs`` at a time."""
    work = Path(tempfile.mkdtemp(prefix="fpm-replay-digests-"))
    try:
        with ThreadPoolExecutor(jobs) as pool:
            return dict(pool.map(lambda c: run_case(c, work, env), selected))
    finally:
        shutil.rmtree(work, ignore_errors=True)


def compare(before: Digests, after: Digests, labels: tuple[str, str] = ("before", "after")) -> int:
    """Print every case whose digests differ (a case on one side only differs too); the number of them."""
    differ = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    for k in differ:
        print(f"differs: {k}\n  {labels[0]:<6} {before.get(k)}\n  {labels[1]:<6} {after.get(k)}")
    print(f"{len(before)} / {len(after)} cases, {sum(len(v) for v in after.values())} digests: "
          f"{'all the same' if not differ else f'{len(differ)} differ'}")  # fmt: skip
    return len(differ)


def _read(path: Path) -> Digests:
    found: Digests = json.loads(path.read_text(encoding="utf-8"))
    return found


def _write(path: Path, found: Digests) -> None:
    path.write_text(json.dumps(found, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"{len(found)} cases, {sum(len(v) for v in found.values())} digests -> {path}")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--write", type=Path, metavar="FILE.json", help="write this checkout's digests")
    ap.add_argument("--compare", type=Path, nargs="+", metavar="FILE.json",
                    help="compare this checkout's digests with a saved file; with two files, the two files")  # fmt: skip
    ap.add_argument("--src", type=Path, metavar="CHECKOUT", help="run a base checkout's code too and compare")
    ap.add_argument("--only", metavar="PREFIX", help="only the cases whose name starts with PREFIX")
    ap.add_argument("--jobs", type=int, default=2, help="runs at a time (default 2)")
    args = ap.parse_args(argv)
    if args.compare and len(args.compare) > 2:
        ap.error("--compare takes one saved file (or two to compare with each other)")
    if args.compare and args.src:
        ap.error("--compare and --src are the two ways to compare: give one")
    if args.compare and len(args.compare) == 2:
        return 1 if compare(_read(args.compare[0]), _read(args.compare[1])) else 0
    if not (args.write or args.compare or args.src):
        ap.error("give --write FILE.json, --compare FILE.json or --src CHECKOUT")
    selected = [c for c in cases() if args.only is None or c[0].startswith(args.only)]
    if not selected:
        ap.error(f"no case starts with {args.only!r}")
    base = digests(selected, base_env(args.src), args.jobs) if args.src else None
    found = digests(selected, _env(), args.jobs)
    if args.write:
        _write(args.write, found)
    if base is not None:
        return 1 if compare(base, found, ("base", "this")) else 0
    if args.compare:
        saved = _read(args.compare[0])
        if args.only is not None:
            saved = {k: v for k, v in saved.items() if k.startswith(args.only)}
        return 1 if compare(saved, found) else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
