"""docs/deploy.md's functions, tables and alarms are template.yaml's (``make docs`` writes them)."""

from __future__ import annotations

from kaibo_local.template import load_template
from tools.deploy_reference import BLOCKS, DEPLOY_DOC, render


def test_given_the_template_then_the_deploy_doc_lists_exactly_its_functions_tables_and_alarms() -> None:
    doc = DEPLOY_DOC.read_text(encoding="utf-8")
    for name in BLOCKS:
        assert doc.count(f"<!-- generated:{name} -->") == 1, name
    headings = [line for line in doc.splitlines() if line.startswith("#")]
    assert len(headings) == len(set(headings)), "a section appears twice"
    assert render(doc, load_template()) == doc, "docs/deploy.md differs from template.yaml: run make docs"


def test_given_a_changed_template_then_the_rendered_doc_changes() -> None:
    template = load_template()
    template["Resources"]["RememberFunction"]["Properties"]["Timeout"] = 7
    doc = DEPLOY_DOC.read_text(encoding="utf-8")
    assert "| RememberFunction | `POST /v1/remember` | 1769 (SemanticOn), else 512 | 7 |" in render(
        doc, template
    )


def test_given_a_grant_or_an_alarm_under_a_condition_then_the_doc_names_the_condition() -> None:
    rendered = render(DEPLOY_DOC.read_text(encoding="utf-8"), load_template())
    assert "- `StructurerFallbacksAlarm` (only with BedrockStructurer): " in rendered
    profile = "arn:*:bedrock:*:*:inference-profile/${BedrockModelId}"
    assert f"when `bedrock:InferenceProfileArn` = {profile} (BedrockStructurer)" in rendered
