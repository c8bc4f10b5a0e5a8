"""Where fpmcore writes: one output-path rule and one atomic writer for every command.

Every command that writes (``import -o``, ``plan -o``, ``probe -o``,
``replay --out``/``--plot``, …) does two things, in this order:

1. **Before any work**, it checks each output path with
   :func:`check_output_path` (one file) or :func:`check_output_folder`
   (a folder of files), giving the command's inputs.  A refusal is an
   :class:`OutputError` (exit 2, one line naming the path); nothing has run.
2. **At the end**, it writes with :func:`write_file` or
   :func:`publish_folder`, which never leave a partial output.

The rules (ids ``O-1`` … ``O-6``; the CLI prints ``fpm: <path>: <message> [O-n]``):

====  ===========================================================================
O-1   the folder that would hold the output does not exist, or is not a folder.
      fpm **never creates missing folders**: a mistyped ``-o /nonexistent/x``
      must not create ``/nonexistent``.  Create the folder first.
O-2   the output exists and is not what the command may replace: for a file
      output, anything but a regular file (a directory, ``/dev/null`` or
      another device, a FIFO, a socket, a symbolic link); for a folder
      output, anything but a folder that is empty or, where the command
      replaces its earlier output, a folder holding exactly the files of
      the manifest :data:`MANIFEST` it wrote.
O-3   the output is one of the command's inputs (``import -o DIR/observations.json``,
      ``plan -o PROFILE``, ``replay --out`` over the trace), or an output
      folder would hold one of them; or two outputs of one command are one
      file (``sweep -o r.png --plot r.png``), or one would lie inside an
      output folder (:func:`check_outputs_apart`).
O-4   the folder cannot be written in (permissions, a read-only file system).
O-5   writing failed (no space, an I/O error): the earlier output, if any, is
      unchanged and no temporary file is left.
O-6   a name taken from input (a configuration label, …) cannot name a file:
      it is empty, ``.`` or ``..``, holds a path separator, a NUL or another
      character that is not printable, or is longer than 200 characters.
====  ===========================================================================

**One file** (:func:`write_file`): the bytes go to a temporary file in the
target's folder (``.<name>.<pid>.<random>.tmp``, created with mode ``0666`` less
the umask, like any file a program creates: ``0644`` under the usual umask
``022``), which is flushed, ``fsync``-ed and renamed over the target; then
the folder is ``fsync``-ed.  A kill at any moment leaves the old file or the
new one; two concurrent writers leave one of the two complete files.
Temporary names never appear in a message.

**A folder** (:func:`publish_folder`): every file is written into a
temporary sibling folder (``.<name>.<pid>.<random>.tmp``), each ``fsync``-ed,
with the manifest :data:`MANIFEST` (``{"schema", "command", "files":
{relative path: sha256}}``) written last when the command replaces its
earlier output; then the folder is published in one step:

* no output yet (or an empty folder): ``rename(2)`` of the temporary folder
  onto the target — atomic, and a second concurrent publisher finds the
  target taken (``O-2``) and removes its own temporary folder;
* an earlier output of the command (its manifest names exactly its files):
  the two folders are swapped atomically (Linux ``renameat2`` with
  ``RENAME_EXCHANGE``) and the old one is removed afterwards.  Where the
  swap is not available the old folder is first renamed aside, then the
  new one into place (a kill between the two renames leaves the old
  output complete under its temporary name).

So a kill at any moment leaves the old complete output or the new complete
output (possibly beside a stale ``.<name>.*.tmp`` folder, which the next
write of the same output removes once its writer's process is gone:
:func:`remove_stale_temporaries`), and concurrent writers leave one
complete output.  A folder that holds anything fpm did not
write is never replaced or removed.

For a command that adopts this module (``fpm replay --out DIR --plot P``)::

    from fpmcore.documents import output_files as outputs

    out = outputs.check_output_folder(args.out, inputs=[args.profile, args.trace], replace=True)
    plot = outputs.check_output_path(args.plot, inputs=[args.profile, args.trace])
    ...                                   # the work
    outputs.publish_folder(out, {"replay-summary.json": data, ...}, replace=True, command="replay")
    outputs.write_file(plot, png_bytes)
"""

