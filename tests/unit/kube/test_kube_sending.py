"""Sending requests: list paging and errors that carry the API's Status."""

from __future__ import annotations

from typing import Any

from promsched.kube.requests import Request, bind_pod
from promsched.kube.sending import ApiError, list_all


class PagedApi:
    def __init__(self) -> None:
        self.sent: list[Request] = []

    async def send(self, request: Request) -> Any:
        self.sent.append(request)
        if request.params.get("continue") == "page-2":
            return {"items": [2], "metadata": {}}
        return {"items": [1], "metadata": {"continue": "page-2"}}


async def test_lists_are_read_a_page_at_a_time() -> None:
    api = PagedApi()
    assert await list_all(api, "/api/v1/nodes", {"fieldSelector": "x"}) == [1, 2]
    assert [dict(request.params) for request in api.sent] == [
        {"fieldSelector": "x", "limit": "100"},
        {"fieldSelector": "x", "limit": "100", "continue": "page-2"},
    ]


def test_errors_carry_the_api_status() -> None:
    request = bind_pod("ns", "web", "uid-1", "node-1", {})
    status = '{"kind":"Status","reason":"Conflict","message":"pod web is already assigned to node node-2"}'
    error = ApiError.from_response(request, 409, status)
    assert (error.status, error.reason) == (409, "Conflict")
    assert str(error) == (
        "POST /api/v1/namespaces/ns/pods/web/binding: 409 Conflict: "
        "pod web is already assigned to node node-2"
    )
    plain = ApiError.from_response(request, 502, "<html>bad gateway</html>")
    assert (plain.reason, plain.message) == ("", "<html>bad gateway</html>")


def test_a_binding_names_the_uid_it_was_decided_for() -> None:
    request = bind_pod("ns", "web", "uid-1", "node-1", {"promsched.io/decision": "{}"})
    assert request.body["metadata"]["uid"] == "uid-1"
    assert request.body["metadata"]["annotations"] == {"promsched.io/decision": "{}"}
    assert request.body["target"] == {"apiVersion": "v1", "kind": "Node", "name": "node-1"}
