"""The native backend: the C library through cffi, or its Python reference.

``BACKEND`` is ``"c"`` when the compiled :mod:`fpmcore.replay._native` module is
importable and was built for this package version, ``"python"`` when
``FPM_PUREPYTHON=1`` is set (:mod:`fpmcore.replay.engine` then runs
:mod:`fpmcore.replay.reference`).  A missing or stale build raises
:class:`NativeBuildError` on import rather than silently running the slower
path: reinstall the package (``pip install -e .``) to rebuild it, or set
``FPM_PUREPYTHON=1`` to run without it.
"""

from __future__ import annotations

import os

import fpmcore


class NativeBuildError(ImportError):
    """The compiled library is missing or was built for another version."""


#: The environment variable that selects the Python reference.
PUREPYTHON_ENV = "FPM_PUREPYTHON"


def want_reference(environ: os._Environ[str] | dict[str, str] = os.environ) -> bool:
    """Whether ``FPM_PUREPYTHON`` asks for the Python reference (set, and neither empty nor ``0``)."""
    return environ.get(PUREPYTHON_ENV, "") not in ("", "0")


if want_reference():
    BACKEND = "python"

    def version() -> str:
        """The library version of the Python reference: the package version (C: ``fpm_version``)."""
        return fpmcore.__version__

else:
    try:
        from fpmcore.replay._native import ffi as _ffi
        from fpmcore.replay._native import lib as _lib
    except ImportError as exc:  # pragma: no cover - exercised by a fresh checkout without a build
        raise NativeBuildError(
            "fpmcore's C library is not built; reinstall fpmcore (pip install -e .) or set FPM_PUREPYTHON=1"
        ) from exc

    BACKEND = "c"

    def version() -> str:
        out = _ffi.new("const char **")
        status = _lib.fpm_version(out)
        if status != 0:  # pragma: no cover - fpm_version only fails on NULL
            raise RuntimeError(f"fpm_version failed with status {status}")
        return str(_ffi.string(out[0]).decode())

    _built = version()
    if _built != fpmcore.__version__:
        raise NativeBuildError(
            f"fpmcore's C library was built for {_built}, the package is "
            f"{fpmcore.__version__}; reinstall fpmcore (pip install -e .) to rebuild it"
        )