from __future__ import annotations

import errno
import os
import re
import stat
import time
from collections.abc import Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from fpmcore.documents.errors import FpmError
from fpmcore.documents.jsonio import file_kind, sha256

#: The manifest a replaceable output folder holds (written last).
MANIFEST = "fpm-manifest.json"
MANIFEST_SCHEMA = "fpmcore-output/v1"
#: The longest name :func:`safe_name` accepts.
MAX_NAME = 200

PathLike = str | os.PathLike[str]


class OutputError(FpmError):
    """An output path fpm refuses or could not write (rules ``O-1`` … ``O-6``, exit 2)."""


def _folder_of(target: Path) -> Path:
    return target.parent if str(target.parent) else Path(".")


def _check_parent(target: Path) -> Path:
    """O-1 and O-4 for the folder that holds ``target``; returns it."""
    if str(target) in ("", "."):
        raise OutputError("O-1", "an output path must name a file or folder", str(target))
    parent = _folder_of(target)
    try:
        st = parent.stat()
    except OSError:
        raise OutputError(
            "O-1",
            f"the folder {parent} does not exist; fpm never creates missing folders (create it first)",
            str(target),
        ) from None
    if not stat.S_ISDIR(st.st_mode):
        raise OutputError("O-1", f"{parent} is not a folder", str(target))
    _probe_writable(parent, target)
    return parent


def _probe_writable(parent: Path, target: Path) -> None:
    """O-4: create (and drop) a nameless file in ``parent`` — what the write will need."""
    flags = os.O_WRONLY | getattr(os, "O_TMPFILE", 0)
    try:
        if flags & getattr(os, "O_TMPFILE", 0):
            try:
                os.close(os.open(parent, flags, 0o600))
                return
            except OSError as exc:
                if exc.errno not in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL, errno.ENOENT):
                    raise
        probe = _temp_path(parent, "fpm-check")
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        os.unlink(probe)
    except OSError as exc:
        raise OutputError("O-4", f"cannot write in the folder {parent}: {exc.strerror}", str(target)) from None


def _same(a: PathLike, b: PathLike) -> bool:
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):
        try:
            return os.path.realpath(a) == os.path.realpath(b)
        except ValueError:  # a NUL in a path taken from input
            return False


def _within(inner: PathLike, outer: PathLike) -> bool:
    try:
        inner_r, outer_r = os.path.realpath(inner), os.path.realpath(outer)
    except ValueError:
        return False
    return inner_r == outer_r or inner_r.startswith(outer_r.rstrip(os.sep) + os.sep)


def check_output_parent(path: PathLike) -> Path:
    """O-1 and O-4 only: the folder that would hold ``path`` exists and can be written in.

    For a command that cannot yet tell whether it will write a file or a
    folder (``fpm import -o`` before its index is read); it checks the rest
    with :func:`check_output_path` or :func:`check_output_folder` once it can.
    """
    target = Path(path)
    _check_parent(target)
    return target


def check_output_path(path: PathLike, *, inputs: Iterable[PathLike | None] = ()) -> Path:
    """Check one output file before any work (O-1 … O-4); return it as a :class:`Path`.

    ``inputs`` are the files the command reads (``None`` entries are skipped).
    """
    target = Path(path)
    _check_parent(target)
    try:
        st = target.lstat()
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise OutputError("O-4", f"cannot inspect the output: {exc.strerror}", str(target)) from None
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise OutputError("O-2", f"the output exists and is {file_kind(st.st_mode)}, not a regular file", str(target))
    for item in inputs:
        if item is not None and os.path.lexists(item) and _same(target, item):
            raise OutputError("O-3", f"the output is the input {item}; give another output path", str(target))
    return target


