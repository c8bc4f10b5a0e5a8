"""The host side of *validate artifact* (05): reading an attempt, the contract choice, the CLI.

The artifacts come from ``tools/make_artifacts.py`` (the producer's shape);
the committed example run is ``examples/artifacts``.
"""

from __future__ import annotations

import argparse
import copy
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fpmcore.artifacts as A
import fpmcore_dsv41
import fpmcore_glm53flash
from fpmcore import API_VERSION, PluginInfo, ProducerContract, hookimpl
from fpmcore.cli import Context
from fpmcore.errors import FpmError
from fpmcore.plugins import PluginHost

from tests.artifact_support import M, host, producer_dir, strict  # noqa: F401  (fixtures)

pytestmark = pytest.mark.usefixtures("strict", "producer_dir")

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "artifacts"






def run_validate(host, capsys, *argv, as_json=False):
    parser = argparse.ArgumentParser()
    cmd = A.validate_command()
    cmd.configure(parser)
    args = parser.parse_args([*argv, *(["--json"] if as_json else [])])
    code = cmd.run(args, Context(host, json=as_json, debug=False))
    return code, capsys.readouterr().out


# -- the committed example run -----------------------------------------------------------


def test_examples_are_what_the_tool_writes(tmp_path):
    M.example(tmp_path)
    written = sorted(p for p in tmp_path.rglob("*") if p.is_file())
    assert len(written) == 11
    for p in written:
        assert (EXAMPLES / p.relative_to(tmp_path)).read_bytes() == p.read_bytes(), p


@pytest.mark.parametrize(
    ("model", "contract"), [("glm53flash", "glm53flash_native_graph_policy"), ("dsv41", "dsv41_eager")]
)
def test_example_run_validates(host, capsys, model, contract):
    code, out = run_validate(host, capsys, str(EXAMPLES / model / "run"), "--plan", str(EXAMPLES / model / "plan.json"))
    assert code == 0
    assert f"({contract}): accepted" in out and "gap: rank 0: injected prompt hashes unavailable" in out
    code, out = run_validate(
        host, capsys, str(EXAMPLES / model / "run"), "--plan", str(EXAMPLES / model / "plan.json"), as_json=True
    )
    doc = json.loads(out)
    cell = json.loads((EXAMPLES / model / "plan.json").read_text())["cells"][0]["cell_id"]
    assert (code, doc) == (
        0,
        {
            "schema": 1,
            "status": "accepted",
            "cells": [{"cell": cell, "contract": contract, "status": "accepted", "diagnostics": []}],
        },
    )


def test_example_run_needs_the_producer_files_it_was_collected_with(host, capsys, monkeypatch, tmp_path):
    """05 §7.2, A-21: without producer files, ``fpm validate`` refuses the GLM example; with them it accepts."""
    from fpmcore_glm53flash import artifact_producer as P

    monkeypatch.delenv("FPM_GLM53FLASH_PRODUCER_DIR")
    monkeypatch.setattr(P, "_package_dir", lambda: tmp_path / "producer")  # an installation without producer files
    run, plan = EXAMPLES / "glm53flash" / "run", EXAMPLES / "glm53flash" / "plan.json"
    code, out = run_validate(host, capsys, str(run), "--plan", str(plan), as_json=True)
    (diag,) = json.loads(out)["cells"][0]["diagnostics"]
    found = json.loads((run / "fpm-glm53flash-tp4-smoke" / "r0.json").read_text())["producer"]
    assert code == 1 and diag["rule"] == "A-21"
    assert diag["message"] == (
        "native glm-5.3-flash result lacks valid producer.runtime_source_manifest_sha256: expected the digest of "
        "the shipped runtime-source manifest, but this installation ships no producer files (set "
        "FPM_GLM53FLASH_PRODUCER_DIR or install them under fpmcore_glm53flash/producer/), found "
        f"{found['runtime_source_manifest_sha256']}: r0.json"
    )
    monkeypatch.setenv("FPM_GLM53FLASH_PRODUCER_DIR", str(EXAMPLES / "producer"))
    code, _ = run_validate(host, capsys, str(run), "--plan", str(plan))
    assert code == 0


