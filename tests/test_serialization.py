"""Strict JSON, the converter, the file and canonical forms (01 §1.2, §9; P-95)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import cattrs
import jsonschema
import pytest

from fpmcore.documents import jsonio
from fpmcore.documents.errors import FpmError
from fpmcore.documents.profile import (
    FpmCacheGroup,
    FpmResourceProfile,
    dumps_profile,
    from_data,
    load_profile,
    parse_profile,
    profile_digest,
    profile_json_schema,
    to_data,
)
from fpmcore.documents.schema import converter

ROOT = Path(__file__).resolve().parents[1]
GLM = ROOT / "examples" / "profiles" / "glm53flash-tp4.fpm-profile.json"

P95_VECTOR = """{
  "runtime_memory": {
    "kv_cache_bytes": 600,
    "gpu_memory_utilization": 0.8,
    "max_model_len": 4096,
    "provenance": "test"
  },
  "cache_layout": "grouped",
  "cache_groups": [
    {
      "name": "attention",
      "kind": "attention",
      "num_layers": 2,
      "block_size_tokens": 16,
      "page_size_bytes": 160,
      "sliding_window": 32
    }
  ],
  "max_num_tokens": 128,
  "max_batch_size": 8,
  "provenance": "test"
}
"""


def test_p95_resources_vector_round_trips_byte_identically():
    obj = from_data(json.loads(P95_VECTOR), FpmResourceProfile)
    assert jsonio.file_form_bytes(to_data(obj)) == P95_VECTOR.encode()


def test_glm_profile_round_trips_and_digests():
    raw = GLM.read_bytes()
    assert len(raw) == 3984
    assert hashlib.sha256(raw).hexdigest() == "d72f7267c9dea2b1cfec95afa9403a8b6ba8975bebce34b8ef381b0681169378"
    profile = load_profile(GLM)
    assert dumps_profile(profile) == raw
    canonical = jsonio.canonical_bytes(to_data(profile))
    assert len(canonical) == 2798
    assert profile_digest(profile) == "ee1b2e6fcc941447a19229af9200477cc380af1128db99166037d1ded96e3a25"


def test_canonical_vector():
    value = json.loads('{"b":1,"a":[0.9,null,true],"é":"x","n":1.0}')
    assert jsonio.canonical_bytes(value) == '{"a":[0.9,null,true],"b":1,"n":1.0,"é":"x"}'.encode()
    assert jsonio.digest(value) == "8dc80123c5924fa5c41ac3151ba02bf6a2bd453460008354e07d6b8f2fd2e32b"


def test_absent_optionals_are_omitted_and_window_always_written():
    g = FpmCacheGroup(name="a", kind="attention", num_layers=1, block_size_tokens=16, page_size_bytes=1)
    assert to_data(g) == {"name": "a", "kind": "attention", "num_layers": 1, "block_size_tokens": 16,
                          "page_size_bytes": 1, "sliding_window": None}  # fmt: skip
    assert list(to_data(g)) == ["name", "kind", "num_layers", "block_size_tokens", "page_size_bytes", "sliding_window"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (b'{"a": 1, "a": 2}', "duplicate key 'a' at a, line 1 column 10"),
        (b'{"a": NaN}', "NaN is not allowed at a, line 1 column 7"),
        (b'{"a": Infinity}', "Infinity is not allowed at a, line 1 column 7"),
        (b'{"a": -Infinity}', "-Infinity is not allowed at a, line 1 column 7"),
        (b'\xef\xbb\xbf{"a": 1}', "a byte-order mark is not allowed"),
        (b'{"a": "\xff"}', "not UTF-8 at byte 7 (line 1 column 8)"),
        (b'{"a": 1', "invalid JSON: Expecting ',' delimiter at line 1 column 8"),
        # fpmcore issue 13 §6, §14: every refusal names the value and where it sits
        (b'{"b": {"c": [0.5, 1e999]}}', "number 1e999 is out of range of a double at b.c[1], line 1 column 19"),
        (b'{"s": "\\ud800"}', "lone surrogate \\ud800 in a string at s, line 1 column 7"),
        (b'{"s": "\\udc00\\ud83d"}', "lone surrogate \\udc00 in a string at s, line 1 column 7"),
        (b'{"k": ' + b"9" * 4301 + b"}", "integer of 4301 digits exceeds the 4300-digit limit at k, line 1 column 7"),
        (b"[" * 257 + b"]" * 257, "nesting deeper than 256 levels at line 1 column 257"),
        (b"[" * 5000 + b"]" * 5000, "nesting deeper than 256 levels at line 1 column 257"),
        (b'{"a\\nb": 1, "a\\nb": 2}', "duplicate key 'a\\nb' at a\\nb, line 1 column 13"),
    ],
)
def test_strict_json_refusals(text, message):
    with pytest.raises(FpmError) as info:
        jsonio.loads(text, where="p.json")
    assert (info.value.rule, info.value.message, info.value.where) == ("JSON", message, "p.json")


def test_duplicate_key_inside_a_profile_names_the_file():
    raw = GLM.read_bytes().replace(b'"num_experts": 288,', b'"num_experts": 288, "num_experts": 0,')
    with pytest.raises(FpmError) as info:
        parse_profile(raw, where="glm.json")
    assert str(info.value) == "glm.json: duplicate key 'num_experts' at num_experts, line 7 column 23"
    raw = GLM.read_bytes().replace(
        b'"prefill_checkpoint_blocks": 1,', b'"prefill_checkpoint_blocks": 1, "prefill_checkpoint_blocks": 1,', 1
    )
    with pytest.raises(FpmError) as info:
        parse_profile(raw, where="glm.json")
    assert str(info.value) == (
        "glm.json: duplicate key 'prefill_checkpoint_blocks' at "
        "deployments[0].resources.cache_groups[0].prefill_checkpoint_blocks, line 49 column 45"
    )


def test_converter_is_strict():
    """A model class read through the one converter meets the structural rules, with their ids and paths."""
    good = {"name": "a", "kind": "state", "num_layers": 1, "block_size_tokens": 4, "page_size_bytes": 8,
            "blocks_per_request": 1}  # fmt: skip
    assert converter.structure(good, FpmCacheGroup).blocks_per_request == 1
    for key, bad, rule in (("num_layers", True, "P-S3"), ("num_layers", "1", "P-S3"), ("num_layers", 1.0, "P-S3"),
                           ("name", 3, "P-S3"), ("num_layers", 2**32, "P-S4"), ("extra", 1, "P-S1")):  # fmt: skip
        with pytest.raises(FpmError) as info:
            converter.structure({**good, key: bad}, FpmCacheGroup)
        assert info.value.rule == rule, (key, bad)
    with pytest.raises(FpmError, match="missing required field 'num_layers'"):
        converter.structure({k: v for k, v in good.items() if k != "num_layers"}, FpmCacheGroup)
    # a float field takes an integer and keeps it a float (01 §1.2)
    rm = {"kv_cache_bytes": 1, "gpu_memory_utilization": 1, "max_model_len": 1, "provenance": "p",
          "enable_prefix_caching": True}  # fmt: skip
    from fpmcore.documents.profile import FpmRuntimeMemory

    out = converter.structure(rm, FpmRuntimeMemory)
    assert isinstance(out.gpu_memory_utilization, float)
    with pytest.raises(FpmError, match="enable_prefix_caching must be a boolean"):
        converter.structure({**rm, "enable_prefix_caching": "false"}, FpmRuntimeMemory)


def _cattrs_generated_converter() -> cattrs.Converter:
    """A cattrs converter with the strict scalar hooks alone, which generates each model class's structure function."""
    from fpmcore.documents.schema import _strict

    conv = cattrs.Converter(forbid_extra_keys=True)
    for kind, scalar in (("int", int), ("float", float), ("str", str), ("bool", bool)):
        conv.register_structure_hook(scalar, _strict(kind))
    return conv


