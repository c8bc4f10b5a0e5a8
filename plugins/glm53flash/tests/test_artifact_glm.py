"""The ``glm53flash_native_graph_policy`` contract (05 §7, §8): the valid example and every negative case.

The artifacts are built by ``tests/support/artifacts`` in the producer's
shape; its smoke cell reproduces the row of 05 §9.1 and the context of §9.2,
and its ``CASES`` are the negative cases of §9.3 (N1 … N40) plus fpmcore's own
(X1 …): each changes the valid example in one way and must be refused by the
named rule with the exact diagnostic.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

import fpmcore_glm53flash
from fpmcore import ProducerContract
from fpmcore.validate.cell import HEX64, CellView
from fpmcore.validate.evaluation import run_rules
from fpmcore.validate.measured_values import canonical_bytes, canonical_digest
from fpmcore.validate.reader import validate_files
from fpmcore_glm53flash import artifact as G
from fpmcore_glm53flash.artifact_producer import expected_producer_record
from tests.validate.support import M, host, producer_dir, strict  # noqa: F401  (fixtures)

pytestmark = pytest.mark.usefixtures("strict", "producer_dir")

ROOT = Path(__file__).resolve().parents[3]


def check(host, plan, cell, files):
    return validate_files(host, cell, files, plan)


# -- the valid example (05 §9.1, §9.2) -------------------------------------------------


def test_example_row_is_the_row_of_9_1():
    plan, cell, files = M.glm_example()
    row = files["r0.json"]["results"][1]
    m = row["fpms"][0]["benchmark_measurement"]
    assert [r["wall_time"] for r in m["raw_fpms"]] == [
        0.0360,
        0.0348,
        0.0347,
        0.0349,
        0.0346,
        0.0350,
        0.0348,
        0.0351,
        0.0347,
        0.0352,
    ]
    assert [r["benchmark_sample"]["forward_index"] for r in m["raw_fpms"]] == list(range(23, 33))
    assert row["fpms"][0]["wall_time"] == 0.0348  # the 5th smallest of raw samples 1…9
    assert m["point_key"] == "d60ecb7532ce754610cb0521e84f5d0a1c9066f7876cf17a31462ed0d5c629f4"
    assert m["preparation"]["warmup_records_before"] == 12
    assert row["repetition_evidence_sha256"] == "88dbaf65d666771ed7be69ccb17df7617510203b47e269cade8c09ea270672bc"
    line = files["repetitions.jsonl"][1]
    assert hashlib.sha256(line.rstrip(b"\n")).hexdigest() == row["repetition_evidence_sha256"]
    assert files["r0.json"]["iteration_groups"][1]["wall_time"] == 0.0348
    # 04 §9: the smoke digest of the FlashKDA list
    assert canonical_digest(files["points.json"]) == "5fe3d7e281abbfdd451d5796ad412a5121fdafe0625a44e8498261d6e20eb93c"
    assert files["r0.json"]["repetition_evidence"]["records"] == 5


@pytest.mark.parametrize("ranks", [1, 2])
def test_valid_example_is_accepted(host, ranks):
    plan, cell, files = M.glm_example(ranks)
    result = check(host, plan, cell, files)
    assert (result.status, result.contract, result.diagnostics) == ("accepted", "glm53flash_native_graph_policy", ())
    # 05 §7.3: two non-blocking gaps per rank
    assert result.gaps == tuple(
        g
        for r in range(ranks)
        for g in (f"rank {r}: injected prompt hashes unavailable", f"rank {r}: preceding prompt evidence incomplete")
    )
    assert [x.wall_time for x in result.retained if x.rank == 0][1] == 0.0348


def test_valid_example_with_merged_artifact_is_accepted(host):
    plan, cell, _ = M.glm_example()
    files = M.glm_cell(plan, cell, M.SMOKE_MANIFEST, ranks=2, merged=True)
    assert check(host, plan, cell, files).status == "accepted"


# -- the negative cases ------------------------------------------------------------------


@pytest.mark.parametrize("case", M.CASES, ids=[c.id for c in M.CASES])
def test_negative_case_is_refused_by_its_rule(host, case):
    plan, cell, files, message = case.build()
    result = check(host, plan, cell, files)
    assert result.status == "refused"
    (d,) = result.diagnostics
    assert (d.rule, d.message) == (case.rule, message)


def test_there_are_enough_negative_cases():
    spec_cases = [c for c in M.CASES if c.id.startswith("N")]
    assert len(spec_cases) == 40 and len(M.CASES) >= 65
    assert len({c.rule for c in M.CASES}) >= 35


def test_nine_samples_pass_the_general_rules_only(host):
    """05 §8.4: the rules come from the frozen cell: nine raw samples satisfy the general rules
    (a cell without configuration-bound identity accepts them) but never the GLM contract, even
    when the artifact's protocol claims nine repetitions."""
    plan, cell, files, _ = M.CASES[1].build()  # N2
    del files["r0.json"]["measurement_protocol"]["producer"]
    general = {"cell_id": cell["cell_id"]}
    assert check(host, plan, general, files).status == "accepted"
    plan, cell, files, _ = M.CASES[1].build()
    files["r0.json"]["measurement_protocol"]["producer"]["measured_repetitions"] = 9
    (d,) = check(host, plan, cell, files).diagnostics
    assert (d.rule, d.message) == (
        "A-23",
        "measurement_protocol.producer.measured_repetitions expected 10, found 9: r0.json",
    )


