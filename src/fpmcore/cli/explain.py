"""``fpm explain [RULE]``: what a rule id means, what it protects, an example refusal and the fix.

Without RULE it lists every id with its one-line meaning.  The entries come
from :mod:`fpmcore.documents.rules_catalogue` (the host's) and from the installed
plugins' ``fpm_rule_catalogue``.  An unknown id is refused (exit 2) with the
closest known ids.
"""

from __future__ import annotations

import argparse

from fpmcore.cli.context import EXIT_OK, print_table
from fpmcore.documents.errors import FpmError
from fpmcore.documents.rules_catalogue import FAMILIES, FIELDS, Catalogued, build, closest, family_of, lookup
from fpmcore.host.hooktypes import CliCommand, CommandContext

#: The rule id of ``fpm explain``'s own refusal (an id the catalogue does not hold).
RULE = "explain"


def catalogue(ctx: CommandContext) -> dict[str, Catalogued]:
    """The host's entries and those of the plugins ``ctx`` loaded."""
    return build(ctx.host.hooks.rule_catalogue())


def _configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("rule", metavar="RULE", nargs="?",
                   help="a rule id as fpm prints it (R-33, P-S1, collect); without RULE, every id and its meaning")  # fmt: skip
    p.add_argument("--json", action="store_true",
                   help="print JSON on stdout: the entry, or without RULE every entry")  # fmt: skip


def _run(args: argparse.Namespace, ctx: CommandContext) -> int:
    entries = catalogue(ctx)
    if args.rule is None:
        return _list(ctx, entries)
    hit = lookup(entries, args.rule)
    if hit is None:
        near = closest(entries, args.rule)
        hint = f"closest: {', '.join(near)}" if near else "fpm explain lists every rule id"
        raise FpmError(RULE, f"no rule {args.rule.strip()!r}; {hint}")
    if ctx.json:
        ctx.emit_json({"rule": hit.to_json()})
        return EXIT_OK
    _show(ctx, hit)
    return EXIT_OK


def _show(ctx: CommandContext, hit: Catalogued) -> None:
    """The entry: its id and meaning, then one ``field: value`` line per field (bold on a terminal)."""
    from rich.markup import escape

    e = hit.entry
    rows = [(f, getattr(e, f)) for f in FIELDS[1:]]
    rows += [("family", dict(FAMILIES).get(family_of(e.id), family_of(e.id))), ("source", hit.source)]
    ctx.out.print(f"[bold]{escape(e.id)}[/]  {escape(e.meaning)}", highlight=False)
    for field, value in rows:
        ctx.out.print(f"  [bold]{field + ':':<9}[/] {escape(value)}", highlight=False)


def _list(ctx: CommandContext, entries: dict[str, Catalogued]) -> int:
    if ctx.json:
        ctx.emit_json({"rules": [c.to_json() for c in entries.values()]})
        return EXIT_OK
    from rich.markup import escape
    from rich.table import Table

    table = Table(title="fpm explain RULE prints", title_justify="left")
    table.add_column("RULE", no_wrap=True)
    table.add_column("meaning")
    for rule, c in entries.items():
        table.add_row(escape(rule), escape(c.entry.meaning))
    print_table(ctx.out, table)
    return EXIT_OK


def explain_command() -> CliCommand:
    return CliCommand("explain", "explain a rule id: what it means, what it protects, an example and the fix",
                      _configure, _run)  # fmt: skip


__all__ = ["RULE", "catalogue", "explain_command"]