def _same(a, b, path="") -> None:
    """``a == b``, and every value of the same type (``1.0`` is not ``1``), attrs objects walked field by field."""
    import attrs

    assert type(a) is type(b), (path, a, b)
    if attrs.has(type(a)):
        for f in attrs.fields(type(a)):
            _same(getattr(a, f.name), getattr(b, f.name), f"{path}.{f.name}")
    elif isinstance(a, tuple):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{path}[{i}]")
    else:
        assert a == b, (path, a, b)


def _variants(data):
    """``data``, then with each optional key left out, each float given as an integer and each null kept."""
    from fpmcore.documents.profile import FpmModelProfile
    from fpmcore.documents.schema import specs

    yield data

    def walk(node, cls, path):
        for name, spec in specs(cls):
            if name not in node:
                continue
            yield path, name, spec
            if spec.kind == "obj" and node[name] is not None:
                yield from walk(node[name], spec.cls, (*path, name))
            elif spec.kind == "list":
                for i, item in enumerate(node[name]):
                    yield from walk(item, spec.cls, (*path, name, i))

    def edited(path, name, value=None, drop=False):
        copy = json.loads(json.dumps(data))
        node = copy
        for step in path:
            node = node[step]
        if drop:
            del node[name]
        else:
            node[name] = value
        return copy

    for path, name, spec in list(walk(data, FpmModelProfile, ())):
        node = data
        for step in path:
            node = node[step]
        if not spec.required:
            yield edited(path, name, drop=True)
        if spec.kind == "float" and node[name] is not None:
            yield edited(path, name, int(node[name]))


