"""Reading a collected run (05 §1): the artifact index, the indexed files and nothing else."""

from __future__ import annotations

import hashlib
import json
import os

import pytest

from fpmcore.validate.attempt import read_attempt
from fpmcore.validate.reader import validate_files
from tests.validate.support import M, host, producer_dir, reindex, strict  # noqa: F401  (fixtures)

pytestmark = pytest.mark.usefixtures("strict", "producer_dir")


def test_index_pins_every_file(host, tmp_path):
    plan, cell, files = M.glm_example()
    d = M.write_attempt(tmp_path / "a", files)
    (d / "notes.json").write_text('{"ignored": true}')  # not indexed: not read
    got, problems = read_attempt(d)
    assert problems == [] and "notes.json" not in got and got["repetitions.jsonl"] == files["repetitions.jsonl"]
    assert validate_files(host, cell, got, plan, problems=problems).status == "accepted"
    raw = (d / "r0.json").read_bytes()
    (d / "r0.json").write_bytes(raw.replace(b'"0.33.0"', b'"0.33.1"', 1))
    _, problems = read_attempt(d)
    assert [p.rule for p in problems] == ["INDEX"] and problems[0].message.startswith(
        "file differs from the artifact index"
    )
    result = validate_files(host, cell, got, plan, problems=problems)
    assert result.status == "refused" and result.diagnostics[0].rule == "INDEX"


def test_duplicate_keys_refuse_the_file(tmp_path):
    plan, cell, files = M.glm_example()
    out = M.serialize(files, index=False)
    out["provenance.json"] = out["provenance.json"].replace(
        b'"schema_version":1', b'"schema_version":1,"schema_version":1'
    )
    for name, data in M.with_index(out).items():  # the index pins the changed bytes
        (tmp_path / name).write_bytes(data)
    _, problems = read_attempt(tmp_path)
    assert [(p.rule, p.message) for p in problems] == [
        ("JSON", "duplicate key 'schema_version' at schema_version, line 1 column 66: provenance.json")
    ]


# -- the index is the only way in (05 §1) --------------------------------------------------------


def _example_attempt(tmp_path, name="fpm-glm53flash-tp4-smoke"):
    plan, cell, files = M.glm_example()
    d = M.write_attempt(tmp_path / "run" / name, files)
    return plan, cell, d


def _problems(d):
    files, problems = read_attempt(d)
    return [(p.rule, p.message) for p in problems]


def test_an_attempt_without_index_is_refused(tmp_path):
    """05 §1: the validator reads only indexed files, so an attempt without an index has none."""
    _, _, d = _example_attempt(tmp_path)
    (d / "index.json").unlink()
    assert _problems(d) == [
        ("INDEX", "artifact index is missing, and the validator reads only indexed files: index.json")
    ]


@pytest.mark.parametrize(
    ("index", "message"),
    [
        (b"[]", "artifact index has no files object: index.json"),
        (b'{"files": []}', "artifact index has no files object: index.json"),
        (
            b'{"files": {"../r0.json": "' + b"0" * 64 + b'"}}',
            'artifact index entry "../r0.json": expected a normalized relative path: index.json',
        ),
        (
            b'{"files": {"/etc/passwd": "' + b"0" * 64 + b'"}}',
            'artifact index entry "/etc/passwd": expected a normalized relative path: index.json',
        ),
        (
            b'{"files": {"./r0.json": "' + b"0" * 64 + b'"}}',
            'artifact index entry "./r0.json": expected a normalized relative path: index.json',
        ),
        (
            b'{"files": {"index.json": "' + b"0" * 64 + b'"}}',
            'artifact index entry "index.json": the index cannot index itself: index.json',
        ),
        (b'{"files": {"r0.json": 7}}', "artifact index entry expected a 64-hex SHA-256, found 7: r0.json"),
        (
            b'{"files": {}, "files": {}}',
            "artifact index is not strict JSON: duplicate key 'files' at files, line 1 column 15: index.json",
        ),
    ],
)
def test_a_malformed_index_is_refused(tmp_path, index, message):
    _, _, d = _example_attempt(tmp_path)
    (d / "index.json").write_bytes(index)
    assert _problems(d) == [("INDEX", message)]


def test_symbolic_links_are_never_followed(tmp_path):
    """A link on the path of an indexed file is refused wherever it points (outside the run, or inside);
    an unindexed link is never opened."""
    _, _, d = _example_attempt(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "r0.json").write_bytes((d / "r0.json").read_bytes())  # same bytes: the digest would match
    (d / "r0.json").unlink()
    (d / "r0.json").symlink_to(outside / "r0.json")
    assert _problems(d) == [("INDEX", "indexed file is a symbolic link: r0.json")]
    (d / "r0.json").unlink()
    (d / "r0.json").symlink_to(d / "provenance.json")  # a link that stays inside the attempt
    assert _problems(d)[0] == ("INDEX", "indexed file is a symbolic link: r0.json")


def test_a_directory_link_on_the_path_of_an_indexed_file_is_refused(tmp_path):
    _, _, d = _example_attempt(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "notes.json").write_text("{}")
    (d / "sub").symlink_to(outside, target_is_directory=True)
    index = json.loads((d / "index.json").read_text())
    index["files"]["sub/notes.json"] = hashlib.sha256(b"{}").hexdigest()
    (d / "index.json").write_text(json.dumps(index))
    assert _problems(d) == [("INDEX", "indexed file lies behind a symbolic link (sub): sub/notes.json")]


