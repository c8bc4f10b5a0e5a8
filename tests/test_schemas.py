"""The JSON Schemas ``fpm schema`` prints: the shipped examples validate, and what the readers refuse is refused.

Each schema is built beside its reader from the reader's declarations; the
tests check both directions the schemas can be held to: every example file
(and every plan ``fpm plan`` writes for the example profiles) validates, and
for each schema a handful of mutations that the reader refuses — a wrong type,
a missing required key, an unknown key where the reader forbids them, a value
out of an enumeration or range — is refused by the schema as well.
"""

from __future__ import annotations

import copy
import json
import shutil
import tomllib
from pathlib import Path

import jsonschema
import pytest

from fpmcore.documents.errors import FpmError
from fpmcore.documents.schema import DIALECT, SCHEMAS, schema_named
from fpmcore.testing import run_fpm
from tests.validate.support import M, host, producer_dir, strict  # noqa: F401  (fixtures)

pytestmark = pytest.mark.usefixtures("producer_dir")  # the GLM example reads its producer files (05 §7.2)

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
NAMES = [
    "profile", "record", "plan", "artifact-index", "rank-artifact", "points", "provenance", "repetition-evidence",
    "trace", "table", "grid",
]  # fmt: skip


def validator(name: str) -> jsonschema.Draft202012Validator:
    entry = schema_named(name)
    assert entry is not None, name
    return jsonschema.Draft202012Validator(entry.build(), format_checker=jsonschema.FormatChecker())


def errors(name: str, instance: object) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator(name).iter_errors(instance)]


def refused(name: str, instance: object) -> bool:
    return not validator(name).is_valid(instance)


# -- fpm schema ------------------------------------------------------------------------------------


def test_fpm_schema_prints_every_schema():
    assert [e.name for e in SCHEMAS] == NAMES
    ids = set()
    for name in NAMES:
        r = run_fpm("schema", name, "--json")
        assert r.exit_code == 0, r.stderr
        schema = json.loads(r.stdout)  # nothing but JSON on stdout
        jsonschema.Draft202012Validator.check_schema(schema)
        assert schema["$schema"] == DIALECT and schema == schema_named(name).build()
        ids.add(schema["$id"])
        assert run_fpm("schema", name).stdout == r.stdout
    assert len(ids) == len(NAMES)


def test_fpm_schema_lists_the_schemas_and_refuses_an_unknown_name():
    r = run_fpm("schema", "--json")
    assert r.exit_code == 0
    assert [s["name"] for s in json.loads(r.stdout)["schemas"]] == NAMES
    bad = run_fpm("schema", "artefact")
    assert bad.exit_code == 2 and bad.stdout == ""
    assert "invalid choice: 'artefact'" in bad.stderr
    for name in NAMES:
        assert f"'{name}'" in bad.stderr


# -- the examples validate -------------------------------------------------------------------------


def _attempt_schema(path: Path) -> str:
    if path.name == "index.json":
        return "artifact-index"
    if path.name == "points.json":
        return "points"
    if path.name.startswith("provenance"):
        return "provenance"
    assert path.name.startswith("r") and path.suffix == ".json", path
    return "rank-artifact"


def test_the_example_artifacts_and_their_plans_validate():
    attempts = sorted(EXAMPLES.glob("artifacts/*/run/*"))
    assert [a.name for a in attempts] == ["fpm-dsv41-tp8-eager", "fpm-glm53flash-tp4-smoke"]
    seen = set()
    for attempt in attempts:
        for path in sorted(attempt.iterdir()):
            if path.suffix == ".jsonl":
                lines = path.read_text(encoding="utf-8").splitlines()
                assert lines
                for line in lines:
                    assert errors("repetition-evidence", json.loads(line)) == [], path
                seen.add("repetition-evidence")
            else:
                name = _attempt_schema(path)
                assert errors(name, json.loads(path.read_bytes())) == [], path
                seen.add(name)
    assert seen == {"artifact-index", "rank-artifact", "points", "provenance", "repetition-evidence"}
    for plan in sorted(EXAMPLES.glob("artifacts/*/plan.json")):
        assert errors("plan", json.loads(plan.read_bytes())) == [], plan


