"""The engine-steps producer contract refuses the mutations of a collected run by the named rules (05 §8).

Each case changes the collected run in one way and re-pins the artifact index
(so the index check does not hide the rule), adjusting dependent values where
stated so that only the named rule fails — like the negative cases of 05 §9.3.
"""

from __future__ import annotations

import copy
import hashlib
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from fpmcore.collect import store
from fpmcore.documents.jsonio import canonical_bytes, load_path
from fpmcore.testing import make_host, run_fpm
from fpmcore.validate.reader import validate_run
from tests.collect.conftest import plan_of, standin_host
from tests.collect.standin import StandinRuntime


@pytest.fixture(scope="module")
def run_and_engine(small_plan, model_dir, tmp_path_factory):
    runtime = StandinRuntime()
    out = tmp_path_factory.mktemp("contract") / "run"
    r = run_fpm(
        "collect", str(small_plan), "--model-dir", str(model_dir), "-o", str(out), "--smoke", host=standin_host(runtime)
    )
    assert r.exit_code == 0, r.stderr
    return out, runtime


@pytest.fixture
def mutate(run_and_engine, small_plan, tmp_path):
    """``mutate(fn)``: a copy of the run with ``fn(artifact, sidecar_lines)`` applied, index re-pinned; its verdict."""
    run, runtime = run_and_engine

    count = iter(range(100))

    def apply(fn: Callable[..., None], *, sidecar_bound: bool = True):
        out = tmp_path / f"run{next(count)}"
        shutil.copytree(run, out)
        art = load_path(out / "r0.json")
        prov = load_path(out / "provenance.json")
        lines = [load_path_line(x) for x in (out / "repetitions.jsonl").read_bytes().splitlines()]
        fn(art, lines, prov) if fn.__code__.co_argcount == 3 else fn(art, lines)
        (out / "provenance.json").write_bytes(store.json_bytes(prov))
        side = b"".join(canonical_bytes(x) + b"\n" for x in lines)
        if sidecar_bound:  # keep the sidecar bound to the artifact and each row to its line
            art["repetition_evidence"]["sha256"] = hashlib.sha256(side).hexdigest()
            art["repetition_evidence"]["records"] = len(lines)
            for row, line in zip(art["results"], lines, strict=False):
                row["repetition_evidence_sha256"] = hashlib.sha256(canonical_bytes(line)).hexdigest()
            for g, row in zip(art["iteration_groups"], art["results"], strict=False):
                g["rank_results"][0]["fpms"] = copy.deepcopy(row["fpms"])
                g["point"] = copy.deepcopy(row["point"])
                g["wall_time"] = row["fpms"][0]["wall_time"]
            t = art["timing"]
            t["measured_iteration_seconds"] = sum(g["wall_time"] for g in art["iteration_groups"])
            t["benchmark_elapsed_seconds"] = max(t["benchmark_elapsed_seconds"], t["measured_iteration_seconds"])
        (out / "r0.json").write_bytes(store.json_bytes(art))
        (out / "repetitions.jsonl").write_bytes(side)
        index = {"files": {n: hashlib.sha256((out / n).read_bytes()).hexdigest() for n in store.ARTIFACT_FILES}}
        (out / "index.json").write_bytes(store.json_bytes(index))
        (result,) = validate_run(standin_host(runtime), out, plan_of(small_plan))
        return result

    return apply


def load_path_line(line: bytes) -> dict:
    from fpmcore.documents.jsonio import loads

    return loads(line)


def _row(art: dict, k: int = 1) -> dict:
    return art["results"][k]


def _retained(row: dict) -> dict:
    return row["fpms"][0]


def _bm(row: dict) -> dict:
    return _retained(row)["benchmark_measurement"]


def test_the_unchanged_run_is_accepted(mutate):
    result = mutate(lambda art, lines: None)
    assert (result.contract, result.status) == ("fpmcore_engine_steps", "accepted")


