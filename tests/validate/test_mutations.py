"""Mutated artifact runs: every mutation is accepted because harmless or refused by a named rule.

Seeded (``derandomize``) Hypothesis campaigns: values replaced, deleted and
swapped in the parsed files of a small GLM cell (in memory); and runs on disk
whose files, links and directories are changed (links out of the run, a
missing index, deep directories, lone surrogates, floats in integer fields) and read by ``fpm validate --json`` in-process.  ``strict`` makes a
rule that raises fail the test instead of becoming a diagnostic.
"""

from __future__ import annotations

import copy
import json
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fpmcore.validate.integers import RANK_INT_SCHEMA
from fpmcore.validate.reader import validate_files
from tests.validate.support import (  # noqa: F401  (fixtures)
    M,
    host,
    integer_fields,
    model_host,
    producer_dir,
    reindex,
    remove_tree,
    strict,
)

pytestmark = pytest.mark.usefixtures("strict", "producer_dir")


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
    result = validate_files(host, _CELL, files, _PLAN, owners={})
    assert result.status in ("accepted", "refused")
    assert all(isinstance(d.message, str) and d.rule for d in result.diagnostics)


_HOST = model_host()


def test_fuzz_base_is_valid():
    assert validate_files(_HOST, _CELL, _FILES, _PLAN).status == "accepted"


# -- runs on disk: files, links and directories -------------------------------------------------------

#: Examples of the on-disk campaign; ``FPM_VALIDATE_FUZZ=N`` runs a longer one (same seed).
DISK_EXAMPLES = int(os.environ.get("FPM_VALIDATE_FUZZ", "150"))
_ATTEMPT = M.serialize(_FILES, indent=1)
_INT_PATHS = [p for p in integer_fields(_FILES["r0.json"], RANK_INT_SCHEMA) if p[0] != "results" or p[1] == 0]
_JSON_NAMES = ("r0.json", "provenance.json")  # the files holding strings (points.json holds numbers)


def _strings(value, path=()):
    if isinstance(value, str):
        yield path
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _strings(v, (*path, i))


def _set(root, path, value):
    parent = root
    for seg in path[:-1]:
        parent = parent[seg]
    parent[path[-1]] = value


#: mutation → the rules that may refuse it (empty: harmless, the cell stays accepted)
DISK_MUTATIONS = {
    "link out of the run": {"INDEX"},
    "link inside the attempt": {"INDEX"},
    "attempt directory is a link": {"INDEX"},
    "index missing": {"INDEX"},
    "index is a link": {"INDEX"},
    "fifo for a file": {"INDEX"},
    "file changed after indexing": {"INDEX"},
    "deep unindexed directories": set(),
    "deep directories beside the attempts": set(),  # harmless to this cell; the directory is a cell of its own
    "unindexed link to /etc/passwd": set(),
    "lone surrogate in a string": {"JSON"},
    "lone surrogate in a sidecar line": {"A-28"},
    "float in an integer field": {"A-1", "A-2"},  # A-1 reads schema_version first
    "skipped point": {"A-5"},
    "number beyond a double": {"JSON"},
    "nesting deeper than the limit": {"JSON"},
}


