"""One cell's verdict (05 §6, §8): the contract choice, the execution identity of the cell, general
cells, the merge invariants, the negative cases on disk, publication (A-41, A-42) and a plan of the
reference.

The artifacts come from ``tests/support/artifacts`` (the producer's shape).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

import fpmcore_dsv41
import fpmcore_glm53flash
from fpmcore import API_VERSION, PluginInfo, ProducerContract, hookimpl
from fpmcore.documents.errors import FpmError
from fpmcore.host.plugins import PluginHost
from fpmcore.validate.attempt import read_attempt
from fpmcore.validate.cell import CellView, cell_identity
from fpmcore.validate.evaluation import ContractRules, run_rules
from fpmcore.validate.measured_values import point_key, upper_median
from fpmcore.validate.reader import plan_cells, publish_files, validate_files
from fpmcore.validate.rows import expected_regime, reduction_indices
from tests.validate.support import M, host, producer_dir, strict  # noqa: F401  (fixtures)

pytestmark = pytest.mark.usefixtures("strict", "producer_dir")

ROOT = Path(__file__).resolve().parents[2]


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
    (d,) = validate_files(host, cell, files, plan).diagnostics
    assert (d.rule, d.message) == (
        "A-14",
        "producer contract for engram residency none is registered twice: glm53flash, twin: r0.json",
    )


def test_cell_identity_defaults_to_the_legacy_identity():
    ident = cell_identity({"cell_id": "x"})
    assert (ident.model_config_sha256, ident.execution_profile, ident.engram_residency, ident.input_modality) == (
        "",
        "full",
        "none",
        "text",
    )
    assert not ident.configuration_bound
    flat = cell_identity({"model_config_sha256": "a" * 64, "engram_residency": "hbm_tp_sharded"})
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
    result = validate_files(host, legacy, files, plan)
    assert (result.status, result.contract) == ("accepted", "general")
    # a measurement record needs a protocol
    files["r0.json"]["results"][0]["fpms"][0]["benchmark_measurement"] = {"schema_version": 1}
    files["r0.json"]["iteration_groups"][0]["rank_results"][0]["fpms"][0]["benchmark_measurement"] = {
        "schema_version": 1
    }
    (d,) = validate_files(host, legacy, files, plan).diagnostics
    assert (d.rule, d.message) == (
        "A-29",
        "benchmark_measurement has no measurement_protocol: benchmark_id=1 rank=0: r0.json",
    )
    # A-40 still compares the retained FPM with its point
    plan, cell, files = M.glm_example()
    files = _general(files)
    files["r0.json"]["results"][3]["fpms"][0]["scheduled_requests"]["num_decode_requests"] = 2
    M.sync(files, 4)
    (d,) = validate_files(host, legacy, files, plan).diagnostics
    assert (d.rule, d.message) == (
        "A-40",
        "retained fpm workload differs from its point: num_decode_requests expected 1, found 2: benchmark_id=4 "
        "rank=0: r0.json",
    )


def test_a8_refuses_a_row_that_differs_from_its_group(host):
    """A-8: a row whose retained FPM or point differs from its group's copy is refused (the equality
    A-2's pass records for A-8 must not hide it, on one rank or on the second of two)."""
    for ranks, rank in ((1, 0), (2, 1)):
        plan, cell, files = M.glm_example(ranks)
        files[f"r{rank}.json"]["results"][2]["fpms"][0]["wall_time"] = 0.5  # the group keeps its copy
        (d,) = validate_files(host, cell, files, plan).diagnostics
        assert (d.rule, d.message) == (
            "A-8",
            f"benchmark_id=3: rank {rank} row differs from its synchronized group: r{rank}.json",
        )
        plan, cell, files = M.glm_example(ranks)
        files[f"r{rank}.json"]["results"][4]["point"]["padding_tokens"] = 3
        (d,) = validate_files(host, cell, files, plan).diagnostics
        assert (d.rule, d.message) == (
            "A-8",
            f"benchmark_id=5: rank {rank} row differs from its synchronized group: r{rank}.json",
        )


def test_a6_refuses_ranks_whose_iteration_groups_differ(host):
    """A-6: iteration groups that differ across ranks are refused with the first differing field."""
    plan, cell, files = M.glm_example(2)
    fpm = files["r1.json"]["iteration_groups"][3]["rank_results"][0]["fpms"][0]
    was = fpm["wall_time"]
    fpm["wall_time"] = 0.5
    (d,) = validate_files(host, cell, files, plan).diagnostics
    assert (d.rule, d.message) == (
        "A-6",
        f"native ranks disagree on iteration_groups[3].rank_results[0].fpms[0].wall_time: rank 0={was}, rank "
        "1=0.5: r1.json",
    )


