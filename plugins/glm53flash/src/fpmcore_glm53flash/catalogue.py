"""The rule ids only the GLM-5.3-Flash plugin raises, for ``fpm explain`` (``fpm_rule_catalogue``)."""

from __future__ import annotations

from fpmcore.plugin_api import RuleEntry

#: The planner's refusals (G-8, G-12) and the producer contract's own artifact checks (A-26, A-27, A-36).
ENTRIES: tuple[RuleEntry, ...] = (
    RuleEntry(
        "G-8",
        "The GLM-5.3-Flash planner's align-mode rule does not model the launch's scheduler block size.",
        "Points planned with a block rule the engine does not follow.",
        "fpm: deployments[0]: glm-5.3-flash collection does not model this launch in its align-mode rule: "
        "scheduler_block_size=528 [G-8]",
        "Import a profile whose scheduler block size equals the attention block size.",
    ),
    RuleEntry(
        "G-12",
        "The GLM-5.3-Flash planner refuses the deployments' settings (checkpoints, token budget, hash block, "
        "revision).",
        "A collection plan the model's producer can measure exactly.",
        "fpm: glm-5.3-flash collection requires hash_block_size_tokens to be a multiple of 4: found 6 [G-12]",
        "Import a profile with the settings the message asks for (a multiple of 4, one checkpoint alignment, "
        "a pinned revision).",
    ),
    RuleEntry(
        "A-26",
        "The ranks of a GLM-5.3-Flash result disagree on serving_config.mamba_prefill_checkpoint.",
        "Every rank measured with one Mamba checkpoint setting.",
        'fpm: native ranks disagree on serving_config.mamba_prefill_checkpoint: rank 0={"blocks":1}, '
        'rank 1={"blocks":0}: run/a1/rank1.json [A-26]',
        "Collect again with one configuration on every rank.",
    ),
    RuleEntry(
        "A-27",
        "A GLM-5.3-Flash result's mamba_prefill_checkpoint differs from the frozen plan.",
        "The run measured the checkpoint setting the plan was made for.",
        'fpm: serving_config.mamba_prefill_checkpoint differs from the frozen plan: expected {"blocks":1}, '
        'found {"blocks":0}: run/a1/rank0.json [A-27]',
        "Collect with the plan's checkpoint setting, or plan again from the profile the engine runs.",
    ),
    RuleEntry(
        "A-36",
        "A GLM-5.3-Flash raw sample lacks its timing or graph evidence.",
        "Every sample shows when it ran and that it ran in the graph mode the contract requires.",
        'fpm: benchmark_sample.cudagraph.status of raw sample 3 expected observed, found "none" at results[4]: '
        "run/a1/rank0.json [A-36]",
        "Collect again with the contract's producer, in graph mode.",
    ),
)