def test_the_tool_writes_no_producer_record_without_producer_files(tmp_path):
    missing = "no producer file runtime_source_manifest.json, glm53flash_prefix_scheduler.py"
    with pytest.raises(SystemExit, match=missing):
        M.glm_example(producer_dir=tmp_path)


def test_retained_table_shows_the_median(host, capsys):
    code, out = run_validate(
        host, capsys, str(EXAMPLES / "glm53flash" / "run"), "--plan", str(EXAMPLES / "glm53flash" / "plan.json")
    )
    assert code == 0 and "0.0348" in out and "real_kv" in out and "not_applicable" in out


def test_refused_cell_exits_1_with_its_diagnostic(host, capsys, tmp_path):
    case = next(c for c in M.CASES if c.id == "N12")
    plan, cell, files, message = case.build()
    M.write_attempt(tmp_path / "run" / cell["cell_id"], files)
    M.write_json(tmp_path / "plan.json", plan)
    code, out = run_validate(host, capsys, str(tmp_path / "run"), "--plan", str(tmp_path / "plan.json"), as_json=True)
    doc = json.loads(out)
    assert code == 1 and doc["status"] == "refused"
    assert doc["cells"][0]["diagnostics"] == [{"rule": "A-21", "message": message, "where": "r0.json"}]
    code, out = run_validate(host, capsys, str(tmp_path / "run"), "--plan", str(tmp_path / "plan.json"))
    assert code == 1 and "A-21" in out and "refused" in out


def test_one_attempt_directory_is_named_by_its_provenance(host, capsys):
    run = EXAMPLES / "glm53flash" / "run" / "fpm-glm53flash-tp4-smoke"
    code, out = run_validate(host, capsys, str(run), "--plan", str(EXAMPLES / "glm53flash" / "plan.json"), as_json=True)
    assert code == 0 and json.loads(out)["cells"][0]["cell"] == "fpm-glm53flash-tp4-smoke"


