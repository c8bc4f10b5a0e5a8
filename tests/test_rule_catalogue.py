"""The rule catalogue: every rule id the code can emit has an entry, and ``fpm explain`` prints it."""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fpmcore import RuleEntry, hookimpl
from fpmcore.collect import contract as engine_steps
from fpmcore.documents.errors import PluginError
from fpmcore.documents.rules_catalogue import FIELDS, build, checked_rule, checks, closest, family_of, host_entries
from fpmcore.importer import (
    block_pool,
    cache_groups,
    launch_settings,
    layer_views,
    prefix_and_capacity,
    record_envelope,
    runtime_identity,
)
from fpmcore.importer.state import guarded, per_record, rule_id
from fpmcore.testing import make_host, run_fpm
from fpmcore.validate.evaluation import ContractRules
from fpmcore.validate.protocol import GENERAL_ARTIFACT_RULES
from fpmcore.validate.rows import GENERAL_ROW_RULES
from fpmcore.validate.structure import STRUCTURE_RULES

ROOT = Path(__file__).resolve().parents[1]
HOST_SRC = ROOT / "src" / "fpmcore"
PLUGIN_SRCS = sorted((ROOT / "plugins").glob("*/src"))
#: Every plugin of this repository (entry point ids).
PLUGINS = ("dsv41", "glm53flash", "vllm_027", "vllm_032", "vllm_033")

#: A rule id written as a string of its own: ``R-33``, ``P-S1``, ``I-114``, a contract section ``§6.4``.
LETTERED = re.compile(r"[A-Z]{1,3}-[A-Z]?\d+[a-z]?|§\d+(?:\.\d+)*")
#: A rule id that is a word (``collect``, ``gdn-head-dim``, ``JSON``).
WORD = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,39}")
#: Calls whose first argument is the rule id (the refusal types, the diagnostics, the import's findings,
#: a runtime's engine limits).
RULE_FIRST = {"FpmError", "PluginError", "Diagnostic", "ImportDiagnostic", "Refusal", "EngineLimit", "Limit",
              "diag", "_file_diag"}  # fmt: skip
#: The exception classes whose ``super().__init__`` gets the rule id first.
REFUSAL_CLASSES = {"FpmError", "PluginError", "JsonError"}


def _name(func: ast.expr) -> str | None:
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)


