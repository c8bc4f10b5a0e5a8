"""Inputs that never end or block: every input file is read by :func:`fpmcore.documents.jsonio.read_input`.

A FIFO, a device or a directory given where a trace, a table, a profile, a
plan or a sweep grid is read is refused before it is opened (exit 2, one
line); a file above :data:`fpmcore.documents.jsonio.MAX_INPUT_BYTES` is refused with
the limit in the message.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fpmcore.documents import jsonio
from fpmcore.testing import make_host, run_fpm

ROOT = Path(__file__).resolve().parent.parent
PROFILE = ROOT / "examples" / "profiles" / "glm53flash-tp4.fpm-profile.json"
TRACE = ROOT / "examples" / "traces" / "glm-mixed-120.jsonl"
TABLE = ROOT / "examples" / "fpm_tables" / "glm53flash-tp4.json"
FIFO_REASON = "a FIFO, not a regular file (an input is read from a file)"
ZERO_REASON = "a character device, not a regular file (an input is read from a file)"


@pytest.fixture(scope="module")
def host():
    return make_host(entry_points=("vllm_027", "vllm_033", "glm53flash"))


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "input.fifo"
    os.mkfifo(path)
    return path


def _argv(role: str, path: str, tmp_path: Path) -> tuple[list[str], str, str]:
    """The command reading ``path`` as ``role``, with the rule and the message prefix of its refusal."""
    if role == "trace":
        return ["replay", str(PROFILE), "--trace", path], "R-33", "cannot read trace: "
    if role == "table":
        return (
            ["replay", str(PROFILE), "--trace", str(TRACE), "--fpm-table", path],
            "R-27",
            "cannot read latency table: ",
        )
    if role == "profile":
        return ["replay", path, "--trace", str(TRACE)], "JSON", "cannot read: "
    if role == "profile-check":
        return ["profile", "check", path], "JSON", "cannot read: "
    if role == "plan":
        return ["validate", str(tmp_path), "--plan", path], "JSON", "cannot read: "
    assert role == "grid"
    return ["sweep", path, "-o", str(tmp_path / "out")], "sweep", "cannot read grid: "


ROLES = ["trace", "table", "profile", "profile-check", "plan", "grid"]


@pytest.mark.parametrize("role", ROLES)
def test_a_fifo_is_refused_before_it_is_opened(role, fifo, tmp_path, host):
    argv, rule, prefix = _argv(role, str(fifo), tmp_path)
    res = run_fpm(*argv, host=host)
    assert res.exit_code == 2, res
    assert res.stderr == f"fpm: {fifo}: {prefix}{FIFO_REASON} [{rule}]\n"


@pytest.mark.parametrize("role", ROLES)
def test_dev_zero_is_refused_not_read(role, tmp_path, host):
    argv, rule, prefix = _argv(role, "/dev/zero", tmp_path)
    res = run_fpm(*argv, host=host)
    assert res.exit_code == 2, res
    assert res.stderr == f"fpm: /dev/zero: {prefix}{ZERO_REASON} [{rule}]\n"


def test_a_directory_given_as_a_trace_is_named(tmp_path, host):
    res = run_fpm("replay", str(PROFILE), "--trace", str(tmp_path), host=host)
    assert res.exit_code == 2
    assert res.stderr == f"fpm: {tmp_path}: cannot read trace: a directory, not a regular file " \
        "(an input is read from a file) [R-33]\n"  # fmt: skip


def test_a_file_above_the_input_limit_is_refused_with_the_limit(tmp_path, host, monkeypatch):
    monkeypatch.setattr(jsonio, "MAX_INPUT_BYTES", 2**30)
    trace = tmp_path / "big.jsonl"
    with open(trace, "wb") as f:
        f.truncate(2**30 + 1)  # sparse: nothing is written
    res = run_fpm("replay", str(PROFILE), "--trace", str(trace), host=host)
    assert res.exit_code == 2
    assert res.stderr == f"fpm: {trace}: cannot read trace: larger than the 1 GiB input limit [R-33]\n"


def test_a_file_growing_past_the_limit_while_read_is_refused(tmp_path, monkeypatch):
    path = tmp_path / "t.json"
    path.write_bytes(b"[1, 2, 3]")
    monkeypatch.setattr(jsonio, "MAX_INPUT_BYTES", 4)
    real_stat = os.stat

    def stat_before_growth(p, *a, **k):  # the size seen before the file grew
        st = real_stat(p, *a, **k)
        return os.stat_result((st.st_mode, *st[1:6], 0, *st[7:]))

    monkeypatch.setattr(jsonio.os, "stat", stat_before_growth)
    with pytest.raises(jsonio.JsonError) as info:
        jsonio.load_path(path)
    assert info.value.message == "cannot read: larger than the 4-byte input limit"


def test_a_file_that_grew_after_it_was_opened_is_read_whole(tmp_path, monkeypatch):
    """Read as the size seen at opening plus one byte, then the rest in pieces: no byte is lost."""
    path = tmp_path / "t.json"
    path.write_bytes(b'{"a": [1, 2, 3], "b": "' + b"x" * 3_000_000 + b'"}')
    real_fstat = os.fstat

    def fstat_before_growth(fd):  # the size seen when it was opened: 3 bytes
        st = real_fstat(fd)
        return os.stat_result((st.st_mode, *st[1:6], 3, *st[7:]))

    monkeypatch.setattr(jsonio.os, "fstat", fstat_before_growth)
    assert jsonio.load_path(path) == {"a": [1, 2, 3], "b": "x" * 3_000_000}
    assert jsonio.read_input(path) == path.read_bytes()


def test_a_regular_file_and_a_symlink_to_one_are_read(tmp_path):
    path = tmp_path / "t.json"
    path.write_bytes(b'{"a": 1}')
    link = tmp_path / "link.json"
    link.symlink_to(path)
    assert jsonio.load_path(path) == jsonio.load_path(link) == {"a": 1}
