"""The cache of attrs' and cattrs' generated code (:mod:`fpmcore.documents.generated_code`) returns what ``compile`` would."""

from __future__ import annotations

import builtins
import dis
import os
import subprocess
import sys
from pathlib import Path
from types import CodeType

import attrs
import pytest

from fpmcore.documents import generated_code
from fpmcore.documents.generated_code import HEADER, MAX_ENTRIES, TYPE_HASH_STAND_IN, CodeCache


@pytest.fixture(autouse=True)
def _bytecode_written(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever ``PYTHONDONTWRITEBYTECODE`` the suite runs under: the cache writes as an ordinary start would."""
    monkeypatch.setattr(sys, "dont_write_bytecode", False)


def _generated_sources(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str, str, int]]:
    """What attrs and cattrs compile for a few fresh classes and a converter: ``(source, filename, mode, flags)``."""
    import attr._make
    import cattrs.gen

    seen: list[tuple[str, str, str, int]] = []

    def spy(source: str, filename: str, mode: str) -> object:
        flags = sys._getframe(1).f_code.co_flags & generated_code.FUTURE_FLAGS  # what compile inherits
        seen.append((source, filename, mode, flags))
        return builtins.compile(source, filename, mode, flags, True)

    for module in (attr._make, cattrs.gen):
        monkeypatch.setattr(module, "compile", spy, raising=False)

    @attrs.frozen
    class Point:
        x: int
        y: float = 0.0

    @attrs.define
    class Box:
        corner: Point
        tags: tuple[str, ...] = ()

    attrs.resolve_types(Box, localns={"Point": Point})
    import cattrs

    converter = cattrs.Converter(forbid_extra_keys=True)
    assert converter.structure({"corner": {"x": 1, "y": 2.5}, "tags": ["a"]}, Box) == Box(Point(1, 2.5), ("a",))
    assert {hash(Point(1)), hash(Point(1))} == {hash(Point(1))}
    return seen


def _same_code(got: CodeType, expected: CodeType) -> bool:
    """``got == expected``, but for the end column of the type hash's constant in an attrs ``__hash__``.

    Compared: every field of the code objects and of those they hold, the positions of every instruction
    but the one loading the type hash (whose end column follows the stand-in's length).
    """
    if not isinstance(got, CodeType) or not isinstance(expected, CodeType):
        return bool(got == expected)
    if len(got.co_consts) != len(expected.co_consts):
        return False
    if not all(
        _same_code(a, b) if isinstance(b, CodeType) else a == b for a, b in zip(got.co_consts, expected.co_consts)
    ):
        return False
    if got.co_name == "__hash__":
        instructions = list(dis.get_instructions(expected))
        got_positions, expected_positions = list(got.co_positions()), list(expected.co_positions())
        loading_int = {
            i for i, ins in enumerate(instructions) if ins.opname == "LOAD_CONST" and type(ins.argval) is int
        }
        skipped = _code_units(instructions, loading_int)
        keep = [i for i in range(len(expected_positions)) if i not in skipped]
        if [got_positions[i] for i in keep] != [expected_positions[i] for i in keep]:
            return False
        got = got.replace(co_linetable=expected.co_linetable)
    return bool(got.replace(co_consts=expected.co_consts) == expected)


def _code_units(instructions: list[dis.Instruction], chosen: set[int]) -> set[int]:
    """The code-unit indexes (``co_positions`` has one entry per unit) of the chosen instructions."""
    units: set[int] = set()
    for i in chosen:
        start = instructions[i].offset // 2
        end = instructions[i + 1].offset // 2 if i + 1 < len(instructions) else start + 1
        units.update(range(start, end))
    return units


def test_every_generated_source_compiles_to_what_compile_returns(tmp_path, monkeypatch):
    with monkeypatch.context() as patch:
        sources = _generated_sources(patch)
    assert len(sources) >= 3 and any("def __hash__" in s for s, *_ in sources)
    path = str(tmp_path / "generated.code")
    first = CodeCache(path)
    compiled = [first.compile(s, f, m, flags, dont_inherit=True) for s, f, m, flags in sources]
    first.save()
    assert Path(path).read_bytes().startswith(HEADER)
    second = CodeCache(path)  # a new process: every entry read from the file
    for (source, filename, mode, flags), code in zip(sources, compiled, strict=True):
        expected = builtins.compile(source, filename, mode, flags, True)
        assert _same_code(code, expected), filename
        assert _same_code(second.compile(source, filename, mode, flags, dont_inherit=True), expected), filename
    assert not second._added  # all were hits


def test_the_type_hash_of_another_process_is_put_back(tmp_path):
    template = (
        "def __hash__(self):\n        return hash((\n                {},\n                self.x,\n            ))\n"
    )
    path = str(tmp_path / "generated.code")
    one = CodeCache(path)
    one.compile(template.format(4322460034843738511), "<attrs generated hash P>", "exec", dont_inherit=True)
    one.save()
    other = CodeCache(path)
    for value in (1234567890123456789, -2060929011604154256, 7):
        source = template.format(value)
        code = other.compile(source, "<attrs generated hash P>", "exec", dont_inherit=True)
        expected = builtins.compile(source, "<attrs generated hash P>", "exec", 0, True)
        assert _same_code(code, expected)
        namespace: dict[str, object] = {}
        exec(code, namespace)
        assert namespace["__hash__"].__code__.co_consts.count(value) == 1  # type: ignore[attr-defined]
        if len(str(value)) == len(TYPE_HASH_STAND_IN):
            assert code == expected  # the same length: the very code object
        else:
            assert code != expected  # the end column differs: the comparison above is not vacuous
    assert not other._added  # one entry serves every process's number
    # a source that holds the stand-in's own text is compiled as it is
    nines = template.format(TYPE_HASH_STAND_IN)
    assert other.compile(nines, "<p>", "exec", dont_inherit=True) == builtins.compile(nines, "<p>", "exec", 0, True)
    assert not other._added


def test_the_callers_future_flags_are_inherited_as_compile_inherits_them():
    """``attr._make`` and ``cattrs.gen`` compile under ``from __future__ import annotations``."""
    source = "def f(a: undefined_name) -> None:\n    pass\n"
    cache = CodeCache(None)
    namespace: dict[str, object] = {}
    exec(cache.compile(source, "<f>", "exec"), namespace)  # this module has the annotations future: no NameError
    assert namespace["f"].__annotations__ == {"a": "undefined_name", "return": "None"}  # type: ignore[attr-defined]
    plain = CodeCache(None)
    with pytest.raises(NameError):
        exec(plain.compile(source, "<f>", "exec", dont_inherit=True), {})


def test_unusual_calls_and_unreadable_files_take_the_builtin_compile(tmp_path):
    bad = tmp_path / "generated.code"
    bad.write_bytes(b"not a cache")
    cache = CodeCache(str(bad))
    assert cache.compile("x = 1", "<x>", "exec") == builtins.compile("x = 1", "<x>", "exec")
    assert cache.compile(b"x = 1", "<x>", "exec") == builtins.compile(b"x = 1", "<x>", "exec")
    tree = cache.compile("x = 1", "<x>", "exec", 0x400)  # ast.PyCF_ONLY_AST
    assert type(tree).__name__ == "Module"
    assert cache.compile("x = 1", "<x>", "exec", optimize=2) == builtins.compile("x = 1", "<x>", "exec", optimize=2)
    assert [key[0] for key in cache._added] == ["x = 1"]  # only the ordinary call was kept


def test_nothing_is_written_when_bytecode_is_not(tmp_path, monkeypatch):
    path = tmp_path / "generated.code"
    cache = CodeCache(str(path))
    cache.compile("y = 2", "<y>", "exec", dont_inherit=True)
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    cache.save()
    assert not path.exists()
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    cache.save()
    assert path.exists() and not list(tmp_path.glob("*.tmp"))


def test_a_full_file_keeps_only_the_entries_of_the_process_writing_it(tmp_path, monkeypatch):
    path = str(tmp_path / "generated.code")
    monkeypatch.setattr(generated_code, "MAX_ENTRIES", 3)
    writer = CodeCache(path)
    for i in range(3):
        writer.compile(f"v = {i}", "<v>", "exec", dont_inherit=True)
    writer.save()
    reader = CodeCache(path)
    reader.compile("v = 1", "<v>", "exec", dont_inherit=True)  # a hit
    reader.compile("w = 9", "<w>", "exec", dont_inherit=True)  # new: the file would hold 4
    reader.save()
    assert sorted(k[0] for k in CodeCache(path)._entries()) == ["v = 1", "w = 9"]
    assert MAX_ENTRIES > 1000  # the module's own bound is far above the ~400 entries of all fpmcore


def test_a_second_start_compiles_no_generated_code(tmp_path):
    """The classes of the host and the profile, imported twice in fresh interpreters: the second compiles nothing.

    Counted from the first line, so attrs' own classes (made while attrs is imported) count too.
    """
    script = (
        "import builtins\n"
        "calls, real = [], builtins.compile\n"
        "def counting(source, filename, *a, **k):\n"
        "    if 'generated' in filename: calls.append(filename)\n"
        "    return real(source, filename, *a, **k)\n"
        "builtins.compile = counting\n"
        "import fpmcore.host.hooktypes, fpmcore.documents.profile as p\n"
        "p.parse_profile\n"
        "print(len(calls))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(tmp_path / "pycache")
    counts = [
        int(subprocess.run([sys.executable, "-c", script], env=env, check=True, capture_output=True, text=True).stdout)
        for _ in range(2)
    ]
    assert counts[0] > 20 and counts[1] == 0, counts
    assert list((tmp_path / "pycache").rglob("generated_code.*.code"))
