"""The rule catalogue: what every rule id fpm prints means, what it protects, an example and the fix.

Every diagnostic ends in a rule id (``[R-33]``, ``[P-S1]``, ``[collect]``, …).
The host's ids are described in the package data file ``data/rules.toml``
(one table per id: ``meaning``, ``protects``, ``example``, ``fix``); the ids
only a plugin raises come from that plugin through the hook
``fpm_rule_catalogue`` (:meth:`fpmcore.host.hooks.Hooks.rule_catalogue`).
``fpm explain RULE`` prints one entry (:mod:`fpmcore.cli.explain`), and the docs
site's rules page lists them all.

This module imports no hook machinery: :class:`RuleEntry` is re-exported by
:mod:`fpmcore.host.hooktypes` for plugins.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import attrs

#: The fields every entry has, in the order ``fpm explain`` prints them.
FIELDS = ("meaning", "protects", "example", "fix")

#: The families of rule ids, in catalogue order: ``(key, title)``.  The key is
#: the letters before the dash (``P`` of ``P-S1``), ``§`` for a producer
#: contract's section, and ``named`` for ids that are a word (``collect``).
FAMILIES: tuple[tuple[str, str], ...] = (
    ("P", "P: the FPM profile (fpm profile check and every reader of a profile)"),
    ("I", "I: importing runtime evidence (fpm import)"),
    ("G", "G: planning (fpm plan) and its later checks"),
    ("A", "A: artifacts of a collected run (fpm validate, fpm assess, fpm publish)"),
    ("INDEX", "The artifact index of a run"),
    ("F", "F: campaign finalization (fpm finalize) and its readers"),
    ("R", "R: replay and latency tables (fpm replay, fpm sweep)"),
    ("T", "T: trace formats and transforms (fpm replay --trace, fpm trace)"),
    ("O", "O: outputs (every command that writes a file or folder)"),
    ("V", "V: serving validation (fpm verify)"),
    ("§", "§: producer contract checks of model plugins"),
    ("named", "Named rules: reading input, commands, plugins and engines"),
)

#: The host's own catalogue, a package data file.
DATA_FILE = "rules.toml"


def _text(_instance: Any, attribute: attrs.Attribute[str], value: object) -> None:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"rule entry {attribute.name} must be a non-blank string, found {value!r}")


@attrs.frozen
class RuleEntry:
    """One rule id and what a user needs to know about it.

    ``meaning`` is one line; ``protects`` says what the rule keeps from going
    wrong; ``example`` is a refusal as fpm prints it (``fpm: … [ID]``);
    ``fix`` is what to do.  Every field is a non-blank string.
    """

    id: str = attrs.field(validator=_text)
    meaning: str = attrs.field(validator=_text)
    protects: str = attrs.field(validator=_text)
    example: str = attrs.field(validator=_text)
    fix: str = attrs.field(validator=_text)

    def to_json(self) -> dict[str, str]:
        return {"id": self.id, **{f: getattr(self, f) for f in FIELDS}, "family": family_of(self.id)}


@attrs.frozen
class Catalogued:
    """An entry of the catalogue and who describes it: ``fpmcore`` or a plugin id."""

    entry: RuleEntry
    source: str

    def to_json(self) -> dict[str, str]:
        return {**self.entry.to_json(), "source": self.source}


def family_of(rule: str) -> str:
    """The family key of a rule id: ``P-S1`` → ``P``, ``§6.4`` → ``§``, ``INDEX`` → ``INDEX``, ``collect`` → ``named``."""
    m = re.match(r"([A-Z]+)-", rule)
    if m:
        return m.group(1)
    if rule.startswith("§"):
        return "§"
    return rule if rule in dict(FAMILIES) else "named"


def sort_key(rule: str) -> tuple[int, int, str]:
    """Catalogue order: by family, then by number (``P-S1`` … ``P-S4`` before ``P-1``), then by name."""
    keys = [k for k, _ in FAMILIES]
    family = family_of(rule)
    m = re.match(r"[A-Z]+-([A-Z]*)(\d+)$", rule)
    number = int(m.group(2)) - (100_000 if m.group(1) else 0) if m else 0
    return keys.index(family) if family in keys else len(keys), number, rule


#: The attribute :func:`checks` sets on a check: the rule id it reports.
CHECKED_RULE_ATTRIBUTE = "checked_rule"

_Check = TypeVar("_Check", bound=Callable[..., Any])


def checks(rule: str) -> Callable[[_Check], _Check]:
    """Mark a check with the catalogued rule id it reports (``@checks("I-62")``).

    The id is the check's own, not its name's: the importer reports it when the
    check meets a value of another JSON type, and the catalogue test holds every
    marked id to an entry.
    """

    def mark(check: _Check) -> _Check:
        setattr(check, CHECKED_RULE_ATTRIBUTE, rule)
        return check

    return mark


def checked_rule(check: Callable[..., Any]) -> str | None:
    """The rule id :func:`checks` gave ``check``, or ``None`` when it has none."""
    rule = getattr(check, CHECKED_RULE_ATTRIBUTE, None)
    return rule if isinstance(rule, str) else None


@functools.cache
def host_entries() -> tuple[RuleEntry, ...]:
    """The host's entries, read once from :data:`DATA_FILE`, in catalogue order."""
    import tomllib  # read on first use, not when a plugin imports RuleEntry
    from importlib import resources

    text = resources.files("fpmcore").joinpath("data", DATA_FILE).read_text(encoding="utf-8")
    tables = tomllib.loads(text)
    entries = []
    for rule, fields in tables.items():
        if not isinstance(fields, dict) or set(fields) != set(FIELDS):
            raise ValueError(f"{DATA_FILE}: [{rule}] must have exactly the fields {', '.join(FIELDS)}")
        entries.append(RuleEntry(rule, **fields))
    return tuple(sorted(entries, key=lambda e: sort_key(e.id)))


