"""The structurer a deployment uses (``KAIBO_STRUCTURER``): rules by default, Bedrock by choice."""

from __future__ import annotations

from kaibo_core.settings import Settings
from kaibo_core.structuring.drafts import Structurer


def configured_structurer(settings: Settings) -> Structurer:
    from kaibo_core.structuring.rules import RuleStructurer  # noqa: PLC0415 - only the one chosen is imported

    rules = RuleStructurer()
    if settings.structurer == "rules":
        return rules
    if settings.structurer == "bedrock":
        from kaibo_core.adapters import bedrock_structurer  # noqa: PLC0415

        if not settings.bedrock_model_id:
            raise ValueError("KAIBO_STRUCTURER=bedrock needs KAIBO_BEDROCK_MODEL_ID")
        client = bedrock_structurer.bedrock_runtime_client()
        return bedrock_structurer.BedrockStructurer(client, settings.bedrock_model_id, rules)
    raise ValueError(f"KAIBO_STRUCTURER must be rules or bedrock, not {settings.structurer!r}")