def check_outputs_apart(outputs: Sequence[tuple[str, PathLike | None]], *, folders: Collection[str] = ()) -> None:
    """O-3 between the outputs of one command, each ``(name, path)`` (``None`` paths skipped): no two are one file,
    and none lies inside an output named in ``folders`` (a folder is published whole).  Each output must have
    passed :func:`check_output_path` or :func:`check_output_folder` against the inputs."""
    given = [(name, path) for name, path in outputs if path is not None]
    for i, (name, path) in enumerate(given):
        for other, earlier in given[:i]:
            if _same(path, earlier):
                raise OutputError("O-3", f"the {name} and the {other} are one file; give two paths", str(path))
            for folder_name, folder, inner_name, inner in ((other, earlier, name, path), (name, path, other, earlier)):
                if folder_name in folders and _within(_folder_of(Path(inner)), folder):
                    raise OutputError(
                        "O-3",
                        f"the {inner_name} would be inside the {folder_name} folder {folder}, which is published "
                        "whole; write it elsewhere",
                        str(inner),
                    )


def refuse_non_folder(path: PathLike) -> None:
    """O-2 when the output exists and is not a real folder — a file, a device, a symbolic link (even to an empty
    folder): fpm writes an output folder only where it can see that the folder is its own."""
    target = Path(path)
    try:
        st = target.lstat()
    except FileNotFoundError:
        return
    except OSError as exc:
        raise OutputError("O-4", f"cannot inspect the output: {exc.strerror}", str(target)) from None
    _refuse_non_folder_mode(target, st.st_mode)


def _refuse_non_folder_mode(target: Path, mode: int) -> None:
    if not stat.S_ISDIR(mode):
        raise OutputError("O-2", f"the output exists and is {file_kind(mode)}, not a folder", str(target))


def check_output_folder(
    path: PathLike,
    *,
    inputs: Iterable[PathLike | None] = (),
    replace: bool = False,
    refusal: str = "",
) -> Path:
    """Check an output folder before any work (O-1 … O-4); return it as a :class:`Path`.

    The folder may be absent or empty; with ``replace`` it may also be an
    earlier output (:func:`is_earlier_output`).  ``refusal`` is added to the
    O-2 message of an occupied folder (``"a probe never overwrites evidence"``).
    ``inputs`` are files or folders the command reads: the output folder may
    neither be one of them nor hold one.
    """
    target = Path(path)
    _check_parent(target)
    try:
        st = target.lstat()
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise OutputError("O-4", f"cannot inspect the output: {exc.strerror}", str(target)) from None
    for item in inputs:
        if item is None or not os.path.lexists(item):
            continue
        if _same(target, item) or (st is not None and _within(item, target)):
            raise OutputError(
                "O-3", f"the output folder holds the input {item}; give another output folder", str(target)
            )
    if st is None:
        return target
    _refuse_non_folder_mode(target, st.st_mode)
    try:
        occupied = any(target.iterdir())
    except OSError as exc:
        raise OutputError("O-4", f"cannot read the output folder: {exc.strerror}", str(target)) from None
    if occupied and not (replace and is_earlier_output(target)):
        what = "holds files fpm did not write" if replace else "is not empty"
        tail = f"; {refusal}" if refusal else "; give a new or an empty folder"
        raise OutputError("O-2", f"the output folder exists and {what}{tail}", str(target))
    return target


def safe_name(name: Any, what: str) -> str:
    """``name`` when it can name one file in a folder (O-6); ``what`` says where it comes from."""
    reason = None
    if not isinstance(name, str) or name == "":
        reason = "it is empty"
    elif name in (".", ".."):
        reason = f"it is '{name}'"
    elif "\x00" in name:
        reason = "it holds a NUL character"
    elif "/" in name or "\\" in name or (os.altsep and os.altsep in name):
        reason = "it holds a path separator" + (" (an absolute path)" if name.startswith(("/", "\\")) else "")
    elif not name.isprintable():
        reason = "it holds a character that is not printable"
    elif len(name) > MAX_NAME:
        reason = f"it is longer than {MAX_NAME} characters"
    if reason is not None:
        import json

        shown = json.dumps(name, ensure_ascii=True) if isinstance(name, str) else repr(name)
        raise OutputError("O-6", f"{what} {shown[:120]} cannot name a file: {reason}")
    return str(name)


