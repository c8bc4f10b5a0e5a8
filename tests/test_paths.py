"""fpmcore.documents.paths writes a path's text as pathlib does (the readers' file names, a replay's provenance)."""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fpmcore.documents.paths import file_name, parent_text, path_text

#: Paths made of the parts that pathlib treats specially: separators, ``.``, ``..``, names with dots.
paths = st.lists(st.sampled_from(["/", "//", ".", "..", "a", "b.json", ".hidden", "x.", " "]), max_size=8).map("".join)


@given(paths)
def test_the_text_name_and_parent_are_pathlibs(path):
    assert path_text(path) == str(PurePosixPath(path)) == str(Path(path))
    assert file_name(path) == PurePosixPath(path).name
    assert parent_text(path) == str(PurePosixPath(path).parent)


@pytest.mark.parametrize(
    ("path", "text", "name", "parent"),
    [
        ("", ".", "", "."),
        ("/", "/", "", "/"),
        ("//srv/a", "//srv/a", "a", "//srv"),
        ("///srv/a", "/srv/a", "a", "/srv"),
        ("./traces//t.jsonl", "traces/t.jsonl", "t.jsonl", "traces"),
        ("runs/../t.jsonl/", "runs/../t.jsonl", "t.jsonl", "runs/.."),
    ],
)
def test_examples(path, text, name, parent):
    assert (path_text(path), file_name(path), parent_text(path)) == (text, name, parent)
    assert path_text(Path(path)) == text  # an os.PathLike is read through os.fspath


def test_bytes_are_refused_as_pathlib_refuses_them():
    with pytest.raises(TypeError):
        path_text(b"t.jsonl")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        Path(b"t.jsonl")  # type: ignore[arg-type]
    assert os.name == "posix"  # the rules above are POSIX's; elsewhere the module asks pathlib
