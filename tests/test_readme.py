"""The code blocks of the README and of the docs pages they moved to are real: each runs here.

The plugin example of the writing-a-plugin guide is loaded as a plugin and called through the host, the
profile example of the onboarding guide gives its numbers, and the README's "Running fpm afterwards" block
replays the profile ``make demo`` writes.
"""

from __future__ import annotations

import re
import types
from pathlib import Path

from fpmcore import ExecutionIdentity

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
PLUGIN_GUIDE = (ROOT / "docs" / "guides" / "writing-a-plugin.md").read_text()
ONBOARDING_GUIDE = (ROOT / "docs" / "guides" / "onboarding.md").read_text()


def _block(marker: str, text: str = README) -> str:
    for _lang, body in re.findall(r"```(\w*)\n(.*?)```", text, re.S):
        if marker in body:
            return body
    raise AssertionError(f"no code block with {marker!r}")


def test_plugin_example_loads_and_answers(fpm_host):
    module = types.ModuleType("my_model_plugin")
    exec(compile(_block("# my_model_plugin.py", PLUGIN_GUIDE), "writing-a-plugin.md", "exec"), module.__dict__)
    host = fpm_host(module)
    assert host.record("mymodel").status == "ok"
    assert host.select_model("acme/MyModel-1").id == "mymodel"
    namespace = {"ExecutionIdentity": ExecutionIdentity, "fpm_host": lambda *p: fpm_host(*p)}
    test_src = _block("def test_my_contract", PLUGIN_GUIDE)
    import sys

    sys.modules["my_model_plugin"] = module
    try:
        exec(compile(test_src, "writing-a-plugin.md", "exec"), namespace)
        namespace["test_my_contract"](fpm_host)
    finally:
        del sys.modules["my_model_plugin"]


def test_profile_example_numbers():
    code = _block("p = load_profile(", ONBOARDING_GUIDE)
    namespace: dict = {}
    exec(compile(code, "onboarding.md", "exec"), namespace)
    assert namespace["res"].request_peak_cache_bytes(1_048_576) == 6_582_681_600
    assert "6_582_681_600" in code


def test_pyproject_example_uses_the_entry_point_group():
    block = _block('[project.entry-points."fpmcore.plugins"]', PLUGIN_GUIDE)
    assert 'mymodel = "my_model_plugin"' in block


def test_hook_table_lists_every_hookspec():
    from fpmcore import hookspecs

    specs = {n for n in vars(hookspecs) if n.startswith("fpm_")}
    rows = dict(re.findall(r"^\| `(fpm_\w+)` \| (first-result|collecting) \|", PLUGIN_GUIDE, re.M))
    assert set(rows) == specs
    for name, kind in rows.items():
        assert (kind == "first-result") == getattr(hookspecs, name).fpmcore_spec.get("firstresult", False), name


def test_running_fpm_after_make_demo(tmp_path):
    """The block under "Running fpm afterwards": the profile it replays is the one ``make demo`` writes (the
    Makefile's GLM_PROFILE), and its replay runs on that profile (imported here the way the demo does)."""
    from fpmcore.testing import make_host, run_fpm

    block = _block(".venv/bin/fpm --help")
    makefile = (Path(__file__).resolve().parents[1] / "Makefile").read_text()
    demo = re.search(r"^DEMO := (\S+)$", makefile, re.M).group(1)  # type: ignore[union-attr]
    profile = re.search(r"^GLM_PROFILE := (\S+)$", makefile, re.M).group(1).replace("$(DEMO)", demo)  # type: ignore[union-attr]
    replay = next(line for line in block.splitlines() if line.startswith(".venv/bin/fpm replay"))
    args = replay.split()[1:]
    assert args[1] == profile
    root = Path(__file__).resolve().parents[1]
    out = tmp_path / "profile.json"
    host = make_host(entry_points=("vllm_033",))
    assert run_fpm("import", str(root / "examples/probes/glm53flash-tp4"), "-o", str(out), host=host).exit_code == 0
    args[1] = str(out)
    args[args.index("--trace") + 1] = str(root / args[args.index("--trace") + 1])
    res = run_fpm(*args, host=host)
    assert res.exit_code == 0, res.stderr
    others = [line.split()[1:] for line in block.splitlines() if line.startswith(".venv/bin/fpm ") and line != replay]
    assert others  # every other line of the block runs as written
    for argv in others:
        res = run_fpm(*argv, host=host)
        assert res.exit_code == 0 and res.stdout, (argv, res.stderr)


def test_make_test_is_described_alike_everywhere():
    """The README, the docs site's front page and the Makefile describe ``make test`` in the same words."""
    root = Path(__file__).resolve().parents[1]
    readme = re.search(r"^make test +# (.+)$", README, re.M).group(1)  # type: ignore[union-attr]
    docs = re.search(r"^make test +# (.+)$", (root / "docs" / "index.md").read_text(), re.M).group(1)  # type: ignore[union-attr]
    makefile = re.search(r"^#   make test +(.+)$", (root / "Makefile").read_text(), re.M).group(1)  # type: ignore[union-attr]
    assert readme == docs == makefile
    assert "ruff and mypy" in readme and "ASan/UBSan" in readme  # what `test: env lint test-c test-python` runs
