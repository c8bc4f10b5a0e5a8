"""The rule ids only the DeepSeek V4.1 plugin raises, for ``fpm explain`` (``fpm_rule_catalogue``)."""

from __future__ import annotations

from fpmcore.plugin_api import RuleEntry

ENTRIES: tuple[RuleEntry, ...] = (
    RuleEntry(
        "§6.4",
        "A DeepSeek V4.1 result's input provenance is invalid (tokenizer-text source, kvwarm_real_kv stamp).",
        "The measured inputs came from real tokenized text, on every rank.",
        'fpm: native deepseek-v4.1 result has invalid input provenance: source expected "tokenizer_text", '
        "found absent: run/a1/rank0.json [§6.4]",
        "Collect with the dsv41_eager producer, which records input_provenance on every rank.",
    ),
)
