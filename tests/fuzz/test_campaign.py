"""A seeded mutation campaign over profiles and evidence folders (``tests/fuzz/README.md``).

Each example mutates a committed input (the GLM-5.3-Flash TP 4 profile, the
sliding-window and vLLM 0.27.0 evidence folders), runs the commands that read
it with an output path (``fpm profile check``, ``fpm plan -o``, ``fpm import
-o``) and asserts what issue 13 asks of every input:

* exit code 0, 1 or 2, never a traceback or ``internal error``;
* every refusal names a rule (``[P-…]``, ``[I-…]``, ``[JSON]``, ``[O-…]``, …),
  and no import diagnostic is ``I-0`` (an unexpected exception);
* nothing is written outside the output path, the inputs are unchanged, and
  an output is either absent or complete (no temporary file left behind).

``FPM_FUZZ_EXAMPLES`` sets the examples per test (default 150; ``tox -e
fuzz`` runs 4,000 of each), ``FPM_FUZZ_SEED`` the seed (default 20261201).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from fpmcore.testing import make_host, run_fpm
from tests.fuzz.conftest import count, examples, work_dir
from tests.fuzz.mutations import copy_example, encode, mutate_bytes, mutate_document, mutate_evidence, snapshot

ROOT = Path(__file__).resolve().parents[2]
PROFILE = ROOT / "examples" / "profiles" / "glm53flash-tp4.fpm-profile.json"
EVIDENCE = [ROOT / "examples" / "probes" / "sliding-window", ROOT / "examples" / "probes" / "vllm-0.27.0-plain"]

SEED = int(os.environ.get("FPM_FUZZ_SEED", "20261201"))


def campaign(kind: str) -> settings:
    """The settings of one test: its examples (``FPM_FUZZ_EXAMPLES_<KIND>``), no database, no deadline."""
    return settings(
        max_examples=examples(kind), deadline=None, database=None, derandomize=False,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
    )  # fmt: skip


#: ``fpm: <place>: <message> [<rule>]``: every refusal names its rule.
_RULE_LINE = re.compile(r"^fpm: .+ \[(?:[A-Z]+-[A-Z0-9]+|JSON|plugins)\]$")
_IMPORT_RULE = re.compile(r"^(?:I-[1-9]\d*|O-[1-6]|JSON|usage)$")


@pytest.fixture(scope="module")
def host():
    return make_host(entry_points=("vllm_027", "vllm_033", "glm53flash"))


def _no_crash(res) -> None:
    text = res.stdout + res.stderr
    assert res.exit_code in (0, 1, 2), (res.exit_code, text[-2000:])
    assert "Traceback" not in text and "internal error" not in text, text[-2000:]


def _refusal_named(res) -> None:
    """A refusal on stderr is one line ending with its rule."""
    for line in res.stderr.splitlines():
        if line.startswith("fpm") and not line.startswith("fpm: the plan"):
            assert _RULE_LINE.match(line), line


def _plan_complete(path: Path) -> None:
    from fpmcore.documents.jsonio import digest, loads

    doc = loads(path.read_bytes())
    body = {k: v for k, v in doc.items() if k not in ("plan_sha256", "stage")}
    assert doc["plan_sha256"] == digest(body)


@seed(SEED)
@campaign("profiles")
@given(data=st.data())
def test_mutated_profiles(host, data):
    """``fpm profile check`` and ``fpm plan -o`` on a mutated GLM profile."""
    base = json.loads(PROFILE.read_bytes())
    raw = mutate_bytes(data, encode(mutate_document(data, base)).encode("utf-8"))
    with tempfile.TemporaryDirectory(prefix="fpm-fuzz-", dir=work_dir()) as tmp:
        root = Path(tmp)
        path = root / "in" / "p.fpm-profile.json"
        path.parent.mkdir()
        path.write_bytes(raw)
        (root / "out").mkdir()
        before = snapshot(root)
        res = run_fpm("profile", "check", str(path), "--json", host=host)
        _no_crash(res)
        if res.exit_code == 2:  # --json: the error document, and the line on stderr
            doc = json.loads(res.stdout)
            assert doc["status"] == "error" and doc["diagnostics"][0]["rule"], doc
            assert _RULE_LINE.match(res.stderr.strip()), res.stderr
        else:
            doc = json.loads(res.stdout)
            assert doc["status"] == ("valid" if res.exit_code == 0 else "invalid")
            assert all(d["rule"] for d in doc["diagnostics"]) and (res.exit_code == 0) == (not doc["diagnostics"])
        out = root / "out" / "plan.json"
        res = run_fpm("plan", str(path), "--model", "glm53flash", "-o", str(out), host=host)
        _no_crash(res)
        _refusal_named(res)
        after = snapshot(root, skip=out)
        assert after == before, sorted(set(after) ^ set(before))  # the input unchanged, nothing else written
        if out.exists():
            assert res.exit_code == 0
            _plan_complete(out)
        assert sorted(p.name for p in (root / "out").iterdir()) in ([], ["plan.json"])
    count("profiles")


@seed(SEED)
@campaign("evidence")
@given(data=st.data(), example=st.sampled_from(EVIDENCE))
def test_mutated_evidence_folders(host, data, example):
    """``fpm import DIR -o OUT --json`` on a mutated evidence folder (records, manifests, index, labels, files)."""
    with tempfile.TemporaryDirectory(prefix="fpm-fuzz-", dir=work_dir()) as tmp:
        root = Path(tmp)
        ev = copy_example(example, root / "in" / "ev")
        mutate_evidence(data, ev)
        (root / "out").mkdir()
        out = root / "out" / "result"
        before = snapshot(root)
        res = run_fpm("import", str(ev), "-o", str(out), "--json", host=host)
        _no_crash(res)
        doc = json.loads(res.stdout)  # --json: exactly one JSON document, also on a refusal
        rules = [d["rule"] for d in doc["diagnostics"]]
        assert all(_IMPORT_RULE.match(r) for r in rules), rules  # named, and never I-0
        assert (res.exit_code == 0) == (doc["status"] == "complete")
        if res.exit_code:
            assert rules, doc
        after = snapshot(root, skip=out)
        assert after == before, sorted(set(after) ^ set(before))
        assert not Path("/tmp/fpm-fuzz-abs").exists()
        if out.is_file():
            from fpmcore.documents.profile import load_profile

            assert res.exit_code in (0, 1)
            load_profile(out)
        elif out.is_dir():
            from fpmcore.documents.output_files import is_earlier_output

            assert is_earlier_output(out)
        assert [p.name for p in (root / "out").iterdir()] in ([], ["result"])
        shutil.rmtree(root / "in", ignore_errors=True)
    count("evidence folders")
