"""Exceptions of fpmcore.

Every refusal that a user can cause is an :class:`FpmError`: it carries the
spec's rule id, the message and where the offending value sits.  The CLI
prints it as one line and exits 2 (or 1 for a negative verdict); it never
shows a traceback unless ``--debug`` is given.
"""

from __future__ import annotations

from fpmcore.documents.diagnostics import Diagnostic


class FpmError(Exception):
    """A refusal with its rule id (``P-4``, ``I-22``, …), message and location."""

    def __init__(self, rule: str, message: str, where: str = "") -> None:
        super().__init__(rule, message, where)
        self.rule = rule
        self.message = message
        self.where = where

    @property
    def diagnostic(self) -> Diagnostic:
        return Diagnostic(rule=self.rule, message=self.message, where=self.where)

    def __str__(self) -> str:
        return self.diagnostic.render()


class PluginError(FpmError):
    """A plugin broke its contract: it raised, or returned a value of the wrong type."""


class Interrupted(BaseException):
    """Ctrl-C (SIGINT) during work that must clean up before the command ends, such as a live engine.

    A command that runs such work installs a SIGINT handler that raises this
    instead of ``KeyboardInterrupt`` (``fpm probe --live``).  Like
    ``KeyboardInterrupt`` it is no ``Exception``, so only ``finally`` blocks
    and ``except BaseException`` clean-ups see it on its way out; unlike it,
    CPython does not remember it: a ``KeyboardInterrupt`` that passed through
    code the interpreter ran from C (``PyRun_*``) makes the process end by
    SIGINT even after Python caught it, and the command's exit code (130) and
    its one-line message would be lost.
    """
