"""The host's layout stays as it is meant: no import cycles, no runtime knowledge.

* **No import cycles** among the modules of ``src/fpmcore``: the host (plugin
  loading) imports no command line, the data model no hook machinery.  Every
  ``import`` counts, at module level or inside a function, except those under
  ``if TYPE_CHECKING:``; ``from package import submodule`` is an edge to the
  submodule.
* **The host names no runtime**: outside docstrings, ``src/fpmcore`` holds no
  version number but fpmcore's own ``__version__``, no cache spec or
  configuration class name of vLLM and no model id of a model plugin; the
  exceptions are :data:`EXEMPT`, each with its reason.
* **The folders are the concepts of ARCHITECTURE.md**: the top of
  ``src/fpmcore`` holds the packages its host table names and only the modules
  fixed there (:data:`FIXED_AT_THE_TOP`; the C engine's binding is in ``replay/``); each stage's
  package has one ``command.py``, the source of its ``fpm`` commands, which no module outside the
  stage's package imports (another stage calls the stage's functions); no two
  modules share a name that says nothing of whose they are
  (:data:`AMBIGUOUS_NAMES`) unless the table names both.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"


def _modules() -> dict[str, Path]:
    mods = {}
    for path in SRC.rglob("*.py"):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        mods[".".join(parts)] = path
    return mods


MODULES = _modules()


def _type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING"
    )


def imports_of(name: str, source: str, *, package: bool) -> set[str]:
    """The modules of ``src/fpmcore`` that module ``name`` imports (see the module docstring)."""
    found: set[str] = set()
    pkg = name if package else name.rpartition(".")[0]

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                head = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                base = ".".join(head + ([node.module] if node.module else []))
            for a in node.names:
                found.add(f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(source))
    return {m for m in found if m in MODULES and m != name}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def import_graph() -> dict[str, set[str]]:
    return {
        name: imports_of(name, path.read_text(encoding="utf-8"), package=path.name == "__init__.py")
        for name, path in MODULES.items()
    }


def test_the_host_has_no_import_cycles():
    assert cycles(import_graph()) == []


def test_the_host_imports_no_command_line():
    """Plugin loading and the hook facade import neither the CLI nor the commands; the model no hook types."""
    graph = import_graph()
    for host in ("fpmcore.host.plugins", "fpmcore.host.hooks"):
        assert not {m for m in graph[host] if m == "fpmcore.cli" or m.startswith("fpmcore.cli.")}, host
    assert "fpmcore.host.hooktypes" not in graph["fpmcore.documents.errors"]
    assert graph["fpmcore.documents.errors"] == {"fpmcore.documents.diagnostics"}


def test_only_the_entry_points_import_the_command_line():
    """The host is built by :mod:`fpmcore.host.build`; only ``python -m fpmcore`` and the test kit (which runs ``fpm``)
    import the command line — a pipeline stage calls another stage's function, never its command."""
    graph = import_graph()
    parser = {"fpmcore.cli", "fpmcore.cli.command_line"}
    importers = {name for name, imported in graph.items() if imported & parser} - parser
    assert importers == {"fpmcore.__main__", "fpmcore.testing"}
    assert "fpmcore.cli.commands" in graph["fpmcore.host.build"]
    assert "fpmcore.host.build" in graph["fpmcore.cli.command_line"]


def test_the_cycle_check_finds_a_cycle():
    """The check is not vacuous: the import that made the host and the command line a cycle is found."""
    graph = import_graph()
    graph["fpmcore.host.plugins"] = graph["fpmcore.host.plugins"] | {"fpmcore.cli.command_line"}
    assert ["fpmcore.cli.command_line", "fpmcore.host.build", "fpmcore.host.plugins"] in cycles(graph)
    lazy = "def f():\n    from fpmcore.cli import main\n"
    typing_only = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from fpmcore.cli import main\n"
    assert imports_of("fpmcore.x", lazy, package=False) == {"fpmcore.cli"}
    assert imports_of("fpmcore.x", typing_only, package=False) == set()


