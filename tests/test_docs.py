"""The docs site (mkdocs): built with warnings as errors, and nothing undocumented.

The reference pages are generated from the code by ``docs/gen_pages.py``; a
hook, a command or an option without its documentation fails here.
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _gen():
    spec = importlib.util.spec_from_file_location("gen_pages", ROOT / "docs" / "gen_pages.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gen = _gen()


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(out)], cwd=ROOT,
                       capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "WARNING" not in r.stderr, r.stderr
    return out


def test_every_hook_is_documented_and_in_the_site(site):
    assert gen.undocumented_hooks() == []
    html = (site / "reference" / "hooks" / "index.html").read_text(encoding="utf-8")
    from fpmcore import hookspecs

    names = [n for n in vars(hookspecs) if n.startswith("fpm_")]
    assert len(names) == 19 and [n for n, _, _ in gen.hook_specs()] == sorted(names, key=list(vars(hookspecs)).index)
    for name in names:
        assert f'id="{name}"' in html, name


def test_every_command_and_option_is_documented_and_in_the_site(site):
    assert gen.undocumented_cli() == []
    html = (site / "reference" / "cli" / "index.html").read_text(encoding="utf-8")

    def walk(parser, prefix):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    assert f"{prefix} {name}</h" in html, f"{prefix} {name}"
                    walk(sub, f"{prefix} {name}")
            if isinstance(action, argparse._HelpAction):
                continue
            for option in action.option_strings:
                assert f"<code>{option}</code>" in html, f"{prefix} {option}"

    walk(gen.cli_parser(), "fpm")
    for command in ("import", "plan", "validate", "replay", "sweep", "probe", "plugins", "schema"):
        assert f"fpm {command}</h" in html


def test_an_undocumented_hook_option_or_command_is_found():
    """The checks can fail: a parser with a bare option and a command without help, a hook without a docstring."""
    p = argparse.ArgumentParser(prog="x")
    p.add_argument("--bare")
    sub = p.add_subparsers()
    sub.add_parser("silent").add_argument("--quiet-too")
    assert gen.undocumented_cli(p, "x") == ["x --bare: no help", "x silent: no help", "x silent --quiet-too: no help"]

    from fpmcore import hookspecs

    original = hookspecs.fpm_align_stop.__doc__
    try:
        hookspecs.fpm_align_stop.__doc__ = original.replace(":param query:", ":param q:").replace("Example::", "")
        assert gen.undocumented_hooks() == [
            "fpm_align_stop: parameter query is not documented",
            "fpm_align_stop: no Example",
        ]
    finally:
        hookspecs.fpm_align_stop.__doc__ = original


def test_the_schemas_page_has_every_schema(site):
    """Every schema ``fpm schema`` prints is on the page, under its title, as the command prints it."""
    import json
    import re

    from fpmcore.documents.schema import SCHEMAS

    html = (site / "reference" / "schemas" / "index.html").read_text(encoding="utf-8")
    titles = re.findall(r"<h2 id=\"([^\"]+)\">([^<]+)</h2>", html)
    assert [t for _, t in titles] == [e.title for e in SCHEMAS] + ["Sweep results row"]
    assert len(SCHEMAS) == 11
    page = gen.schemas_page()
    for (anchor, title), entry in zip(titles, SCHEMAS):
        assert f"(#{anchor})" in page, title  # the table at the top links each section
        assert json.dumps(entry.build(), indent=2, ensure_ascii=False) in page, entry.name