def test_a_profile_is_built_as_cattrs_would_build_it():
    """The model objects built from their specs equal, type for type, those a cattrs-generated structure
    function builds, for every example profile and its variants (optional keys left out, floats given as
    integers)."""
    from fpmcore.documents.profile import FpmModelProfile
    from fpmcore.documents.schema import check_structure, structure

    generated = _cattrs_generated_converter()
    files = sorted((ROOT / "examples").rglob("*.fpm-profile.json"))
    assert len(files) >= 3
    built = 0
    for path in files:
        for data in _variants(json.loads(path.read_text())):
            check_structure(data, FpmModelProfile)
            _same(structure(data, FpmModelProfile), generated.structure(data, FpmModelProfile))
            built += 1
    assert built > 3 * len(files)


def test_converter_unstructures_in_file_form():
    profile = load_profile(GLM)
    assert converter.unstructure(profile) == json.loads(GLM.read_text())


def test_json_schema_accepts_the_example_and_refuses_structural_faults():
    schema = profile_json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    doc = json.loads(GLM.read_text())
    validator.validate(doc)
    doc["deployments"][0]["resources"]["cache_groups"][0]["passed"] = True
    with pytest.raises(jsonschema.ValidationError):
        validator.validate(doc)
    doc = json.loads(GLM.read_text())
    doc["deployments"][0]["resources"]["cache_groups"][0]["page_size_bytes"] = 2**53 + 1
    with pytest.raises(jsonschema.ValidationError):
        validator.validate(doc)


def test_machine_output_writes_an_integer_beyond_64_bits_whole():
    """A resumed run's settings or a campaign manifest may carry one (the strict reader accepts it): --json prints
    it back in the compact form of every other document."""
    assert jsonio.dumps_output({"warmups": 2**64, "n": [1, -(2**70)], "s": "ü"}) == (
        b'{"warmups":18446744073709551616,"n":[1,-1180591620717411303424],"s":"\xc3\xbc"}\n'
    )
    assert jsonio.dumps_output({"warmups": 2**63 - 1}) == b'{"warmups":9223372036854775807}\n'
