"""`-o jsonpath=`: kubectl's templates, as scripts use them."""

from __future__ import annotations

import pytest

from promsched.operating.jsonpaths import JsonPathError, render_jsonpath

DOCUMENT = {
    "pod": "shop/web-0",
    "dryRun": True,
    "node": None,
    "ranked": [{"node": "node-1", "total": 80.5}, {"node": "node-2", "total": 61}],
    "policy": {"weights": {"cpu": 3}},
}


@pytest.mark.parametrize(
    ("template", "text"),
    [
        ("{.pod}", "shop/web-0"),
        ("{$.pod}", "shop/web-0"),
        ("{.ranked[0].node}", "node-1"),
        ("{.ranked[-1].total}", "61"),
        ("{.ranked[*].node}", "node-1 node-2"),
        ("{.ranked[*].total}", "80.5 61"),
        ("pod {.pod}{'\\n'}".replace("'", '"'), "pod shop/web-0\n"),
        ("{.dryRun} {.node}", "true null"),
        ("{.policy.weights}", '{"cpu": 3}'),
        ("{.policy.*}", '{"cpu": 3}'),
        ("no braces", "no braces"),
    ],
)
def test_a_template_prints_what_it_selects(template: str, text: str) -> None:
    assert render_jsonpath(DOCUMENT, template) == text


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ("{.missing}", "{.missing}: missing is not found"),
        ("{.ranked[2]}", "{.ranked[2]}: index 2 is out of range (the list has 2)"),
        ("{.pod", "unclosed or nested brace in jsonpath template '{.pod'"),
        ("{pod}", "cannot read {pod} in jsonpath template '{pod}'"),
    ],
)
def test_a_template_that_cannot_be_followed_says_where(template: str, message: str) -> None:
    with pytest.raises(JsonPathError) as raised:
        render_jsonpath(DOCUMENT, template)
    assert str(raised.value) == message
