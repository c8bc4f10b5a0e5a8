"""What every test of the mutation campaign shares (``tests/fuzz/README.md``): its Hypothesis settings and one
run of ``fpm … --json`` under an alarm, with the assertions every input owes."""

from __future__ import annotations

import json
import os
import re
import signal
import time
from typing import Any

from hypothesis import HealthCheck, settings

from fpmcore.testing import run_fpm
from tests.fuzz.conftest import examples

#: Inputs per example (``FPM_FUZZ_BATCH``, default 1): a long run draws several per example, which
#: spreads Hypothesis's own cost per example over more runs of the command.
BATCH = int(os.environ.get("FPM_FUZZ_BATCH", "1"))
SEED = int(os.environ.get("FPM_FUZZ_SEED", "20261201"))
#: A run longer than this is a hang.
HANG_S = 60.0
RULE = re.compile(r"^(?:[A-Z]+-[A-Z0-9]+|JSON|usage|input|plugins|sweep|collect|onboard)$")


def campaign(kind: str) -> settings:
    """The settings of one test: its examples (``FPM_FUZZ_EXAMPLES_<KIND>``), no database, no deadline."""
    return settings(
        max_examples=examples(kind), deadline=None, database=None, derandomize=False,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
    )  # fmt: skip


class Hang(Exception):
    pass


def _alarm(signum, frame):  # noqa: ANN001
    raise Hang(f"a run took more than {HANG_S:.0f} s")


def run_json(*argv: str, host: Any, env: dict[str, str] | None = None) -> tuple[Any, dict[str, Any]]:
    """``fpm ARGV`` (with ``--json``) under an alarm: exit 0, 1 or 2, no traceback, one JSON document on stdout
    and, on exit 2, the error document whose diagnostics name their rules and a line on stderr."""
    start = time.monotonic()
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(int(HANG_S))
    try:
        res = run_fpm(*argv, host=host, env=env)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    took = time.monotonic() - start
    text = res.stdout + res.stderr
    assert took < HANG_S, (argv, took)
    assert res.exit_code in (0, 1, 2), (res.exit_code, text[-2000:])
    assert "Traceback" not in text and "internal error" not in text, text[-2000:]
    doc = json.loads(res.stdout)  # --json: exactly one document, errors included
    assert isinstance(doc, dict) and doc["schema"] == 1, doc
    if res.exit_code == 2:
        assert doc.get("status") == "error", doc
        rules = [d["rule"] for d in doc["diagnostics"]]
        assert rules and all(RULE.match(r) for r in rules), rules
        assert res.stderr.strip(), "a refusal says why on stderr"
    return res, doc
