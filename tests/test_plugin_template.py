"""The plugin template (examples/plugin-template) in the default suite, loaded from its folder.

``tox -e plugin-template`` installs it and runs its own tests; here it is
imported from its source folder, without installing, so that a change of the
host that breaks it fails the default suite.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from fpmcore.testing import check_plugin, make_host, run_fpm

TEMPLATE = Path(__file__).resolve().parents[1] / "examples" / "plugin-template"


@pytest.fixture
def acme(monkeypatch):
    monkeypatch.syspath_prepend(str(TEMPLATE / "src"))
    import fpmcore_acme

    yield fpmcore_acme
    for name in [m for m in sys.modules if m.startswith("fpmcore_acme")]:
        del sys.modules[name]


def test_the_template_conforms(acme):
    assert check_plugin(acme) == []


def test_fpm_plan_uses_the_template_points(acme):
    profile = TEMPLATE.parents[1] / "examples" / "profiles" / "glm53flash-tp4.fpm-profile.json"
    r = run_fpm("plan", str(profile), "--model", "acme-hybrid-7b", "--json", host=make_host(acme))
    assert r.exit_code == 0, r.stderr
    doc = r.json()
    assert doc["counts"] == {"prefill": 30, "decode": 81}
    assert doc["dropped"] == {"align_split": 100, "token_budget": 0}


def test_the_template_is_a_distribution_with_its_entry_point():
    import tomllib

    meta = tomllib.loads((TEMPLATE / "pyproject.toml").read_text())
    assert meta["project"]["entry-points"]["fpmcore.plugins"] == {"acme": "fpmcore_acme"}
    assert meta["project"]["dependencies"] == ["fpmcore>=0.1,<0.2"]
    assert (TEMPLATE / "tests" / "test_acme.py").is_file()


def test_fpm_replay_reads_the_templates_trace_format(acme, tmp_path):
    """The template's ``acme-log`` format is sniffed, its failed rows skipped and counted, and listed by its plugin."""
    log = tmp_path / "acme.log"
    log.write_text("# acme-log v1\n0 100 10 ok\n250 200 20 timeout\n500 300 30 ok\n")
    host = make_host(acme)
    out = tmp_path / "acme.jsonl"
    r = run_fpm("trace", "convert", str(log), "-o", str(out), "--json", host=host)
    assert r.exit_code == 0, r.stderr
    doc = r.json()
    assert doc["trace"]["format"] == "acme-log" and doc["trace"]["format_plugin"] == "acme"
    assert doc["trace"]["rows_skipped"] == {"status timeout": 1}
    assert out.read_text() == (
        '{"request_id":"2","prompt_len":100,"output_len":10,"arrival_time":0.0}\n'
        '{"request_id":"4","prompt_len":300,"output_len":30,"arrival_time":0.5}\n'
    )
    assert r.stderr.startswith(f"fpm: read {log} as acme-log (sniffed): 2 requests, rows skipped: 1 status timeout")
    shown = run_fpm("plugins", "show", "acme", "--json", host=host).json()["plugin"]
    assert [f["name"] for f in shown["trace_formats"]] == ["acme-log"]
    log.write_text("# acme-log v1\n0 100 ten ok\n")
    bad = run_fpm("trace", "stats", str(log), host=host)
    assert bad.exit_code == 2
    assert (
        bad.stderr
        == f"fpm: {log}: line 2: expected '<arrival ms> <prompt> <output> <status>', found '0 100 ten ok' [T-2]\n"
    )