# --------------------------------------------------------------------------
# the host names no runtime
# --------------------------------------------------------------------------


def _runtime_words() -> tuple[set[str], set[str]]:
    """The spec class names the runtime plugins know, and the model ids the model plugins target."""
    from fpmcore.testing import make_host
    from fpmcore_vllm033.classes import TABLE

    host = make_host(entry_points=("vllm_027", "vllm_032", "vllm_033", "glm53flash", "dsv41"))
    classes = set(TABLE) | {"KVCacheConfig", "KVCacheTensor", "KVCacheGroupSpec", "VllmConfig", "CacheConfig",
                            "SchedulerConfig", "BlockPool", "KVCacheManager", "MultipleOf", "LlamaForCausalLM"}  # fmt: skip
    models = {t for r in host.active("model") for t in (r.id, *r.targets)}
    return classes, models


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                out.add(id(first.value))
    return out


def _own_version(tree: ast.AST) -> set[int]:
    """The constant of ``__version__ = "…"``: fpmcore's own version."""
    return {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["__version__"]
    }


def _code_words(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """``(line, text)`` of every string constant (docstrings left out) and every name of the code."""
    docs = _docstrings(tree) | _own_version(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            yield node.lineno, node.value
        elif isinstance(node, ast.Name):
            yield node.lineno, node.id
        elif isinstance(node, ast.Attribute):
            yield node.lineno, node.attr
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield node.lineno, node.name


VERSION = re.compile(r"\b\d+\.\d+\.\d+")


def runtime_names(source: str, classes: set[str], models: set[str]) -> list[tuple[int, str]]:
    """``(line, word)`` of each vLLM version, runtime class name or model id the code (not its docstrings) names."""
    hits = []
    for line, text in _code_words(ast.parse(source)):
        hits += [(line, v) for v in VERSION.findall(text)]
        hits += [(line, w) for w in sorted(set(re.findall(r"\w+", text)) & classes)]
        hits += [(line, m) for m in sorted(models) if m in text]
    return hits


#: Modules that may name runtime classes, and why.
EXEMPT = {
    # the plugin test kit's shared cases: the spec class names fpm_classify_spec is asked about are
    # inputs of every runtime plugin's conformance test, not knowledge the host acts on
    "fpmcore.host.conformance": "test inputs of the plugin kit",
}


@pytest.mark.parametrize("name", sorted(set(MODULES) - set(EXEMPT)))
def test_the_host_names_no_runtime(name):
    classes, models = _runtime_words()
    assert runtime_names(MODULES[name].read_text(encoding="utf-8"), classes, models) == []


def test_the_exemptions_are_modules_that_name_a_runtime():
    """An exemption that no longer names a runtime is taken out."""
    classes, models = _runtime_words()
    for name in EXEMPT:
        assert runtime_names(MODULES[name].read_text(encoding="utf-8"), classes, models) != [], name


def test_the_runtime_name_check_finds_a_name():
    classes, models = _runtime_words()
    assert "MambaSpec" in classes and "glm53flash" in models
    code = 'def f():\n    """vLLM 0.33.0\'s MambaSpec, for glm53flash (a docstring: allowed)."""\n' \
           '    return "vllm.v1.kv_cache_interface.MambaSpec", "0.33.0", glm53flash\n'  # fmt: skip
    assert runtime_names(code, classes, models) == [(3, "MambaSpec"), (3, "0.33.0"), (3, "glm53flash")]


def test_architecture_md_names_every_hook_and_host_package():
    """ARCHITECTURE.md stays true: it names every hookspec and every package of the host."""
    import fpmcore.hookspecs

    text = (SRC.parent / "ARCHITECTURE.md").read_text(encoding="utf-8")
    hooks = sorted(n for n in vars(fpmcore.hookspecs) if n.startswith("fpm_"))
    assert len(hooks) >= 14
    assert [h for h in hooks if f"`{h}`" not in text and f"{h}`" not in text] == []
    packages = sorted(p.name for p in (SRC / "fpmcore").iterdir() if (p / "__init__.py").exists())
    assert packages and [p for p in packages if f"{p}/" not in text] == []


def test_validation_and_planning_know_no_collector():
    """``fpm validate`` and ``fpm plan`` read what a collection wrote; they import nothing of ``collect/``
    (the producer record a contract expects is asked of the hook facade, the plan's point is the plan's)."""
    graph = import_graph()
    readers = [
        n
        for n in graph
        if n.startswith("fpmcore.validate") or n in ("fpmcore.plan.planning", "fpmcore.plan.point_grid")
    ]
    assert len(readers) > 10
    assert {n: sorted(m for m in graph[n] if m.startswith("fpmcore.collect")) for n in readers} == dict.fromkeys(
        readers, []
    )


ROOT = SRC.parent
#: The source trees of the shipped plugins and of the plugin template.
PLUGIN_SOURCES = sorted([*(ROOT / "plugins").glob("*/src"), ROOT / "examples" / "plugin-template" / "src"])


def _plugin_imports() -> dict[str, set[str]]:
    """``file → every module it imports`` (``if TYPE_CHECKING:`` imports too) for every plugin source file."""
    found: dict[str, set[str]] = {}
    for tree in PLUGIN_SOURCES:
        for path in sorted(tree.rglob("*.py")):
            names: set[str] = set()
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    names.update(a.name for a in node.names)
                elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                    names.update({node.module} | {f"{node.module}.{a.name}" for a in node.names})
            found[str(path.relative_to(ROOT))] = names
    return found


def test_no_plugin_imports_the_command_line():
    """A plugin's hooks build the host with :func:`fpmcore.host.build.build_host`, never through the command line."""
    imports = _plugin_imports()
    assert len(PLUGIN_SOURCES) >= 7 and len(imports) > 40
    command_line = {
        f: sorted(n for n in m if n == "fpmcore.cli" or n.startswith("fpmcore.cli.")) for f, m in imports.items()
    }
    assert {f: m for f, m in command_line.items() if m} == {}


def test_the_engine_steps_contract_claims_the_cells_the_grid_plans():
    """The contract is declared apart from the grid so that loading the host stays light; the two agree."""
    from fpmcore.collect.identity import CONTRACT
    from fpmcore.plan.point_grid import CELL_IDENTITY

    assert (CONTRACT.residency, CONTRACT.execution_profile) == (
        CELL_IDENTITY["engram_residency"],
        CELL_IDENTITY["execution_profile"],
    )


# --------------------------------------------------------------------------
# the layout: the folders are the concepts of ARCHITECTURE.md
# --------------------------------------------------------------------------

#: The modules at the top of ``src/fpmcore`` that stay there: the package, ``python -m fpmcore``, the hook
#: specifications, the declared plugin API and the plugins' pytest kit.
FIXED_AT_THE_TOP = {"__init__", "__main__", "hookspecs", "plugin_api", "testing"}
#: The rows whose packages are stages of the data flow: each has one ``command.py``.
STAGE_ROWS = ("pipelines", "trace formats", "campaigns")
#: Module names that say nothing of whose they are: two of them may share one only where the table names both.
AMBIGUOUS_NAMES = {"model", "values", "outputs", "plot", "context"}
HOST = SRC / "fpmcore"


def host_table() -> dict[str, str]:
    """``concept → modules`` of ARCHITECTURE.md's host table."""
    text = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")
    section = text.split("## The host", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|") for line in section.splitlines() if line.startswith("| ") and "---" not in line]
    return {cells[1].strip(): cells[2] for cells in rows[1:]}


def packages_named(cell: str) -> set[str]:
    """The packages a table cell names (```probe/```, not ```collect/measure.py```)."""
    return set(re.findall(r"`(\w+)/`", cell))


def test_the_top_of_the_host_holds_the_fixed_modules_and_the_packages_of_the_table():
    table = host_table()
    assert {"plugin loading", "data model", "pipelines", "command line", "C engine"} <= set(table)
    named = {p for cell in table.values() for p in packages_named(cell)}
    named = {p for p in named if not (ROOT / p).is_dir()}  # csrc/ is beside src/, not in it
    packages = {p.name for p in HOST.iterdir() if (p / "__init__.py").is_file()}
    assert packages == named
    assert {p.stem for p in HOST.glob("*.py")} == FIXED_AT_THE_TOP
    assert {"native", "_native_build"} <= {p.stem for p in (HOST / "replay").glob("*.py")}  # the C binding
    assert not [p.name for p in HOST.iterdir() if p.is_dir() and p.name not in packages | {"data", "__pycache__"}]


def test_each_stage_package_has_one_command_module():
    """Every stage's argparse and run sit in its package's one ``command.py``, and every pipeline command of
    ``fpm`` comes from one of them (``fpm explain`` is the command line's own)."""
    from fpmcore.cli.commands import PIPELINE_COMMANDS

    table = host_table()
    stages = {p for row in STAGE_ROWS for p in packages_named(table[row])}
    assert len(stages) >= 11
    for stage in sorted(stages):
        found = sorted(str(p.relative_to(HOST)) for p in (HOST / stage).rglob("command.py"))
        assert found == [f"{stage}/command.py"], stage
    modules = {module for _, _, module, _ in PIPELINE_COMMANDS}
    assert modules - {"fpmcore.cli.explain"} == {f"fpmcore.{stage}.command" for stage in stages}


def command_importers(graph: dict[str, set[str]], stages: set[str]) -> dict[str, list[str]]:
    """``stage's command module → the modules outside the stage's package that import it``, for those imported."""
    found = {}
    for stage in sorted(stages):
        command, package = f"fpmcore.{stage}.command", f"fpmcore.{stage}"
        outside = sorted(
            n
            for n, imported in graph.items()
            if command in imported and n != package and not n.startswith(f"{package}.")
        )
        if outside:
            found[command] = outside
    return found


def test_no_stage_imports_another_stages_command():
    """A stage's ``command.py`` holds its ``fpm`` commands only (argparse and the call of the stage's functions):
    no module outside the stage's package imports it — another stage calls the stage's functions
    (``fpm onboard`` runs ``collect.run.run_collect``), and only the command line's registration
    (:data:`fpmcore.cli.commands.PIPELINE_COMMANDS`, by module name) loads a command module."""
    table = host_table()
    stages = {p for row in STAGE_ROWS for p in packages_named(table[row])}
    graph = import_graph()
    assert command_importers(graph, stages) == {}
    # the check is not vacuous: onboarding calling the collection through collect's command module is found
    graph["fpmcore.campaign.onboard"] = graph["fpmcore.campaign.onboard"] | {"fpmcore.collect.command"}
    assert command_importers(graph, stages) == {"fpmcore.collect.command": ["fpmcore.campaign.onboard"]}
    # nor does a plugin: its commands are its own, through fpm_cli_commands
    commands = {f"fpmcore.{stage}.command" for stage in stages}
    plugins = {f: sorted(m & commands) for f, m in _plugin_imports().items()}
    assert {f: m for f, m in plugins.items() if m} == {}


def test_no_two_modules_share_a_name_that_says_nothing_unless_the_table_names_both():
    text = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")
    by_name: dict[str, list[str]] = {}
    for path in sorted(HOST.rglob("*.py")):
        if path.stem in AMBIGUOUS_NAMES:
            by_name.setdefault(path.stem, []).append(str(path.relative_to(HOST)))
    shared = {name: paths for name, paths in by_name.items() if len(paths) > 1}
    assert {name: [p for p in paths if f"`{p}`" not in text] for name, paths in shared.items()} == dict.fromkeys(
        shared, []
    )
