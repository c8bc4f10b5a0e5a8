"""The native backend: the C library through cffi, or its Python reference.

``BACKEND`` is ``"c"`` when the compiled :mod:`fpmcore._native` module is
importable and was built for this package version, ``"python"`` when
``FPM_PUREPYTHON=1`` is set.  A missing or stale build raises
:class:`NativeBuildError` on import rather than silently running the slower
path: reinstall the package (``pip install -e .``) to rebuild it, or set
``FPM_PUREPYTHON=1`` to run without it.

``FPMCORE_PUREPYTHON`` is the deprecated former name of ``FPM_PUREPYTHON``;
it still works when ``FPM_PUREPYTHON`` is not set.
"""

from __future__ import annotations

import os

import fpmcore


class NativeBuildError(ImportError):
    """The compiled library is missing or was built for another version."""


#: The environment variable that selects the Python reference, and its deprecated former name.
PUREPYTHON_ENV = "FPM_PUREPYTHON"
DEPRECATED_PUREPYTHON_ENV = "FPMCORE_PUREPYTHON"


def want_reference(environ: os._Environ[str] | dict[str, str] = os.environ) -> bool:
    """Whether ``FPM_PUREPYTHON`` (or, when unset, the deprecated ``FPMCORE_PUREPYTHON``) asks for the reference."""
    value = environ.get(PUREPYTHON_ENV)
    if value is None:
        value = environ.get(DEPRECATED_PUREPYTHON_ENV, "")
    return value not in ("", "0")


if want_reference():
    from fpmcore import _reference as _impl

    BACKEND = "python"

    def version() -> str:
        return _impl.version()

    replay_run = _impl.replay_run
    align_stop = _impl.align_stop

else:
    try:
        from fpmcore._native import ffi as _ffi
        from fpmcore._native import lib as _lib
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

    def replay_run(cfg, requests, arrival_mode):  # type: ignore[no-untyped-def]
        """Replay a whole trace in C (``fpm_replay_open`` … ``fpm_replay_close``); see :mod:`fpmcore.replay.cengine`."""
        from fpmcore.replay.cengine import run_c

        return run_c(cfg, requests, arrival_mode)

    def align_stop(query):  # type: ignore[no-untyped-def]
        """04 G-2 … G-6 in C (``fpm_align_stop``)."""
        from fpmcore.replay.cengine import align_stop_c

        return align_stop_c(query)

    _built = version()
    if _built != fpmcore.__version__:
        raise NativeBuildError(
            f"fpmcore's C library was built for {_built}, the package is "
            f"{fpmcore.__version__}; reinstall fpmcore (pip install -e .) to rebuild it"
        )
