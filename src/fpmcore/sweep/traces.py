"""Generated traces: Poisson arrivals at given rates with length distributions.

A grid's ``traces`` list may hold, besides trace files, generator objects::

    {"generate": "poisson", "rate": [1, 2, 4], "requests": 200, "seed": 7,
     "prompt_len": {"dist": "lognormal", "median": 4000, "sigma": 0.6, "min": 16, "max": 60000},
     "output_len": {"dist": "uniform", "min": 64, "max": 512}}

``rate`` (requests per second, a number or a list: one trace per rate),
``requests`` (count), ``prompt_len`` and ``output_len`` are required; ``seed``
defaults to 0 and ``name`` to ``poisson``.  A length is an integer (every
request the same) or a distribution:

``{"dist": "uniform", "min": a, "max": b}``
    an integer drawn uniformly from ``a … b`` (both included);
``{"dist": "lognormal", "median": m, "sigma": s, "min": a, "max": b}``
    ``round(m · exp(s · N(0, 1)))`` clamped to ``[a, b]`` (``min`` defaults
    to 1, ``max`` to no bound);
``{"dist": "choice", "values": [v, …]}``
    one of the values, each equally likely.

Sizes are bounded before anything is generated: ``requests`` by
:data:`MAX_REQUESTS` per trace and :data:`MAX_GENERATED_REQUESTS` for all
the generated traces of a grid, every length and ``median`` by
:data:`MAX_LENGTH` (the replay's bound on counts), ``sigma`` by
:data:`MAX_SIGMA` (so ``exp`` stays finite), and a lognormal draw above
:data:`MAX_LENGTH` is clamped to it when no ``max`` is given.

The generator is Python's ``random.Random(seed)``: for each request in order
it draws the gap to the previous arrival (``expovariate(rate)``, the first
request arrives after one gap), then the prompt length, then the output
length.  Arrival times are rounded to microseconds.  The same object gives
the same trace on every machine and in every worker, and its digest (the
trace's JSONL bytes) keys the results like a file's.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Mapping
from typing import Any

from fpmcore.documents.errors import FpmError

RULE = "sweep"
#: The keys of a generator object, in the order the module docstring lists them.
GENERATOR_KEYS = ("generate", "rate", "requests", "seed", "name", "prompt_len", "output_len")
#: The keys a generator object must give besides ``generate``.
GENERATOR_REQUIRED = ("rate", "requests", "prompt_len", "output_len")
#: The length distributions and the keys each takes.
DISTRIBUTIONS: dict[str, tuple[str, ...]] = {
    "uniform": ("dist", "min", "max"),
    "lognormal": ("dist", "median", "sigma", "min", "max"),
    "choice": ("dist", "values"),
}
#: Most requests of one generated trace (a trace file holds more: read, not generated in memory per rate).
MAX_REQUESTS = 1_000_000
#: Most requests of all the generated traces of one grid together.
MAX_GENERATED_REQUESTS = 10_000_000
#: Largest length, ``min``, ``max``, ``median`` or choice value: the replay's bound on counts (R-32).
MAX_LENGTH = 2**40
#: Largest lognormal ``sigma``: ``exp(sigma · N(0, 1))`` stays a finite double for every draw.
MAX_SIGMA = 10


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _num(v: Any) -> bool:
    """A finite number: an integer beyond a double (``10**400``) is not one, as it has no float to compute with."""
    from fpmcore.documents.jsonio import is_finite_number

    return is_finite_number(v)


def _bad(msg: str, where: str) -> FpmError:
    return FpmError(RULE, msg, where)


def check_length(spec: Any, field: str, where: str) -> Any:
    """A length distribution, checked (see the module docstring)."""
    if _int(spec):
        if not 1 <= spec <= MAX_LENGTH:
            raise _bad(f"{field} must be an integer from 1 to 2**40 ({MAX_LENGTH}), found {spec}", where)
        return spec
    if not isinstance(spec, Mapping):
        raise _bad(f"{field} must be an integer or a distribution object, found {json.dumps(spec)}", where)
    dist = spec.get("dist")
    allowed = DISTRIBUTIONS
    if not isinstance(dist, str) or dist not in allowed:  # a list is no name (and no key of a dict)
        raise _bad(f"{field}: dist must be uniform, lognormal or choice, found {json.dumps(dist)}", where)
    unknown = sorted(set(spec) - set(allowed[dist]))
    if unknown:
        raise _bad(f"{field}: unknown field {unknown[0]} of a {dist} distribution", where)
    if dist == "choice":
        values = spec.get("values")
        if not isinstance(values, list) or not values or not all(_int(v) and 1 <= v <= MAX_LENGTH for v in values):
            raise _bad(
                f"{field}: values must be a non-empty list of integers from 1 to 2**40, found {json.dumps(values)}",
                where,
            )
        return dict(spec)
    lo, hi = spec.get("min", 1 if dist == "lognormal" else None), spec.get("max")
    if dist == "uniform" and (lo is None or hi is None):
        raise _bad(f"{field}: a uniform distribution needs min and max", where)
    for name, v in (("min", lo), ("max", hi)):
        if v is not None and (not _int(v) or not 1 <= v <= MAX_LENGTH):
            raise _bad(
                f"{field}: {name} must be an integer from 1 to 2**40 ({MAX_LENGTH}), found {json.dumps(v)}", where
            )
    if lo is not None and hi is not None and lo > hi:
        raise _bad(f"{field}: min {lo} exceeds max {hi}", where)
    if dist == "lognormal":
        median: Any = spec.get("median")
        sigma: Any = spec.get("sigma")
        if not _num(median) or not 0 < median <= MAX_LENGTH:
            raise _bad(f"{field}: median must be a number > 0 and <= 2**40, found {json.dumps(median)}", where)
        if not _num(sigma) or not 0 <= sigma <= MAX_SIGMA:
            raise _bad(f"{field}: sigma must be a number from 0 to {MAX_SIGMA}, found {json.dumps(sigma)}", where)
    return dict(spec)


def _draw(rng: random.Random, spec: Any) -> int:
    if isinstance(spec, int):
        return spec
    dist = spec["dist"]
    if dist == "uniform":
        return rng.randint(spec["min"], spec["max"])
    if dist == "choice":
        return int(spec["values"][rng.randrange(len(spec["values"]))])
    value = round(spec["median"] * math.exp(spec["sigma"] * rng.gauss(0.0, 1.0)))
    value = max(value, spec.get("min", 1))
    value = min(value, MAX_LENGTH if spec.get("max") is None else spec["max"])
    return int(value)


def check_generator(spec: Mapping[str, Any], where: str) -> list[dict[str, Any]]:
    """A generator object, checked and expanded: one spec per rate."""
    if spec.get("generate") != "poisson":
        raise _bad(f'a generated trace needs "generate": "poisson", found {json.dumps(spec.get("generate"))}', where)
    unknown = sorted(set(spec) - set(GENERATOR_KEYS))
    if unknown:
        raise _bad(f"generated trace: unknown field {unknown[0]}", where)
    for key in GENERATOR_REQUIRED:
        if key not in spec:
            raise _bad(f"generated trace: missing field {key}", where)
    rates = spec["rate"] if isinstance(spec["rate"], list) else [spec["rate"]]
    if not rates or not all(_num(r) and r > 0 for r in rates):
        raise _bad(
            f"generated trace: rate must be a positive number or a list of them, found {json.dumps(spec['rate'])}",
            where,
        )
    n = spec["requests"]
    if not _int(n) or not 1 <= n <= MAX_REQUESTS:
        raise _bad(
            f"generated trace: requests must be an integer from 1 to {MAX_REQUESTS:,} (the limit of a generated "
            f"trace; a longer trace is a file), found {json.dumps(n)}",
            where,
        )
    seed = spec.get("seed", 0)
    if not _int(seed):
        raise _bad(f"generated trace: seed must be an integer, found {json.dumps(seed)}", where)
    name = spec.get("name", "poisson")
    if not isinstance(name, str) or not name:
        raise _bad(f"generated trace: name must be a non-empty string, found {json.dumps(name)}", where)
    prompt = check_length(spec["prompt_len"], "prompt_len", where)
    output = check_length(spec["output_len"], "output_len", where)
    return [
        {"name": name, "rate": r, "requests": n, "seed": seed, "prompt_len": prompt, "output_len": output}
        for r in rates
    ]


def label(spec: Mapping[str, Any]) -> str:
    """How rows name a generated trace: ``poisson(rate=2,requests=200,seed=7)``."""
    return f"{spec['name']}(rate={spec['rate']:g},requests={spec['requests']},seed={spec['seed']})"


def generate_lines(spec: Mapping[str, Any]) -> list[str]:
    """The JSONL lines (R-32) of one expanded generator spec."""
    rng = random.Random(spec["seed"])
    rate = float(spec["rate"])
    t = 0.0
    lines = []
    for i in range(spec["requests"]):
        t += rng.expovariate(rate)
        prompt = _draw(rng, spec["prompt_len"])
        output = _draw(rng, spec["output_len"])
        line = {"request_id": f"r{i:06d}", "arrival_time": round(t, 6), "prompt_len": prompt, "output_len": output}
        lines.append(json.dumps(line))
    return lines


def generator_json_schema() -> dict[str, Any]:
    """JSON Schema of a generator object (a grid's ``traces`` entry), from this module's declarations."""
    count = {"type": "integer", "minimum": 1, "maximum": MAX_LENGTH}
    kinds: dict[str, dict[str, Any]] = {
        "min": count, "max": count, "median": {"type": "number", "exclusiveMinimum": 0, "maximum": MAX_LENGTH},
        "sigma": {"type": "number", "minimum": 0, "maximum": MAX_SIGMA}, "values": {"type": "array", "items": count, "minItems": 1},
    }  # fmt: skip
    needs = {"uniform": ["min", "max"], "lognormal": ["median", "sigma"], "choice": ["values"]}
    dists = [
        {"type": "object", "additionalProperties": False, "required": ["dist", *needs[name]],
         "properties": {k: {"const": name} if k == "dist" else kinds[k] for k in keys}}
        for name, keys in DISTRIBUTIONS.items()
    ]  # fmt: skip
    length = {"oneOf": [count, *dists]}
    rate = {"type": "number", "exclusiveMinimum": 0}
    kinds.update(
        generate={"const": "poisson"}, rate={"anyOf": [rate, {"type": "array", "items": rate, "minItems": 1}]},
        requests={"type": "integer", "minimum": 1, "maximum": MAX_REQUESTS}, seed={"type": "integer"}, name={"type": "string", "minLength": 1},
        prompt_len=length, output_len=length,
    )  # fmt: skip
    return {
        "type": "object",
        "description": "Poisson arrivals at each rate, with length distributions",
        "properties": {k: kinds[k] for k in GENERATOR_KEYS},
        "required": ["generate", *GENERATOR_REQUIRED],
        "additionalProperties": False,
    }


__all__ = ["check_generator", "check_length", "generate_lines", "generator_json_schema", "label"]