def test_the_example_traces_tables_and_grids_validate():
    traces = sorted(EXAMPLES.glob("traces/*.jsonl"))
    assert len(traces) == 4
    for path in traces:
        for line in path.read_text(encoding="utf-8").splitlines():
            assert errors("trace", json.loads(line)) == [], path
    tables = sorted(EXAMPLES.glob("fpm_tables/*.json"))
    assert len(tables) == 2
    for path in tables:
        assert errors("table", json.loads(path.read_bytes())) == [], path
    grids = sorted(EXAMPLES.glob("sweeps/*"))
    assert {g.suffix for g in grids} == {".json", ".toml"}
    for path in grids:
        doc = tomllib.loads(path.read_text()) if path.suffix == ".toml" else json.loads(path.read_bytes())
        assert errors("grid", doc) == [], path


@pytest.mark.parametrize("profile", ["glm53flash-tp4", "plain-llama8b-like"])
def test_the_plans_of_the_example_profiles_validate(profile, tmp_path):
    """The GLM point list (04, with its G-25 record) and the model-agnostic grid (with cells and engine)."""
    src = EXAMPLES / "profiles" / f"{profile}.fpm-profile.json"
    for extra in ((), ("--smoke",)):
        out = tmp_path / f"plan{len(extra)}.json"
        r = run_fpm("plan", str(src), "-o", str(out), *extra)
        assert r.exit_code == 0, r.stderr
        plan = json.loads(out.read_bytes())
        assert plan["stage"] == ("smoke" if extra else "full")
        assert errors("plan", plan) == []
        assert ("cells" in plan) == (profile == "plain-llama8b-like")  # the grid names its collection cells
        manifest = plan["options"]["benchmark_points"]["manifest"]
        assert errors("points", manifest) == []


# -- mutations the readers refuse are refused by the schemas ---------------------------------------


def test_trace_line_mutations():
    """Lines the schema accepts are accepted by the reader; the R-33 vectors it can express are refused by both."""
    from fpmcore.replay.trace import FIELDS, parse_trace_lines

    assert list(schema_named("trace").build()["properties"]) == list(FIELDS)
    good = {"request_id": "a", "arrival_time": 0, "prompt_len": 8, "output_len": 2}
    hashed = {**good, "hash_ids": [0, 2**63 - 1], "hash_block_tokens": 4}
    for ok in (good, {**good, "priority": -3}, {**good, "shared_prefix_id": "s", "shared_prefix_len": 4}, hashed):
        assert errors("trace", ok) == []
        parse_trace_lines([json.dumps(ok)])
    bad_lines = (
        {**good, "deadline": 1},  # unknown key
        {**good, "priority": "high"},  # wrong type
        {**good, "priority": 2**62 + 1},
        {**good, "output_len": 0},
        {**good, "prompt_len": True},
        {**good, "arrival_time": -1},
        {**good, "request_id": ""},
        {"request_id": "a", "prompt_len": 8, "output_len": 2},  # no arrival
        {**good, "arrival_step": 0},  # both arrivals
        {k: v for k, v in good.items() if k != "output_len"},  # missing key
        {**good, "shared_prefix_id": "s"},  # without its length
        {**good, "prefix_of_len": 2},  # without the request it names
        {**good, "hash_ids": [0, 1]},  # without its block size
        {**good, "hash_block_tokens": 4},  # without its ids
        {**hashed, "hash_ids": [0, -1]},
        {**hashed, "hash_ids": [0, 2**63]},
        {**hashed, "hash_ids": [0, 1.5]},
        {**hashed, "hash_ids": "0,1"},
        {**hashed, "hash_block_tokens": 0},
        {**hashed, "shared_prefix_id": "s", "shared_prefix_len": 4},  # two ways of sharing
    )
    for bad in bad_lines:
        assert refused("trace", bad), bad
        with pytest.raises(FpmError) as exc:
            parse_trace_lines([json.dumps(good | {"request_id": "z"}), json.dumps(bad)])
        assert exc.value.rule == "R-33"