def _mutate(kind, data, root, run, attempt):
    """Apply one mutation to the run written under ``root``."""
    if kind == "link out of the run":
        name = data.draw(st.sampled_from(sorted(_ATTEMPT)))
        (root / "outside").mkdir(exist_ok=True)
        (root / "outside" / name).write_bytes((attempt / name).read_bytes())
        (attempt / name).unlink()
        (attempt / name).symlink_to(root / "outside" / name)
    elif kind == "link inside the attempt":
        name = data.draw(st.sampled_from([n for n in sorted(_ATTEMPT) if n != "index.json"]))
        (attempt / ".real").mkdir(exist_ok=True)
        os.replace(attempt / name, attempt / ".real" / name)
        (attempt / name).symlink_to(Path(".real") / name)
    elif kind == "attempt directory is a link":
        os.replace(attempt, root / "moved")
        attempt.symlink_to(root / "moved", target_is_directory=True)
    elif kind == "index missing":
        (attempt / "index.json").unlink()
    elif kind == "index is a link":
        os.replace(attempt / "index.json", root / "index.json")
        (attempt / "index.json").symlink_to(root / "index.json")
    elif kind == "fifo for a file":
        name = data.draw(st.sampled_from(sorted(_ATTEMPT)))
        (attempt / name).unlink()
        os.mkfifo(attempt / name)
    elif kind == "file changed after indexing":
        name = data.draw(st.sampled_from([n for n in sorted(_ATTEMPT) if n != "index.json"]))
        (attempt / name).write_bytes((attempt / name).read_bytes() + b" ")
    elif kind in ("deep unindexed directories", "deep directories beside the attempts"):
        d = attempt if kind == "deep unindexed directories" else run
        for _ in range(data.draw(st.sampled_from([2, 150, 1100]))):
            d = d / "zz"
            d.mkdir()
    elif kind == "unindexed link to /etc/passwd":
        (attempt / "notes.json").symlink_to("/etc/passwd")
    elif kind in ("lone surrogate in a string", "number beyond a double", "nesting deeper than the limit",
                  "float in an integer field", "skipped point"):  # fmt: skip
        name = (
            "r0.json"
            if kind in ("float in an integer field", "skipped point")
            else data.draw(st.sampled_from(_JSON_NAMES))
        )
        doc = json.loads((attempt / name).read_bytes())
        if kind == "lone surrogate in a string":
            path = data.draw(st.sampled_from(list(_strings(doc))))
            v = doc
            for seg in path:
                v = v[seg]
            _set(doc, path, v + data.draw(st.sampled_from(["\ud800", "\udfff", "\udc80x"])))
            text = json.dumps(doc)  # ensure_ascii: the surrogate is written as its escape
        elif kind == "float in an integer field":
            path = data.draw(st.sampled_from(_INT_PATHS))
            _set(doc, path, data.draw(st.sampled_from([1.0, 2.5, True, "3"])))
            text = json.dumps(doc)
        elif kind == "skipped point":
            doc["skipped_points"] = [{"benchmark_id": 9, "reason": "timeout"}]
            text = json.dumps(doc)
        else:
            marker = "__MARK__"
            doc[data.draw(st.sampled_from(["zz_extra", "schema_name"]))] = marker
            value = "1e999" if kind == "number beyond a double" else "[" * 120 + "0" + "]" * 120
            text = json.dumps(doc).replace(f'"{marker}"', value)
        (attempt / name).write_text(text)
        if (attempt / "index.json").exists():
            reindex(attempt)
    elif kind == "lone surrogate in a sidecar line":
        lines = (attempt / "repetitions.jsonl").read_bytes().splitlines(keepends=True)
        k = data.draw(st.integers(0, len(lines) - 1))
        lines[k] = lines[k].replace(b'"warmup"', b'"warmup\\ud800"', 1)
        (attempt / "repetitions.jsonl").write_bytes(b"".join(lines))
        reindex(attempt)


@settings(max_examples=DISK_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(st.data())
def test_mutated_runs_on_disk_are_accepted_or_refused_by_a_named_rule(data):
    kinds = data.draw(st.lists(st.sampled_from(sorted(DISK_MUTATIONS)), min_size=1, max_size=2, unique=True))
    root = Path(tempfile.mkdtemp(prefix="fpm-validate-"))
    try:
        run, attempt = root / "run", root / "run" / _CELL["cell_id"]
        attempt.mkdir(parents=True)
        for name, body in _ATTEMPT.items():
            (attempt / name).write_bytes(body)
        (root / "plan.json").write_text(json.dumps(_PLAN))
        applied = []
        for kind in sorted(kinds, key=lambda k: k == "fifo for a file"):  # nothing reads a FIFO after it is made
            try:
                _mutate(kind, data, root, run, attempt)
                applied.append(kind)
            except OSError:  # the file an earlier mutation took away
                pass
        kinds = applied
        code, out, err = _fpm("validate", str(run), "--plan", str(root / "plan.json"), "--json")
    finally:
        remove_tree(root)
    doc = json.loads(out)  # exactly one JSON document
    assert "internal error" not in err and "Traceback" not in err, err
    cells = {c["cell"]: c for c in doc["cells"]}
    ours = cells[_CELL["cell_id"]]
    diags = [d for c in cells.values() for d in c["diagnostics"]]
    assert all(d["rule"] and "cannot read the input" not in d["message"] for d in diags), diags
    expected = set().union(*(DISK_MUTATIONS[k] for k in kinds))
    if "deep directories beside the attempts" in kinds:  # a directory of no cell, and without index
        assert (code, cells["zz"]["diagnostics"][0]["rule"]) == (1, "INDEX")
    if expected:
        assert code == 1 and ours["status"] == "refused" and ours["diagnostics"][0]["rule"] in expected, (kinds, ours)
    else:
        assert ours["status"] == "accepted" and code == (1 if "zz" in cells else 0), (kinds, ours)


def _fpm(*argv):
    from contextlib import redirect_stderr, redirect_stdout
    from io import StringIO

    from fpmcore.cli import main

    out, err = StringIO(), StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(list(argv), host=_HOST)
    return code, out.getvalue(), err.getvalue()