def test_a38_compares_multisets():
    """A row digest binds one line; two rows cannot share a line (A-38)."""
    plan, cell, files = M.glm_example()
    rows = files["r0.json"]["results"]
    rows[2]["repetition_evidence_sha256"] = rows[1]["repetition_evidence_sha256"]
    view = CellView.from_hook(fpmcore_glm53flash.CONTRACT, cell, files, plan)
    (d,) = run_rules(view, G.RULES)
    assert d.rule == "A-38" and "benchmark_id=3 rank=0 matches no line" in d.message


# -- rules in isolation ----------------------------------------------------------------------


def test_expected_producer_pins_vllm_0_33_0_and_the_dynamo_commit():
    rec = expected_producer_record()
    assert list(rec) == [
        "name",
        "vllm_package_version",
        "scheduler_revision",
        "distribution",
        "port_sources",
        "runtime_source_manifest_sha256",
        "overlay_sha256",
    ]
    assert rec["vllm_package_version"] == "0.33.0"
    assert rec["scheduler_revision"] == "9abd2ef0d908c4bb323e1b8956ea76a5772a1d41"
    assert len(rec["port_sources"]) == 5


def test_line_problems():
    plan, cell, files = M.glm_example()
    view = CellView.from_hook(fpmcore_glm53flash.CONTRACT, cell, files, plan)
    rank, row = view.ranks[0], files["r0.json"]["results"][1]
    line = files["repetitions.jsonl"][1]
    assert G.line_problem(line, row, rank) is None
    obj = json.loads(line)
    obj["repetitions"].insert(7, obj["repetitions"].pop(1))  # a warm-up after a measurement
    for j, rep in enumerate(obj["repetitions"]):
        rep["index"] = j
    bad = canonical_bytes(obj) + b"\n"
    assert G.line_problem(bad, row, rank) == "warm-up repetition 7 comes after a measured repetition"
    spaced = json.dumps(json.loads(line)).encode() + b"\n"
    assert G.line_problem(spaced, row, rank) == "line is not canonical JSON (04 G-23)"
    obj = json.loads(line)
    obj["repetitions"] = obj["repetitions"][:1] + obj["repetitions"][2:]
    for j, rep in enumerate(obj["repetitions"]):
        rep["index"] = j
    assert G.line_problem(canonical_bytes(obj), row, rank) == "warm-up repetitions expected 5, found 4"


def test_validate_answers_only_its_contract():
    plan, cell, files = M.glm_example()
    other = ProducerContract("dsv41_eager", "eager", "hbm_tp_sharded")
    given = {"cell": cell, "files": files, "plan": plan, "attempt": ".", "owners": {}, "producer": {}}
    assert fpmcore_glm53flash.fpm_validate_artifact(contract=other, **given) is None
    assert fpmcore_glm53flash.fpm_validate_artifact(contract=fpmcore_glm53flash.CONTRACT, **given) == []


# -- the producer files (05 §7.2, A-21) ----------------------------------------------------

NO_FILES = (
    "but this installation ships no producer files (set FPM_GLM53FLASH_PRODUCER_DIR or install them under "
    "fpmcore_glm53flash/producer/)"
)


