"""Counts of the mutation campaign (``tests/fuzz/README.md``): generated inputs per kind, printed at the end."""

from __future__ import annotations

import collections
import json
import os
import tempfile

import pytest

#: ``kind -> generated inputs run`` for this session.
COUNTS: collections.Counter[str] = collections.Counter()


def count(kind: str, n: int = 1) -> None:
    """One more input of ``kind`` run; every 1,000 the counts go to the file ``FPM_FUZZ_COUNTS`` names (a long run's progress)."""
    COUNTS[kind] += n
    path = os.environ.get("FPM_FUZZ_COUNTS")
    if path and sum(COUNTS.values()) % 1000 == 0:
        with open(path, "w", encoding="utf-8") as f:
            f.write(json.dumps(dict(COUNTS), sort_keys=True) + "\n")


def examples(kind: str) -> int:
    """Examples of one test: ``FPM_FUZZ_EXAMPLES_<KIND>``, else ``FPM_FUZZ_EXAMPLES``, else 150."""
    return int(os.environ.get(f"FPM_FUZZ_EXAMPLES_{kind.upper()}", os.environ.get("FPM_FUZZ_EXAMPLES", "150")))


def work_dir() -> str | None:
    """Where examples are written: ``FPM_FUZZ_TMP``, else ``/dev/shm`` (fsync costs nothing there), else the default."""
    chosen = os.environ.get("FPM_FUZZ_TMP")
    if chosen:
        return chosen
    return "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else tempfile.gettempdir()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if COUNTS:
        parts = ", ".join(f"{k} {v:,}" for k, v in sorted(COUNTS.items()))
        terminalreporter.write_line(f"fuzz inputs: {parts}; total {sum(COUNTS.values()):,}")
