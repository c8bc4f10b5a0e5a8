"""cffi build script of :mod:`fpmcore._native` (API out-of-line mode).

``setup.py`` names it in ``cffi_modules``.  The C sources live in ``csrc/``;
``FPM_VERSION`` is the package version, so that :mod:`fpmcore.native` can
refuse a stale build.
"""

from __future__ import annotations

import re
from pathlib import Path

from cffi import FFI

ROOT = Path(__file__).resolve().parents[2]
CSRC = ROOT / "csrc"
_VERSION = re.search(r'^__version__ = "([^"]+)"', (ROOT / "src" / "fpmcore" / "__init__.py").read_text(), re.M)
assert _VERSION is not None, "src/fpmcore/__init__.py names no __version__"
VERSION = _VERSION.group(1)

#: The public headers, in include order: the single source of the declarations.
HEADERS = ("fpm_status.h", "fpmcore.h", "fpm_replay.h")
_DEFINE = re.compile(r"#\s*define\s+(\w+)\s+\(?(-?\d+)(?:LL)?\)?(?![\w.])")


def cdef_from_headers(headers: tuple[str, ...] = HEADERS) -> str:
    """The declarations cffi exposes, read from the public headers.

    cffi's ``cdef`` takes no preprocessor lines: integer ``#define`` constants
    are kept (cffi understands them; a ``LL`` suffix is dropped), every other
    directive (guards, includes) is dropped.  Comments are left to cffi, which strips them.
    """
    out: list[str] = []
    for name in headers:
        for line in (CSRC / name).read_text().splitlines():
            if line.lstrip().startswith("#"):
                m = _DEFINE.match(line.strip())
                if m:
                    out.append(f"#define {m.group(1)} {m.group(2)}")
                continue
            out.append(line)
    return "\n".join(out)


CDEF = cdef_from_headers()

ffibuilder = FFI()
ffibuilder.cdef(CDEF)
ffibuilder.set_source(
    "fpmcore._native",
    '#include "fpmcore.h"',
    sources=sorted(str(p.relative_to(ROOT)) for p in CSRC.glob("*.c")),
    include_dirs=[str(CSRC.relative_to(ROOT))],
    define_macros=[("FPM_VERSION", f'"{VERSION}"')],
    depends=sorted(str(p.relative_to(ROOT)) for p in CSRC.glob("*.h")),
    # No fused multiply-add: the latency model must round exactly as the Python reference.
    extra_compile_args=["-std=c11", "-O2", "-Wall", "-Wextra", "-ffp-contract=off"],
)

if __name__ == "__main__":  # pragma: no cover
    ffibuilder.compile(verbose=True)
