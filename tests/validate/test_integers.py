"""A-2 [BEYOND]: every integer field of a rank artifact and of its sidecar is a JSON integer (05 §8.1)."""

from __future__ import annotations

import copy
import json

import pytest

from fpmcore.validate.cell import CellView
from fpmcore.validate.integers import (
    RANK_INT_SCHEMA,
    RANK_INTEGERS,
    SIDECAR_INT_SCHEMA,
    integer_fields_are_integers,
)
from fpmcore.validate.measured_values import canonical_bytes, js
from fpmcore.validate.reader import validate_files
from tests.validate.support import M, dotted, host, integer_fields, producer_dir, strict  # noqa: F401  (fixtures)

pytestmark = pytest.mark.usefixtures("strict", "producer_dir")


def test_a2_visits_results_before_iteration_groups():
    plan, cell, files = M.glm_example()
    doc = files["r0.json"]
    reordered = {"iteration_groups": doc.pop("iteration_groups"), **doc}
    reordered["iteration_groups"][0]["benchmark_id"] = 1.0
    reordered["results"][4]["point"]["batch_size"] = "2"
    files["r0.json"] = reordered
    view = CellView(cell=cell, files=files, plan=plan)
    d = integer_fields_are_integers(view)
    assert (d.rule, d.message) == ("A-2", 'results[4].point.batch_size must be an integer, found "2": r0.json')


def test_a2_finds_every_wrong_integer_field_with_its_path():
    """A-2: each integer field of a rank artifact and of its sidecar, made a boolean, a float or a
    string, is the field A-2 reports (the fast tests never hide one)."""
    plan, cell, files = M.glm_example()
    doc = files["r0.json"]
    paths = list(integer_fields(doc, RANK_INT_SCHEMA))
    # every FPM copy is visited: rows, and both places in the groups
    assert len([p for p in paths if p[-1] == "forward_index"]) == 2 * 5 * 10
    assert ("results", 0, "fpms", 0, "queued_requests", "sum_decode_kv_tokens") in paths
    bad = [True, 2.5, "7", 1.0, False]
    view = CellView(cell=cell, files=files, plan=plan)
    for n, path in enumerate(paths):
        parent = doc
        for seg in path[:-1]:
            parent = parent[seg]
        old, parent[path[-1]] = parent[path[-1]], bad[n % len(bad)]
        d = integer_fields_are_integers(view)
        parent[path[-1]] = old
        found = js(bad[n % len(bad)])
        assert d is not None and d.message == f"{dotted(path)} must be an integer, found {found}: r0.json", path
    assert integer_fields_are_integers(view) is None
    lines = files["repetitions.jsonl"]
    for k, line in enumerate(lines):
        obj = json.loads(line)
        for path in integer_fields(obj, SIDECAR_INT_SCHEMA):
            changed = copy.deepcopy(obj)
            parent = changed
            for seg in path[:-1]:
                parent = parent[seg]
            parent[path[-1]] = 1.0
            lines[k] = canonical_bytes(changed) + b"\n"
            d = integer_fields_are_integers(view)
            assert d.message == f"lines[{k}].{dotted(path)} must be an integer, found 1.0: repetitions.jsonl"
        lines[k] = line


def test_a2_checks_a_queued_count_dynamo_does_not_write(host):
    """A-2: Dynamo's ``queued_requests`` carries no ``sum_prefill_kv_tokens``; when present it is an
    integer field (an earlier fast test let ``1.5`` through)."""
    plan, cell, files = M.glm_example()
    M.raw(files, 3)["queued_requests"]["sum_prefill_kv_tokens"] = 1.5
    M.sync(files)
    (d,) = validate_files(host, cell, files, plan).diagnostics
    assert (d.rule, d.message) == (
        "A-2",
        "results[1].fpms[0].benchmark_measurement.raw_fpms[3].queued_requests.sum_prefill_kv_tokens must be an "
        "integer, found 1.5: r0.json",
    )


@pytest.mark.parametrize(
    ("path", "value", "found"),
    [
        (("limits", "num_gpu_blocks"), 13696.0, "13696.0"),
        (("limits", "num_gpu_blocks"), True, "true"),
        (("limits", "max_model_len"), "131079", '"131079"'),
        (("limits", "block_size"), 2176.5, "2176.5"),
        (("serving_config", "hash_block_size"), 2176.0, "2176.0"),
        (("serving_config", "mamba_prefill_checkpoint", "alignment"), 16.0, "16.0"),
    ],
)
def test_a2_reads_the_limits_and_the_serving_config(host, path, value, found):
    """A float ``num_gpu_blocks`` was once accepted; the limits (05 §2) and the integer fields of
    ``serving_config`` (05 §7.2) are integer fields of A-2: exact integers, no floats, no booleans."""
    plan, cell, files = M.glm_example()
    parent = files["r0.json"]
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = value
    (d,) = validate_files(host, cell, files, plan).diagnostics
    assert (d.rule, d.message) == ("A-2", f"{'.'.join(path)} must be an integer, found {found}: r0.json")


def test_the_schema_is_compiled_once_and_checks_every_form():
    """The compiled check agrees with the document-order walk on objects of unusual form: keys
    missing, values that are not objects where objects are declared, lists that are not lists."""
    plan, cell, files = M.glm_example()
    doc = files["r0.json"]
    assert RANK_INTEGERS.passes(doc)
    odd = copy.deepcopy(doc)
    del odd["results"][0]["fpms"][0]["scheduled_requests"]["num_prefill_requests"]  # a key missing
    odd["results"][1]["fpms"][0]["queued_requests"] = ["not", "an", "object"]
    odd["results"][2]["fpms"][0]["benchmark_measurement"]["raw_fpms"] = {"not": "a list"}
    odd["iteration_groups"][0]["rank_results"] = "none"
    odd["results"][3]["fpms"].append(7)
    assert RANK_INTEGERS.passes(odd) and RANK_INTEGERS.first_non_integer(odd) is None
    odd["results"][4]["fpms"][0]["benchmark_measurement"]["raw_fpms"][9]["benchmark_sample"]["cudagraph"][
        "num_paddings"
    ] = 0.0
    assert not RANK_INTEGERS.passes(odd)
    assert RANK_INTEGERS.first_non_integer(odd) == (
        "results[4].fpms[0].benchmark_measurement.raw_fpms[9].benchmark_sample.cudagraph.num_paddings",
        0.0,
    )
