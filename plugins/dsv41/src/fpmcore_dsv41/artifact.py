"""The DeepSeek V4.1 producer contract ``dsv41_eager`` (05 §6.3, §6.4).

A V4.1 cell (Engram residency ``hbm_tp_sharded``) is read with the general
rules of :mod:`fpmcore.validate` — A-15 … A-17 unchanged (execution mode
``eager``; a ``measurement_protocol.producer`` of another contract is refused)
— plus:

* ``§6.4`` input provenance: ``input_provenance`` with ``source``
  ``tokenizer_text``, 64-hex ``text_sha256``, ``token_ids_sha256`` and
  ``corpus_sha256``, a non-empty ``tokenizer_revision``, ``num_tokens ≥ 2`` and
  ``1 ≤ num_unique_tokens ≤ num_tokens``; and the ``kvwarm`` stamp
  ``{"method": "kvwarm_real_kv"}``.  Chapter 05 only summarizes these checks;
  the field names are fpmcore's reading of that summary.
* A-37: cached prefill and decode rows are published ``real_kv`` (05 §7.4),
  the host's rule.
"""

from __future__ import annotations

import re
from typing import Any

from fpmcore.plugin_api import KV_SEED_REGIME, CellView, ContractRules, Diagnostic, checks, get, is_int, js, plain
from fpmcore_dsv41 import CONTRACT

_HEX64 = re.compile(r"[0-9a-f]{64}\Z")
KVWARM = {"method": "kvwarm_real_kv"}


def input_provenance_problem(ip: Any) -> str | None:
    """What is wrong with an ``input_provenance`` block (05 §6.4), or ``None``."""
    if not isinstance(ip, dict):
        return f"input_provenance expected an object, found {js(ip)}"
    if get(ip, "source") != "tokenizer_text":
        return f"input_provenance.source expected tokenizer_text, found {plain(get(ip, 'source'))}"
    for key in ("text_sha256", "token_ids_sha256", "corpus_sha256"):
        v = get(ip, key)
        if not (isinstance(v, str) and _HEX64.match(v)):
            return f"input_provenance.{key} expected a 64-hex digest, found {plain(v)}"
    rev = get(ip, "tokenizer_revision")
    if not (isinstance(rev, str) and rev):
        return f"input_provenance.tokenizer_revision expected a non-empty string, found {plain(rev)}"
    n, u = get(ip, "num_tokens"), get(ip, "num_unique_tokens")
    if not (is_int(n) and n >= 2):
        return f"input_provenance.num_tokens expected an integer ≥ 2, found {plain(n)}"
    if not (is_int(u) and 1 <= u <= n):
        return f"input_provenance.num_unique_tokens expected an integer in 1..{n}, found {plain(u)}"
    return None


@checks("§6.4")
def input_provenance(view: CellView) -> Diagnostic | None:
    """05 §6.4: tokenizer-text input provenance and the ``kvwarm_real_kv`` stamp on every rank."""
    for r in view.ranks:
        problem = input_provenance_problem(get(r.doc, "input_provenance"))
        if problem is None and get(r.doc, "kvwarm") != KVWARM:
            problem = f"kvwarm expected {js(KVWARM)}, found {js(get(r.doc, 'kvwarm'))}"
        if problem is not None:
            return Diagnostic(
                "§6.4", f"native deepseek-v4.1 result has invalid input provenance: {problem}: {r.path}", r.path
            )
    return None


RULES = ContractRules(
    name=CONTRACT.name,
    artifact=(("§6.4", input_provenance),),
    rows=(KV_SEED_REGIME,),
)