def test_table_mutations():
    from fpmcore.replay.table import ROW_KEYS, table_from_rows

    doc = json.loads((EXAMPLES / "fpm_tables" / "plain-llama8b-like.json").read_bytes())
    table_from_rows(doc["rows"])
    assert set(schema_named("table").build()["$defs"]["row"]["properties"]) == set(ROW_KEYS)
    prefill = next(i for i, r in enumerate(doc["rows"]) if r["phase"] == "prefill")
    decode = next(i for i, r in enumerate(doc["rows"]) if r["phase"] == "decode")
    mutations = (
        (prefill, lambda r: r.update(tokens=1)),  # unknown key
        (prefill, lambda r: r.update(phase="chunk")),
        (prefill, lambda r: r.update(batch_size=0)),
        (prefill, lambda r: r.update(batch_size=True)),
        (prefill, lambda r: r.update(total_kv_read_tokens=1.5)),
        (prefill, lambda r: r.pop("total_prefill_tokens")),  # required on prefill rows
        (decode, lambda r: r.update(wall_time_seconds=0)),
        (decode, lambda r: r.pop("wall_time_seconds")),
        (decode, lambda r: r.update(dp_rank=-1)),
        (decode, lambda r: r.update(dp_rank="0")),
    )
    for i, change in mutations:
        bad = copy.deepcopy(doc)
        change(bad["rows"][i])
        with pytest.raises(FpmError) as exc:
            table_from_rows(bad["rows"])
        assert exc.value.rule == "R-27"
        assert refused("table", bad), bad["rows"][i]
        assert refused("table", bad["rows"]), bad["rows"][i]  # the list form too
    ok = copy.deepcopy(doc)
    ok["rows"][decode]["dp_rank"] = 1
    table_from_rows(ok["rows"])
    assert errors("table", ok) == []


def _grid_doc() -> dict:
    return {
        "profiles": [str(EXAMPLES / "profiles" / "plain-llama8b-like.fpm-profile.json")],
        "traces": [str(EXAMPLES / "traces" / "glm-one-request.jsonl")],
        "settings": {"max_num_seqs": [8, 16], "prefix_caching": "on"},
    }


def test_grid_mutations(tmp_path):
    from fpmcore.sweep.grid import expand

    grid = tmp_path / "grid.json"
    doc = _grid_doc()
    expand(grid, doc)
    assert errors("grid", doc) == []
    generator = {"generate": "poisson", "rate": [1, 2], "requests": 3, "prompt_len": 64,
                 "output_len": {"dist": "uniform", "min": 1, "max": 4}}  # fmt: skip
    expand(grid, {**doc, "traces": [generator]})
    assert errors("grid", {**doc, "traces": [generator]}) == []
    mutations = (
        {**doc, "profile": doc["profiles"]},  # unknown key
        {k: v for k, v in doc.items() if k != "traces"},  # missing key
        {**doc, "profiles": []},
        {**doc, "tables": [3]},
        {**doc, "settings": {"max_num_seqs": [0]}},
        {**doc, "settings": {"max_num_seqs": ["8"]}},
        {**doc, "settings": {"max_num_seqs": [8.5]}},
        {**doc, "settings": {"prefix_caching": "maybe"}},
        {**doc, "settings": {"enable_chunked_prefill": 1}},
        {**doc, "settings": {"max_seqs": [8]}},  # unknown setting
        {**doc, "settings": {"max_num_seqs": []}},
        {**doc, "runs": [{"max_num_seqs": 8}]},  # settings and runs
        {**doc, "traces": [{**generator, "burst": 1}]},
        {**doc, "traces": [{k: v for k, v in generator.items() if k != "requests"}]},
        {**doc, "traces": [{**generator, "rate": 0}]},
        {**doc, "traces": [{**generator, "output_len": {"dist": "uniform", "min": 1}}]},
        {**doc, "traces": [{**generator, "prompt_len": {"dist": "choice", "values": [0]}}]},
    )
    for bad in mutations:
        with pytest.raises(FpmError):
            expand(grid, bad)
        assert refused("grid", bad), bad


