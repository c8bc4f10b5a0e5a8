"""Import-side normalization of vLLM 0.27.0 records (02 §3.14).

A ``vllm_027`` record already has the ``fpmcore-runtime-observation/v1``
form: the keys vLLM 0.27.0 cannot fill are present and ``null`` (or absent
where §3.14 says so), and the host's rules read them as §3.14 prescribes.
Normalization therefore only hands the import a new top-level mapping.  vLLM is never imported here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def normalize(record: Mapping[str, Any]) -> dict[str, Any]:
    """A new top-level dict holding the record's values (the rules never mutate them)."""
    return dict(record)
