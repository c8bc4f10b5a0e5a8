"""mkdocs hook: the reference pages generated from the code, so that they cannot drift.

* ``reference/hooks.md`` from :mod:`fpmcore.hookspecs` (every ``fpm_*`` spec: its
  calling convention, signature, parameters, return value and example);
* ``reference/cli.md`` from the ``fpm`` argument parser of a host with
  fpmcore's built-in commands only (every command and every option);
* ``reference/schemas.md`` from the declarations the readers use (the profile
  and record JSON Schemas, the trace reader's fields, the sweep row);
* ``reference/rules.md`` from the rule catalogue (:mod:`fpmcore.documents.rules_catalogue`
  and the ``fpm_rule_catalogue`` answers of the plugins shipped here).

``pages()`` returns them as ``{path: markdown}``; ``tests/test_docs.py`` checks
them and builds the site.
"""

from __future__ import annotations

import argparse
import inspect
import json
import re
import textwrap
from typing import Any

_ROLE = re.compile(r":(?:class|func|data|mod|meth|attr|exc):`~?([^`]+)`")


def _md(text: str) -> str:
    """reST inline markup of the docstrings as Markdown."""
    text = _ROLE.sub(lambda m: f"`{m.group(1).rsplit('.', 1)[-1] if m.group(0).count('~') else m.group(1)}`", text)
    return text.replace("``", "`")


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _docstring_parts(doc: str) -> tuple[list[str], list[tuple[str, str]], str, str]:
    """(body paragraphs, params, returns, example) of a sphinx-style docstring."""
    lines = inspect.cleandoc(doc).splitlines()
    body: list[str] = []
    params: list[tuple[str, str]] = []
    returns = example = ""
    i = 0
    while i < len(lines):
        line = lines[i]
        m = re.match(r":param (\w+):\s*(.*)", line)
        r = re.match(r":returns:\s*(.*)", line)
        if m or r:
            text = [(m or r).group(2 if m else 1)]
            i += 1
            while i < len(lines) and lines[i].startswith("    "):
                text.append(lines[i].strip())
                i += 1
            joined = _md(" ".join(text))
            if m:
                params.append((m.group(1), joined))
            else:
                returns = joined
            continue
        if line.strip() == "Example::":
            block = []
            i += 1
            while i < len(lines) and (not lines[i].strip() or lines[i].startswith("    ")):
                block.append(lines[i])
                i += 1
            example = textwrap.dedent("\n".join(block)).strip("\n")
            continue
        body.append(line)
        i += 1
    return body, params, returns, example


def hook_specs() -> list[tuple[str, Any, dict[str, Any]]]:
    """``(name, function, spec options)`` of every hook, in source order."""
    from fpmcore import hookspecs

    found = []
    for name, fn in vars(hookspecs).items():
        opts = getattr(fn, f"{hookspecs.PROJECT}_spec", None)
        if name.startswith("fpm_") and opts is not None:
            found.append((name, fn, opts))
    return sorted(found, key=lambda t: inspect.getsourcelines(t[1])[1])


def hooks_page() -> str:
    from fpmcore import hookspecs

    out = ["# Hook reference", "",
           "Generated from `src/fpmcore/hookspecs.py`: every hook a plugin may implement.", "",
           _md(inspect.cleandoc(hookspecs.__doc__ or "")), ""]  # fmt: skip
    out += ["| hook | calling convention |", "|---|---|"]
    for name, _fn, opts in hook_specs():
        out.append(f"| [`{name}`](#{name}) | {'first-result' if opts.get('firstresult') else 'collecting'} |")
    out.append("")
    for name, fn, _opts in hook_specs():
        body, params, returns, example = _docstring_parts(fn.__doc__ or "")
        sig = str(inspect.signature(fn)).replace("'", "")
        out += [f"## {name}", "", "```python", f"def {name}{sig}", "```", ""]
        out += [_md("\n".join(body)).strip(), ""]
        if params:
            out += ["| parameter | meaning |", "|---|---|"]
            out += [f"| `{p}` | {_cell(text)} |" for p, text in params]
            out.append("")
        if returns:
            out += [f"**Returns:** {returns}", ""]
        if example:
            out += ["Example:", "", "```python", example, "```", ""]
    return "\n".join(out)


def _option_row(action: argparse.Action) -> str:
    names = ", ".join(f"`{o}`" for o in action.option_strings) or f"`{action.metavar or action.dest}`"
    if action.choices is not None and not isinstance(action, argparse._SubParsersAction):
        value = " \\| ".join(f"`{c}`" for c in action.choices)
    elif action.nargs == 0:
        value = "flag"
    else:
        value = f"`{_cell(action.metavar or action.dest.upper())}`"
    default = "" if action.default in (None, False, argparse.SUPPRESS, []) else f"`{action.default}`"
    help_text = (action.help or "").replace("|", "\\|") % {"default": action.default} if action.help else ""
    return f"| {names} | {value} | {default} | {help_text} |"


def _parser_section(parser: argparse.ArgumentParser, title: str, level: int) -> list[str]:
    out = [f"{'#' * level} {title}", ""]
    if parser.description:
        out += [parser.description, ""]
    out += ["```", parser.format_usage().strip(), "```", ""]
    rows = [a for a in parser._actions if not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction))]
    if rows:
        out += ["| argument | value | default | meaning |", "|---|---|---|---|"]
        out += [_option_row(a) for a in rows]
        out.append("")
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out += _parser_section(sub, f"{title} {name}", level + 1)
    return out


def cli_parser() -> argparse.ArgumentParser:
    """``fpm``'s parser with fpmcore's own commands (no third-party plugin)."""
    from fpmcore.cli.command_line import build_parser
    from fpmcore.host.build import build_host

    return build_parser(build_host(autoload=False, environ={}))