def test_an_index_that_is_a_link_is_refused(tmp_path):
    _, _, d = _example_attempt(tmp_path)
    (tmp_path / "index.json").write_bytes((d / "index.json").read_bytes())
    (d / "index.json").unlink()
    (d / "index.json").symlink_to(tmp_path / "index.json")
    assert _problems(d) == [("INDEX", "artifact index is a symbolic link: index.json")]


def test_unindexed_links_and_files_are_not_read(host, tmp_path):
    plan, cell, d = _example_attempt(tmp_path)
    (d / "notes.json").symlink_to("/etc/passwd")
    (d / "stray.json").write_text("not json")
    files, problems = read_attempt(d)
    assert problems == [] and "notes.json" not in files and "stray.json" not in files
    assert validate_files(host, cell, files, plan).status == "accepted"


def test_special_files_are_not_opened(tmp_path):
    """A FIFO in place of an indexed file is refused without being opened (reading it would block)."""
    _, _, d = _example_attempt(tmp_path)
    (d / "provenance.json").unlink()
    os.mkfifo(d / "provenance.json")
    assert _problems(d) == [("INDEX", "indexed file is not a regular file: provenance.json")]
    os.unlink(d / "provenance.json")
    (d / "provenance.json").mkdir()
    assert _problems(d) == [("INDEX", "indexed file is not a regular file: provenance.json")]


def test_deep_directories_are_read_without_recursion(host, tmp_path):
    """1,100 nested directories in an attempt: unindexed, they are never visited; an indexed file
    1,100 levels down is opened one directory at a time (no RecursionError)."""
    plan, cell, d = _example_attempt(tmp_path)
    chain = [d]
    for _ in range(1100):
        chain.append(chain[-1] / "d")
        chain[-1].mkdir()
    try:
        files, problems = read_attempt(d)
        assert problems == [] and validate_files(host, cell, files, plan).status == "accepted"
        rel = "/".join(["d"] * 1100) + "/deep.json"
        (chain[-1] / "deep.json").write_text('{"deep": true}')
        index = json.loads((d / "index.json").read_text())
        index["files"][rel] = hashlib.sha256(b'{"deep": true}').hexdigest()
        (d / "index.json").write_text(json.dumps(index))
        files, problems = read_attempt(d)
        assert problems == [] and files[rel] == {"deep": True}
    finally:  # shutil.rmtree recurses once per level: take the chain down from the bottom
        (chain[-1] / "deep.json").unlink(missing_ok=True)
        for p in reversed(chain[1:]):
            p.rmdir()


# -- strict JSON beyond jsonio: lone surrogates, numbers out of range, deep nesting ------------


@pytest.mark.parametrize(
    ("name", "old", "new", "message"),
    [
        (
            "r0.json",
            b'"run_id":"glm53flash-smoke-run-1"',
            b'"run_id":"\\ud800"',
            "lone surrogate \\ud800 in a string at run_id, line 1 column ",
        ),
        (
            "r0.json",
            b'"sample_reasons":["explicit"]',
            b'"sample_reasons":["x\\udfff"]',
            "lone surrogate \\udfff in a string at results[0].point.sample_reasons[0], line 1 column ",
        ),
        (
            "r0.json",
            b'"run_id":',
            b'"\\udc80":1,"run_id":',
            "lone surrogate \\udc80 in a string at \\udc80, line 1 column ",
        ),
        (
            "provenance.json",
            b'"attempt_id":"',
            b'"attempt_id":"\\ud83d',
            "lone surrogate \\ud83d in a string at attempt_id, line 1 column ",
        ),
        (
            "r0.json",
            b'"num_gpu_blocks":13696',
            b'"num_gpu_blocks":1e999',
            "number 1e999 is out of range of a double at limits.num_gpu_blocks, line 1 column ",
        ),
        (
            "r0.json",
            b'"num_gpu_blocks":13696',
            b'"num_gpu_blocks":' + b"9" * 400,
            "value at limits.num_gpu_blocks is a number beyond the range of a double (1.8e308): r0.json",
        ),
        (
            "r0.json",
            b'"num_gpu_blocks":13696',
            b'"num_gpu_blocks":' + b"9" * 5000,
            "integer of 5000 digits exceeds the 4300-digit limit at limits.num_gpu_blocks, line 1 column ",
        ),
        (
            "r0.json",
            b'"limits":',
            b'"deep":' + b"[" * 150 + b"]" * 150 + b',"limits":',
            "nesting deeper than 100 levels: r0.json",
        ),
    ],
)
def test_values_no_rule_could_render_are_refused_where_they_are(tmp_path, name, old, new, message):
    """A lone surrogate, a number beyond a double and deep nesting are refused by the reader,
    naming the field — never a rule's ``cannot read the input: UnicodeEncodeError``."""
    _, _, d = _example_attempt(tmp_path)
    data = json.dumps(json.loads((d / name).read_bytes()), separators=(",", ":")).encode()
    assert old in data
    (d / name).write_bytes(data.replace(old, new, 1))
    reindex(d)
    (problem,) = _problems(d)
    assert problem[0] == "JSON" and problem[1].startswith(message), problem


def test_a_surrogate_pair_is_text(host, tmp_path):
    """A valid pair of surrogate escapes is one character, not a lone surrogate."""
    plan, cell, d = _example_attempt(tmp_path)
    data = (d / "r0.json").read_bytes().replace(b'"explicit"', b'"explicit \\ud83d\\ude00"')
    (d / "r0.json").write_bytes(data)
    reindex(d)
    files, problems = read_attempt(d)
    assert problems == [] and files["r0.json"]["results"][0]["point"]["sample_reasons"] == ["explicit \U0001f600"]
