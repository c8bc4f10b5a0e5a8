"""Test kit for fpmcore and its plugins: an opt-in pytest plugin.

Enable it in a ``conftest.py`` (``pytest_plugins = ["fpmcore.testing"]``) or
with ``-p fpmcore.testing``.  It provides:

``fpm_host``
    a factory fixture: ``fpm_host(*plugin_objects, entry_points=("vllm_033",))``
    builds a :class:`~fpmcore.host.plugins.PluginHost` with exactly those plugins
    (plus fpmcore's built-in commands, as ``fpm`` builds it) and no
    autoload, independent of the environment.
``run_fpm``
    a fixture (and a plain function) running ``fpm`` in-process:
    ``run_fpm("plugins", "--json", env={"FPM_PLUGINS": "glm53flash"})``
    returns :class:`FpmResult` ``(exit_code, stdout, stderr)``.
:func:`check_plugin`
    the conformance suite every plugin runs against itself:
    ``assert check_plugin("fpmcore_mymodel") == []`` (see :mod:`fpmcore.host.conformance`).
:data:`DATA`
    the folder of the conformance suite's inputs: ``DATA / "conformance-hybrid.fpm-profile.json"``,
    a hybrid profile (GLM-5.3-Flash TP 4) a model plugin can plan on.
"""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import attrs
import pytest

from fpmcore.host.build import build_host
from fpmcore.host.plugins import PluginHost

#: The folder of the conformance suite's inputs (the profiles a plugin's tests can plan on).
DATA = Path(__file__).parent / "data"


@attrs.frozen
class FpmResult:
    """What one ``fpm`` run gave."""

    exit_code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        """stdout parsed as strict JSON (one document)."""
        from fpmcore.documents.jsonio import loads

        return loads(self.stdout)


@contextlib.contextmanager
def _environment(env: Mapping[str, str | None]) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in env}
    try:
        for k, v in env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def run_fpm(*argv: str, env: Mapping[str, str | None] | None = None, host: PluginHost | None = None) -> FpmResult:
    """Run ``fpm ARGV`` in this process with captured output.

    ``env`` overrides environment variables (``None`` unsets one); ``host``
    replaces the host built from the installed plugins (see ``fpm_host``).
    """
    from fpmcore.cli import main

    out, err = io.StringIO(), io.StringIO()
    with _environment(env or {}), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv), host=host)
    return FpmResult(code, out.getvalue(), err.getvalue())


def make_host(*plugins: object, entry_points: tuple[str, ...] = (), **kwargs: Any) -> PluginHost:
    """A host like ``fpm``'s (fpmcore's built-in commands) with exactly ``plugins`` and the named entry points; no autoload."""
    return build_host(plugins=plugins, autoload=False, enable=entry_points, environ={}, **kwargs)


@pytest.fixture
def fpm_host() -> Callable[..., PluginHost]:
    """Factory fixture: ``fpm_host(*plugin_objects, entry_points=(...))``."""
    return make_host


@pytest.fixture(name="run_fpm")
def run_fpm_fixture() -> Callable[..., FpmResult]:
    """Fixture form of :func:`run_fpm`."""
    return run_fpm


def check_plugin(plugin: Any) -> list[str]:
    """The conformance problems of a plugin (a module or its import name); empty when it conforms."""
    from fpmcore.host.conformance import check_plugin as check

    return check(plugin)


__all__ = ["FpmResult", "check_plugin", "fpm_host", "make_host", "run_fpm", "run_fpm_fixture"]