# --------------------------------------------------------------------------
# writing
# --------------------------------------------------------------------------


#: When this process began writing (near enough: when this module was imported); a temporary of an output
#: without its writer's process id that is older than this is stale (:func:`remove_stale_temporaries`).
_STARTED = time.time()


def _temp_path(folder: Path, name: str) -> Path:
    """``.<name>.<pid>.<random>.tmp``: the process id names the writer, for :func:`remove_stale_temporaries`."""
    return folder / f".{name[:80]}.{os.getpid()}.{os.urandom(6).hex()}.tmp"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return pid > 0  # another user's process exists
    return True


def remove_stale_temporaries(folder: PathLike, name: str) -> list[str]:
    """Remove the temporaries a killed writer of the output ``name`` left in ``folder``; returns their names.

    Only names of the pattern of :func:`_temp_path` for this output are
    considered (``.<name>.<pid>.<12 hex>.tmp``, and ``.<name>.<12 hex>.tmp``
    of earlier versions), and only files and folders (never a link): one is
    stale when the process that made it is gone, or, without a process id,
    when it is older than this run.  A concurrent writer's temporary (its
    process alive) is left alone.
    """
    pattern = re.compile(rf"\.{re.escape(name[:80])}\.(?:(\d+)\.)?[0-9a-f]{{12}}\.tmp")
    removed: list[str] = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    for entry in entries:
        m = pattern.fullmatch(entry.name)
        if m is None:
            continue
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        pid = int(m.group(1)) if m.group(1) else None
        if pid == os.getpid() or not (stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode)):
            continue
        if (pid is not None and not _alive(pid)) or (pid is None and st.st_mtime < _STARTED):
            if stat.S_ISDIR(st.st_mode):
                _remove(Path(entry.path))
            else:
                _unlink(Path(entry.path))
            removed.append(entry.name)
    return removed


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:  # some file systems cannot sync a directory
        pass
    finally:
        os.close(fd)


def _write_new(path: Path, data: bytes) -> None:
    """Create ``path`` (mode 0666 less the umask), write, flush and fsync it."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)


def _failed(target: Path, exc: OSError) -> OutputError:
    return OutputError(
        "O-5", f"cannot write the output: {exc.strerror or type(exc).__name__}; nothing was replaced", str(target)
    )


def write_file(path: PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (see the module docstring); raises :class:`OutputError`."""
    target = Path(path)
    folder = _folder_of(target)
    remove_stale_temporaries(folder, target.name)
    tmp = _temp_path(folder, target.name)
    try:
        _write_new(tmp, data)
        os.replace(tmp, target)
    except OSError as exc:
        _unlink(tmp)
        if isinstance(exc, IsADirectoryError):
            raise OutputError("O-2", "the output exists and is a directory, not a regular file", str(target)) from None
        raise _failed(target, exc) from None
    except BaseException:
        _unlink(tmp)
        raise
    _fsync_dir(folder)


def _unlink(path: Path) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def manifest_bytes(files: Mapping[str, bytes], command: str) -> bytes:
    """The manifest of a folder output: the SHA-256 of every file, keys sorted."""
    return _manifest({name: sha256(data).hexdigest() for name, data in files.items()}, command)


def _manifest(digests: Mapping[str, str], command: str) -> bytes:
    from fpmcore.documents.jsonio import file_form_bytes

    return file_form_bytes(
        {
            "schema": MANIFEST_SCHEMA,
            "command": command,
            "files": {name: digests[name] for name in sorted(digests)},
        }
    )