def _string(node: ast.expr | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _ids_in(tree: ast.AST) -> set[str]:
    """The rule ids a module can emit, read from its syntax tree."""
    found: set[str] = set()
    refusal_inits: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and {_name(b) for b in node.bases} & REFUSAL_CLASSES:
            refusal_inits |= {id(n) for n in ast.walk(node) if isinstance(n, ast.Call) and _name(n.func) == "__init__"}
    for node in ast.walk(tree):
        value = _string(node) if isinstance(node, ast.expr) else None
        if value is not None and LETTERED.fullmatch(value):
            found.add(value)  # a lettered id anywhere: a call's argument, a rule table, a tuple of findings
        if isinstance(node, ast.Call):
            name = _name(node.func)
            first = _string(node.args[0]) if node.args else None
            if (name in RULE_FIRST or id(node) in refusal_inits) and first and WORD.fullmatch(first):
                found.add(first)
            if name == "_error_document" and len(node.args) > 2 and _string(node.args[2]):
                found.add(_string(node.args[2]))  # type: ignore[arg-type]
            for kw in node.keywords:
                if kw.arg == "rule" and _string(kw.value):
                    found.add(_string(kw.value))  # type: ignore[arg-type]
        elif isinstance(node, ast.Assign) and _string(node.value):
            if any(isinstance(t, ast.Name) and t.id.endswith("RULE") for t in node.targets):
                found.add(_string(node.value))  # type: ignore[arg-type]  # RULE = "sweep"
        elif isinstance(node, ast.Dict):
            for k, v in zip(node.keys, node.values, strict=True):
                if k is not None and _string(k) == "rule" and _string(v):
                    found.add(_string(v))  # type: ignore[arg-type]  # {"rule": "sweep", ...}
    return found


def emitted(*roots: Path) -> set[str]:
    """Every rule id the Python sources under ``roots`` can emit."""
    found: set[str] = set()
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            found |= _ids_in(ast.parse(path.read_text(encoding="utf-8"), str(path)))
    return found


@pytest.fixture(scope="module")
def catalogue():
    return build(make_host(entry_points=PLUGINS).hooks.rule_catalogue())


# ---------------------------------------------------------------------------
# (a) every id the code can emit has an entry
# ---------------------------------------------------------------------------


def test_the_scan_finds_the_ids_of_every_kind():
    host, plugins = emitted(HOST_SRC), emitted(*PLUGIN_SRCS)
    assert len(host) >= 240, sorted(host)
    # one of each way an id is written: a literal argument, a rule table, a RULE constant, a dict,
    # an exception class's own id, the command line's error documents, an engine limit, a contract section
    assert {"R-33", "P-S1", "I-114", "A-45", "sweep", "JSON", "usage", "internal", "collect", "INDEX"} <= host
    assert {"gdn-head-dim", "mamba2-prefix-caching", "probe", "engine", "R-40", "G-12", "§6.4"} <= plugins


def test_the_scan_reads_every_way_an_id_is_written():
    code = (
        'RULE = "w1"\n'
        'class E(FpmError):\n    def __init__(self):\n        super().__init__("w2", "m")\n'
        'x = {"rule": "w3", "message": "m"}\n'
        'raise FpmError("w4", "a message, not an id")\n'
        'Diagnostic(rule="w5", message="m")\n'
        'rules = (("Q-7", check),)\n'
        'print("Q-8 is in a sentence")\n'
    )
    assert _ids_in(ast.parse(code)) == {"w1", "w2", "w3", "w4", "w5", "Q-7"}


def test_every_id_the_code_emits_has_an_entry(catalogue):
    missing = sorted(emitted(HOST_SRC, *PLUGIN_SRCS) - set(catalogue))
    assert missing == []


def test_the_host_describes_every_id_the_host_emits():
    """The host's catalogue alone covers the host's ids; no plugin is needed to explain a host refusal."""
    assert sorted(emitted(HOST_SRC) - {e.id for e in host_entries()}) == []


def test_ids_only_a_plugin_emits_come_from_that_plugin(catalogue):
    for plugin_src in PLUGIN_SRCS:
        own = emitted(plugin_src) - emitted(HOST_SRC)
        for rule in own:
            assert catalogue[rule].source != "fpmcore", rule
    assert catalogue["gdn-head-dim"].source == "vllm_032"
    assert catalogue["G-12"].source == "glm53flash"
    assert catalogue["§6.4"].source == "dsv41"


def test_every_entry_names_an_id_the_code_emits(catalogue):
    """No stale entry: the catalogue describes ids that exist (``explain`` is fpm explain's own refusal)."""
    assert sorted(set(catalogue) - emitted(HOST_SRC, *PLUGIN_SRCS)) == []


# ---------------------------------------------------------------------------
# (c) every entry is complete
# ---------------------------------------------------------------------------


def test_every_entry_has_every_field(catalogue):
    assert len(catalogue) >= 250
    for rule, c in catalogue.items():
        for field in FIELDS:
            assert getattr(c.entry, field).strip(), f"{rule}: {field}"
        assert "\n" not in c.entry.meaning, rule


def test_every_example_is_a_line_as_fpm_prints_it(catalogue):
    """An example reads ``fpm…: message [ID]``; an import diagnostic ``<configuration>: <phase>/<artifact>:
    message [I-n]`` (the live probe prints its message alone; usage and interruption end without an id)."""
    unbracketed = {"usage", "interrupted", "internal", "probe"}
    for rule, c in catalogue.items():
        if family_of(rule) == "I":
            assert re.match(r"[^: ]+: [^: /]+/[^: /]+: ", c.entry.example), rule
        else:
            assert c.entry.example.startswith("fpm"), rule
        if rule not in unbracketed:
            assert c.entry.example.endswith(f"[{rule}]"), rule


def test_an_entry_with_a_blank_field_is_refused():
    with pytest.raises(ValueError, match="fix must be a non-blank string"):
        RuleEntry("X-1", "meaning", "protects", "fpm: example [X-1]", " ")


def test_families():
    assert [family_of(r) for r in ("P-S1", "I-114", "§6.4", "INDEX", "collect", "gdn-bfloat16")] == [
        "P", "I", "§", "INDEX", "named", "named"]  # fmt: skip


# ---------------------------------------------------------------------------
# (b) fpm explain
# ---------------------------------------------------------------------------


def _run(*argv: str):
    return run_fpm(*argv, host=make_host(entry_points=PLUGINS))


@pytest.mark.parametrize(
    ("rule", "words"),
    [("R-33", "The trace cannot be read."), ("P-S1", "does not define"), ("collect", "fpm collect cannot"),
     ("[a-45]", "not repeatable"), ("gdn-bfloat16", "bfloat16 only")],
)  # fmt: skip
def test_explain_prints_the_entry(rule, words):
    res = _run("explain", rule)
    assert res.exit_code == 0, res.stderr
    assert words in res.stdout
    assert "\x1b[" not in res.stdout and "[bold]" not in res.stdout  # piped: plain text
    for field in ("protects:", "example:", "fix:", "family:", "source:"):
        assert field in res.stdout


def test_explain_of_an_unknown_id_exits_2_with_the_closest():
    res = _run("explain", "R-99")
    assert res.exit_code == 2
    assert res.stdout == ""
    assert res.stderr.strip() == "fpm: no rule 'R-99'; closest: R-40, R-9, I-99 [explain]"
    res = _run("explain", "colect")
    assert res.exit_code == 2 and "closest: collect" in res.stderr


def test_explain_json():
    res = _run("explain", "I-22", "--json")
    assert res.exit_code == 0
    doc = json.loads(res.stdout)
    assert doc["schema"] == 1
    assert doc["rule"]["id"] == "I-22" and doc["rule"]["family"] == "I" and doc["rule"]["source"] == "fpmcore"
    assert set(FIELDS) <= set(doc["rule"])
    res = _run("explain", "R-99", "--json")
    assert res.exit_code == 2
    assert json.loads(res.stdout)["diagnostics"][0]["rule"] == "explain"


def test_explain_without_a_rule_lists_every_id(catalogue):
    res = _run("explain")
    assert res.exit_code == 0
    lines = res.stdout.splitlines()
    for rule, c in catalogue.items():
        assert any(rule in line and c.entry.meaning[:40] in line for line in lines), rule
    doc = json.loads(_run("explain", "--json").stdout)
    assert [r["id"] for r in doc["rules"]] == list(catalogue)


def test_closest_prefers_the_same_family():
    cat = build()
    assert closest(cat, "A-44") == ["A-43", "A-4", "I-44"]
    assert closest(cat, "R-330") == ["R-35", "R-33", "R-3"]
    assert closest(cat, "p-s9") == ["P-S4", "P-9", "P-S3"]
    assert closest(cat, "colect") == ["collect"]


# ---------------------------------------------------------------------------
# the hook
# ---------------------------------------------------------------------------


def _plugin(fn):
    import types

    from fpmcore import API_VERSION, PluginInfo

    mod = types.ModuleType("rules_plugin")
    mod.fpm_plugin_info = hookimpl(lambda: PluginInfo(id="rules_plugin", kind="model", targets=("m",),
                                                      api_version=API_VERSION))  # fmt: skip
    mod.fpm_rule_catalogue = hookimpl(fn)
    return mod


def test_a_plugin_adds_its_ids_and_cannot_replace_the_hosts():
    entry = RuleEntry("Z-1", "A refusal of this plugin.", "Its own rule.", "fpm: refused [Z-1]", "Do it right.")
    other = RuleEntry("R-33", "Another meaning.", "Nothing.", "fpm: x [R-33]", "None.")
    host = make_host(_plugin(lambda: [entry, other]))
    res = run_fpm("explain", "Z-1", "--json", host=host)
    assert json.loads(res.stdout)["rule"]["source"] == "rules_plugin"
    res = run_fpm("explain", "R-33", "--json", host=host)
    assert json.loads(res.stdout)["rule"]["source"] == "fpmcore"


def test_a_plugin_answer_of_the_wrong_type_names_the_plugin():
    host = make_host(_plugin(lambda: ["Z-1"]))
    with pytest.raises(PluginError, match="rules_plugin"):
        host.hooks.rule_catalogue()
    res = run_fpm("explain", "R-33", host=host)
    assert res.exit_code == 2 and "rules_plugin" in res.stderr and res.stderr.rstrip().endswith("[plugins]")


def test_the_docs_rules_page_lists_every_entry(catalogue):
    import importlib.util

    spec = importlib.util.spec_from_file_location("gen_pages", ROOT / "docs" / "gen_pages.py")
    gen = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(gen)  # type: ignore[union-attr]
    page = gen.pages()["reference/rules.md"]
    headings = re.findall(r"^### (.+)$", page, re.M)
    assert headings == list(catalogue)
    assert "2\\*\\*53" in page  # prose is Markdown-safe


# ---------------------------------------------------------------------------
# (f) what a user reads names no document the repository does not hold
# ---------------------------------------------------------------------------

#: A citation of a chapter of outside documents: a chapter file, ``(02)``, ``04 G-20``, ``05 §7.3``.
OUTSIDE = re.compile(r"\b\d\d-[a-z-]+\.md\b|\(0\d\)|\b0\d\s+(?:§|[A-Z]-)")


def test_the_help_and_the_guides_cite_no_chapter_of_outside_documents():
    """``fpm --help`` said "(02)", "(05)", "(06)" and the guides cited ``01-profile.md`` §10, documents the
    repository does not hold: the help of every command, the README and the user's pages name none (a rule id is
    looked up with ``fpm explain``)."""
    import argparse

    from fpmcore.cli.command_line import build_parser

    host = make_host(entry_points=PLUGINS)
    parser = build_parser(host)
    texts = {"fpm --help": parser.format_help()}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name in action.choices:  # each command configured as it is when it runs
                texts[f"fpm {name} --help"] = run_fpm(name, "--help", host=host).stdout
    pages = [ROOT / "README.md", ROOT / "docs" / "index.md", ROOT / "docs" / "live-engine.md",
             *sorted((ROOT / "docs" / "guides").glob("*.md"))]  # fmt: skip
    texts |= {str(p.relative_to(ROOT)): p.read_text(encoding="utf-8") for p in pages}
    assert len(texts) > 20
    cited = {where: OUTSIDE.findall(text) for where, text in texts.items()}
    assert {where: found for where, found in cited.items() if found} == {}


# ---------------------------------------------------------------------------
# (g) every check carries its rule id explicitly (``@checks("I-62")``) and is named by what it checks
# ---------------------------------------------------------------------------

#: A name that is a rule id and then words: ``i62_blocks``, ``a33_raw_samples``, ``A37_KV_SEED_REGIME``.
RULE_NAMED = re.compile(r"[A-Za-z]\d+_")
#: Names of that shape that are no rule id: a percentile's bound, a model type vLLM names.
NOT_RULE_IDS = {"P90_BOUND", "k3_dspark"}

#: The importer's stages, in the order the pipeline runs them.
IMPORT_STAGES = {
    "record_envelope.RULES": record_envelope.RULES,
    "runtime_identity.RULES": runtime_identity.RULES,
    "launch_settings.RULES": launch_settings.RULES,
    "cache_groups.STAGE_E": cache_groups.STAGE_E,
    "cache_groups.STAGE_F": cache_groups.STAGE_F,
    "block_pool.STAGE_G": block_pool.STAGE_G,
    "block_pool.STAGE_H_PLANNED": block_pool.STAGE_H_PLANNED,
    "block_pool.STAGE_H": block_pool.STAGE_H,
    "layer_views.STAGE_I": layer_views.STAGE_I,
    "prefix_and_capacity.STAGE_J": prefix_and_capacity.STAGE_J,
    "prefix_and_capacity.STAGE_K": prefix_and_capacity.STAGE_K,
    "prefix_and_capacity.STAGE_L": prefix_and_capacity.STAGE_L,
}


def _names(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """Every name a module defines or reads as an attribute or a key: functions, classes, assignments."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield node.lineno, node.name
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            yield node.lineno, node.id
        elif isinstance(node, ast.Attribute):
            yield node.lineno, node.attr
        elif isinstance(node, ast.alias):
            yield node.lineno, node.asname or node.name.rpartition(".")[2]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.isidentifier():
            yield node.lineno, node.value  # a key: "check_warmup_recorded": "fpmcore.validate.protocol:…"


def test_no_name_is_a_rule_id():
    found = []
    for root in (HOST_SRC, *PLUGIN_SRCS):
        for path in sorted(root.rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
            found += [f"{path}:{line}: {name}" for line, name in _names(tree)
                      if RULE_NAMED.match(name) and name not in NOT_RULE_IDS]  # fmt: skip
    assert found == []


def test_the_scan_finds_a_name_that_is_a_rule_id():
    tree = ast.parse("def i62_blocks(): pass\nA37_KV = 1\nx.a3_ranks\nP90_BOUND = 0.15\n")
    assert [n for _, n in _names(tree) if RULE_NAMED.match(n) and n not in NOT_RULE_IDS] == [
        "i62_blocks", "A37_KV", "a3_ranks"
    ]  # fmt: skip


@pytest.mark.parametrize("stage", sorted(IMPORT_STAGES))
def test_every_import_check_carries_a_catalogued_id(stage, catalogue):
    for rule in IMPORT_STAGES[stage]:
        rule_of = checked_rule(rule)
        assert rule_of is not None, f"{stage}: {rule.__name__} carries no @checks id"
        assert rule_of.startswith("I-") and rule_of in catalogue, (stage, rule.__name__, rule_of)


def _contract_rules() -> Iterator[tuple[str, tuple[tuple[str, Any], ...]]]:
    yield "structure", STRUCTURE_RULES
    yield "protocol", GENERAL_ARTIFACT_RULES
    yield "rows", GENERAL_ROW_RULES
    contracts: list[ContractRules] = [engine_steps.RULES]
    for plugin in ("fpmcore_glm53flash.artifact", "fpmcore_dsv41.artifact"):
        contracts.append(__import__(plugin, fromlist=["RULES"]).RULES)
    for rules in contracts:
        for part in ("artifact", "rows", "rank_end"):
            yield f"{rules.name}.{part}", getattr(rules, part)


@pytest.mark.parametrize("table", [name for name, _ in _contract_rules()])
def test_every_artifact_check_carries_the_id_it_is_registered_under(table, catalogue):
    rules = dict(_contract_rules())[table]
    for rule, check in rules:
        assert checked_rule(check) == rule, (table, check.__name__, rule)
        assert rule in catalogue, (table, rule)


def test_the_id_of_a_check_is_its_mark_and_not_its_name():
    @checks("I-62")
    def i14_binding(ctx: Any, rec: Any) -> None:
        raise TypeError

    def unmarked(ctx: Any) -> Iterator[Any]:
        yield from ()

    assert rule_id(i14_binding) == "I-62" and checked_rule(per_record(i14_binding)) == "I-62"
    assert rule_id(unmarked) == "I-0" and checked_rule(guarded(unmarked)) is None
