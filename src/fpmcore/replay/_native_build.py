"""cffi build script of :mod:`fpmcore.replay._native` (API out-of-line mode).

``setup.py`` names it in ``cffi_modules``.  The C sources live in ``csrc/``;
``FPM_VERSION`` is the package version, so that :mod:`fpmcore.replay.native` can
refuse a stale build.
"""

from __future__ import annotations

import re
from pathlib import Path

from cffi import FFI

ROOT = Path(__file__).resolve().parents[3]
CSRC = ROOT / "csrc"
_VERSION = re.search(r'^__version__ = "([^"]+)"', (ROOT / "src" / "fpmcore" / "__init__.py").read_text(), re.M)
assert _VERSION is not None, "src/fpmcore/__init__.py names no __version__"
VERSION = _VERSION.group(1)

#: The public headers, in include order: the single source of the declarations.
HEADERS = ("fpm_status.h", "fpmcore.h", "fpm_replay.h", "fpm_trace.h", "fpm_records.h")
_EXPORT_MARK = re.compile(r"^FPM_API\s+")
_DEFINE = re.compile(r"#\s*define\s+(\w+)\s+\(?(-?\d+)(?:LL)?\)?(?![\w.])")


def cdef_from_headers(headers: tuple[str, ...] = HEADERS) -> str:
    """The declarations cffi exposes, read from the public headers.

    cffi's ``cdef`` takes no preprocessor lines: integer ``#define`` constants
    are kept (cffi understands them; a ``LL`` suffix is dropped), every other
    directive (guards, includes) is dropped, and so is the ``FPM_API`` export
    mark of the public functions.  Comments are left to cffi, which strips them.
    """
    out: list[str] = []
    for name in headers:
        for line in (CSRC / name).read_text().splitlines():
            if line.lstrip().startswith("#"):
                m = _DEFINE.match(line.strip())
                if m:
                    out.append(f"#define {m.group(1)} {m.group(2)}")
                continue
            out.append(_EXPORT_MARK.sub("", line))
    return "\n".join(out)


CDEF = cdef_from_headers()

#: The compiler flags of the extension, the ones of ``make -C csrc check``
#: that change what is compiled (that one adds -Werror and the sanitizers):
#:
#: * ``-ffp-contract=off``: no fused multiply-add, so the latency model rounds
#:   exactly as the Python reference;
#: * ``-fno-wrapv``: CPython builds extensions with ``-fwrapv``, under which a
#:   signed overflow wraps silently; the sanitized C tests are built without it,
#:   so the library must not rely on it, and the extension is compiled under the
#:   same rules as the tests check (overflow is an error the tests find, not a
#:   wrapped value a replay would use);
#: * ``-fvisibility=hidden``: only the public API (``FPM_API``, the ``fpm_``
#:   functions of the headers) is exported; the functions the C files share stay
#:   inside the extension.
COMPILE_FLAGS = (
    "-std=c11",
    "-O2",
    "-Wall",
    "-Wextra",
    "-ffp-contract=off",
    "-fno-wrapv",
    "-fvisibility=hidden",
)

ffibuilder = FFI()
ffibuilder.cdef(CDEF)
ffibuilder.set_source(
    "fpmcore.replay._native",
    '#include "fpmcore.h"',
    sources=sorted(str(p.relative_to(ROOT)) for p in CSRC.glob("*.c")),
    include_dirs=[str(CSRC.relative_to(ROOT))],
    define_macros=[("FPM_VERSION", f'"{VERSION}"')],
    depends=sorted(str(p.relative_to(ROOT)) for p in CSRC.glob("*.h")),
    # COMPILE_FLAGS: after CPython's own flags, so they win over them.
    extra_compile_args=list(COMPILE_FLAGS),
)

if __name__ == "__main__":  # pragma: no cover
    ffibuilder.compile(verbose=True)
