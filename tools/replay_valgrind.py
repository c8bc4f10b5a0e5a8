#!/usr/bin/env python3
"""Run the C-backend replay tests under valgrind (memcheck) and report errors in the binding.

    .venv/bin/python tools/replay_valgrind.py [pytest -k expression]

Runs ``pytest tests/replay`` restricted to the C backend (``-k`` default
``c and not differential and not real``) with ``PYTHONMALLOC=malloc``
under valgrind's memcheck with Python's suppressions.  The CPython
interpreter itself reports uninitialised-value noise under valgrind
(``int.from_bytes`` of random seeds); the verdict counts only the error and
leak records whose stack passes through fpmcore's library (``fpm_*``
functions or their sources; cffi's own one-time module-init allocation is
not ours).  Exit 0 when there is none and the
tests pass.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: a stack frame in fpmcore's C library: an exported fpm_* function or a frame in its sources
OURS = re.compile(r"\bfpm_\w+ \(|fpm_replay\.c|fpmcore\.c")


def main() -> int:
    expr = sys.argv[1] if len(sys.argv) > 1 else "c and not differential and not real"
    supp = [f"--suppressions={p}" for p in ("/usr/lib/valgrind/python3.supp",) if Path(p).exists()]
    cmd = [
        "valgrind",
        "--tool=memcheck",
        "--leak-check=full",
        "--show-leak-kinds=definite",
        "--num-callers=30",
        *supp,
        str(ROOT / ".venv" / "bin" / "python"),
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        str(ROOT / "tests" / "replay"),
        "-k",
        expr,
    ]
    env = {**os.environ, "PYTHONMALLOC": "malloc"}
    proc = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True)
    records: list[list[str]] = [[]]
    for line in proc.stderr.splitlines():
        body = line.split("== ", 1)[-1] if line.startswith("==") else line
        if not body.strip():
            records.append([])
        else:
            records[-1].append(body)
    ours = [r for r in records if r and any(OURS.search(ln) for ln in r)]
    summary = [ln for ln in proc.stderr.splitlines() if "ERROR SUMMARY" in ln]
    out = proc.stdout.strip().splitlines()
    print("\n".join(out[-15:]) if proc.returncode else (out[-1] if out else "(no pytest output)"))
    print(
        f"valgrind records through fpmcore's library: {len(ours)}; interpreter total: {summary[-1] if summary else '?'}"
    )
    for r in ours[:5]:
        print("\n".join(r), file=sys.stderr)
    return 0 if (proc.returncode == 0 and not ours) else 1


if __name__ == "__main__":
    sys.exit(main())
