#!/usr/bin/env python3
"""The cold start of ``fpm`` (issue 21, goal 4): whole-process wall and CPU time of three commands.

``fpm --help``, ``fpm plugins`` and a one-request ``fpm replay`` of the GLM
example (profile, trace and latency table of ``examples/``), each started
``--rounds`` times as a fresh process after one warm-up round, with bytecode
caching on as in an ordinary installation.  Prints, per command, the minimum
and median of the wall time and of the process's CPU time (user + system),
and the load average before and after: the wall time of a process on a shared
machine grows with the others' work, its CPU time much less.  The output goes to
a pipe, as in a script; ``--tty`` also times each command with its output on a
pseudo-terminal, as typed at a shell (where rich prints the tables, in colour).
Last, the same timing of ``python -c 'import attrs, cattrs'`` (without fpm's
cache of generated code): a reference for the machine's speed state, which on
the reference machine moves these times by up to two.

``--before CHECKOUT`` compares with the code of another checkout in the same
run: every round starts each command as ``python -m fpmcore`` twice, once with
this checkout's sources (fpmcore's and every plugin's) first on ``PYTHONPATH``
and once with ``CHECKOUT``'s, so that both meet the machine in the same state.
``CHECKOUT`` needs its C library built (``make env`` there, or this
checkout's ``src/fpmcore/replay/_native*.so`` copied into it); the plugins'
entry points are this environment's, which both checkouts' plugin packages
answer by name.

    .venv/bin/python tools/bench_cold_start.py [--rounds 10] [--tty] [--fpm .venv/bin/fpm] [--before CHECKOUT]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
COMMANDS = {
    "fpm --help": ("--help",),
    "fpm plugins": ("plugins",),
    "fpm replay (one request)": (
        "replay", str(EXAMPLES / "profiles" / "glm53flash-tp4.fpm-profile.json"),
        "--trace", str(EXAMPLES / "traces" / "glm-one-request.jsonl"),
        "--fpm-table", str(EXAMPLES / "fpm_tables" / "glm53flash-tp4.json"),
    ),
}  # fmt: skip
#: Bytecode caching on, whatever PYTHONDONTWRITEBYTECODE the calling environment sets; no plugin selection.
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE" and not k.startswith("FPM_")}


def one_run(argv: list[str], tty: bool = False, env: dict[str, str] | None = None) -> tuple[float, float]:
    """``(wall seconds, CPU seconds)`` of one whole process, its output to a pipe or to a pseudo-terminal."""
    env = ENV if env is None else env
    before = os.times()
    start = time.perf_counter()
    if not tty:
        subprocess.run(argv, check=True, capture_output=True, env=env)
    else:
        master, slave = os.openpty()
        proc = subprocess.Popen(argv, stdout=slave, stderr=slave, env=env)
        os.close(slave)
        while True:  # drained as it comes, so that the terminal never blocks the process
            try:
                if not os.read(master, 65536):
                    break
            except OSError:  # EIO: the process closed the terminal
                break
        os.close(master)
        if proc.wait() != 0:
            raise subprocess.CalledProcessError(proc.returncode, argv)
    wall = time.perf_counter() - start
    after = os.times()
    cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    return wall, cpu


def checkout_env(root: Path) -> dict[str, str]:
    """:data:`ENV` with the sources of the checkout ``root`` (fpmcore's and every plugin's) first on ``PYTHONPATH``."""
    plugins = sorted(p / "src" for p in (root / "plugins").iterdir() if (p / "src").is_dir())
    return {**ENV, "PYTHONPATH": os.pathsep.join(str(p) for p in (root / "src", *plugins))}


def _row(label: str, runs: list[tuple[float, float]]) -> str:
    wall, cpu = [r[0] * 1e3 for r in runs], [r[1] * 1e3 for r in runs]
    return (
        f"{label:<38} {min(wall):9.0f} {statistics.median(wall):12.0f} {min(cpu):8.0f} {statistics.median(cpu):11.0f}"
    )


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--tty", action="store_true", help="also time each command on a pseudo-terminal")
    parser.add_argument("--fpm", default=str(Path(sys.executable).parent / "fpm"))
    parser.add_argument(
        "--before", type=Path, metavar="CHECKOUT", help="also time the code of this checkout, alternately"
    )
    args = parser.parse_args()
    print(f"load average before: {load_average()}")
    print(f"{'command':<38} {'wall min':>9} {'wall median':>12} {'CPU min':>8} {'CPU median':>11}  (ms)")
    for name, argv in COMMANDS.items():
        for tty in (False, True) if args.tty else (False,):
            label = f"{name}, on a terminal" if tty else name
            if args.before is None:
                one_run([args.fpm, *argv], tty)  # warm-up: bytecode written, files in the page cache
                print(_row(label, [one_run([args.fpm, *argv], tty) for _ in range(args.rounds)]))
                continue
            module = [sys.executable, "-m", "fpmcore", *argv]
            envs = {"": checkout_env(ROOT), ", before": checkout_env(args.before.resolve())}
            runs: dict[str, list[tuple[float, float]]] = {which: [] for which in envs}
            for round_ in range(args.rounds + 1):  # the first round warms up
                for which, env in envs.items():
                    run = one_run(module, tty, env)
                    if round_:
                        runs[which].append(run)
            for which in envs:
                print(_row(label + which, runs[which]))
    reference = [one_run([sys.executable, "-c", "import attrs, cattrs"]) for _ in range(args.rounds)]
    wall = [r[0] * 1e3 for r in reference]
    label = "python -c 'import attrs, cattrs'"
    print(f"{label:<38} {min(wall):9.0f} {statistics.median(wall):12.0f}"
          "  (the machine's speed: the interpreter and two of fpm's imports alone)")  # fmt: skip
    print(f"load average after: {load_average()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
