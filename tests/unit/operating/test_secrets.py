"""The Secret cache: values decoded, one read per Secret per ttl, errors that name the Secret and key."""

from __future__ import annotations

import base64
from types import SimpleNamespace
from typing import Any

import pytest

from promsched.kube import requests
from promsched.operating import secrets
from promsched.operating.secrets import SecretCache
from support.clocks import Clock
from support.fake_apis import FakeSender

PROM = requests.get_secret("monitoring", "prom").path
OTHER = requests.get_secret("monitoring", "other").path


def secret(**values: str) -> dict[str, Any]:
    return {"data": {key: base64.b64encode(value.encode()).decode() for key, value in values.items()}}


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    # SecretCache reads time.monotonic itself (it takes no clock), so the module's `time` is replaced.
    clock = Clock(1000.0)
    monkeypatch.setattr(secrets, "time", SimpleNamespace(monotonic=clock))
    return clock


async def test_a_key_is_read_and_decoded() -> None:
    cache = SecretCache(FakeSender({PROM: secret(token="s3cret\n")}, strict=True))
    assert await cache.read("monitoring", "prom", "token") == "s3cret\n"


async def test_the_keys_of_one_secret_take_one_read_within_the_ttl(clock: Clock) -> None:
    sender = FakeSender({PROM: secret(username="user", password="pass")}, strict=True)
    cache = SecretCache(sender, ttl=30.0)
    for _ in range(2):
        assert await cache.read("monitoring", "prom", "username") == "user"
        assert await cache.read("monitoring", "prom", "password") == "pass"
        clock.advance(15.0)
    assert sender.paths("GET") == [PROM]


async def test_a_rotated_secret_takes_effect_once_the_ttl_has_passed(clock: Clock) -> None:
    sender = FakeSender({PROM: secret(token="old")}, strict=True)
    cache = SecretCache(sender, ttl=30.0)
    assert await cache.read("monitoring", "prom", "token") == "old"
    sender.answers[PROM] = secret(token="new")
    clock.advance(30.0)
    assert await cache.read("monitoring", "prom", "token") == "old"
    clock.advance(0.5)
    assert await cache.read("monitoring", "prom", "token") == "new"
    assert sender.paths("GET") == [PROM, PROM]


async def test_each_secret_is_cached_on_its_own(clock: Clock) -> None:
    sender = FakeSender({PROM: secret(token="a"), OTHER: secret(token="b")}, strict=True)
    cache = SecretCache(sender)
    for _ in range(2):
        assert await cache.read("monitoring", "prom", "token") == "a"
        assert await cache.read("monitoring", "other", "token") == "b"
    assert sender.paths("GET") == [PROM, OTHER]


@pytest.mark.parametrize(
    ("status", "message"),
    [
        (None, f"Secret monitoring/prom cannot be read: 404 {PROM} not found"),
        (403, "Secret monitoring/prom cannot be read: 403 refused"),
    ],
)
async def test_a_secret_that_cannot_be_read_is_an_error_naming_it(status: int | None, message: str) -> None:
    sender = FakeSender(strict=True)
    if status is not None:
        sender.fail[PROM] = status
    cache = SecretCache(sender)
    with pytest.raises(ValueError, match=r"^Secret monitoring/prom ") as raised:
        await cache.read("monitoring", "prom", "token")
    assert str(raised.value) == message


async def test_a_failed_read_is_not_cached(clock: Clock) -> None:
    sender = FakeSender(strict=True)
    cache = SecretCache(sender)
    with pytest.raises(ValueError, match="cannot be read"):
        await cache.read("monitoring", "prom", "token")
    sender.answers[PROM] = secret(token="s3cret")
    assert await cache.read("monitoring", "prom", "token") == "s3cret"


@pytest.mark.parametrize("stored", [secret(token="s3cret"), {}, {"data": None}])
async def test_a_missing_key_is_an_error_naming_it(stored: dict[str, Any]) -> None:
    cache = SecretCache(FakeSender({PROM: stored}, strict=True))
    with pytest.raises(ValueError, match=r"^Secret monitoring/prom ") as raised:
        await cache.read("monitoring", "prom", "password")
    assert str(raised.value) == "Secret monitoring/prom has no key 'password'"