def is_earlier_output(folder: PathLike) -> bool:
    """True when ``folder`` holds a readable :data:`MANIFEST` that names exactly its other files, unchanged."""
    from fpmcore.documents.jsonio import JsonError, load_path

    base = Path(folder)
    try:
        manifest = load_path(base / MANIFEST)
    except JsonError:
        return False
    if not isinstance(manifest, dict) or manifest.get("schema") != MANIFEST_SCHEMA:
        return False
    named = manifest.get("files")
    if not isinstance(named, dict):
        return False
    present: dict[str, Path] = {}
    for p in base.rglob("*"):
        if p.is_symlink():
            return False
        if p.is_dir():
            continue
        if not p.is_file():
            return False
        rel = p.relative_to(base).as_posix()
        if rel != MANIFEST:
            present[rel] = p
    if set(present) != set(named):
        return False
    return all(sha256(present[n].read_bytes()).hexdigest() == named[n] for n in named)


def _check_relative(rel: str) -> None:
    parts = rel.split("/")
    if not rel or rel.startswith("/") or any(p in ("", ".", "..") for p in parts) or "\x00" in rel:
        raise ValueError(f"not a relative file name inside the folder: {rel!r}")


def publish_folder(
    path: PathLike,
    files: Mapping[str, bytes],
    *,
    replace: bool = False,
    command: str = "",
    refusal: str = "",
) -> None:
    """Write ``files`` (relative POSIX path → bytes, in the order given) as the folder ``path``, atomically.

    With ``replace``, an earlier output of the command is swapped out and a
    :data:`MANIFEST` naming the files is written last; without it the target
    must be absent or empty.  Raises :class:`OutputError` (the target is
    then unchanged and no temporary folder is left).
    """
    target = Path(path)
    for rel in files:
        _check_relative(rel)
    folder = _folder_of(target)
    remove_stale_temporaries(folder, target.name)
    tmp = _temp_path(folder, target.name)
    try:
        os.mkdir(tmp, 0o777)
        made: set[Path] = {tmp}
        for rel, data in files.items():
            dest = tmp / rel
            for parent in reversed(dest.relative_to(tmp).parents[:-1]):
                sub = tmp / parent
                if sub not in made:
                    os.mkdir(sub, 0o777)
                    made.add(sub)
            _write_new(dest, data)
        if replace:
            _write_new(tmp / MANIFEST, manifest_bytes(files, command))
        for sub in sorted(made, key=lambda p: len(p.parts), reverse=True):
            _fsync_dir(sub)
        _publish(tmp, target, replace=replace, refusal=refusal)
    except OutputError:
        _remove(tmp)
        raise
    except OSError as exc:
        _remove(tmp)
        raise _failed(target, exc) from None
    except BaseException:
        _remove(tmp)
        raise
    _fsync_dir(folder)


