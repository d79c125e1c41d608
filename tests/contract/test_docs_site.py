"""What the API serves without a key (#17 item 2): built from the code and docs/ by
tools/build_docs_site.py into functions/docs/site/; rebuilt here and compared byte for byte, so the
served docs never drift (run ``make docs`` after changing a route, a model or a doc)."""

from __future__ import annotations

import base64
import io
import json
import zipfile
from typing import Any

import pytest

from functions.docs.app import lambda_handler
from kaibo_local.apigw_events import rest_proxy_event
from kaibo_local.template import load_template, routes
from tests.integration.api import FakeLambdaContext
from tools import build_docs_site

BUILT = build_docs_site.build()


@pytest.mark.parametrize("name", sorted(BUILT))
def test_given_the_code_and_docs_then_the_committed_site_is_exactly_what_they_build(name: str) -> None:
    committed = (build_docs_site.SITE / name).read_bytes()
    assert committed == BUILT[name], f"functions/docs/site/{name} is stale: run `make docs`"


def test_given_the_openapi_document_then_it_lists_every_route_of_the_template_with_its_schemas() -> None:
    document = json.loads(BUILT["openapi.json"])
    served = {(route.method.lower(), route.path) for route in routes(load_template())}
    documented = {(method, path) for path, operations in document["paths"].items() for method in operations}
    assert documented == served
    schemas = document["components"]["schemas"]
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            assert operation.get("summary"), (method, path)
            assert {"400", "401", "403", "404", "422"} <= set(operation["responses"]) or path.startswith(
                ("/docs/", "/openapi")
            ), (method, path)
            body = operation.get("requestBody", {}).get("content", {}).get("application/json", {})
            reference = body.get("schema", {}).get("$ref")
            if reference:
                assert reference.rsplit("/", 1)[-1] in schemas
    assert {"ForgetRequest", "ForgetResponse", "RecallRequest", "RememberRequest", "ErrorResponse"} <= set(
        schemas
    )
    public = {
        path
        for path, ops in document["paths"].items()
        if all(op.get("security") == [] for op in ops.values())
    }
    assert public == set(build_docs_site.PUBLIC_PATHS)


def test_given_the_llms_txt_then_it_follows_the_convention_and_links_every_doc() -> None:
    text = BUILT["llms.txt"].decode()
    lines = text.splitlines()
    assert lines[0] == "# Kaibo"
    assert lines[2].startswith("> ")
    for path in build_docs_site.markdown_files():
        assert f"]({path.relative_to(build_docs_site.ROOT).as_posix()})" in text
    full = BUILT["llms-full.txt"].decode()
    assert all(path.read_text(encoding="utf-8").strip() in full for path in build_docs_site.markdown_files())


def test_given_the_zip_then_it_is_valid_and_holds_every_doc() -> None:
    with zipfile.ZipFile(io.BytesIO(BUILT["docs.zip"])) as archive:
        assert archive.testzip() is None
        names = set(archive.namelist())
        for path in build_docs_site.markdown_files():
            name = f"kaibo-docs/{path.relative_to(build_docs_site.ROOT).as_posix()}"
            assert name in names
            assert archive.read(name) == path.read_bytes()


def served(path: str) -> dict[str, Any]:
    """The docs function's answer to a GET of ``path`` with no key (no authorizer context)."""
    result: dict[str, Any] = lambda_handler(
        rest_proxy_event("GET", path, query=[], headers=[], body=None),
        FakeLambdaContext(),  # type: ignore[arg-type]
    )
    return result


@pytest.mark.parametrize(
    ("path", "content_type"),
    [
        ("/openapi.json", "application/json"),
        ("/docs/llms.txt", "text/plain; charset=utf-8"),
        ("/docs/llms-full.txt", "text/plain; charset=utf-8"),
    ],
)
def test_given_a_docs_route_without_a_key_then_the_function_serves_the_built_file(
    path: str, content_type: str
) -> None:
    result = served(path)
    headers = {
        **{k: v[-1] for k, v in (result.get("multiValueHeaders") or {}).items()},
        **(result.get("headers") or {}),
    }
    assert result["statusCode"] == 200
    assert headers["Content-Type"] == content_type
    assert result["body"].encode() == BUILT[path.rsplit("/", 1)[-1]]


def test_given_the_zip_route_then_it_answers_binary_as_api_gateway_needs_it() -> None:
    result = served("/docs/docs.zip")
    assert result["statusCode"] == 200
    assert result["headers"]["Content-Type"] == "application/zip"
    assert result["isBase64Encoded"] is True
    assert base64.b64decode(result["body"]) == BUILT["docs.zip"]
