"""02 §3.7 field encoding of live values, for the value kinds that need no vLLM object."""

from __future__ import annotations

import dataclasses
import enum
from fractions import Fraction

import pytest

from fpmcore_vllm_support.encode import cdiv, class_name, encode_value, spec_fields


class Role(str, enum.Enum):  # noqa: UP042 - the (str, Enum) shape vLLM uses, which the encoder must read
    INDEXER = "indexer"


class MultipleOf:
    """Stands for ``vllm.v1.attention.backend.MultipleOf``: recognised by its name and ``base``."""

    def __init__(self, base: int) -> None:
        self.base = base


class dtype:  # noqa: N801 - the name and module of torch's dtype class
    __module__ = "torch"

    def __str__(self) -> str:
        return "torch.bfloat16"


@dataclasses.dataclass
class Spec:
    block_size: int
    tokens_per_state: Fraction
    alignment: MultipleOf | None
    dtypes: tuple[dtype, ...]
    window: float = float("inf")


def test_every_value_kind_of_3_7():
    assert encode_value(Role.INDEXER) == "INDEXER"
    assert encode_value(Fraction(3, 2)) == "3/2"
    assert encode_value(MultipleOf(16)) == {"multiple_of": 16}
    assert encode_value(dtype()) == "torch.bfloat16"
    assert encode_value(((1, 2), (3,))) == [[1, 2], [3]]
    assert encode_value(frozenset({"b", "a"})) == ["a", "b"]
    assert encode_value({1: Fraction(1, 4)}) == {"1": "1/4"}
    assert encode_value(None) is None and encode_value(True) is True and encode_value(2176) == 2176
    assert encode_value(0.5) == 0.5


@pytest.mark.parametrize(("value", "text"), [(float("inf"), "inf"), (float("-inf"), "-inf"), (float("nan"), "nan")])
def test_non_finite_floats_are_text(value, text):
    """JSON has no non-finite number: the record writes its text (strict JSON stays writable)."""
    assert encode_value(value) == text


def test_dataclass_fields_and_class_names():
    spec = Spec(2176, Fraction(1, 16), MultipleOf(16), (dtype(),))
    assert spec_fields(spec) == {"block_size": 2176, "tokens_per_state": "1/16", "alignment": {"multiple_of": 16},
                                 "dtypes": ["torch.bfloat16"], "window": "inf"}  # fmt: skip
    assert encode_value([spec])[0]["tokens_per_state"] == "1/16"
    assert class_name(spec) == class_name(Spec) == f"{__name__}.Spec"
    assert (cdiv(1048576, 2176), cdiv(2176, 2176), cdiv(0, 16)) == (482, 1, 0)