def test_every_setting_value_the_sweep_takes_the_schema_takes():
    """Per setting, each candidate value ``Setting.check`` accepts validates; the types it refuses are refused."""
    from fpmcore.sweep.grid import setting_json_schema
    from fpmcore.sweep.settings import replay_settings

    settings = replay_settings()
    assert set(schema_named("grid").build()["$defs"]) == set(settings)
    candidates = (-1, 0, 1, 8, 0.5, "8", True, False, "on", "off", "fcfs", "priority", None, [1])
    refusals = 0
    for name, setting in settings.items():
        v = jsonschema.Draft202012Validator(setting_json_schema(setting))
        for value in candidates:
            try:
                setting.check(value, "grid")
            except FpmError:
                accepted = False
            else:
                accepted = True
            if accepted:
                assert v.is_valid(value), (name, value)
            elif not isinstance(value, (int, float)) or isinstance(value, bool) or setting.kind != "value":
                assert not v.is_valid(value), (name, value)  # a wrong type or an unknown choice
                refusals += 1
            elif value in (-1, 0) and not isinstance(value, bool) and setting.kind == "value":
                low = setting_json_schema(setting).get("minimum")
                assert low is not None and value < low, (name, value)  # a value below the minimum
                assert not v.is_valid(value)
                refusals += 1
    assert refusals > 50


def _plan(tmp_path: Path, profile: str = "plain-llama8b-like") -> dict:
    out = tmp_path / "plan.json"
    r = run_fpm("plan", str(EXAMPLES / "profiles" / f"{profile}.fpm-profile.json"), "-o", str(out))
    assert r.exit_code == 0, r.stderr
    return json.loads(out.read_bytes())


def test_plan_mutations(tmp_path):
    from fpmcore.collect.measure import PlannedPoint
    from fpmcore.validate.cell import cell_identity
    from fpmcore.validate.reader import plan_problem

    plan = _plan(tmp_path)
    excerpt = json.loads((EXAMPLES / "artifacts" / "dsv41" / "plan.json").read_bytes())
    for doc in (plan, excerpt):
        assert plan_problem(doc) is None
        for cell in doc["cells"]:
            cell_identity(cell)

    def frozen(change):  # refused by fpm validate --plan (plan_problem) or by A-14 (cell_identity)
        for doc in (plan, excerpt):
            bad = copy.deepcopy(doc)
            change(bad)
            problem = plan_problem(bad)
            if problem is None:
                with pytest.raises(FpmError) as exc:
                    for cell in bad["cells"]:
                        cell_identity(cell)
                assert exc.value.rule == "A-14"
            assert refused("plan", bad), problem

    frozen(lambda d: d.update(cells=[]))
    frozen(lambda d: d["cells"][0].update(cell_id=""))
    frozen(lambda d: d["cells"][0].update(cell_id=7))
    frozen(lambda d: d.update({("sha256" if "sha256" in d else "plan_sha256"): "abc"}))
    frozen(lambda d: d.pop("sha256" if "sha256" in d else "plan_sha256"))
    frozen(lambda d: d["cells"][0]["execution_identity"].update(execution_mode="eager"))  # unknown key
    frozen(lambda d: d["cells"][0]["execution_identity"].pop("input_modality"))
    frozen(lambda d: d["cells"][0]["execution_identity"].update(model_config_sha256="ABC"))
    frozen(lambda d: d["cells"][0]["execution_identity"].update(engram_residency=""))

    def point(change):  # refused by the collection's reader of a point
        bad = copy.deepcopy(plan)
        change(bad["points"][0])
        with pytest.raises(FpmError):
            PlannedPoint.from_plan(bad["points"][0])
        assert refused("plan", bad)

    point(lambda p: p.pop("batch_size"))
    point(lambda p: p.pop("phase"))
    point(lambda p: p.pop("benchmark_id"))


