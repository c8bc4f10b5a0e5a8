"""A-2 [BEYOND]: every integer field of an artifact is a JSON integer (05 §8.1).

The integer fields of a rank artifact (05 §2 - §4, §7) and of its
repetition-evidence sidecar lines (05 §7.5) are declared once, as a schema
(:data:`RANK_INT_SCHEMA`, :data:`SIDECAR_INT_SCHEMA`): a dict ``key → spec``,
where a spec is :data:`INT` (an integer), :data:`NINT` (an integer or
``null``), :data:`ROWS` (a list of lists of integers), a nested schema dict,
or ``("list", spec)`` (a list whose elements follow ``spec``).  A field the
rule visits is a present key of an object; a value of another shape (an
object where a list is declared, say) is left to the rules that read it.

:class:`IntegerSchema` compiles a schema once into Python functions — one per
object that is an element of a list, with the objects nested in it inlined —
that answer "is every integer field an integer?" without interpreting the
schema per value (A-2 visits every integer of every FPM copy; the A-2 budget
is part of the < 200 ms a 577-point two-rank artifact takes).  An object they
refuse is then walked in document order for the first wrong field and its
path; the same compiled functions skip the list elements that pass.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

import orjson

from fpmcore.documents.rules_catalogue import checks
from fpmcore.host.hooktypes import Diagnostic
from fpmcore.validate.cell import CellView
from fpmcore.validate.measured_values import ABSENT, js

INT, NINT, ROWS = "int", "nint", "rows"

_COUNTS = {
    "num_prefill_requests": INT, "sum_prefill_tokens": INT, "sum_prefill_kv_tokens": INT,
    "num_decode_requests": INT, "sum_decode_kv_tokens": INT,
}  # fmt: skip
_SAMPLE = {
    "sample_index": INT,
    "forward_index": INT,
    "cudagraph": {"num_unpadded_tokens": NINT, "num_padded_tokens": NINT, "num_paddings": NINT},
}
_RAW_FPM = {
    "version": INT, "dp_rank": INT, "counter_id": INT,
    "scheduled_requests": _COUNTS, "queued_requests": _COUNTS, "benchmark_sample": _SAMPLE,
}  # fmt: skip
_MEASUREMENT = {
    "schema_version": INT,
    "dp_rank": INT,
    "prompts": {"requests": ("list", {"slot": INT, "num_tokens": INT})},
    "preparation": {"completed_points_before": INT, "warmup_records_before": NINT},
    "expected_internal_samples": INT,
    "raw_fpms": ("list", _RAW_FPM),
    "estimate": {"raw_sample_indices": ("list", INT)},
}
_FPM = dict(_RAW_FPM, benchmark_measurement=_MEASUREMENT)
_POINT = {
    "benchmark_id": INT, "batch_size": INT, "total_prefill_tokens": INT, "total_kv_read_tokens": INT,
    "rows": ROWS, "expected_capture_size": NINT, "padding_tokens": NINT,
}  # fmt: skip
_ROW = {"point": _POINT, "fpms": ("list", _FPM)}
_GROUP = {"benchmark_id": INT, "point": _POINT, "expected_dp_ranks": ("list", INT),
          "rank_results": ("list", {"dp_rank": INT, "fpms": ("list", _FPM)})}  # fmt: skip
_WARMUP_RECORD = {
    "forward_index_start": NINT, "forward_index_end": NINT, "observed_forward_count": INT,
    "completed_points_before": INT,
}  # fmt: skip
#: The integer fields of a rank artifact (05 §2 - §4, §7).
RANK_INT_SCHEMA: dict[str, Any] = {
    "schema_version": INT,
    "dp": {"rank": INT, "size": INT},
    "coverage": {"expected_points": INT, "completed_points": INT, "skipped_points": INT},
    "limits": dict.fromkeys(
        ("max_num_scheduled_tokens", "max_num_running_reqs", "max_model_len", "block_size", "num_gpu_blocks"), INT
    ),
    "producer": {"context_policy": {"measured_context": INT, "internal_positions": INT}},
    "serving_config": {"hash_block_size": INT, "block_size": INT, "mamba_prefill_checkpoint": {"alignment": NINT}},
    "measurement_protocol": {
        "schema_version": INT,
        "independent_repetitions": INT,
        "preparation": {"warmup_iterations": INT, "giant_kv_threshold": INT, "giant_kv_repeats": INT},
        "execution_evidence": {"schema_version": INT},
        "producer": {"warmup_repetitions": INT, "measured_repetitions": INT, "max_rejected_repetitions": INT},
    },
    "warmup_evidence": {"records": ("list", _WARMUP_RECORD)},
    "repetition_evidence": {"records": INT},
    "results": ("list", _ROW),
    "iteration_groups": ("list", _GROUP),
}
#: The integer fields of one repetition-evidence sidecar line (05 §7.5).
SIDECAR_INT_SCHEMA: dict[str, Any] = {
    "benchmark_id": INT,
    "dp_rank": INT,
    "repetitions": ("list", {"index": INT, "fpm_count": INT, "raw_sample_index": INT}),
}

_INTS = frozenset((int,))
_NINTS = frozenset((int, type(None)))


def _rows_ok(rows: list[Any]) -> bool:
    for r in rows:
        if type(r) is list and not _INTS.issuperset(map(type, r)):
            return False
    return True


#: Fields the producers write on some objects only, as ``<key of the parent>.<field>``: Dynamo's
#: queued counts lack ``sum_prefill_kv_tokens``, a retained FPM (in ``fpms``) has no
#: ``benchmark_sample``, warm-up and rejected repetitions have no ``raw_sample_index``.  The fast
#: checks read them with ``get`` and every other key by subscript (a speed hint: an object that
#: lacks a key is read by the tolerant check).
_USUALLY_ABSENT = frozenset(
    ("queued_requests.sum_prefill_kv_tokens", "fpms.benchmark_sample", "repetitions.raw_sample_index")
)


def _usually_absent(parent: str, key: str) -> bool:
    return f"{parent}.{key}" in _USUALLY_ABSENT


class _Compiler:
    """Writes the source of the checking functions of a schema.

    Each object that is an element of a list gets two functions:
    ``_check_<n>`` reads every key with ``get`` and type-checks every value
    before it reads into it; ``_fast_<n>`` is the same test for the usual
    form — keys read by subscript, nested objects and the elements of nested
    lists inlined — and hands an object of another form (a missing key, a
    value that is not an object: the subscript raises) to ``_check_<n>``,
    which calls the fast functions of its elements.
    """

    def __init__(self) -> None:
        self.names: dict[int, str] = {}
        self.sources: list[str] = []
        self.namespace: dict[str, Any] = {"_INTS": _INTS, "_NINTS": _NINTS, "_rows_ok": _rows_ok}

    def function(self, schema: Mapping[str, Any]) -> str:
        """The name of the (fast) function that checks an object of ``schema``."""
        n = self.names.get(id(schema))
        if n is None:
            n = self.names[id(schema)] = str(len(self.names))
            self.namespace[f"_schema_{n}"] = schema  # keeps id(schema) alive and unique
            tolerant = [f"def _check_{n}(o):"]
            self._object(schema, "o", tolerant, "    ", [0], "", fast=False)
            fast = [f"def _fast_{n}(o):", "    try:"]
            self._object(schema, "o", fast, "        ", [0], "", fast=True)
            fast += ["    except (KeyError, TypeError, AttributeError):", f"        return _check_{n}(o)"]
            self.sources += ["\n".join([*tolerant, "    return True"]), "\n".join([*fast, "    return True"])]
        return f"_fast_{n}"

    @staticmethod
    def _leaf(spec: Any, value: str) -> str | None:
        """The test of one leaf field whose value is the expression ``value``, ``None`` for a nested spec."""
        if spec == INT:
            return f"type({value}) is int"
        if spec == NINT:
            return f"type({value}) in _NINTS"
        if spec == ROWS:
            return f"(type(v := {value}) is not list or _rows_ok(v))"
        if isinstance(spec, tuple) and spec[1] == INT:
            return f"(type(v := {value}) is not list or _INTS.issuperset(map(type, v)))"
        return None

    def _object(
        self, schema: Mapping[str, Any], obj: str, out: list[str], ind: str, counter: list[int], parent: str, fast: bool
    ) -> None:
        """Append the test of the object ``obj`` (a variable name) of ``schema`` to ``out``."""
        counter[0] += 1
        g = f"g{counter[0]}"

        def by_get(key: str) -> bool:
            return not fast or _usually_absent(parent, key)

        def read(key: str, default: str = "") -> str:
            return f"{g}({key!r}{default})" if by_get(key) else f"{obj}[{key!r}]"

        if any(by_get(key) for key in schema):
            out.append(f"{ind}{g} = {obj}.get")
        tests = [t for key, spec in schema.items() if (t := self._leaf(spec, read(key, ", 0"))) is not None]
        if tests:
            out += [f"{ind}if not ({' and '.join(tests)}):", f"{ind}    return False"]
        for key, spec in schema.items():
            counter[0] += 1
            v, x = f"v{counter[0]}", f"x{counter[0]}"
            if isinstance(spec, dict) and by_get(key):
                out += [f"{ind}{v} = {read(key)}", f"{ind}if type({v}) is dict:"]
                self._object(spec, v, out, ind + "    ", counter, key, fast)
            elif isinstance(spec, dict):  # fast: a value that is not an object raises at its first subscript
                out.append(f"{ind}{v} = {read(key)}")
                self._object(spec, v, out, ind, counter, key, fast)
            elif isinstance(spec, tuple) and isinstance(spec[1], dict) and fast:  # the elements inlined
                out += [
                    f"{ind}for {x} in {read(key)}:",
                    f"{ind}    if type({x}) is not dict:",
                    f"{ind}        raise TypeError",
                ]
                self._object(spec[1], x, out, ind + "    ", counter, key, fast)
            elif isinstance(spec, tuple) and isinstance(spec[1], dict):
                out += [
                    f"{ind}{v} = {read(key)}",
                    f"{ind}if type({v}) is list:",
                    f"{ind}    for {x} in {v}:",
                    f"{ind}        if type({x}) is dict and not {self.function(spec[1])}({x}):",
                    f"{ind}            return False",
                ]

    def build(self) -> dict[int, Callable[[dict[str, Any]], bool]]:
        exec(compile("\n\n".join(self.sources), "<A-2 integer schema>", "exec"), self.namespace)  # noqa: S102
        return {sid: self.namespace[f"_fast_{n}"] for sid, n in self.names.items()}


class IntegerSchema:
    """A schema of integer fields compiled once, when an object is first checked (see the module docstring)."""

    def __init__(self, schema: Mapping[str, Any]) -> None:
        self.schema = schema

    @functools.cached_property
    def _checks(self) -> dict[int, Callable[[dict[str, Any]], bool]]:
        compiler = _Compiler()
        compiler.function(self.schema)
        return compiler.build()

    def passes(self, obj: dict[str, Any]) -> bool:
        """``True`` when no integer field of the object ``obj`` breaks A-2."""
        return self._checks[id(self.schema)](obj)

    def first_non_integer(self, obj: Any, path: str = "", *, results_first: bool = False) -> tuple[str, Any] | None:
        """The first integer field of ``obj`` (document order) that is not a JSON integer, as
        ``(field path, value)``; ``results_first`` visits the whole of ``results`` before
        ``iteration_groups`` (05 §8.1, A-2)."""
        if type(obj) is not dict or self.passes(obj):
            return None
        hit = self._locate(obj, self.schema, results_first)
        if hit is None:  # pragma: no cover - the compiled check and the walk read the same schema
            return None
        segments, value = hit
        out = path
        for seg in reversed(segments):
            out = f"{out}[{seg}]" if isinstance(seg, int) else f"{out}.{seg}" if out else seg
        return out, value

    def _locate(
        self, obj: dict[str, Any], schema: Mapping[str, Any], results_first: bool = False
    ) -> tuple[list[str | int], Any] | None:
        """The walk in document order; the path comes back as a reversed list of segments."""
        keys: list[str] = list(obj)
        if (
            results_first
            and "results" in obj
            and "iteration_groups" in obj
            and keys.index("iteration_groups") < keys.index("results")
        ):
            keys.remove("iteration_groups")
            keys.insert(keys.index("results") + 1, "iteration_groups")
        for key in keys:
            spec = schema.get(key)
            if spec is None:
                continue
            value = obj[key]
            if spec == INT:
                if type(value) is not int:
                    return [key], value
            elif spec == NINT:
                if value is not None and type(value) is not int:
                    return [key], value
            elif spec == ROWS:
                if type(value) is list:
                    for i, row in enumerate(value):
                        if type(row) is list:
                            for j, x in enumerate(row):
                                if type(x) is not int:
                                    return [j, i, key], x
            elif isinstance(spec, tuple):
                if type(value) is list:
                    inner = spec[1]
                    for i, item in enumerate(value):
                        if inner == INT:
                            if type(item) is not int:
                                return [i, key], item
                        elif type(item) is dict and not self._checks[id(inner)](item):
                            hit = self._locate(item, inner)
                            if hit is not None:
                                hit[0].extend((i, key))
                                return hit
            elif type(value) is dict:
                hit = self._locate(value, spec)
                if hit is not None:
                    hit[0].append(key)
                    return hit
        return None


RANK_INTEGERS = IntegerSchema(RANK_INT_SCHEMA)
SIDECAR_INTEGERS = IntegerSchema(SIDECAR_INT_SCHEMA)


@functools.lru_cache(maxsize=4096)
def parse_line(line: bytes) -> Any:
    """A sidecar line parsed (without its newline), :data:`ABSENT` when it is not JSON.

    Cached, so that A-2 and A-39 parse each line once; callers never mutate the result.
    """
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        return ABSENT


@checks("A-2")
def integer_fields_are_integers(view: CellView) -> Diagnostic | None:
    """A-2 [BEYOND]: every integer field is a JSON integer (not a bool, a float or a string).

    Rank by rank, the artifact's fields are visited in document order,
    ``results`` before ``iteration_groups``, then the rank's sidecar lines;
    the first wrong field is reported.
    """
    for r in view.ranks:
        hit = RANK_INTEGERS.first_non_integer(r.doc, results_first=True)
        if hit is not None:
            return Diagnostic("A-2", f"{hit[0]} must be an integer, found {js(hit[1])}: {r.path}", r.path)
        for i, line in enumerate(r.sidecar or ()):
            hit = SIDECAR_INTEGERS.first_non_integer(parse_line(line), f"lines[{i}]")
            if hit is not None:
                where = str(r.sidecar_path)
                return Diagnostic("A-2", f"{hit[0]} must be an integer, found {js(hit[1])}: {where}", where)
    return None