@pytest.fixture
def no_package_files(monkeypatch, tmp_path):
    """An installation whose package ships no ``producer/`` directory and no producer directory named."""
    from fpmcore_glm53flash import artifact_producer as P

    monkeypatch.delenv("FPM_GLM53FLASH_PRODUCER_DIR")
    monkeypatch.setattr(P, "_package_dir", lambda: tmp_path / "no-producer")
    return P


def _copy_producer(to: Path) -> Path:
    to.mkdir()
    for p in M.PRODUCER_DIR.iterdir():
        (to / p.name).write_bytes(p.read_bytes())
    return to


@pytest.mark.parametrize("ranks", [1, 2])
def test_without_producer_files_every_glm_artifact_is_refused(host, no_package_files, ranks):
    """No digest is assumed: refused at the first digest field of A-21, runtime_source_manifest_sha256."""
    plan, cell, files = M.glm_example(ranks)
    rec = no_package_files.expected_producer_record()
    assert (rec["runtime_source_manifest_sha256"], rec["overlay_sha256"]) == (None, None)
    found = files["r0.json"]["producer"]["runtime_source_manifest_sha256"]
    assert found == hashlib.sha256((M.PRODUCER_DIR / "runtime_source_manifest.json").read_bytes()).hexdigest()
    (d,) = check(host, plan, cell, files).diagnostics
    assert (d.rule, d.message) == (
        "A-21",
        "native glm-5.3-flash result lacks valid producer.runtime_source_manifest_sha256: expected the digest of "
        f"the shipped runtime-source manifest, {NO_FILES}, found {found}: r0.json",
    )


def test_a_record_that_claims_no_digest_is_refused_too(host, no_package_files):
    plan, cell, files = M.glm_example()
    files["r0.json"]["producer"]["runtime_source_manifest_sha256"] = None
    (d,) = check(host, plan, cell, files).diagnostics
    assert d.message.endswith(f"{NO_FILES}, found null: r0.json")


def test_package_producer_files_decide_the_digests(host, no_package_files, monkeypatch, tmp_path):
    """Producer files installed under ``fpmcore_glm53flash/producer/`` are read when no directory is named."""
    pkg = _copy_producer(tmp_path / "producer")
    monkeypatch.setattr(no_package_files, "_package_dir", lambda: pkg)
    rec = no_package_files.expected_producer_record()
    assert rec["overlay_sha256"] == hashlib.sha256((pkg / "glm53flash_prefix_scheduler.py").read_bytes()).hexdigest()
    assert rec["runtime_source_manifest_sha256"] == (
        hashlib.sha256((pkg / "runtime_source_manifest.json").read_bytes()).hexdigest()
    )
    plan, cell, files = M.glm_example()
    assert check(host, plan, cell, files).status == "accepted"
    # a named producer directory takes precedence over the package data
    monkeypatch.setenv("FPM_GLM53FLASH_PRODUCER_DIR", str(tmp_path / "empty"))
    (d,) = check(host, plan, cell, files).diagnostics
    assert d.message == (
        "native glm-5.3-flash result lacks valid producer.runtime_source_manifest_sha256: expected the digest of "
        f"the shipped runtime-source manifest, but FPM_GLM53FLASH_PRODUCER_DIR={tmp_path / 'empty'} holds no "
        f"readable runtime_source_manifest.json, found {files['r0.json']['producer']['runtime_source_manifest_sha256']}"
        ": r0.json"
    )


def test_a_package_without_its_overlay_is_refused_at_overlay_sha256(host, no_package_files, monkeypatch, tmp_path):
    pkg = _copy_producer(tmp_path / "producer")
    (pkg / "glm53flash_prefix_scheduler.py").unlink()
    monkeypatch.setattr(no_package_files, "_package_dir", lambda: pkg)
    plan, cell, files = M.glm_example()
    (diag,) = check(host, plan, cell, files).diagnostics
    assert (diag.rule, diag.message) == (
        "A-21",
        "native glm-5.3-flash result lacks valid producer.overlay_sha256: expected the digest of the shipped "
        "producer scheduler file, but the producer files installed under fpmcore_glm53flash/producer/ lack a "
        f"readable glm53flash_prefix_scheduler.py, found {files['r0.json']['producer']['overlay_sha256']}: r0.json",
    )