def _rank_files():
    plan, cell, files = M.glm_example()
    return plan, cell, files


def test_rank_artifact_mutations(host):
    """Each mutation is refused by the reader with the rule named, and by the schema."""
    from fpmcore.validate.reader import validate_files

    plan, cell, files = _rank_files()
    assert errors("rank-artifact", files["r0.json"]) == []

    def check(rule, change):
        bad = copy.deepcopy(files)
        change(bad["r0.json"])
        diags = validate_files(host, cell, bad, plan).diagnostics
        assert diags and diags[0].rule == rule, (rule, diags)
        assert refused("rank-artifact", bad["r0.json"]), rule

    row = lambda d: d["results"][1]  # noqa: E731
    check("A-1", lambda d: d.update(artifact_type="merged"))
    check("A-1", lambda d: d.update(schema_version=3))
    check("A-2", lambda d: row(d)["point"].update(benchmark_id="2"))
    check("A-2", lambda d: d["coverage"].update(expected_points=5.0 + 0.5))
    check("A-2", lambda d: row(d)["fpms"][0]["benchmark_measurement"]["raw_fpms"][0]["benchmark_sample"].update(
        forward_index=True))  # fmt: skip
    check("A-4", lambda d: d.pop("status"))
    check("A-4", lambda d: d.update(valid="true"))
    check("A-4", lambda d: d.update(timing_valid=1))
    check("A-5", lambda d: d.pop("coverage"))
    check("A-6", lambda d: d.update(run_id=""))
    check("A-6", lambda d: d.pop("grid_digest"))
    check("A-9", lambda d: d["timing"].update(measured_iteration_seconds="0.1"))
    check("A-19", lambda d: d["measurement_protocol"].update(synthetic_content="lorem"))
    check("A-19", lambda d: d["measurement_protocol"].update(timing_metric="wall"))
    check("A-19", lambda d: d["measurement_protocol"]["preparation"].pop("prefill_real_seed"))
    check("A-20", lambda d: d["measurement_protocol"]["execution_evidence"].update(extra=1))  # an unknown key
    check("A-24", lambda d: d["warmup_evidence"]["records"][0].update(kind="cold"))
    check("A-24", lambda d: d["warmup_evidence"].update(status="partial"))
    check("A-28", lambda d: d["repetition_evidence"].update(sha256="0" * 63))


def test_rank_artifact_row_mutations(host):
    """Row rules (A-29 … A-33, and the GLM contract's A-32): a mutation of the row and of its group, so that A-8 still holds."""
    from fpmcore.validate.reader import validate_files

    plan, cell, files = _rank_files()

    def check(rule, change):
        bad = copy.deepcopy(files)
        change(M.fpm(bad, bid=2))
        M.sync(bad, bid=2)
        diags = validate_files(host, cell, bad, plan).diagnostics
        assert diags and diags[0].rule == rule, (rule, diags)
        assert refused("rank-artifact", bad["r0.json"]), rule

    bm = lambda f: f["benchmark_measurement"]  # noqa: E731
    check("A-29", lambda f: bm(f).update(point_key="xyz"))
    check("A-29", lambda f: bm(f).update(schema_version=2))
    check("A-31", lambda f: bm(f)["prompts"].update(status="missing"))
    check("A-33", lambda f: bm(f)["raw_fpms"][3]["benchmark_sample"]["timing"].update(basis="wall_clock"))
    check("A-33", lambda f: bm(f)["raw_fpms"][3]["benchmark_sample"]["cudagraph"].update(status="seen"))
    check("A-33", lambda f: bm(f)["raw_fpms"][3].pop("benchmark_sample"))
    check("A-32", lambda f: bm(f)["estimate"].update(method="mean"))  # the GLM contract's reduction rule


