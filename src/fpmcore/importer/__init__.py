"""``fpm import``: runtime observation records → an FPM profile draft (02, 03).

The pipeline (:mod:`fpmcore.importer.pipeline`) runs stages A to M of 02 §6
for each selected configuration and gives ``complete`` with a profile draft,
or ``incomplete`` with diagnostics that name the rule, the record and the
value; never a traceback.  Everything specific to a vLLM version is asked of
the runtime plugins through the host's hooks (``classify_spec``,
``normalize_record``) and its runtime selection.

Command line::

    fpm import DIR [-o PROFILE] [--json] [--launch LAUNCH.json] [--configuration LABEL]

Exit status: 0 every selected configuration is complete; 1 incomplete;
2 the evidence folder or its index cannot be read, or bad usage.
"""

from __future__ import annotations

from typing import Any

from fpmcore.importer.command import import_command

__all__ = ["ConfigResult", "HostServices", "ImportRun", "import_command", "import_evidence"]


def __getattr__(name: str) -> Any:
    # The pipeline loads on first use: the CLI imports this package to register the command.
    if name in ("ConfigResult", "HostServices", "ImportRun", "import_evidence"):
        from fpmcore.importer import pipeline

        return getattr(pipeline, name)
    raise AttributeError(name)
