"""Import-side normalization of vLLM 0.33.0 records (02 §3).

The ``vllm_033`` observer writes the record in exactly the form the import
rules read (hybrid evidence included), so normalization only hands the import a
new top-level mapping.  vLLM is never imported here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def normalize(record: Mapping[str, Any]) -> dict[str, Any]:
    """A new top-level dict holding the record's values (the rules never mutate them)."""
    return dict(record)
