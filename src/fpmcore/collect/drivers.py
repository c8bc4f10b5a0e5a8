"""Where the host finds a runtime's measurement driver: the runtime plugin selected for the plan's pin.

:func:`driver_for` is the one place ``fpm collect``, ``fpm onboard`` and the
engine-steps contract (A-21) ask for a runtime plugin's
:class:`~fpmcore.hooktypes.MeasurementDriver`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fpmcore.errors import FpmError
from fpmcore.hooktypes import MeasurementDriver


def driver_for(host: Any, runtime: str) -> MeasurementDriver:
    """The measurement driver of the runtime plugin selected for ``runtime`` (an exact pin,
    ``fpm_measurement_driver``); a refusal names the pin when no plugin drives an engine for it."""
    try:
        return host.hooks.runtime(runtime).measurement_driver()  # type: ignore[no-any-return]
    except FpmError as exc:
        raise FpmError(
            "plugins", f"no runtime plugin drives a measurement engine for {runtime}: {exc.message}"
        ) from None


def expected_producer(host: Any, plan: Mapping[str, Any]) -> dict[str, Any]:
    """The producer record the runtime plugin of ``plan["engine"]["runtime"]`` gives, JSON-ready, or
    ``{"error": why}`` when there is none (the contract refuses at A-21 then)."""
    engine = plan.get("engine") if isinstance(plan, Mapping) else None
    pin = engine.get("runtime") if isinstance(engine, Mapping) else None
    if not isinstance(pin, str):
        return {"error": "the plan names no engine runtime"}
    try:
        p = driver_for(host, pin).producer
    except FpmError as exc:
        return {"error": exc.message}
    return {"name": p.name, "runtime": p.runtime, "plugin": p.plugin, "timing_boundary": p.timing_boundary,
            "files": p.files_json()}  # fmt: skip
