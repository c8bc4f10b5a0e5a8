"""Refuse an engine configuration its runtime plugin names as one the engine cannot run, before it starts.

``fpm probe --live``, ``fpm collect`` and ``fpm onboard`` (through
:func:`fpmcore.probe.live.refuse_engine_limits`) call :func:`refuse` before they start an engine and before they write anything: the model
folder's ``config.json`` and the engine settings go to the runtime plugin
(``fpm_engine_limits``), and the first limit it names becomes the command's
one-line refusal — the limit's rule, its message and the way out — with exit
code 2.  What the limits are (which architectures, dtypes and settings a
release's engine cannot run here) is the runtime plugin's knowledge; the host
names no runtime and no model.

A folder without a readable ``config.json`` object is not checked here: the
command refuses it itself, with its own message.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from fpmcore.documents.errors import FpmError
from fpmcore.host.stage_hooktypes import EngineLimit, EngineRequest

MODEL_CONFIG = "config.json"


def model_config(model_dir: str | os.PathLike[str]) -> Mapping[str, Any] | None:
    """The model folder's ``config.json`` object, or ``None`` when there is none to read."""
    try:
        data = json.loads((Path(model_dir) / MODEL_CONFIG).read_bytes())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def as_options(fix: str) -> str:
    """The way out as ``fpm probe --live`` and ``fpm onboard`` take it."""
    return f"use {fix}"


def limits(
    runtime: Any,
    model_dir: str | os.PathLike[str],
    *,
    prefix_caching: bool,
    dtype: str | None = None,
    max_model_len: int | None = None,
) -> list[EngineLimit]:
    """The limits ``runtime`` (a runtime's hooks, ``host.hooks.runtime(pin)``) names for the model and settings."""
    config = model_config(model_dir)
    if config is None:
        return []
    request = EngineRequest(config, prefix_caching=prefix_caching, dtype=dtype, max_model_len=max_model_len)
    return runtime.engine_limits(request=request)  # type: ignore[no-any-return]


def refuse(
    runtime: Any,
    model_dir: str | os.PathLike[str],
    *,
    prefix_caching: bool,
    dtype: str | None = None,
    max_model_len: int | None = None,
    way_out: Callable[[str], str] = as_options,
) -> None:
    """Raise the refusal of the first limit the runtime names for the model and settings; return when none.

    The message is the limit's, then ``way_out(fix)`` (``use --caching off``
    by default; ``fpm collect`` says how to get a plan without the setting),
    or that no option runs the model on this runtime.

    :raises FpmError: rule = the limit's rule.
    """
    found = limits(runtime, model_dir, prefix_caching=prefix_caching, dtype=dtype, max_model_len=max_model_len)
    if not found:
        return
    first = found[0]
    out = way_out(first.fix) if first.fix else "no option runs it on this runtime"
    raise FpmError(first.rule, f"{first.message}; {out}", str(model_dir))
