"""``fpm validate`` (05): the committed example runs, exit codes, ``--json``, and the reader's
refusals of input that is not a run or not a plan.

The artifacts come from ``tests/support/artifacts`` (the producer's shape);
the committed example runs are ``examples/artifacts``.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import attrs
import pytest

from fpmcore.cli.context import Context
from fpmcore.documents.errors import FpmError
from fpmcore.validate.command import validate_command
from fpmcore.validate.reader import validate_run
from tests.validate.support import M, fpm, host, producer_dir, strict  # noqa: F401  (fixtures)

pytestmark = pytest.mark.usefixtures("strict", "producer_dir")

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "artifacts"


def run_validate(host, capsys, *argv, as_json=False):
    parser = argparse.ArgumentParser()
    cmd = validate_command()
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
    retained = doc["cells"][0].pop("retained")
    assert (code, doc) == (
        0,
        {
            "schema": 1,
            "status": "accepted",
            "cells": [
                {
                    "cell": cell,
                    "contract": contract,
                    "status": "accepted",
                    "diagnostics": [],
                    # the gap lines of the human output (05 §7.3)
                    "gaps": [
                        "rank 0: injected prompt hashes unavailable",
                        "rank 0: preceding prompt evidence incomplete",
                    ],
                }
            ],
        },
    )
    # the table of the human output
    (result,) = validate_run(host, EXAMPLES / model / "run", json.loads((EXAMPLES / model / "plan.json").read_text()))
    assert retained == [attrs.asdict(x) for x in result.retained] and len(retained) == len(result.retained) > 1
    if model == "glm53flash":  # the row of 05 §9.1
        assert retained[1] == {
            "benchmark_id": 2, "rank": 0, "point_type": "prefill", "batch_size": 1, "total_prefill_tokens": 64,
            "total_kv_read_tokens": 2176, "wall_time": 0.0348, "kv_seed_regime": "real_kv",
        }  # fmt: skip


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
    (r,) = validate_run(host, tmp_path, plan)
    assert r.status == "refused" and r.diagnostics[0].rule == "A-13"


# -- what is not a run or not a plan, and --json on errors -------------------------------------

GLM_PLAN = EXAMPLES / "glm53flash" / "plan.json"
GLM_RUN = EXAMPLES / "glm53flash" / "run"


def _point_plan(host, capsys, tmp_path):
    """The file ``fpm plan -o`` writes: a point plan, not a frozen collection plan."""
    profile = ROOT / "examples" / "profiles" / "glm53flash-tp4.fpm-profile.json"
    code, _, _ = fpm(host, capsys, "plan", str(profile), "--model", "glm53flash", "-o", str(tmp_path / "points.json"))
    assert code == 0
    return tmp_path / "points.json"


@pytest.mark.parametrize(
    ("document", "problem"),
    [
        ("profile", "cells expected a non-empty list of cells, found absent"),
        ("point plan", "cells expected a non-empty list of cells, found absent"),
        ([], "expected a JSON object, found []"),
        ("text", 'expected a JSON object, found "a plan"'),
        ({"cells": [], "sha256": "0" * 64}, "cells expected a non-empty list of cells, found []"),
        ({"cells": [7], "sha256": "0" * 64}, "cells[0] expected an object, found 7"),
        ({"cells": [{"cell_id": ""}], "sha256": "0" * 64}, 'cells[0].cell_id expected a non-empty string, found ""'),
        ({"cells": [{"cell_id": "a"}, {"cell_id": "a"}], "sha256": "0" * 64}, "cells[1].cell_id a is not unique"),
        ({"cells": [{"cell_id": "a"}]}, "sha256 expected the 64-hex plan hash, found absent"),
        (
            {"cells": [{"cell_id": "a"}], "sha256": "A" * 64},
            'sha256 expected the 64-hex plan hash, found "' + "A" * 56 + "…",
        ),
    ],
)
def test_a_document_that_is_not_a_plan_is_exit_2(host, capsys, tmp_path, document, problem):
    """``--plan <a profile>`` (or any JSON that is not a frozen collection plan) says so, exit 2;
    it is not read as a plan whose cells the run does not match (A-13)."""
    if document == "profile":
        path = ROOT / "examples" / "profiles" / "glm53flash-tp4.fpm-profile.json"
    elif document == "point plan":
        path = _point_plan(host, capsys, tmp_path)
    else:
        path = tmp_path / "plan.json"
        path.write_text(json.dumps("a plan" if document == "text" else document))
    code, out, err = fpm(host, capsys, "validate", str(GLM_RUN), "--plan", str(path))
    assert (code, out) == (2, "")
    assert err == f"fpm: {path}: not a frozen collection plan: {problem} [input]\n"
    code, out, err = fpm(host, capsys, "validate", str(GLM_RUN), "--plan", str(path), "--json")
    assert code == 2 and json.loads(out) == {
        "schema": 1,
        "status": "error",
        "diagnostics": [{"rule": "input", "message": f"not a frozen collection plan: {problem}", "where": str(path)}],
    }


def test_every_json_run_prints_one_document(host, capsys, tmp_path):
    """With ``--json``, stdout holds exactly one JSON document, errors (exit 2) included."""
    (tmp_path / "empty").mkdir()
    (tmp_path / "dup.json").write_text('{"cells": [], "cells": []}')
    (tmp_path / "surrogate.json").write_text('{"cells": [{"cell_id": "\\ud800"}], "sha256": "' + "0" * 64 + '"}')
    cases = [
        ((str(tmp_path / "missing"), "--plan", str(GLM_PLAN)), "input", f"not a directory: {tmp_path / 'missing'}"),
        ((str(GLM_RUN), "--plan", str(tmp_path / "nope.json")), "JSON", "cannot read: No such file or directory"),
        (
            (str(GLM_RUN), "--plan", str(tmp_path / "dup.json")),
            "JSON",
            "duplicate key 'cells' at cells, line 1 column 15",
        ),
        (
            (str(GLM_RUN), "--plan", str(tmp_path / "surrogate.json")),
            "JSON",
            "lone surrogate \\ud800 in a string at cells[0].cell_id, line 1 column 24",
        ),
        ((str(tmp_path / "empty"), "--plan", str(GLM_PLAN)), "input", f"no attempt found in {tmp_path / 'empty'}"),
    ]
    for argv, rule, message in cases:
        code, out, err = fpm(host, capsys, "validate", *argv, "--json")
        (diag,) = json.loads(out)["diagnostics"]  # json.loads refuses anything after the one document
        assert (code, json.loads(out)["status"], diag["rule"], diag["message"]) == (2, "error", rule, message), argv
        assert err.startswith("fpm: ") and "internal error" not in err


def test_an_attempt_without_index_is_refused_exit_1(host, capsys, tmp_path):
    """A run without ``index.json`` was once accepted; 05 §1 reads only indexed files."""
    plan, cell, files = M.glm_example()
    d = M.write_attempt(tmp_path / "run" / cell["cell_id"], files)
    M.write_json(tmp_path / "plan.json", plan)
    (d / "index.json").unlink()
    for run in (tmp_path / "run", d):  # a run directory, and the attempt named directly
        code, out, _ = fpm(host, capsys, "validate", str(run), "--plan", str(tmp_path / "plan.json"), "--json")
        (result,) = json.loads(out)["cells"]
        assert (code, result["status"], result["diagnostics"]) == (
            1,
            "refused",
            [
                {
                    "rule": "INDEX",
                    "message": "artifact index is missing, and the validator reads only indexed files: index.json",
                    "where": "index.json",
                }
            ],
        )


def test_links_out_of_the_run_are_refused_exit_1(host, capsys, tmp_path):
    """``fpm validate`` once followed links out of the run folder; now no link below the run is
    followed — an attempt directory that is a link, or a link to a file with the indexed bytes."""
    plan, cell, files = M.glm_example()
    M.write_json(tmp_path / "plan.json", plan)
    elsewhere = M.write_attempt(tmp_path / "elsewhere" / cell["cell_id"], files)
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / cell["cell_id"]).symlink_to(elsewhere, target_is_directory=True)
    code, out, _ = fpm(host, capsys, "validate", str(tmp_path / "run"), "--plan", str(tmp_path / "plan.json"), "--json")
    (d,) = json.loads(out)["cells"][0]["diagnostics"]
    label = str(tmp_path / "run" / cell["cell_id"])
    assert (code, d) == (
        1,
        {"rule": "INDEX", "message": f"attempt directory is a symbolic link: {label}", "where": label},
    )
    (tmp_path / "run" / cell["cell_id"]).unlink()
    d = M.write_attempt(tmp_path / "run" / cell["cell_id"], files)
    (d / "points.json").unlink()
    (d / "points.json").symlink_to(elsewhere / "points.json")
    code, out, _ = fpm(host, capsys, "validate", str(tmp_path / "run"), "--plan", str(tmp_path / "plan.json"), "--json")
    (d,) = json.loads(out)["cells"][0]["diagnostics"]
    assert (code, d["rule"], d["message"]) == (1, "INDEX", "indexed file is a symbolic link: points.json")


def test_a_directory_name_that_is_not_utf8_is_shown_escaped(host, capsys, tmp_path):
    """A cell directory whose name is not UTF-8 is refused as a cell of no plan, its name escaped."""
    plan, cell, files = M.glm_example()
    M.write_json(tmp_path / "plan.json", plan)
    M.write_attempt(Path(os.fsdecode(bytes(tmp_path) + b"/run/fpm-\xff")), files)
    for as_json in (True, False):
        argv = ("validate", str(tmp_path / "run"), "--plan", str(tmp_path / "plan.json"), *(["--json"] * as_json))
        code, out, err = fpm(host, capsys, *argv)
        shown = json.loads(out)["cells"][0]["cell"] if as_json else out
        assert code == 1 and "fpm-\\xff" in shown and "internal error" not in err
