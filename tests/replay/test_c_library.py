"""The C library and its Python side agree on every constant; the build is required.

The Python modules re-declare the C library's numbering (group kinds, arrival
modes, policies, stop errors, reject reasons, events, the bounds of its
boundary): each value must equal the header's, read through cffi (which
takes the declarations from the headers themselves).  A missing C build
fails here, it does not skip.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from fpmcore.replay import model
from fpmcore.replay._native import lib

CSRC = Path(__file__).resolve().parents[2] / "csrc"

#: Python name in fpmcore.replay.model -> C name in csrc/fpm_replay.h
PAIRS = {
    "KIND_FULL": "FPM_KIND_FULL", "KIND_WINDOW": "FPM_KIND_WINDOW", "KIND_CONV": "FPM_KIND_CONV",
    "KIND_RING": "FPM_KIND_RING", "KIND_MAMBA": "FPM_KIND_MAMBA", "KIND_CHUNK": "FPM_KIND_CHUNK",
    "ARRIVE_STEP": "FPM_ARRIVE_STEP", "ARRIVE_TIME": "FPM_ARRIVE_TIME",
    "POLICY_FCFS": "FPM_POLICY_FCFS", "POLICY_PRIORITY": "FPM_POLICY_PRIORITY",
    "ERR_OVERSIZED": "FPM_RERR_OVERSIZED", "ERR_STALL": "FPM_RERR_STALL", "ERR_NO_PHASE": "FPM_RERR_NO_PHASE",
    "ERR_STEP_LIMIT": "FPM_RERR_STEP_LIMIT",
    "ST_FINISHED": "FPM_RST_FINISHED", "ST_REJECTED": "FPM_RST_REJECTED",
    "REJ_PROMPT": "FPM_REJ_PROMPT", "REJ_FINAL_FORWARD": "FPM_REJ_FINAL_FORWARD",
    "REJ_INPUT_SEQUENCE": "FPM_REJ_INPUT_SEQ", "REJ_QUEUED_REQS": "FPM_REJ_QUEUED_REQS",
    "REJ_QUEUED_TOKENS": "FPM_REJ_QUEUED_TOKENS",
    "EV_ADMITTED": "FPM_EV_ADMITTED", "EV_PREEMPTED": "FPM_EV_PREEMPTED", "EV_FINISHED": "FPM_EV_FINISHED",
    "EV_REJECTED": "FPM_EV_REJECTED",
    "MAX_TOKENS": "FPM_MAX_TOKENS", "MAX_BYTES": "FPM_MAX_BYTES", "MAX_ARRIVAL_STEP": "FPM_MAX_ARRIVAL_STEP",
    "MAX_STEPS": "FPM_MAX_STEPS", "MAX_PRIORITY": "FPM_MAX_PRIORITY",
}  # fmt: skip


def test_python_constants_equal_the_header():
    for py, c in PAIRS.items():
        assert getattr(model, py) == getattr(lib, c), (py, c)


def test_every_replay_constant_of_the_header_has_a_python_twin():
    """A constant added to the header without its Python twin fails here."""
    header = (CSRC / "fpm_replay.h").read_text()
    names = set(re.findall(r"#define (FPM_(?:KIND|ARRIVE|POLICY|RERR|RST|REJ|EV|MAX)_\w+)", header))
    assert names == set(PAIRS.values())


def test_status_codes_live_in_one_header():
    """Every status code is defined once, in fpm_status.h, and the binding sees them all."""
    codes = {}
    for h in CSRC.glob("*.h"):
        for name in re.findall(r"#define (FPM_(?:OK|E[A-Z]+))\b", h.read_text()):
            codes.setdefault(name, []).append(h.name)
    assert codes and all(files == ["fpm_status.h"] for files in codes.values()), codes
    assert (lib.FPM_OK, lib.FPM_EINVAL, lib.FPM_ENOMEM, lib.FPM_ERANGE, lib.FPM_ENOSPC) == (0, 1, 2, 3, 4)


def test_trace_priority_bound_is_the_engine_bound():
    from fpmcore.replay import trace

    assert trace.MAX_PRIORITY == lib.FPM_MAX_PRIORITY


def test_the_extension_exports_only_the_public_api():
    """``nm -D`` of the built extension: the functions of the public headers and the module's init, nothing else.

    The C files share their internal functions (``fpm_internal.h``) under
    ``-fvisibility=hidden``; only ``FPM_API`` functions are exported.
    """
    import subprocess

    from fpmcore.replay import _native

    table = subprocess.run(["nm", "-D", "--defined-only", _native.__file__], capture_output=True, text=True, check=True)
    exported = {line.split()[-1] for line in table.stdout.splitlines() if line.strip()}
    public = {name for name in dir(lib) if callable(getattr(lib, name))}
    assert public == {
        "fpm_version", "fpm_replay_open", "fpm_replay_advance", "fpm_replay_close", "fpm_replay_run",
        "fpm_align_stop", "fpm_step_time", "fpm_block_range", "fpm_peak_request_blocks",
        "fpm_trace_reader_open", "fpm_trace_reader_feed", "fpm_trace_reader_columns", "fpm_trace_reader_close",
        "fpm_trace_scale_times", "fpm_hash_origins", "fpm_trace_requests",
        "fpm_format_steps", "fpm_format_requests", "fpm_format_double", "fpm_sort_doubles",
    }  # fmt: skip
    assert exported == public | {"PyInit__native"}


def test_struct_layouts_are_read_from_the_build():
    """The requests are packed, and the completed requests read, with the :mod:`struct` layout of the build's own
    structs (their fields in the order the Python side names them, pad bytes where the compiler put them)."""
    from fpmcore.replay._native import ffi
    from fpmcore.replay.cengine import _REQUEST_IN, _packing
    from fpmcore.replay.model import RawRequest

    done = _packing("fpm_request_rec", RawRequest._fields)
    assert done.format == "=iiqqddddqqqq" and done.size == ffi.sizeof("fpm_request_rec") == 88
    request = _packing("fpm_replay_request", _REQUEST_IN)
    assert request.format == "=qqqdqqqq" and request.size == ffi.sizeof("fpm_replay_request") == 64
    rq = ffi.new("fpm_replay_request *", (4096, 512, 3, 1.5, 7, 0, 0, -2))
    assert bytes(ffi.buffer(rq)) == request.pack(4096, 512, 3, 1.5, 7, 0, 0, -2)
    with pytest.raises(RuntimeError, match="has the fields"):
        _packing("fpm_replay_request", _REQUEST_IN[::-1])
