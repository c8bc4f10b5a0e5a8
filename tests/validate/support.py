"""What every measurement-artifact test shares (core and plugin tests alike).

``M`` is ``tests/support/artifacts``, the writer of artifacts in the producers'
shape; ``host``, ``strict`` and ``producer_dir`` are fixtures a test module
imports to use::

    from tests.validate.support import M, host, producer_dir, strict  # noqa: F401
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import fpmcore.validate.evaluation
import fpmcore_dsv41
import fpmcore_glm53flash
from fpmcore.host.plugins import PluginHost
from fpmcore.testing import make_host
from fpmcore.validate.integers import INT, NINT, ROWS
from tests.support import artifacts as M

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def host() -> PluginHost:
    """A host like ``fpm``'s (its built-in commands) with the two model plugins and nothing else."""
    return model_host()


def model_host() -> PluginHost:
    """:func:`host` outside a fixture."""
    return make_host(fpmcore_glm53flash, fpmcore_dsv41)


@pytest.fixture
def strict(monkeypatch):
    """A rule that raises is a bug: let it raise instead of becoming a diagnostic."""
    monkeypatch.setattr(fpmcore.validate.evaluation, "STRICT", True)


@pytest.fixture
def producer_dir(monkeypatch):
    """Read GLM artifacts with the producer files of the example campaign (05 §7.2)."""
    monkeypatch.setenv("FPM_GLM53FLASH_PRODUCER_DIR", str(M.PRODUCER_DIR))


def reindex(attempt: Path) -> None:
    """Pin the current bytes of every file the attempt's index names (after a test changed one)."""
    index_path = attempt / "index.json"
    index = json.loads(index_path.read_text())
    index["files"] = {name: hashlib.sha256((attempt / name).read_bytes()).hexdigest() for name in index["files"]}
    index_path.write_text(json.dumps(index, indent=2) + "\n")


def fpm(host: PluginHost, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``fpm ARGV`` in-process: ``(exit code, stdout, stderr)``."""
    from fpmcore.cli import main

    code = main(list(argv), host=host)
    out = capsys.readouterr()
    return code, out.out, out.err


def integer_fields(value: Any, spec: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every integer field of A-2's schema present in ``value``, as key paths (document order aside)."""
    if spec in (INT, NINT):
        yield path
    elif spec == ROWS:
        for i, row in enumerate(value if isinstance(value, list) else ()):
            for j, _ in enumerate(row if isinstance(row, list) else ()):
                yield (*path, i, j)
    elif isinstance(spec, tuple):
        for i, item in enumerate(value if isinstance(value, list) else ()):
            yield from integer_fields(item, spec[1], (*path, i))
    elif isinstance(value, dict):
        for key, sub in spec.items():
            if key in value:
                yield from integer_fields(value[key], sub, (*path, key))


def dotted(path: tuple[Any, ...]) -> str:
    """A key path as A-2 names it: ``results[1].point.batch_size``."""
    out = ""
    for seg in path:
        out = f"{out}[{seg}]" if isinstance(seg, int) else f"{out}.{seg}" if out else seg
    return out


def remove_tree(top: Path) -> None:
    """``shutil.rmtree`` without recursion (it recurses once per directory level)."""
    order, stack = [], [top]
    while stack:
        d = stack.pop()
        order.append(d)
        with os.scandir(d) as it:
            for e in it:
                if e.is_dir(follow_symlinks=False):
                    stack.append(Path(e.path))
                else:
                    os.unlink(e.path)
    for d in reversed(order):
        os.rmdir(d)