def _publish(tmp: Path, target: Path, *, replace: bool, refusal: str) -> None:
    for _attempt in range(8):
        try:
            os.rename(tmp, target)  # absent, or an empty folder: atomic
            return
        except OSError as exc:
            if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR, errno.EISDIR):
                raise
            if exc.errno in (errno.ENOTDIR, errno.EISDIR) or not target.is_dir() or target.is_symlink():
                raise OutputError("O-2", "the output exists and is not a folder", str(target)) from None
        if not (replace and is_earlier_output(target)):
            what = "holds files fpm did not write" if replace else "is not empty"
            tail = f"; {refusal}" if refusal else "; give a new or an empty folder"
            raise OutputError("O-2", f"the output folder exists and {what}{tail}", str(target))
        try:
            swapped = _exchange(tmp, target)
        except FileNotFoundError:
            continue  # the target went away meanwhile: publish by rename
        if swapped:
            _remove(tmp)  # tmp now holds the earlier output
            return
        aside = _temp_path(_folder_of(target), target.name)
        try:
            os.rename(target, aside)
        except FileNotFoundError:
            continue
        os.rename(tmp, target)
        _remove(aside)
        return
    raise OutputError("O-5", "the output folder kept changing while it was written; nothing was replaced", str(target))


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths atomically (Linux ``renameat2(RENAME_EXCHANGE)``); False where not available."""
    import ctypes  # here, not at the top: only a folder replaced needs it, and it costs every start

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err))


def _remove(path: Path) -> None:
    import shutil  # imported here: every command that checks an output folder imports this module

    shutil.rmtree(path, ignore_errors=True)


class StagedFolder:
    """A folder output whose files are written (streamed) one by one, then published like :func:`publish_folder`.

    For a command whose files are too large to hold in memory (``fpm replay
    --out``)::

        stage = StagedFolder(out, replace=True, command="replay")   # after check_output_folder
        try:
            with open(stage.file("replay-steps.jsonl.gz"), "xb") as f:
                ...                                                 # stream the records
            digest = stage.digest("replay-steps.jsonl.gz")          # its SHA-256, e.g. for a summary
            stage.publish()                                         # fsync, manifest last, one rename or swap
        finally:
            stage.discard()                                         # a no-op once published

    The files go into a temporary sibling folder (``.<name>.<pid>.<random>.tmp``; a stale one a killed writer
    left is removed first, :func:`remove_stale_temporaries`)
    and reach the target only in :meth:`publish`, with the guarantees of
    :func:`publish_folder` (a kill leaves the old output or the new one whole,
    concurrent writers leave one complete output).  :meth:`publish` raises
    :class:`OutputError` (``O-2``, ``O-5``) and removes the temporary folder.
    """

    def __init__(self, path: PathLike, *, replace: bool = False, command: str = "", refusal: str = "") -> None:
        self.target = Path(path)
        self._replace, self._command, self._refusal = replace, command, refusal
        remove_stale_temporaries(_folder_of(self.target), self.target.name)  # of a killed earlier writer
        self.path = _temp_path(_folder_of(self.target), self.target.name)
        try:
            os.mkdir(self.path, 0o777)
        except OSError as exc:
            raise _failed(self.target, exc) from None
        self._digests: dict[str, str] = {}
        self._done = False

    def file(self, rel: str) -> Path:
        """The path to create for the relative file name ``rel`` (its subfolders are made)."""
        _check_relative(rel)
        dest = self.path / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        return dest

    def digest(self, rel: str) -> str:
        """The SHA-256 of a file written (and closed), read back once."""
        if rel not in self._digests:
            h = sha256()
            try:
                with open(self.path / rel, "rb") as f:
                    for block in iter(lambda: f.read(1 << 20), b""):
                        h.update(block)
                    os.fsync(f.fileno())
            except OSError as exc:
                raise _failed(self.target, exc) from None
            self._digests[rel] = h.hexdigest()
        return self._digests[rel]

    def publish(self) -> dict[str, str]:
        """Publish the folder (manifest last with ``replace``); returns the SHA-256 of every file."""
        try:
            files = sorted(p.relative_to(self.path).as_posix() for p in self.path.rglob("*") if p.is_file())
            digests = {rel: self.digest(rel) for rel in files}
            if self._replace:
                _write_new(self.path / MANIFEST, _manifest(digests, self._command))
            for sub in sorted((p for p in self.path.rglob("*") if p.is_dir()), key=lambda p: len(p.parts),
                              reverse=True):  # fmt: skip
                _fsync_dir(sub)
            _fsync_dir(self.path)
            _publish(self.path, self.target, replace=self._replace, refusal=self._refusal)
        except OutputError:
            self.discard()
            raise
        except OSError as exc:
            self.discard()
            raise _failed(self.target, exc) from None
        self._done = True
        _fsync_dir(_folder_of(self.target))
        return digests

    def discard(self) -> None:
        """Remove the temporary folder (nothing of it was published); a no-op after :meth:`publish`."""
        if not self._done:
            self._done = True
            _remove(self.path)

    def __enter__(self) -> StagedFolder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.discard()
