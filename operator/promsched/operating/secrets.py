"""Secret values a policy names (Prometheus tokens, passwords, CAs), read through a short-lived cache.

The metrics layer asks for a token before every query; the cache keeps that to one API read per Secret
per `ttl`, and a rotated Secret takes effect within it.
"""

from __future__ import annotations

import base64
import time
from dataclasses import dataclass, field

from promsched.kube import requests
from promsched.kube.sending import ApiError, SupportsSend


@dataclass
class SecretCache:
    sender: SupportsSend
    ttl: float = 30.0
    _entries: dict[tuple[str, str], tuple[float, dict[str, str]]] = field(default_factory=dict)

    async def read(self, namespace: str, name: str, key: str) -> str:
        cached = self._entries.get((namespace, name))
        if cached is None or time.monotonic() - cached[0] > self.ttl:
            try:
                secret = await self.sender.send(requests.get_secret(namespace, name))
            except ApiError as error:
                raise ValueError(
                    f"Secret {namespace}/{name} cannot be read: {error.status} {error.message}"
                ) from None
            data = {k: base64.b64decode(v).decode() for k, v in (secret.get("data") or {}).items()}
            cached = (time.monotonic(), data)
            self._entries[(namespace, name)] = cached
        value = cached[1].get(key)
        if value is None:
            raise ValueError(f"Secret {namespace}/{name} has no key {key!r}")
        return value
