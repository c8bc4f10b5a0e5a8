"""The runtime pin: the exact runtime release a record, profile, plan or plugin names (``vllm==0.33.0``).

A pin is written ``<framework>==<version>`` wherever fpmcore stores or shows
one (a runtime plugin's ``targets``, a plan's ``engine.runtime``, a producer
record's ``runtime``, the ``runtime`` argument of every runtime hook) and is
compared as that exact string: no PEP 440 normalization (02 §4).  A profile
and a collector provenance keep its two parts apart (``backend`` and
``backend_version``).  :class:`RuntimePin` is the one place that joins and
splits them; :data:`FRAMEWORK` is the one place that names the framework.
"""

from __future__ import annotations

import re

import attrs

#: The runtime framework fpmcore reads: the import name whose installed distribution selects the runtime plugin,
#: the ``framework`` of a runtime observation record (I-21) and the ``backend`` of a profile deployment.
FRAMEWORK = "vllm"
#: What joins the framework and the version of a pin.
SEPARATOR = "=="
#: A runtime plugin's target: an exact pin, one name and one version, nothing around them.
_WELL_FORMED = re.compile(r"^[A-Za-z0-9_.\-]+==[A-Za-z0-9_.+\-]+$")


@attrs.frozen
class RuntimePin:
    """``framework==version``: ``str(RuntimePin("0.33.0"))`` is ``"vllm==0.33.0"``.

    ``version`` is the exact version string (``0.33.0``), ``framework`` the
    runtime's import name, :data:`FRAMEWORK` unless given.
    """

    version: str
    framework: str = FRAMEWORK

    @classmethod
    def parse(cls, text: str) -> RuntimePin:
        """The pin ``text`` writes (``vllm==0.33.0``); ``ValueError`` when it is not ``framework==version``."""
        framework, sep, version = text.partition(SEPARATOR)
        if not sep:
            raise ValueError(f"not a runtime pin (framework{SEPARATOR}version): {text!r}")
        return cls(version=version, framework=framework)

    @staticmethod
    def well_formed(text: str) -> bool:
        """``text`` is an exact pin a runtime plugin may target: ``name==version``, no range, no spaces."""
        return _WELL_FORMED.match(text) is not None

    @staticmethod
    def version_of(text: str) -> str:
        """The version ``text`` pins (``0.33.0`` of ``vllm==0.33.0``); ``text`` itself when it is no pin (a
        runtime plugin's target is compared as given, whatever it holds)."""
        return text.partition(SEPARATOR)[2] if SEPARATOR in text else text

    def __str__(self) -> str:
        return f"{self.framework}{SEPARATOR}{self.version}"
