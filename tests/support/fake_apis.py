"""Fake Kubernetes API servers that take the operator's `Request`s in place of its client."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from promsched.kube.requests import Request
from promsched.kube.sending import ApiError

REASONS = {404: "NotFound", 409: "Conflict", 403: "Forbidden"}


class FakeSender:
    """Records every request and answers it from `answers` (path -> body); a path without an answer
    gets `{}`, or when `strict` a 404, as the API server answers for a missing object or an uninstalled
    CRD. `fail` maps a path suffix to the status to refuse matching requests with."""

    def __init__(self, answers: Mapping[str, Any] | None = None, *, strict: bool = False) -> None:
        self.sent: list[Request] = []
        self.answers: dict[str, Any] = dict(answers or {})
        self.fail: dict[str, int] = {}
        self.strict = strict

    async def send(self, request: Request) -> Any:
        self.sent.append(request)
        for suffix, status in self.fail.items():
            if request.path.endswith(suffix):
                raise ApiError(request, status, REASONS.get(status, "InternalError"), "refused")
        return self.answer(request)

    def answer(self, request: Request) -> Any:
        if request.path in self.answers:
            return self.answers[request.path]
        if self.strict:
            raise ApiError(request, 404, "NotFound", f"{request.path} not found")
        return {}

    def paths(self, verb: str = "") -> list[str]:
        return [r.path for r in self.sent if not verb or r.method == verb]

    def bodies(self, suffix: str) -> list[Any]:
        return [r.body for r in self.sent if r.path.endswith(suffix)]


class FakeApiServer(FakeSender):
    """Keeps objects by path as the API server does: GET reads one, POST to a collection creates one
    (409 AlreadyExists if its name is taken), PUT replaces one only if the request names its current
    resourceVersion (409 Conflict otherwise), DELETE removes one; a missing object is a 404. Every write
    gets the next resourceVersion, as etcd's revision grows. `fail` works as in `FakeSender`."""

    def __init__(self) -> None:
        super().__init__()
        self.objects: dict[str, dict[str, Any]] = {}
        self.revision = 0

    def store(self, path: str, obj: Mapping[str, Any]) -> dict[str, Any]:
        """Write `obj` at `path` with the next resourceVersion, as another client would; returns a copy."""
        self.revision += 1
        stored = copy.deepcopy(dict(obj))
        stored["metadata"] = {**stored.get("metadata", {}), "resourceVersion": str(self.revision)}
        self.objects[path] = stored
        return copy.deepcopy(stored)

    def answer(self, request: Request) -> Any:
        path, current = request.path, self.objects.get(request.path)
        if request.method == "POST":
            path = f"{path}/{request.body['metadata']['name']}"
            if path in self.objects:
                raise ApiError(request, 409, "AlreadyExists", f"{path} already exists")
            return self.store(path, request.body)
        if current is None:
            raise ApiError(request, 404, "NotFound", f"{path} not found")
        if request.method == "GET":
            return copy.deepcopy(current)
        if request.method == "PUT":
            if request.body["metadata"].get("resourceVersion") != current["metadata"]["resourceVersion"]:
                raise ApiError(
                    request,
                    409,
                    "Conflict",
                    "the object has been modified; please apply your changes to the latest version",
                )
            return self.store(path, request.body)
        if request.method == "DELETE":
            return self.objects.pop(path)
        raise ApiError(request, 405, "MethodNotAllowed", f"{request.method} is not faked")