def test_unreadable_input_is_exit_2(host, capsys, tmp_path):
    with pytest.raises(FpmError):  # the CLI prints it and exits 2
        run_validate(host, capsys, str(tmp_path / "missing"), "--plan", str(EXAMPLES / "glm53flash" / "plan.json"))
    (tmp_path / "plan.json").write_text('{"cells": [], "cells": []}')
    with pytest.raises(FpmError):
        run_validate(host, capsys, str(EXAMPLES / "glm53flash" / "run"), "--plan", str(tmp_path / "plan.json"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(FpmError, match="no attempt found"):
        run_validate(host, capsys, str(tmp_path / "empty"), "--plan", str(EXAMPLES / "glm53flash" / "plan.json"))


def test_directory_of_an_unknown_cell_is_refused(host, tmp_path):
    plan, cell, files = M.glm_example()
    M.write_attempt(tmp_path / "fpm-unknown", files)
    (r,) = A.validate_run(host, tmp_path, plan)
    assert r.status == "refused" and r.diagnostics[0].rule == "A-13"


# -- reading an attempt (05 §1) ------------------------------------------------------------


def test_index_pins_every_file(host, tmp_path):
    plan, cell, files = M.glm_example()
    d = M.write_attempt(tmp_path / "a", files)
    (d / "notes.json").write_text('{"ignored": true}')  # not indexed: not read
    got, problems = A.read_attempt(d)
    assert problems == [] and "notes.json" not in got and got["repetitions.jsonl"] == files["repetitions.jsonl"]
    assert A.validate_files(host, cell, got, plan, problems=problems).status == "accepted"
    raw = (d / "r0.json").read_bytes()
    (d / "r0.json").write_bytes(raw.replace(b'"0.33.0"', b'"0.33.1"', 1))
    _, problems = A.read_attempt(d)
    assert [p.rule for p in problems] == ["INDEX"] and problems[0].message.startswith(
        "file differs from the artifact index"
    )
    result = A.validate_files(host, cell, got, plan, problems=problems)
    assert result.status == "refused" and result.diagnostics[0].rule == "INDEX"


def test_duplicate_keys_refuse_the_file(tmp_path):
    plan, cell, files = M.glm_example()
    out = M.serialize(files, index=False)
    out["provenance.json"] = out["provenance.json"].replace(
        b'"schema_version":1', b'"schema_version":1,"schema_version":1'
    )
    for name, data in out.items():
        (tmp_path / name).write_bytes(data)
    _, problems = A.read_attempt(tmp_path)
    assert [(p.rule, p.message) for p in problems] == [("JSON", "duplicate key 'schema_version': provenance.json")]


# -- contract choice (05 §6.3, A-14) ------------------------------------------------------------


class Twin:
    """A second model plugin that claims residency ``none`` too."""

    @hookimpl
    def fpm_plugin_info(self):
        return PluginInfo(id="twin", kind="model", targets=("twin",), api_version=API_VERSION)

    @hookimpl
    def fpm_choose_producer_contract(self, identity):
        return (
            ProducerContract("twin_native", "native_graph_policy", "none")
            if identity.engram_residency == "none"
            else None
        )


def test_a_residency_claimed_twice_is_refused():
    host = PluginHost(autoload=False, plugins=[fpmcore_glm53flash, fpmcore_dsv41, Twin()], environ={})
    plan, cell, files = M.glm_example()
    (d,) = A.validate_files(host, cell, files, plan).diagnostics
    assert (d.rule, d.message) == (
        "A-14",
        "producer contract for engram residency none is registered twice: glm53flash, twin: r0.json",
    )


def test_cell_identity_defaults_to_the_legacy_identity():
    ident = A.cell_identity({"cell_id": "x"})
    assert (ident.model_config_sha256, ident.execution_profile, ident.engram_residency, ident.input_modality) == (
        "",
        "full",
        "none",
        "text",
    )
    assert not ident.configuration_bound
    flat = A.cell_identity({"model_config_sha256": "a" * 64, "engram_residency": "hbm_tp_sharded"})
    assert flat.configuration_bound and flat.engram_residency == "hbm_tp_sharded"


# -- general cells ---------------------------------------------------------------------------------


def _general(files):
    """The example as a producer without protocol or measurement record writes it."""
    files = copy.deepcopy(files)
    for name in [n for n in files if n.endswith(".jsonl")]:
        del files[name]
    doc = files["r0.json"]
    for key in (
        "measurement_protocol",
        "producer",
        "execution_mode",
        "execution_identity",
        "repetition_evidence",
        "warmup_evidence",
    ):
        doc.pop(key)
    for row in doc["results"]:
        row.pop("repetition_evidence_sha256")
        del row["fpms"][0]["benchmark_measurement"]
    for g in doc["iteration_groups"]:
        del g["rank_results"][0]["fpms"][0]["benchmark_measurement"]
    return files


def test_general_cell_without_protocol(host):
    plan, cell, files = M.glm_example()
    legacy = {"cell_id": cell["cell_id"]}
    files = _general(files)
    result = A.validate_files(host, legacy, files, plan)
    assert (result.status, result.contract) == ("accepted", "general")
    # a measurement record needs a protocol
    files["r0.json"]["results"][0]["fpms"][0]["benchmark_measurement"] = {"schema_version": 1}
    files["r0.json"]["iteration_groups"][0]["rank_results"][0]["fpms"][0]["benchmark_measurement"] = {
        "schema_version": 1
    }
    (d,) = A.validate_files(host, legacy, files, plan).diagnostics
    assert (d.rule, d.message) == (
        "A-29",
        "benchmark_measurement has no measurement_protocol: benchmark_id=1 rank=0: r0.json",
    )
    # A-40 still compares the retained FPM with its point
    plan, cell, files = M.glm_example()
    files = _general(files)
    files["r0.json"]["results"][3]["fpms"][0]["scheduled_requests"]["num_decode_requests"] = 2
    M.sync(files, 4)
    (d,) = A.validate_files(host, legacy, files, plan).diagnostics
    assert (d.rule, d.message) == (
        "A-40",
        "retained fpm workload differs from its point: num_decode_requests expected 1, found 2: benchmark_id=4 "
        "rank=0: r0.json",
    )


def test_a2_visits_results_before_iteration_groups():
    plan, cell, files = M.glm_example()
    doc = files["r0.json"]
    reordered = {"iteration_groups": doc.pop("iteration_groups"), **doc}
    reordered["iteration_groups"][0]["benchmark_id"] = 1.0
    reordered["results"][4]["point"]["batch_size"] = "2"
    files["r0.json"] = reordered
    view = A.CellView(cell=cell, files=files, plan=plan)
    d = A.a2_integers(view)
    assert (d.rule, d.message) == ("A-2", 'results[4].point.batch_size must be an integer, found "2": r0.json')


def _int_fields(value, spec, path=()):
    """Every integer field of A-2's schema present in ``value``, as key paths (document order aside)."""
    if spec in (A.INT, A.NINT):
        yield path
    elif spec == A.ROWS:
        for i, row in enumerate(value if isinstance(value, list) else ()):
            for j, _ in enumerate(row if isinstance(row, list) else ()):
                yield (*path, i, j)
    elif isinstance(spec, tuple):
        for i, item in enumerate(value if isinstance(value, list) else ()):
            yield from _int_fields(item, spec[1], (*path, i))
    elif isinstance(value, dict):
        for key, sub in spec.items():
            if key in value:
                yield from _int_fields(value[key], sub, (*path, key))


def _dotted(path):
    out = ""
    for seg in path:
        out = f"{out}[{seg}]" if isinstance(seg, int) else f"{out}.{seg}" if out else seg
    return out


def test_a2_finds_every_wrong_integer_field_with_its_path():
    """A-2: each integer field of a rank artifact and of its sidecar, made a boolean, a float or a
    string, is the field A-2 reports (the fast tests never hide one)."""
    plan, cell, files = M.glm_example()
    doc = files["r0.json"]
    paths = list(_int_fields(doc, A.RANK_INT_SCHEMA))
    # every FPM copy is visited: rows, and both places in the groups
    assert len([p for p in paths if p[-1] == "forward_index"]) == 2 * 5 * 10
    assert ("results", 0, "fpms", 0, "queued_requests", "sum_decode_kv_tokens") in paths
    bad = [True, 2.5, "7", 1.0, False]
    view = A.CellView(cell=cell, files=files, plan=plan)
    for n, path in enumerate(paths):
        parent = doc
        for seg in path[:-1]:
            parent = parent[seg]
        old, parent[path[-1]] = parent[path[-1]], bad[n % len(bad)]
        d = A.a2_integers(view)
        parent[path[-1]] = old
        found = A.js(bad[n % len(bad)])
        assert d is not None and d.message == f"{_dotted(path)} must be an integer, found {found}: r0.json", path
    assert A.a2_integers(view) is None
    lines = files["repetitions.jsonl"]
    for k, line in enumerate(lines):
        obj = json.loads(line)
        for path in _int_fields(obj, A.SIDECAR_INT_SCHEMA):
            changed = copy.deepcopy(obj)
            parent = changed
            for seg in path[:-1]:
                parent = parent[seg]
            parent[path[-1]] = 1.0
            lines[k] = A.canonical_bytes(changed) + b"\n"
            d = A.a2_integers(view)
            assert d.message == f"lines[{k}].{_dotted(path)} must be an integer, found 1.0: repetitions.jsonl"
        lines[k] = line


def test_a2_checks_a_queued_count_dynamo_does_not_write():
    """A-2: Dynamo's ``queued_requests`` carries no ``sum_prefill_kv_tokens``; when present it is an
    integer field (an earlier fast test let ``1.5`` through)."""
    plan, cell, files = M.glm_example()
    M.raw(files, 3)["queued_requests"]["sum_prefill_kv_tokens"] = 1.5
    M.sync(files)
    (d,) = A.validate_files(_HOST, cell, files, plan).diagnostics
    assert (d.rule, d.message) == (
        "A-2",
        "results[1].fpms[0].benchmark_measurement.raw_fpms[3].queued_requests.sum_prefill_kv_tokens must be an "
        "integer, found 1.5: r0.json",
    )


def test_a8_refuses_a_row_that_differs_from_its_group():
    """A-8: a row whose retained FPM or point differs from its group's copy is refused (the equality
    A-2's pass records for A-8 must not hide it, on one rank or on the second of two)."""
    for ranks, rank in ((1, 0), (2, 1)):
        plan, cell, files = M.glm_example(ranks)
        files[f"r{rank}.json"]["results"][2]["fpms"][0]["wall_time"] = 0.5  # the group keeps its copy
        (d,) = A.validate_files(_HOST, cell, files, plan).diagnostics
        assert (d.rule, d.message) == (
            "A-8",
            f"benchmark_id=3: rank {rank} row differs from its synchronized group: r{rank}.json",
        )
        plan, cell, files = M.glm_example(ranks)
        files[f"r{rank}.json"]["results"][4]["point"]["padding_tokens"] = 3
        (d,) = A.validate_files(_HOST, cell, files, plan).diagnostics
        assert (d.rule, d.message) == (
            "A-8",
            f"benchmark_id=5: rank {rank} row differs from its synchronized group: r{rank}.json",
        )


def test_a6_refuses_ranks_whose_iteration_groups_differ():
    """A-6: iteration groups that differ across ranks are refused with the first differing field."""
    plan, cell, files = M.glm_example(2)
    fpm = files["r1.json"]["iteration_groups"][3]["rank_results"][0]["fpms"][0]
    was = fpm["wall_time"]
    fpm["wall_time"] = 0.5
    (d,) = A.validate_files(_HOST, cell, files, plan).diagnostics
    assert (d.rule, d.message) == (
        "A-6",
        f"native ranks disagree on iteration_groups[3].rank_results[0].fpms[0].wall_time: rank 0={was}, rank "
        "1=0.5: r1.json",
    )


def test_upper_median_is_the_fifth_of_nine():
    assert A.upper_median([0.0348, 0.0347, 0.0349, 0.0346, 0.0350, 0.0348, 0.0351, 0.0347, 0.0352]) == 0.0348
    assert A.reduction_indices("adjacent_upper_median", 10, 10) == list(range(1, 10))
    assert A.reduction_indices("last_step", 10, 10) == [9]
    assert A.reduction_indices("single_step", 2, 2) is None
    assert A.reduction_indices("adjacent_upper_median", 2, 2) is None  # expected > 2


def test_point_key_of_9_1():
    point = {
        "point_type": "prefill",
        "benchmark_id": 2,
        "batch_size": 1,
        "total_prefill_tokens": 64,
        "total_kv_read_tokens": 2176,
        "rows": [[64, 2176]],
        "partition": None,
        "expected_cudagraph_mode": "PIECEWISE",
    }
    assert A.point_key(point) == "d60ecb7532ce754610cb0521e84f5d0a1c9066f7876cf17a31462ed0d5c629f4"


# -- robustness: mutated artifacts never raise ----------------------------------------------------

SMALL = {
    "schema_version": 3,
    "prefill": [M.SMOKE_MANIFEST["prefill"][0], M.SMOKE_MANIFEST["prefill"][1]],
    "decode": [M.SMOKE_MANIFEST["decode"][0]],
}
_PLAN = M.glm_plan(smoke=SMALL)
_CELL = next(c for c in _PLAN["cells"] if c["point_set"] == "smoke")
_FILES = M.glm_cell(_PLAN, _CELL, SMALL)


def _paths(value, prefix=()):
    yield prefix
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(value, list) and not (value and isinstance(value[0], bytes)):
        for i, v in enumerate(value):
            yield from _paths(v, (*prefix, i))


_PATHS = [p for name in sorted(_FILES) for p in _paths(_FILES[name], (name,)) if len(p) > 1]

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-3, 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=4,
)


def _replaced(root, path, op, value=None):
    """A copy of ``root`` with the value at ``path`` replaced or deleted (only the spine is copied)."""
    if not path:
        return value
    head, rest = path[0], path[1:]
    new = copy.copy(root)
    if rest:
        new[head] = _replaced(root[head], rest, op, value)
    elif op == "delete":
        del new[head]
    else:
        new[head] = value
    return new


def _group_path(path):
    """The path of the same value in the row's iteration group (05 §9.3 adjustment), or ``None``."""
    if len(path) > 3 and path[0] == "r0.json" and path[1] == "results":
        k = path[2]
        if path[3] == "point":
            return ("r0.json", "iteration_groups", k, "point", *path[4:])
        if path[3] == "fpms" and len(path) > 4 and path[4] == 0:
            return ("r0.json", "iteration_groups", k, "rank_results", 0, "fpms", 0, *path[5:])
    return None


@settings(max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(st.data())
def test_mutated_artifacts_never_raise(data):
    host = _HOST
    files = dict(_FILES)
    for _ in range(data.draw(st.integers(1, 2))):
        kind = data.draw(st.sampled_from(["replace", "replace", "delete", "swap", "line"]))
        path = data.draw(st.sampled_from(_PATHS))
        if path[0] not in files:
            continue
        try:
            if kind == "delete":
                files[path[0]] = _replaced(files[path[0]], path[1:], "delete")
            elif kind == "swap":
                other = data.draw(st.sampled_from(_PATHS))
                v = _FILES[other[0]]
                for k in other[1:]:
                    v = v[k]
                files[path[0]] = _replaced(files[path[0]], path[1:], "replace", v)
            elif kind == "line":
                lines = list(files["repetitions.jsonl"])
                i = data.draw(st.integers(0, len(lines) - 1))
                lines[i] = data.draw(
                    st.sampled_from(
                        [b"", b"{}\n", b"not json\n", lines[i].rstrip(b"\n"), lines[i] * 2, b'{"benchmark_id":true}\n']
                    )
                )
                files["repetitions.jsonl"] = lines
            else:
                value = data.draw(json_values)
                files[path[0]] = _replaced(files[path[0]], path[1:], "replace", value)
                mirror = _group_path(path)
                if mirror is not None and data.draw(st.booleans()):  # keep A-8 satisfied, reach the row rules
                    files[path[0]] = _replaced(files[path[0]], mirror[1:], "replace", value)
        except (KeyError, IndexError, TypeError):
            continue  # the path vanished under an earlier mutation
    result = A.validate_files(host, _CELL, files, _PLAN, owners={})
    assert result.status in ("accepted", "refused")
    assert all(isinstance(d.message, str) and d.rule for d in result.diagnostics)


_HOST = PluginHost(autoload=False, plugins=[fpmcore_glm53flash, fpmcore_dsv41], environ={})


def test_fuzz_base_is_valid():
    assert A.validate_files(_HOST, _CELL, _FILES, _PLAN).status == "accepted"


def test_negative_cases_survive_the_disk(host, tmp_path):
    """Every negative case, written by the tool and read back (05 §1), is refused with the same diagnostic."""
    M.write_negatives(tmp_path)
    for case in M.CASES:
        d = tmp_path / case.id
        expected = json.loads((d / "expected.json").read_text())
        plan = json.loads((d / "plan.json").read_text())
        files, problems = A.read_attempt(d / "attempt")
        result = A.validate_files(host, expected["cell"], files, plan, attempt=".", problems=problems)
        assert [(x.rule, x.message) for x in result.diagnostics] == [(case.rule, expected["message"])], case.id


# -- publication (A-41, A-42) ------------------------------------------------------------------


class Lenient:
    """A model plugin whose contract runs the general rules only (no A-37)."""

    CONTRACT = ProducerContract("lenient_native", "native_graph_policy", "host_offload")

    @hookimpl
    def fpm_plugin_info(self):
        return PluginInfo(id="lenient", kind="model", targets=("lenient",), api_version=API_VERSION)

    @hookimpl
    def fpm_choose_producer_contract(self, identity):
        return self.CONTRACT if identity.engram_residency == "host_offload" else None

    @hookimpl
    def fpm_validate_artifact(self, contract, cell, files, plan):
        if contract.name != self.CONTRACT.name:
            return None
        view = A.CellView.from_hook(contract, cell, files, plan)
        return A.run_rules(view, A.ContractRules(name=contract.name, owns_protocol_producer=True))


def test_publication_labels_rows_of_configuration_bound_cells():
    host = PluginHost(autoload=False, plugins=[fpmcore_glm53flash, fpmcore_dsv41, Lenient()], environ={})
    case = next(c for c in M.CASES if c.id == "N19")  # the artifact read under a host_offload cell
    plan, cell, files, _ = case.build()
    assert A.publish_files(host, cell, files, plan).status == "accepted"
    files["r0.json"]["results"][1]["kv_seed_regime"] = "real_prefix"
    files["r0.json"]["results"][1]["fpms"][0]["benchmark_measurement"]["preparation"]["kv_seed_regime"] = "real_prefix"
    M.sync(files)
    assert A.validate_files(host, cell, files, plan).status == "accepted"  # the reader alone accepts it
    (d,) = A.publish_files(host, cell, files, plan).diagnostics
    assert (d.rule, d.message) == (
        "A-41",
        "cannot publish benchmark_id=2 rank=0: kv_seed_regime real_prefix is not accepted for this execution "
        "identity: r0.json",
    )
    # a reader refusal blocks publication with its own text
    plan, cell, files, message = next(c for c in M.CASES if c.id == "N6").build()
    assert [x.message for x in A.publish_files(_HOST, cell, files, plan).diagnostics] == [message]


# -- a plan of the reference (fpm_collection_plan_v10: no execution identity, points left to the runtime) --

REFERENCE_PLAN = ROOT / "tests" / "data" / "artifacts" / "fpm_collection_plan_v10.json"


def test_reference_plan_cells_are_general(host):
    plan = json.loads(REFERENCE_PLAN.read_text())
    cell = A.plan_cells(plan)["fpm-d111aeb8823a9bee"]
    assert not A.cell_identity(cell).configuration_bound
    _, _, files = M.glm_example()
    files = _general(files)
    del files["points.json"]  # the plan stages no point list: the runtime decides (A-10 does not apply)
    files["provenance.json"].update(cell_id=cell["cell_id"], plan_sha256=plan["sha256"])
    result = A.validate_files(host, cell, files, plan)
    assert (result.status, result.contract) == ("accepted", "general")
    # the GLM artifact read under this cell: its protocol producer belongs to another contract
    _, _, files = M.glm_example()
    del files["points.json"]
    files["provenance.json"].update(cell_id=cell["cell_id"], plan_sha256=plan["sha256"])
    (d,) = A.validate_files(host, cell, files, plan).diagnostics
    assert (d.rule, d.message) == (
        "A-17",
        "measurement_protocol.producer belongs to the glm-5.3-flash producer contract, "
        "found in a cell with contract general: r0.json",
    )
