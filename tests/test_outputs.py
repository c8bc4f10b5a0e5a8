"""``fpmcore.documents.output_files``: the one output-path rule (O-1 … O-6) and the atomic writers of every command.

fpmcore issue 13 §1, §10, §11: an output path is checked before any work
(exit 2, one line naming it), a missing folder is never created, a special
file or an input is never replaced, and a kill or a concurrent writer never
leaves a partial output.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fpmcore.documents import output_files as outputs
from fpmcore.documents.output_files import MANIFEST, OutputError


def _refused(rule: str, fn, *args, **kwargs) -> OutputError:
    with pytest.raises(OutputError) as info:
        fn(*args, **kwargs)
    assert info.value.rule == rule, str(info.value)
    assert ".tmp" not in str(info.value)  # temporary names never reach a message
    return info.value


def _names(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*"))


# --------------------------------------------------------------------------
# check_output_path
# --------------------------------------------------------------------------


def test_a_missing_folder_is_refused_and_never_created(tmp_path):
    target = tmp_path / "nonexistent" / "dir" / "x.json"
    err = _refused("O-1", outputs.check_output_path, target)
    assert err.message == (
        f"the folder {target.parent} does not exist; fpm never creates missing folders (create it first)"
    )
    assert err.where == str(target)
    assert not (tmp_path / "nonexistent").exists()
    (tmp_path / "file").write_text("x")
    assert _refused("O-1", outputs.check_output_path, tmp_path / "file" / "x.json").message == (
        f"{tmp_path / 'file'} is not a folder"
    )


@pytest.mark.parametrize("make, kind", [
    (lambda p: p.mkdir(), "a directory"),
    (lambda p: os.mkfifo(p), "a FIFO"),
    (lambda p: os.symlink("elsewhere.json", p), "a symbolic link"),
])  # fmt: skip
def test_a_target_that_is_not_a_regular_file_is_refused(tmp_path, make, kind):
    target = tmp_path / "out.json"
    make(target)
    err = _refused("O-2", outputs.check_output_path, target)
    assert err.message == f"the output exists and is {kind}, not a regular file"


def test_dev_null_is_never_replaced():
    err = _refused("O-2", outputs.check_output_path, "/dev/null")
    assert err.message == "the output exists and is a character device, not a regular file"
    assert Path("/dev/null").is_char_device()


def test_an_output_equal_to_an_input_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "profile.json").write_text("{}")
    os.link(tmp_path / "profile.json", tmp_path / "hard.json")
    for spelling in ("profile.json", "./profile.json", str(tmp_path / "profile.json"), "hard.json"):
        err = _refused("O-3", outputs.check_output_path, spelling, inputs=[None, "profile.json"])
        assert err.message == "the output is the input profile.json; give another output path"
    assert outputs.check_output_path("new.json", inputs=["profile.json"]) == Path("new.json")


def test_an_unwritable_folder_is_refused_before_the_work():
    err = _refused("O-4", outputs.check_output_path, "/proc/fpm-output.json")
    assert err.message.startswith("cannot write in the folder /proc: ")


def test_check_accepts_an_existing_regular_file(tmp_path):
    (tmp_path / "old.json").write_text("old")
    assert outputs.check_output_path(tmp_path / "old.json") == tmp_path / "old.json"
    assert [p.name for p in tmp_path.iterdir()] == ["old.json"]  # the write check leaves nothing behind


# --------------------------------------------------------------------------
# write_file
# --------------------------------------------------------------------------


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o027, 0o640), (0o077, 0o600)])
def test_write_file_honours_the_umask_like_any_file(tmp_path, umask, mode):
    old = os.umask(umask)
    try:
        outputs.write_file(tmp_path / "a.json", b"one")
    finally:
        os.umask(old)
    assert (tmp_path / "a.json").stat().st_mode & 0o777 == mode


def test_write_file_replaces_and_leaves_no_temporary(tmp_path):
    target = tmp_path / "a.json"
    outputs.write_file(target, b"one")
    outputs.write_file(target, b"two")
    assert target.read_bytes() == b"two"
    assert _names(tmp_path) == ["a.json"]


def test_a_failed_write_keeps_the_old_file(tmp_path, monkeypatch):
    target = tmp_path / "a.json"
    target.write_bytes(b"old")

    def full(fd, data):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(outputs.os, "write", full)
    err = _refused("O-5", outputs.write_file, target, b"new")
    assert err.message == "cannot write the output: No space left on device; nothing was replaced"
    monkeypatch.undo()
    assert target.read_bytes() == b"old" and _names(tmp_path) == ["a.json"]


_WRITER = """
import sys
from fpmcore.documents import output_files as outputs
target, size = sys.argv[1], int(sys.argv[2])
print("ready", flush=True)
n = 0
while True:
    n += 1
    outputs.write_file(target, (b"%08d" % n) * (size // 8))
"""


def test_killed_file_writers_leave_a_complete_file(tmp_path):
    """kill -9 at random moments: the target always holds one complete version."""
    target = tmp_path / "big.json"
    size = 1 << 20
    rnd = random.Random(13)
    for _ in range(8):
        proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(target), str(size)], stdout=subprocess.PIPE)
        assert proc.stdout.readline() == b"ready\n"
        time.sleep(rnd.uniform(0.0, 0.15))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        if target.exists():
            data = target.read_bytes()
            assert len(data) == size and data == data[:8] * (size // 8)
        for p in tmp_path.iterdir():
            p.unlink()


# --------------------------------------------------------------------------
# folders
# --------------------------------------------------------------------------


def test_publish_a_new_folder(tmp_path):
    out = tmp_path / "out"
    outputs.publish_folder(out, {"a.json": b"1", "x/y/b.json": b"2"})
    assert _names(out) == ["a.json", "x", "x/y", "x/y/b.json"]
    assert (out / "x" / "y" / "b.json").read_bytes() == b"2"
    assert _names(tmp_path) == ["out", "out/a.json", "out/x", "out/x/y", "out/x/y/b.json"]
    assert out.stat().st_mode & 0o777 == 0o777 & ~_umask()


def _umask() -> int:
    old = os.umask(0)
    os.umask(old)
    return old


def test_publish_never_overwrites_a_folder_that_holds_files(tmp_path):
    """Every path is checked first: an occupied folder is refused and nothing of the new output is written."""
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "second").write_bytes(b"old")
    files = {"first": b"1", "x/second": b"2", "observations.json": b"3"}
    err = _refused("O-2", outputs.publish_folder, tmp_path / "x", files, refusal="a probe never overwrites evidence")
    assert err.message == "the output folder exists and is not empty; a probe never overwrites evidence"
    assert _names(tmp_path) == ["x", "x/second"] and (tmp_path / "x" / "second").read_bytes() == b"old"
    (tmp_path / "empty").mkdir()
    outputs.publish_folder(tmp_path / "empty", files)  # an empty folder is taken
    assert _names(tmp_path / "empty") == ["first", "observations.json", "x", "x/second"]


def test_replace_swaps_an_earlier_output_only(tmp_path):
    out = tmp_path / "out"
    outputs.publish_folder(out, {"a.json": b"1", "b.json": b"2"}, replace=True, command="t")
    manifest = json.loads((out / MANIFEST).read_bytes())
    assert manifest == {
        "schema": "fpmcore-output/v1",
        "command": "t",
        "files": {"a.json": hashlib.sha256(b"1").hexdigest(), "b.json": hashlib.sha256(b"2").hexdigest()},
    }
    assert outputs.is_earlier_output(out)
    outputs.publish_folder(out, {"c.json": b"3"}, replace=True, command="t")
    assert _names(out) == ["c.json", MANIFEST]
    assert _names(tmp_path) == ["out", "out/c.json", f"out/{MANIFEST}"]  # the old folder is gone
    (out / "notes.txt").write_text("mine")
    err = _refused("O-2", outputs.publish_folder, out, {"d.json": b"4"}, replace=True, command="t")
    assert err.message == "the output folder exists and holds files fpm did not write; give a new or an empty folder"
    assert _names(out) == ["c.json", MANIFEST, "notes.txt"]
    (out / "notes.txt").unlink()
    (out / "c.json").write_bytes(b"changed")
    _refused("O-2", outputs.check_output_folder, out, replace=True)


def test_replace_without_an_atomic_swap(tmp_path, monkeypatch):
    """Where renameat2 is missing, the old folder is renamed aside first, then removed."""
    monkeypatch.setattr(outputs, "_exchange", lambda a, b: False)
    out = tmp_path / "out"
    outputs.publish_folder(out, {"a.json": b"1"}, replace=True, command="t")
    outputs.publish_folder(out, {"b.json": b"2"}, replace=True, command="t")
    assert _names(tmp_path) == ["out", "out/b.json", f"out/{MANIFEST}"]


def test_check_output_folder(tmp_path):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "observations.json").write_text("{}")
    err = _refused("O-3", outputs.check_output_folder, tmp_path / "in", inputs=[tmp_path / "in"])
    assert err.message == f"the output folder holds the input {tmp_path / 'in'}; give another output folder"
    _refused("O-3", outputs.check_output_folder, tmp_path, inputs=[tmp_path / "in" / "observations.json"])
    (tmp_path / "f").write_text("x")
    assert _refused("O-2", outputs.check_output_folder, tmp_path / "f").message == (
        "the output exists and is a file, not a folder"
    )
    _refused("O-1", outputs.check_output_folder, tmp_path / "missing" / "out")
    assert outputs.check_output_folder(tmp_path / "new") == tmp_path / "new"


def _publisher(args):
    out, n, barrier = args
    barrier.wait()
    files = {f"part-{i}.jsonl": (b"%d\n" % n) * 20000 for i in range(4)}
    try:
        outputs.publish_folder(out, files, replace=True, command="t")
        return "ok"
    except OutputError as exc:
        return exc.rule


def test_concurrent_writers_leave_one_complete_output(tmp_path):
    out = tmp_path / "out"
    ctx = multiprocessing.get_context("fork")
    with ctx.Manager() as manager:
        barrier = manager.Barrier(6)
        with ctx.Pool(6) as pool:
            results = pool.map(_publisher, [(out, n, barrier) for n in range(6)])
    assert set(results) <= {"ok", "O-2"} and "ok" in results
    assert outputs.is_earlier_output(out)
    contents = {(out / f"part-{i}.jsonl").read_bytes() for i in range(4)}
    assert len(contents) == 1  # all four files from the same writer
    assert _names(tmp_path) == [
        "out",
        *(f"out/{n}" for n in sorted([MANIFEST, *(f"part-{i}.jsonl" for i in range(4))])),
    ]


_FOLDER_WRITER = """
import sys
from fpmcore.documents import output_files as outputs
out = sys.argv[1]
print("ready", flush=True)
n = 0
while True:
    n += 1
    outputs.publish_folder(out, {f"f{i}.bin": (b"%08d" % n) * 65536 for i in range(4)}, replace=True, command="t")
"""


def test_killed_folder_writers_leave_a_complete_output(tmp_path):
    out = tmp_path / "out"
    rnd = random.Random(11)
    for _ in range(8):
        proc = subprocess.Popen([sys.executable, "-c", _FOLDER_WRITER, str(out)], stdout=subprocess.PIPE)
        assert proc.stdout.readline() == b"ready\n"
        time.sleep(rnd.uniform(0.0, 0.2))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        if out.exists():
            assert outputs.is_earlier_output(out)  # the manifest names exactly the files, unchanged
            assert len({(out / f"f{i}.bin").read_bytes() for i in range(4)}) == 1
        for stale in tmp_path.glob(".out.*.tmp"):  # a kill may leave a temporary sibling, never a partial target
            import shutil

            shutil.rmtree(stale)


# --------------------------------------------------------------------------
# names from input
# --------------------------------------------------------------------------


@pytest.mark.parametrize("name, reason", [
    ("../../escaped/pwn", "it holds a path separator"),
    ("/abs/pwn", "it holds a path separator (an absolute path)"),
    ("a\\b", "it holds a path separator"),
    ("..", "it is '..'"),
    (".", "it is '.'"),
    ("", "it is empty"),
    ("a\x00b", "it holds a NUL character"),
    ("a\nb", "it holds a character that is not printable"),
    ("x" * 201, "it is longer than 200 characters"),
    (None, "it is empty"),
])  # fmt: skip
def test_names_from_input_that_cannot_name_a_file(name, reason):
    err = _refused("O-6", outputs.safe_name, name, "configuration label")
    assert err.message.startswith("configuration label ") and err.message.endswith(f"cannot name a file: {reason}")
    assert "\n" not in err.message


def test_safe_names_pass():
    for name in ("glm53flash-tp4", "a.b", "ä b", "x" * 200):
        assert outputs.safe_name(name, "label") == name


def test_onboard_refuses_an_output_that_is_no_real_folder(tmp_path):
    """``fpm onboard -o`` a symbolic link to an empty folder, a file, or /dev/null: O-2 naming what the output is
    (never "not empty", never written through the link); ``fpm collect`` the same (tests/collect/test_collect.py)."""
    from fpmcore.testing import run_fpm

    (tmp_path / "empty").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "empty")
    (tmp_path / "file").write_text("x")
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text("{}")
    for out, kind in ((tmp_path / "link", "a symbolic link"), (tmp_path / "file", "a file"),
                      (Path("/dev/null"), "a character device")):  # fmt: skip
        res = run_fpm("onboard", str(tmp_path / "model"), "-o", str(out), "--probe", "dry")
        assert res.exit_code == 2, res.stderr
        assert f"the output exists and is {kind}, not a folder [O-2]" in res.stderr, res.stderr
    assert list((tmp_path / "empty").iterdir()) == []


def test_outputs_of_one_command_are_apart(tmp_path):
    from fpmcore.documents.output_files import OutputError, check_outputs_apart

    folder, plot, report = tmp_path / "out", tmp_path / "p.png", tmp_path / "r.json"
    check_outputs_apart([("report", report), ("plot", plot), ("none", None)])
    with pytest.raises(OutputError) as info:
        check_outputs_apart([("report", report), ("plot", tmp_path / "." / "r.json")])
    assert (info.value.rule, info.value.message) == ("O-3", "the plot and the report are one file; give two paths")
    with pytest.raises(OutputError) as info:
        check_outputs_apart([("--out", folder), ("plot", folder / "sub" / "p.png")], folders={"--out"})
    assert info.value.rule == "O-3"
    assert info.value.message == (
        f"the plot would be inside the --out folder {folder}, which is published whole; write it elsewhere"
    )
    check_outputs_apart([("--out", folder), ("plot", plot)], folders={"--out"})
