"""A run collected on the stand-in engine, its plan and its published table validate against their JSON Schemas."""

from __future__ import annotations

import json

import jsonschema

from fpmcore.documents.schema import schema_named
from fpmcore.testing import run_fpm
from tests.collect.conftest import plan_of, standin_host
from tests.collect.standin import StandinRuntime


def _errors(name: str, instance: object) -> list[str]:
    v = jsonschema.Draft202012Validator(schema_named(name).build())
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in v.iter_errors(instance)]


def test_a_collected_run_and_its_table_validate(small_plan, model_dir, tmp_path):
    assert _errors("plan", plan_of(small_plan)) == []
    out = tmp_path / "run"
    host = standin_host(StandinRuntime())
    r = run_fpm("collect", str(small_plan), "--model-dir", str(model_dir), "-o", str(out), host=host)
    assert r.exit_code == 0, r.stderr
    index = json.loads((out / "index.json").read_bytes())
    assert _errors("artifact-index", index) == []
    by_name = {"r0.json": "rank-artifact", "points.json": "points", "provenance.json": "provenance"}
    assert set(index["files"]) == {*by_name, "repetitions.jsonl"}
    for name, schema in by_name.items():
        assert _errors(schema, json.loads((out / name).read_bytes())) == [], name
    lines = (out / "repetitions.jsonl").read_text().splitlines()
    assert len(lines) == 77
    for line in lines:
        assert _errors("repetition-evidence", json.loads(line)) == []
    table = tmp_path / "table.json"
    r = run_fpm("publish", str(out), "--plan", str(small_plan), "-o", str(table), host=host)
    assert r.exit_code == 0, r.stderr
    doc = json.loads(table.read_bytes())
    assert len(doc["rows"]) == 77 and _errors("table", doc) == []