def test_upper_median_is_the_fifth_of_nine():
    assert upper_median([0.0348, 0.0347, 0.0349, 0.0346, 0.0350, 0.0348, 0.0351, 0.0347, 0.0352]) == 0.0348
    assert reduction_indices("adjacent_upper_median", 10, 10) == list(range(1, 10))
    assert reduction_indices("last_step", 10, 10) == [9]
    assert reduction_indices("single_step", 2, 2) is None
    assert reduction_indices("adjacent_upper_median", 2, 2) is None  # expected > 2


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
    assert point_key(point) == "d60ecb7532ce754610cb0521e84f5d0a1c9066f7876cf17a31462ed0d5c629f4"


def test_negative_cases_survive_the_disk(host, tmp_path):
    """Every negative case, written by the tool and read back (05 §1), is refused with the same diagnostic."""
    M.write_negatives(tmp_path)
    for case in M.CASES:
        d = tmp_path / case.id
        expected = json.loads((d / "expected.json").read_text())
        plan = json.loads((d / "plan.json").read_text())
        files, problems = read_attempt(d / "attempt")
        result = validate_files(host, expected["cell"], files, plan, attempt=".", problems=problems)
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
    def fpm_validate_artifact(self, contract, cell, files, plan, attempt, owners, producer):
        if contract.name != self.CONTRACT.name:
            return None
        view = CellView.from_hook(contract, cell, files, plan, attempt=attempt, owners=owners, producer=producer)
        return run_rules(view, ContractRules(name=contract.name, owns_protocol_producer=True))


def test_publication_labels_rows_of_configuration_bound_cells(host):
    lenient = PluginHost(autoload=False, plugins=[fpmcore_glm53flash, fpmcore_dsv41, Lenient()], environ={})
    case = next(c for c in M.CASES if c.id == "N19")  # the artifact read under a host_offload cell
    plan, cell, files, _ = case.build()
    assert publish_files(lenient, cell, files, plan).status == "accepted"
    files["r0.json"]["results"][1]["kv_seed_regime"] = "real_prefix"
    files["r0.json"]["results"][1]["fpms"][0]["benchmark_measurement"]["preparation"]["kv_seed_regime"] = "real_prefix"
    M.sync(files)
    assert validate_files(lenient, cell, files, plan).status == "accepted"  # the reader alone accepts it
    (d,) = publish_files(lenient, cell, files, plan).diagnostics
    assert (d.rule, d.message) == (
        "A-41",
        "cannot publish benchmark_id=2 rank=0: kv_seed_regime real_prefix is not accepted for this execution "
        "identity: r0.json",
    )
    # a reader refusal blocks publication with its own text
    plan, cell, files, message = next(c for c in M.CASES if c.id == "N6").build()
    assert [x.message for x in publish_files(host, cell, files, plan).diagnostics] == [message]


# -- a plan of the reference (fpm_collection_plan_v10: no execution identity, points left to the runtime) --

REFERENCE_PLAN = ROOT / "tests" / "validate" / "data" / "fpm_collection_plan_v10.json"


def test_reference_plan_cells_are_general(host):
    plan = json.loads(REFERENCE_PLAN.read_text())
    cell = plan_cells(plan)["fpm-d111aeb8823a9bee"]
    assert not cell_identity(cell).configuration_bound
    _, _, files = M.glm_example()
    files = _general(files)
    del files["points.json"]  # the plan stages no point list: the runtime decides (A-10 does not apply)
    files["provenance.json"].update(cell_id=cell["cell_id"], plan_sha256=plan["sha256"])
    result = validate_files(host, cell, files, plan)
    assert (result.status, result.contract) == ("accepted", "general")
    # the GLM artifact read under this cell: its protocol producer belongs to another contract
    _, _, files = M.glm_example()
    del files["points.json"]
    files["provenance.json"].update(cell_id=cell["cell_id"], plan_sha256=plan["sha256"])
    (d,) = validate_files(host, cell, files, plan).diagnostics
    assert (d.rule, d.message) == (
        "A-17",
        "measurement_protocol.producer belongs to the glm-5.3-flash producer contract, "
        "found in a cell with contract general: r0.json",
    )


# -- an unreadable execution identity is a refusal, never the general contract -------------------

HEX = "7" * 64