def test_provenance_mutations(host):
    from fpmcore.validate.reader import validate_files

    plan, cell, files = _rank_files()
    name = next(n for n in files if n.startswith("provenance"))
    assert errors("provenance", files[name]) == []
    mutations = (
        lambda p: p.update(schema_name="collector"),
        lambda p: p.update(schema_version=2),
        lambda p: p.pop("plan_sha256"),
        lambda p: p.update(plan_sha256="0" * 63 + "X"),
        lambda p: p["runtime"].update(backend="sglang"),
        lambda p: p["runtime"].pop("backend_version"),
        lambda p: p.update(attempt_id=1),
        lambda p: p.pop("cell_id"),
    )
    for change in mutations:
        bad = copy.deepcopy(files)
        change(bad[name])
        diags = validate_files(host, cell, bad, plan).diagnostics
        assert diags and diags[0].rule == "A-13", diags
        assert refused("provenance", bad[name])


def test_repetition_evidence_mutations(host):
    from fpmcore.validate.reader import validate_files

    plan, cell, files = _rank_files()
    mutations = (
        ("A-2", lambda line: line.update(benchmark_id="2")),
        ("A-2", lambda line: line["repetitions"][0].update(index=0.5)),
        ("A-39", lambda line: line["repetitions"][6].update(role="timed")),
        ("A-39", lambda line: line["repetitions"][6].update(fpm_count=0)),
        ("A-39", lambda line: line["repetitions"][6].pop("wall_time")),  # a measured repetition without its time
        ("A-39", lambda line: line.pop("dp_rank")),
        ("A-39", lambda line: line.update(repetitions={})),
    )
    for rule, change in mutations:
        bad = copy.deepcopy(files)
        M.edit_line(bad, 1, change)
        diags = validate_files(host, cell, bad, plan).diagnostics
        assert diags and diags[0].rule == rule, (rule, diags)
        line = json.loads(bad["repetitions.jsonl"][1])
        assert refused("repetition-evidence", line), rule


def test_points_manifest_mutations(host):
    """The staged manifest is refused (A-10) when its digest is not the plan's; the G-22 shape it breaks too."""
    from fpmcore.validate.reader import validate_files

    plan, cell, files = _rank_files()
    assert errors("points", files["points.json"]) == []
    mutations = (
        lambda m: m.update(schema_version=2),
        lambda m: m["prefill"][0].update(partition=None),  # extra fields are forbidden (04 G-22)
        lambda m: m["prefill"][0]["rows"][0].__setitem__(0, 0),  # new tokens ≥ 1
        lambda m: m["decode"][0].pop("total_kv_read_tokens"),
        lambda m: m.update(decode={}),
    )
    for change in mutations:
        bad = copy.deepcopy(files)
        change(bad["points.json"])
        diags = validate_files(host, cell, bad, plan).diagnostics
        assert diags and diags[0].rule == "A-10", diags
        assert refused("points", bad["points.json"])


def test_artifact_index_mutations(tmp_path):
    from fpmcore.validate.attempt import read_attempt

    src = next(EXAMPLES.glob("artifacts/dsv41/run/*"))
    index = json.loads((src / "index.json").read_bytes())
    digest = index["files"]["r0.json"]
    mutations = (
        {"files": []},
        {"schema_version": 1},
        {"files": {**index["files"], "../r1.json": digest}},
        {"files": {**index["files"], "/etc/passwd": digest}},
        {"files": {**index["files"], "a//b.json": digest}},
        {"files": {**index["files"], "index.json": digest}},
        {"files": {**index["files"], "r0.json": digest.upper()}},
        {"files": {**index["files"], "r0.json": 7}},
    )
    for i, bad in enumerate(mutations):
        attempt = tmp_path / f"a{i}"
        shutil.copytree(src, attempt)
        (attempt / "index.json").write_text(json.dumps(bad))
        _, problems = read_attempt(attempt)
        assert problems and problems[0].rule == "INDEX", bad
        assert refused("artifact-index", bad), bad
    assert read_attempt(src)[1] == [] and errors("artifact-index", index) == []


