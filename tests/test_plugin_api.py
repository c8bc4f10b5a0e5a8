"""The declared plugin API (:mod:`fpmcore.plugin_api`): what a plugin may import of fpmcore, and only that.

* every source file of the shipped plugins (``plugins/*/src``) and the plugin
  template (``examples/plugin-template``, its tests too) imports of fpmcore only
  ``fpmcore.plugin_api`` and ``fpmcore.testing``;
* every name of the API resolves, its typing block names the same objects, and
  importing it loads nothing of the host;
* the reference page and the plugin guide list it.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import fpmcore.plugin_api as api

ROOT = Path(__file__).resolve().parents[1]
#: What a plugin may import of fpmcore.
ALLOWED = {"fpmcore.plugin_api", "fpmcore.testing"}
#: The plugin sources the rule holds for.
PLUGIN_TREES = sorted(
    [*(ROOT / "plugins").glob("*/src"), ROOT / "examples" / "plugin-template" / "src",
     ROOT / "examples" / "plugin-template" / "tests"]
)  # fmt: skip


def fpmcore_imports(source: str) -> list[tuple[int, str]]:
    """``(line, module)`` of every import of an fpmcore module (``if TYPE_CHECKING:`` and inside functions too);
    ``from fpmcore import x`` counts as ``fpmcore.x`` when ``x`` is a module, else as ``fpmcore``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "fpmcore"]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            if node.module.split(".")[0] != "fpmcore":
                continue
            if node.module == "fpmcore":
                found += [(node.lineno, f"fpmcore.{a.name}") for a in node.names]
            else:
                found.append((node.lineno, node.module))
    return found


def test_plugins_import_only_the_plugin_api():
    files = [p for tree in PLUGIN_TREES for p in sorted(tree.rglob("*.py"))]
    assert len(PLUGIN_TREES) >= 8 and len(files) > 40
    outside = {
        f"{path.relative_to(ROOT)}:{line}": module
        for path in files
        for line, module in fpmcore_imports(path.read_text(encoding="utf-8"))
        if module not in ALLOWED
    }
    assert outside == {}


def test_the_check_finds_an_internal_import():
    code = (
        "from fpmcore import hookimpl\nfrom fpmcore.plugin_api import PluginInfo\nimport fpmcore.documents.record\n"
        "def f():\n    from fpmcore.validate.measured_values import get\n"
    )
    assert sorted(fpmcore_imports(code)) == [
        (1, "fpmcore.hookimpl"), (2, "fpmcore.plugin_api"), (3, "fpmcore.documents.record"), (5, "fpmcore.validate.measured_values")
    ]  # fmt: skip


def test_every_name_resolves_and_its_typing_block_names_the_same_object():
    assert api.__all__ == sorted(api.EXPORTS) and len(api.EXPORTS) > 100
    tree = ast.parse(Path(api.__file__).read_text(encoding="utf-8"))
    typed = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            for imp in node.body:
                assert isinstance(imp, ast.ImportFrom)
                typed.update({a.asname or a.name: f"{imp.module}:{a.name}" for a in imp.names})
    assert typed == api.EXPORTS
    for name, where in api.EXPORTS.items():
        module, _, attribute = where.partition(":")
        assert getattr(api, name) is getattr(__import__(module, fromlist=[attribute]), attribute), name


def _loaded_after(statement: str) -> set[str]:
    code = f"import sys; {statement}; print(sorted(m for m in sys.modules if m.startswith('fpmcore')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return set(ast.literal_eval(out))


def test_importing_the_plugin_api_loads_nothing_of_the_host():
    """Its names load on first use: a plugin importing it at its top costs ``fpm --help`` nothing."""
    assert _loaded_after("import fpmcore.plugin_api") - _loaded_after("import fpmcore") == {"fpmcore.plugin_api"}


def test_the_docs_list_the_plugin_api():
    reference = (ROOT / "docs" / "reference" / "plugin-api.md").read_text(encoding="utf-8")
    assert [n for n in api.__all__ if f"`{n}`" not in reference] == []
    assert "fpmcore.plugin_api" in (ROOT / "docs" / "guides" / "writing-a-plugin.md").read_text(encoding="utf-8")