@pytest.mark.parametrize(
    ("identity", "problem"),
    [
        (
            "hbm_tp_sharded",
            "execution_identity expected an object of model_config_sha256, execution_profile, "
            'engram_residency, input_modality, found "hbm_tp_sharded"',
        ),
        (
            None,
            "execution_identity expected an object of model_config_sha256, execution_profile, engram_residency, "
            "input_modality, found null",
        ),
        (
            {"engram_residency": "hbm_tp_sharded"},
            "execution_identity expected an object of model_config_sha256, "
            'execution_profile, engram_residency, input_modality, found {"engram_residency":"hbm_tp_sharded"}',
        ),
        (
            {
                "model_config_sha256": HEX,
                "execution_profile": "full",
                "engram_residency": "hbm_tp_sharded",
                "input_modality": "text",
                "extra": 1,
            },
            None,
        ),
        (
            {
                "model_config_sha256": None,
                "execution_profile": "full",
                "engram_residency": "hbm_tp_sharded",
                "input_modality": "text",
            },
            "model_config_sha256 expected an empty string or a 64-hex digest, found null",
        ),
        (
            {
                "model_config_sha256": "x",
                "execution_profile": "full",
                "engram_residency": "hbm_tp_sharded",
                "input_modality": "text",
            },
            'model_config_sha256 expected an empty string or a 64-hex digest, found "x"',
        ),
        (
            {"model_config_sha256": HEX, "execution_profile": "full", "engram_residency": 5, "input_modality": "text"},
            "engram_residency expected a non-empty string, found 5",
        ),
        (
            {
                "model_config_sha256": HEX,
                "execution_profile": "",
                "engram_residency": "hbm_tp_sharded",
                "input_modality": "text",
            },
            'execution_profile expected a non-empty string, found ""',
        ),
    ],
)
def test_a_malformed_execution_identity_is_refused_at_a14(host, identity, problem):
    """A DeepSeek V4.1 cell whose identity cannot be read once fell back to the general contract
    and passed; it is refused (A-14: no contract can be chosen for it)."""
    plan = M.dsv41_plan()
    cell = copy.deepcopy(plan["cells"][0])
    files = M.dsv41_cell(plan, plan["cells"][0], M.DSV41_MANIFEST)
    assert validate_files(host, cell, files, plan).status == "accepted"
    cell["execution_identity"] = identity
    (d,) = validate_files(host, cell, files, plan).diagnostics
    if problem is None:
        problem = (
            "execution_identity expected an object of model_config_sha256, execution_profile, engram_residency, "
            "input_modality, found " + json.dumps(identity, sort_keys=True, separators=(",", ":"))
        )
    assert (d.rule, d.message) == (
        "A-14",
        f"native execution identity of the frozen cell is unreadable: {problem}: r0.json",
    )


def test_identity_columns_on_the_cell_are_read_strictly(host):
    with pytest.raises(FpmError, match="engram_residency expected a non-empty string, found true"):
        cell_identity({"cell_id": "x", "model_config_sha256": HEX, "engram_residency": True})
    with pytest.raises(FpmError, match="cell expected an object, found 7"):
        cell_identity(7)


# -- 05 §2 / A-5: a publishable artifact skips no point -----------------------------------------


@pytest.mark.parametrize(
    ("skipped", "found"),
    [
        ([{"benchmark_id": 6, "reason": "timeout"}], '[{"benchmark_id":6,"reason":"timeout"}]'),
        (None, "null"),
        ("absent", "absent"),
    ],
)
def test_skipped_points_are_refused_at_a5(host, skipped, found):
    """An artifact listing skipped points was once accepted; 05 §2 requires ``skipped_points`` ``[]``
    and A-5 refuses an artifact that skipped any (its counter and its list)."""
    plan, cell, files = M.glm_example()
    if skipped == "absent":
        del files["r0.json"]["skipped_points"]
    else:
        files["r0.json"]["skipped_points"] = skipped
    (d,) = validate_files(host, cell, files, plan).diagnostics
    assert (d.rule, d.message) == (
        "A-5",
        f"native coverage is inconsistent: skipped_points expected [], found {found}: r0.json",
    )


def test_collector_provenance_is_compared_exactly(host):
    """A-13: the provenance ``schema_version`` is the integer 1 (``1.0`` was accepted), on every pod."""
    plan, cell, files = M.glm_example()
    files["provenance.json"]["schema_version"] = 1.0
    (d,) = validate_files(host, cell, files, plan).diagnostics
    assert (d.rule, d.message) == (
        "A-13",
        "collector provenance differs from the frozen cell: schema_version expected 1, found 1.0: provenance.json",
    )
    plan, cell, files = M.glm_example()
    files["provenance.pod1.json"] = dict(files["provenance.json"], schema_version=1.0)  # a second pod
    (d,) = validate_files(host, cell, files, plan).diagnostics
    assert (d.rule, d.message) == (
        "A-13",
        "collector provenance differs across pods: schema_version: provenance.pod1.json",
    )


@pytest.mark.parametrize(
    ("point", "regime"),
    [
        ({"point_type": "prefill", "total_kv_read_tokens": 2176}, "real_kv"),
        ({"point_type": "prefill", "total_kv_read_tokens": 0}, "not_applicable"),
        ({"point_type": "decode", "total_kv_read_tokens": 4096}, "real_kv"),
    ],
)
def test_kv_seed_regime_follows_7_4(point, regime):
    """05 §7.4, one table for A-37 and A-41."""
    assert expected_regime(point) == regime
