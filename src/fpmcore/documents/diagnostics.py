"""One finding of a check: the value the data model and the hooks share.

:class:`Diagnostic` is what a rule reports (the import, the profile check,
artifact validation) and what a model plugin returns from
``fpm_validate_artifact``; :class:`fpmcore.documents.errors.FpmError` carries one.  It
lives in the data model, so that the model never imports the hook types
(:mod:`fpmcore.host.hooktypes` re-exports it for plugins).
"""

from __future__ import annotations

import attrs


@attrs.frozen
class Diagnostic:
    """One finding: the rule id, the message, and where (path, record, field)."""

    rule: str
    message: str
    where: str = ""

    def render(self) -> str:
        """``<where>: <message>``, or the message alone when ``where`` is empty."""
        return f"{self.where}: {self.message}" if self.where else self.message