def test_a_changed_row_wall_time_is_refused_by_the_reduction(mutate):
    """A-34: the retained wall time moved to the slowest repetition (group time and totals moved with it)."""

    def fn(art, lines):
        raw = _bm(_row(art))["raw_fpms"]
        _retained(_row(art))["wall_time"] = max(s["wall_time"] for s in raw[1:])

    result = mutate(fn)
    assert result.diagnostics[0].rule == "A-34"
    assert "benchmark_measurement reduction disagrees with retained timing" in result.diagnostics[0].message


def test_a_changed_row_point_is_refused_by_the_staged_list(mutate):
    """A-10: a point whose kv-read tokens changed no longer encodes to the plan's staged list."""

    def fn(art, lines):
        p = _row(art)["point"]
        p["total_kv_read_tokens"] += 544
        p["rows"] = [[p["rows"][0][0], p["rows"][0][1] + 544]]

    result = mutate(fn)
    assert result.diagnostics[0].rule == "A-10"
    assert result.diagnostics[0].message.startswith("native points differ from the staged plan list")


def test_a_missing_repetition_is_refused(mutate):
    """A-32: the last raw sample removed, expected samples, indices and the retained value recomputed, and the
    sidecar's last measured entry dropped: five repetitions where the protocol measured six."""

    def fn(art, lines):
        row = _row(art)
        bm = _bm(row)
        bm["raw_fpms"].pop()
        bm["expected_internal_samples"] = 5
        bm["estimate"]["raw_sample_indices"] = [1, 2, 3, 4]
        _retained(row)["wall_time"] = sorted(s["wall_time"] for s in bm["raw_fpms"][1:])[2]
        lines[1]["repetitions"].pop()

    result = mutate(fn)
    d = result.diagnostics[0]
    assert d.rule == "A-32"
    assert d.message == (
        "benchmark_measurement does not hold the producer's 6 measured repetitions with their "
        "adjacent_trimmed_mean estimate: method=adjacent_trimmed_mean, raw_samples=5, "
        "expected_internal_samples=5: benchmark_id=2 rank=0: r0.json"
    ).replace("r0.json", d.where)


def test_a_foreign_producer_record_is_refused(mutate, run_and_engine):
    """A-21: a producer file whose bytes differ from the installed one, another producer name, another model."""
    _, runtime = run_and_engine
    installed = runtime.driver().producer.files[0]

    def edited_file(art, lines):
        art["producer"]["files"][0]["sha256"] = "0" * 64

    d = mutate(edited_file).diagnostics[0]
    assert d.rule == "A-21"
    assert d.message.startswith(
        f"engine-steps result lacks valid producer.files[{installed.path}]: expected "
        f"{installed.sha256}, found {'0' * 64}"
    )

    def renamed(art, lines):
        art["producer"]["name"] = "someone_elses_scheduler"

    d = mutate(renamed).diagnostics[0]
    assert (
        d.rule == "A-21" and "producer.name: expected standin_engine_steps, found someone_elses_scheduler" in d.message
    )

    def other_model(art, lines):
        art["producer"]["model_config_sha256"] = "1" * 64

    d = mutate(other_model).diagnostics[0]
    assert d.rule == "A-21" and "producer.model_config_sha256" in d.message


def test_a_producer_of_another_runtime_than_the_collectors_is_refused(mutate):
    """A-22: the collector provenance names runtime vllm 0.33.1; the producer ran on vllm 0.33.0."""

    def fn(art, lines, prov):
        prov["runtime"]["backend_version"] = "0.33.1"

    d = mutate(fn).diagnostics[0]
    assert d.rule == "A-22"
    assert d.message.startswith(
        "engine-steps producer.runtime differs from the collector provenance runtime: "
        "expected vllm==0.33.1, found vllm==0.33.0"
    )


def test_a_raw_sample_of_another_workload_is_refused(mutate):
    """A-40: raw sample 2 of a cached prefill point read no cached tokens."""

    def fn(art, lines):
        _bm(_row(art))["raw_fpms"][2]["scheduled_requests"]["sum_prefill_kv_tokens"] = 0

    d = mutate(fn).diagnostics[0]
    assert d.rule == "A-40"
    assert d.message.startswith(
        "raw sample 2 workload differs from its point: sum_prefill_kv_tokens expected 544, found 0"
    )