def test_a_missing_overlay_is_refused_at_overlay_sha256(host, monkeypatch, tmp_path):
    d = _copy_producer(tmp_path / "producer")
    (d / "glm53flash_prefix_scheduler.py").unlink()
    monkeypatch.setenv("FPM_GLM53FLASH_PRODUCER_DIR", str(d))
    plan, cell, files = M.glm_example()
    (diag,) = check(host, plan, cell, files).diagnostics
    assert (diag.rule, diag.message) == (
        "A-21",
        "native glm-5.3-flash result lacks valid producer.overlay_sha256: expected the digest of the shipped "
        f"producer scheduler file, but FPM_GLM53FLASH_PRODUCER_DIR={d} holds no readable "
        f"glm53flash_prefix_scheduler.py, found {files['r0.json']['producer']['overlay_sha256']}: r0.json",
    )


@pytest.mark.parametrize(
    ("name", "field"),
    [
        ("glm53flash_prefix_scheduler.py", "overlay_sha256"),
        ("runtime_source_manifest.json", "runtime_source_manifest_sha256"),
    ],
)
def test_a_comment_added_to_an_installed_producer_file_refuses_the_campaign(host, monkeypatch, tmp_path, name, field):
    """05 §7.2: after any change of either file (a comment included) the earlier campaign is refused."""
    d = _copy_producer(tmp_path / "producer")
    plan, cell, files = M.glm_example()  # collected with the unedited files
    with (d / name).open("ab") as f:
        f.write(b"# edited after the campaign\n" if name.endswith(".py") else b" ")
    monkeypatch.setenv("FPM_GLM53FLASH_PRODUCER_DIR", str(d))
    now = hashlib.sha256((d / name).read_bytes()).hexdigest()
    was = files["r0.json"]["producer"][field]
    assert now != was
    (diag,) = check(host, plan, cell, files).diagnostics
    assert (diag.rule, diag.message) == (
        "A-21",
        f"native glm-5.3-flash result lacks valid producer.{field}: expected {now}, found {was}: r0.json",
    )


def test_the_example_producer_is_a_labeled_stand_in():
    """examples/artifacts/producer: the stand-in producer of the example campaign, not the Dynamo overlay."""
    from fpmcore_glm53flash.artifact_producer import PORT_SOURCES

    overlay = (M.PRODUCER_DIR / "glm53flash_prefix_scheduler.py").read_text()
    assert "Stand-in for the GLM-5.3-Flash producer overlay" in overlay and "NOT the producer overlay" in overlay
    man = json.loads((M.PRODUCER_DIR / "runtime_source_manifest.json").read_text())
    assert man["stand_in"] is True and man["vllm"]["package_version"] == "0.33.0"
    vllm_files = man["vllm"]["files"]
    assert len(vllm_files) == 19 and len({f["path"] for f in vllm_files}) == 19  # 05 §7.1: 19 vLLM files
    assert all(f["path"].startswith("vllm/") and HEX64.match(f["sha256"]) for f in vllm_files)
    assert "vllm/v1/core/sched/scheduler.py" in {f["path"] for f in vllm_files}
    dyn = man["dynamo"]
    assert (dyn["revision"], dyn["distribution"]) == (
        "9abd2ef0d908c4bb323e1b8956ea76a5772a1d41",
        "ai-dynamo==1.7.0.dev20261109",
    )
    assert [f["path"] for f in dyn["files"]] == list(PORT_SOURCES)  # the 5 Dynamo files, not pinned here
    assert all(f["sha256"] is None and f["pinned"] is False for f in dyn["files"])


@pytest.mark.real
def test_the_stand_in_manifest_pins_the_bytes_of_the_vllm_0_33_0_wheel():
    """Each pinned vLLM file digest equals the installed vLLM 0.33.0 file (the oracle venv)."""
    import importlib.metadata
    import importlib.util

    spec = importlib.util.find_spec("vllm")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("needs the real vLLM (tox -e vllm033-real)")
    assert importlib.metadata.version("vllm") == "0.33.0"
    site = Path(next(iter(spec.submodule_search_locations))).parent
    man = json.loads((M.PRODUCER_DIR / "runtime_source_manifest.json").read_text())
    for f in man["vllm"]["files"]:
        assert hashlib.sha256((site / f["path"]).read_bytes()).hexdigest() == f["sha256"], f["path"]