# -- the schemas follow the readers' declarations --------------------------------------------------


def test_every_integer_field_of_a2_is_an_integer_in_the_rank_artifact_schema():
    from fpmcore.validate.integers import RANK_INT_SCHEMA
    from fpmcore.validate.schemas import rank_artifact_schema

    def walk(spec, node, path):
        for key, sub in spec.items():
            target = node["properties"][key]
            if isinstance(sub, dict):
                yield from walk(sub, target, f"{path}.{key}")
            elif isinstance(sub, tuple):
                items = target["items"]
                if isinstance(sub[1], dict):
                    yield from walk(sub[1], items, f"{path}.{key}[]")
                else:
                    assert "integer" in items["type"], f"{path}.{key}[]"
                    yield f"{path}.{key}[]"
            else:
                assert "integer" in target["type"] or "array" in target["type"], f"{path}.{key}"
                yield f"{path}.{key}"

    def count(spec, node, path=""):
        n = 0
        for key, sub in spec.items():
            target = node["properties"][key]
            if isinstance(sub, dict):
                n += count(sub, target, path)
            elif isinstance(sub, tuple) and isinstance(sub[1], dict):
                n += count(sub[1], target["items"], path)
            else:
                n += 1
        return n

    schema = rank_artifact_schema()
    assert len(list(walk(RANK_INT_SCHEMA, schema, ""))) > 30
    # a counter added to the reader's integer schema is an integer field of the JSON Schema
    extended = copy.deepcopy(RANK_INT_SCHEMA)
    extended["coverage"]["retried_points"] = "int"
    extended["results"][1]["point"]["chunk_count"] = "int"
    grown = rank_artifact_schema(extended)
    assert grown["properties"]["coverage"]["properties"]["retried_points"] == {"type": "integer"}
    assert grown["properties"]["results"]["items"]["properties"]["point"]["properties"]["chunk_count"] == {
        "type": "integer"
    }
    group_point = grown["properties"]["iteration_groups"]["items"]["properties"]["point"]
    assert group_point["properties"]["chunk_count"] == {"type": "integer"}  # rows and groups share the point
    assert count(extended, grown) == count(RANK_INT_SCHEMA, schema) + 3


def test_the_enumerations_come_from_the_reader():
    from fpmcore.validate import protocol, rows
    from fpmcore.validate.repetition_evidence import REPETITION_ROLES

    art = schema_named("rank-artifact").build()["properties"]
    mp = art["measurement_protocol"]["properties"]
    assert mp["synthetic_content"] == {"enum": list(protocol.SYNTHETIC_CONTENT)}
    assert mp["execution_evidence"]["const"] == protocol.EXECUTION_EVIDENCE
    assert [(k, mp[k]["const"]) for k, _ in protocol.PROTOCOL_FIELDS] == list(protocol.PROTOCOL_FIELDS)
    record = art["warmup_evidence"]["properties"]["records"]["items"]["properties"]
    assert record["kind"]["enum"] == list(protocol.WARMUP_KINDS)
    fpm = art["results"]["items"]["properties"]["fpms"]["items"]["properties"]
    assert fpm["benchmark_measurement"]["properties"]["estimate"]["properties"]["method"]["enum"] == list(
        rows.REDUCTIONS
    )
    line = schema_named("repetition-evidence").build()
    assert line["properties"]["repetitions"]["items"]["properties"]["role"]["enum"] == list(REPETITION_ROLES)