def test_a_sidecar_line_that_contradicts_its_row_is_refused(mutate):
    """A-39: the sidecar's measured wall time of raw sample 3 differs from the row's."""

    def fn(art, lines):
        rep = [r for r in lines[1]["repetitions"] if r.get("raw_sample_index") == 3][0]
        rep["wall_time"] += 0.5

    d = mutate(fn).diagnostics[0]
    assert d.rule == "A-39"
    assert "contradicts its row: pass 1: measured wall_time of raw sample 3" in d.message


def test_an_unbound_sidecar_is_refused(mutate):
    """A-28: the sidecar changed without the artifact's record of it."""

    def fn(art, lines):
        lines[0]["repetitions"][0]["fpm_count"] += 1

    d = mutate(fn, sidecar_bound=False).diagnostics[0]
    assert d.rule == "A-28" and d.message.startswith("repetition evidence sidecar digest differs")


def test_a_protocol_that_claims_other_counts_is_refused(mutate):
    """A-32: the protocol claims five measured repetitions while every row holds six (three passes of two)."""

    def fn(art, lines):
        art["measurement_protocol"]["producer"]["measured_repetitions"] = 5

    d = mutate(fn).diagnostics[0]
    assert d.rule == "A-32" and "the producer's 5 measured repetitions" in d.message


def test_a_protocol_without_a_valid_decode_lead_in_is_refused(mutate):
    """A-23: the decode lead-in is an integer from 1 to 256 decode steps; a run collected before it existed has
    none and is read with its old protocol (one decode before the measured one)."""

    def zero(art, lines):
        art["measurement_protocol"]["producer"]["decode_lead_in_steps"] = 0

    def text(art, lines):
        art["measurement_protocol"]["producer"]["decode_lead_in_steps"] = "16"

    def absent(art, lines):
        del art["measurement_protocol"]["producer"]["decode_lead_in_steps"]

    for fn, found in ((zero, "found 0"), (text, 'found "16"')):
        d = mutate(fn).diagnostics[0]
        assert d.rule == "A-23" and "decode_lead_in_steps expected an integer from 1 to 256" in d.message, d
        assert found in d.message
    assert mutate(absent).status == "accepted"


def test_another_execution_mode_is_refused(mutate):
    def fn(art, lines):
        art["execution_mode"] = "native_graph_policy"

    d = mutate(fn).diagnostics[0]
    assert d.rule == "A-16"
    assert d.message.startswith(
        "native execution identity cell expects execution mode engine_steps, found native_graph_policy"
    )


def test_without_the_runtime_plugin_the_producer_is_unknown(run_and_engine, small_plan):
    """A-21: the runtime plugin of the plan's runtime drives no engine, or none is installed: no producer can be
    expected."""
    run, _ = run_and_engine
    (result,) = validate_run(standin_host(None), run, plan_of(small_plan))
    d = result.diagnostics[0]
    assert d.rule == "A-21"
    assert (
        "the producer of an installed runtime plugin (no runtime plugin drives a measurement engine for "
        "vllm==0.33.0: runtime plugin 'vllm_033' does not implement fpm_measurement_driver for vllm==0.33.0)"
    ) in d.message
    (result,) = validate_run(make_host(), run, plan_of(small_plan))
    assert "no runtime plugin for vllm==0.33.0" in result.diagnostics[0].message


def test_the_contract_is_the_cells_not_the_artifacts(mutate, small_plan, run_and_engine, tmp_path):
    """05 §6.3: a cell of the legacy profile 'full' (the GLM-5.3-Flash key) reads the same run under GLM's contract."""
    run, _ = run_and_engine
    plan = plan_of(small_plan)
    for cell in plan["cells"]:
        cell["execution_identity"]["execution_profile"] = "full"
    host = make_host(entry_points=("glm53flash",))
    (result,) = validate_run(host, run, plan)
    assert result.contract == "glm53flash_native_graph_policy" and result.status == "refused"
    assert not Path(tmp_path / "x").exists()
