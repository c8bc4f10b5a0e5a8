"""The host's entry-point reader (``fpmcore.host.entry_points``) against ``importlib.metadata``."""

from __future__ import annotations

import sys
import zipfile
from importlib import metadata
from pathlib import Path

import pytest

from fpmcore.host.entry_points import EntryPoint, entry_points, import_object, read_group
from fpmcore.host.plugins import GROUP


def _dist(root: Path, folder: str, name: str, version: str, eps: str | None, meta: str = "METADATA") -> None:
    d = root / folder
    d.mkdir(parents=True)
    (d / meta).write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\nName: not a header\n")
    if eps is not None:
        (d / "entry_points.txt").write_text(eps)


def _as_importlib(group: str, path: list[str]) -> list[tuple[str, str, str, str]]:
    dists = metadata.distributions(path=path)
    seen: set[str] = set()
    out = []
    for d in dists:
        key = d.name.replace("-", "_").replace(".", "_").lower()
        if key in seen:
            continue
        seen.add(key)
        out += [(ep.name, ep.value, d.name, d.version) for ep in d.entry_points if ep.group == group]
    return out


def test_the_installed_plugins_are_read_as_importlib_metadata_reads_them():
    ours = sorted((e.name, e.value, e.dist_name, e.dist_version) for e in read_group(GROUP) or [])
    theirs = sorted((e.name, e.value, e.dist.name, e.dist.version) for e in metadata.entry_points(group=GROUP))
    assert ours == theirs
    assert {"vllm_033", "vllm_027", "vllm_032", "glm53flash", "dsv41"} <= {e[0] for e in ours}


def test_a_folder_of_distributions_is_read_as_importlib_metadata_reads_it(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    _dist(a, "one_plugin-1.2.dist-info", "one-plugin", "1.2",
          "# comment\n[console_scripts]\nx = m:f\n\n[fpmcore.plugins]\nfirst = pkg.mod:obj.attr\n"
          "second=pkg2 [extra]\n[other]\nthird = p:q\n")  # fmt: skip
    _dist(a, "no_eps-0.1.dist-info", "no-eps", "0.1", None)
    _dist(a, "legacy.egg-info", "legacy", "3", "[fpmcore.plugins]\nold = legacy.plugin\n", meta="PKG-INFO")
    _dist(b, "One.Plugin-9.dist-info", "One.Plugin", "9", "[fpmcore.plugins]\nshadowed = x:y\n")
    path = [str(a), str(tmp_path / "missing"), str(b)]
    ours = [(e.name, e.value, e.dist_name, e.dist_version) for e in read_group(GROUP, path) or []]
    assert sorted(ours) == sorted(_as_importlib(GROUP, path))
    assert sorted(ours) == [("first", "pkg.mod:obj.attr", "one-plugin", "1.2"), ("old", "legacy.plugin", "legacy", "3"),
                            ("second", "pkg2 [extra]", "one-plugin", "1.2")]  # fmt: skip


def test_what_it_cannot_read_is_left_to_importlib_metadata(tmp_path):
    archive = tmp_path / "plugins.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("z_plugin-1.0.dist-info/METADATA", "Name: z-plugin\nVersion: 1.0\n")
    assert read_group(GROUP, [str(archive)]) is None
    nameless = tmp_path / "n"
    (nameless / "x-1.dist-info").mkdir(parents=True)
    (nameless / "x-1.dist-info" / "METADATA").write_text("Version: 1\n")
    # importlib.metadata tells it apart by its folder's name and finds no entry point in it: neither does this
    assert read_group(GROUP, [str(nameless)]) == []
    (nameless / "x-1.dist-info" / "entry_points.txt").write_text("[fpmcore.plugins]\nq = r\n")
    assert read_group(GROUP, [str(nameless)]) is None  # its entry point needs the distribution's name: not there
    broken = tmp_path / "b"
    _dist(broken, "y-1.dist-info", "y", "1", "[fpmcore.plugins\nq = r\n")
    assert read_group(GROUP, [str(broken)]) is None


def test_an_entry_point_loads_the_attribute_its_value_names():
    assert EntryPoint("p", "fpmcore.host.entry_points:EntryPoint.load", None, None).load() is EntryPoint.load
    assert EntryPoint("p", "fpmcore.host.entry_points", None, None).load().__name__ == "fpmcore.host.entry_points"  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="malformed"):
        EntryPoint("p", "not a value!", None, None).load()


def test_a_reference_names_a_module_or_an_attribute_path_of_it():
    """``import_object`` reads every "module:attribute" string of fpmcore, as an entry point's value."""
    assert import_object("fpmcore.host.entry_points:EntryPoint.load") is EntryPoint.load
    assert import_object("fpmcore.host.entry_points") is sys.modules["fpmcore.host.entry_points"]
    assert import_object("fpmcore.host.entry_points:import_object [extra]") is import_object
    with pytest.raises(ValueError, match=r"malformed reference 'fpmcore:'"):
        import_object("fpmcore:")
    with pytest.raises(AttributeError, match="no_such_name"):
        import_object("fpmcore.host.entry_points:no_such_name")
    with pytest.raises(ModuleNotFoundError):
        import_object("fpmcore.no_such_module:x")


def test_the_host_reads_the_plugins_without_importlib_metadata():
    assert [e.name for e in sorted(entry_points(GROUP), key=lambda e: e.name)] == sorted(
        e.name for e in metadata.entry_points(group=GROUP)
    )