def build(plugin_entries: Iterable[tuple[str, RuleEntry]] = ()) -> dict[str, Catalogued]:
    """The catalogue: the host's entries, then the plugins' ``(plugin id, entry)`` pairs, in catalogue order.

    An id the host describes keeps the host's entry; an id two plugins
    describe keeps the first plugin's.
    """
    found = {e.id: Catalogued(e, "fpmcore") for e in host_entries()}
    for plugin, entry in plugin_entries:
        found.setdefault(entry.id, Catalogued(entry, plugin))
    return {rule: found[rule] for rule in sorted(found, key=sort_key)}


def normalize(asked: str) -> str:
    """A rule id as a user may type it: ``[r-33]`` → ``r-33`` (brackets and spaces dropped)."""
    return asked.strip().strip("[]").strip()


def lookup(catalogue: dict[str, Catalogued], asked: str) -> Catalogued | None:
    """The entry of ``asked``: exactly, else ignoring case (``r-33``, ``Collect``)."""
    rule = normalize(asked)
    if rule in catalogue:
        return catalogue[rule]
    folded = {k.casefold(): v for k, v in catalogue.items()}
    return folded.get(rule.casefold())


def closest(catalogue: dict[str, Catalogued], asked: str, n: int = 3) -> list[str]:
    """Up to ``n`` known ids nearest to ``asked``: the same family's nearest number first, then by spelling."""
    import difflib

    rule = normalize(asked)
    by_fold = {k.casefold(): k for k in catalogue}
    near = [by_fold[k] for k in difflib.get_close_matches(rule.casefold(), list(by_fold), n=n, cutoff=0.5)]
    m = re.fullmatch(r"([A-Za-z]+-[A-Za-z]?)(\d+)", rule)
    if m:
        number = int(m.group(2))
        prefix = m.group(1).upper()
        same = [k for k in catalogue if re.fullmatch(re.escape(prefix) + r"\d+", k)]
        same.sort(key=lambda k: (abs(int(re.findall(r"\d+$", k)[0]) - number), k))
        near = [*same[:1], *near, *same[1:]]
    return list(dict.fromkeys(near))[:n]


__all__ = [
    "FAMILIES", "FIELDS", "Catalogued", "RuleEntry", "build", "checked_rule", "checks", "closest", "family_of",
    "host_entries", "lookup",
]  # fmt: skip
