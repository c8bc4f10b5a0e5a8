"""The ``dsv41_eager`` contract (05 §6.3, §6.4): the general rules, A-14 … A-17, §6.4 and A-37."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

import fpmcore_dsv41
import fpmcore_glm53flash
from fpmcore.validate.reader import validate_files
from tests.validate.support import M, host, producer_dir, strict  # noqa: F401  (fixtures)

pytestmark = pytest.mark.usefixtures("strict", "producer_dir")

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def example():
    plan = M.dsv41_plan()
    cell = plan["cells"][0]
    return plan, cell, M.dsv41_cell(plan, cell, M.DSV41_MANIFEST)


def refusal(host, plan, cell, files):
    result = validate_files(host, cell, files, plan)
    assert result.status == "refused"
    (d,) = result.diagnostics
    return d.rule, d.message


def test_valid_eager_cell_is_accepted(host, example):
    plan, cell, files = example
    result = validate_files(host, cell, files, plan)
    assert (result.status, result.contract) == ("accepted", "dsv41_eager")
    # three raw samples, adjacent_upper_median over samples 1 and 2: the upper median of two is the larger
    walls = [r["wall_time"] for r in files["r0.json"]["results"][0]["fpms"][0]["benchmark_measurement"]["raw_fpms"]]
    assert result.retained[0].wall_time == max(walls[1:])


def test_v41_cell_with_native_graph_policy_artifact(host, example):
    """05 §6.3: the artifact's label never selects the contract; a V4.1 cell is read as eager."""
    plan, cell, files = example
    files["r0.json"]["execution_mode"] = "native_graph_policy"
    assert refusal(host, plan, cell, files) == (
        "A-16",
        "native execution identity cell expects execution mode eager, found native_graph_policy: r0.json",
    )


def test_glm_artifact_under_v41_cell_is_refused_at_a16(host):
    plan, cell, files = M.glm_example()
    v41 = copy.deepcopy(cell)
    v41["execution_identity"]["engram_residency"] = "hbm_tp_sharded"
    files["r0.json"]["execution_identity"] = dict(v41["execution_identity"])
    assert refusal(host, plan, v41, files)[0] == "A-16"


def test_protocol_producer_in_a_v41_cell(host, example):
    plan, cell, files = example
    files["r0.json"]["measurement_protocol"]["producer"] = M.glm_protocol()["producer"]
    assert refusal(host, plan, cell, files) == (
        "A-17",
        "measurement_protocol.producer belongs to the glm-5.3-flash producer contract, found in a cell with "
        "contract dsv41_eager: r0.json",
    )


@pytest.mark.parametrize(
    ("field", "value", "detail"),
    [
        ("source", "seeded_tokens", "input_provenance.source expected tokenizer_text, found seeded_tokens"),
        ("text_sha256", "abc", "input_provenance.text_sha256 expected a 64-hex digest, found abc"),
        ("tokenizer_revision", "", "input_provenance.tokenizer_revision expected a non-empty string, found "),
        ("num_tokens", 1, "input_provenance.num_tokens expected an integer ≥ 2, found 1"),
        (
            "num_unique_tokens",
            262145,
            "input_provenance.num_unique_tokens expected an integer in 1..262144, found 262145",
        ),
    ],
)
def test_input_provenance(host, example, field, value, detail):
    plan, cell, files = example
    files["r0.json"]["input_provenance"][field] = value
    assert refusal(host, plan, cell, files) == (
        "§6.4",
        f"native deepseek-v4.1 result has invalid input provenance: {detail}: r0.json",
    )


def test_kvwarm_stamp(host, example):
    plan, cell, files = example
    files["r0.json"]["kvwarm"] = {"method": "native_prefix_cache_real_seed"}
    rule, message = refusal(host, plan, cell, files)
    assert rule == "§6.4" and 'kvwarm expected {"method":"kvwarm_real_kv"}' in message


def test_cached_rows_are_real_kv(host, example):
    plan, cell, files = example
    row = files["r0.json"]["results"][1]  # decode
    row["kv_seed_regime"] = "not_applicable"
    m = row["fpms"][0]["benchmark_measurement"]
    m["preparation"]["kv_seed_regime"] = "not_applicable"
    M.sync(files, 2)
    assert refusal(host, plan, cell, files) == (
        "A-37",
        "kv_seed_regime does not follow its point: expected real_kv, found not_applicable: benchmark_id=2 rank=0: "
        "r0.json",
    )


def test_general_rules_apply(host, example):
    """A-40 applies to every contract: a raw sample of another workload is refused."""
    plan, cell, files = example
    s = files["r0.json"]["results"][1]["fpms"][0]["benchmark_measurement"]["raw_fpms"][1]
    s["scheduled_requests"]["num_decode_requests"] = 3
    M.sync(files, 2)
    assert refusal(host, plan, cell, files) == (
        "A-40",
        "raw sample 1 workload differs from its point: num_decode_requests expected 4, found 3: benchmark_id=2 "
        "rank=0: r0.json",
    )


def test_validate_answers_only_its_contract(example):
    plan, cell, files = example
    given = {"cell": cell, "files": files, "plan": plan, "attempt": ".", "owners": {}, "producer": {}}
    assert fpmcore_dsv41.fpm_validate_artifact(contract=fpmcore_glm53flash.CONTRACT, **given) is None
    assert fpmcore_dsv41.fpm_validate_artifact(contract=fpmcore_dsv41.CONTRACT, **given) == []