def cli_page() -> str:
    parser = cli_parser()
    out = ["# Command-line reference", "",
           ("Generated from `fpm`'s argument parser: every command and every option of fpmcore itself "
            "(plugins add theirs through `fpm_cli_commands`)."), ""]  # fmt: skip
    out += _parser_section(parser, "fpm", 2)
    return "\n".join(out)


def _slug(title: str) -> str:
    """The anchor mkdocs gives a heading."""
    return re.sub(r"[^\w\s-]", "", title).strip().lower().replace(" ", "-")


def schemas_page() -> str:
    from fpmcore.documents.schema import SCHEMAS
    from fpmcore.sweep.results import ROW_KEYS

    def block(schema: Any) -> list[str]:
        return ["```json", json.dumps(schema, indent=2, ensure_ascii=False), "```", ""]

    out = ["# JSON Schemas", "",
           ("Generated from the declarations the readers use (JSON Schema draft 2020-12); `fpm schema NAME` prints "
            "each. The readers check more than a schema can say (every P-, I-, G-, A-, R- rule with its diagnostic, "
            "and whatever relates one field to another); the schemas describe the shapes."), ""]  # fmt: skip
    out += ["| NAME | document |", "|---|---|"]
    out += [f"| [`{e.name}`](#{_slug(e.title)}) | {e.summary} |" for e in SCHEMAS]
    out.append("")
    for e in SCHEMAS:
        out += [f"## {e.title}", "", f"{e.summary[0].upper()}{e.summary[1:]}. "
                f"`fpm schema {e.name}` prints it.", ""] + block(e.build())  # fmt: skip
    out += ["## Sweep results row", "", "One line of `fpm sweep`'s results file; keys: "
            + ", ".join(f"`{k}`" for k in ROW_KEYS) + " (see the sweeping guide).", ""]  # fmt: skip
    return "\n".join(out)


#: The plugins of this repository whose rule ids the rules page lists beside the host's.
RULE_PLUGINS = ("dsv41", "glm53flash", "vllm_027", "vllm_032", "vllm_033")


def _prose(text: str) -> str:
    """Text as Markdown: ``*`` outside code spans is literal (``2**53``)."""
    parts = text.split("`")
    return "`".join(p if i % 2 else p.replace("*", "\\*") for i, p in enumerate(parts))


def rules_page() -> str:
    from fpmcore.documents.rules_catalogue import FAMILIES, build, family_of
    from fpmcore.testing import make_host

    catalogue = build(make_host(entry_points=RULE_PLUGINS).hooks.rule_catalogue())
    out = ["# Rule catalogue", "",
           ("Generated from the rule catalogue (`src/fpmcore/data/rules.toml` and the plugins' "
            "`fpm_rule_catalogue`): every rule id fpm prints at the end of a diagnostic, what it means, what it "
            "protects, an example and the fix. `fpm explain RULE` prints one entry."), ""]  # fmt: skip
    for key, title in FAMILIES:
        rules = [c for rule, c in catalogue.items() if family_of(rule) == key]
        if not rules:
            continue
        out += [f"## {title}", "", "| rule | meaning |", "|---|---|"]
        out += [f"| [`{c.entry.id}`](#{_slug(c.entry.id)}) | {_cell(_prose(c.entry.meaning))} |" for c in rules]
        out.append("")
        for c in rules:
            e = c.entry
            source = "" if c.source == "fpmcore" else f" (plugin `{c.source}`)"
            out += [f"### {e.id}", "", f"{_prose(e.meaning)}{source}", "",
                    f"**Protects:** {_prose(e.protects)}", "", "**Example:**", "", "```", e.example, "```", "",
                    f"**Fix:** {_prose(e.fix)}", ""]  # fmt: skip
    return "\n".join(out)


def undocumented_hooks() -> list[str]:
    """Hooks whose docstring lacks a part: the calling convention, a parameter, the return value, an example."""
    problems = []
    for name, fn, opts in hook_specs():
        doc = fn.__doc__ or ""
        body, params, returns, example = _docstring_parts(doc)
        convention = "*First-result*" if opts.get("firstresult") else "*Collecting*"
        if not "".join(body).strip():
            problems.append(f"{name}: no description")
        if convention not in doc:
            problems.append(f"{name}: does not say {convention}")
        documented = {p for p, _ in params}
        for p in inspect.signature(fn).parameters:
            if p not in documented:
                problems.append(f"{name}: parameter {p} is not documented")
        if not returns:
            problems.append(f"{name}: no :returns:")
        if not example:
            problems.append(f"{name}: no Example")
    return problems


def undocumented_cli(parser: argparse.ArgumentParser | None = None, prefix: str = "fpm") -> list[str]:
    """Commands without a help text, and options (``--x``) without one."""
    parser = cli_parser() if parser is None else parser
    problems = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help for a in action._choices_actions}
            for name, sub in action.choices.items():
                if not helps.get(name):
                    problems.append(f"{prefix} {name}: no help")
                problems += undocumented_cli(sub, f"{prefix} {name}")
        elif action.option_strings and not isinstance(action, argparse._HelpAction) and not action.help:
            problems.append(f"{prefix} {'/'.join(action.option_strings)}: no help")
    return problems


def pages() -> dict[str, str]:
    return {"reference/hooks.md": hooks_page(), "reference/cli.md": cli_page(), "reference/schemas.md": schemas_page(),
            "reference/rules.md": rules_page()}  # fmt: skip


def on_files(files: Any, config: Any) -> Any:
    """mkdocs event: add the generated pages."""
    from mkdocs.structure.files import File

    for uri, content in pages().items():
        files.append(File.generated(config, uri, content=content))
    return files
