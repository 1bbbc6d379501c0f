"""The reflector loop on its own: resumed from the last version seen (bookmarks included), started anew
from what `expired` gives after 410 Gone, and other failures, a watch closed at once with nothing among
them, retried after pauses that double up to a cap (a scripted watcher, an injected sleep and clock)."""

from __future__ import annotations

import itertools
import json
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

import aiohttp
import pytest

from promsched.kube.reflecting import MAX_RETRY_SECONDS, SHORT_WATCH_SECONDS, WATCH_SECONDS, Reflector
from promsched.kube.requests import Request
from promsched.kube.sending import ApiError
from support.clocks import Clock
from support.watchers import Event, ScriptedWatcher, follow_until


def widget(version: int) -> Mapping[str, Any]:
    return {"kind": "Widget", "metadata": {"name": "w", "resourceVersion": str(version)}}


def bookmark(version: int) -> Event:
    return ("BOOKMARK", {"kind": "Widget", "metadata": {"resourceVersion": str(version)}})


def api_error(status: int) -> ApiError:
    return ApiError(Request("GET", "/apis/example.io/v1/widgets"), status, "Reason", "message")


class Run:
    """What a reflector did: events delivered, `expired` calls (each answered with the next of
    `answers`, or raising it when it is an exception) and pauses taken."""

    def __init__(self, *answers: str | Exception) -> None:
        self.answers = list(answers)
        self.delivered: list[tuple[str, str]] = []
        self.expired = 0
        self.sleeps: list[float] = []

    def deliver(self, event_type: str, obj: Mapping[str, Any]) -> None:
        self.delivered.append((event_type, obj["metadata"]["resourceVersion"]))

    async def on_expired(self) -> str:
        self.expired += 1
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)


async def reflect(
    watcher: ScriptedWatcher,
    run: Run,
    version: str | None,
    watches: int,
    logger: logging.Logger | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Follow from `version` until `watches` watches have been opened."""
    reflector = Reflector(
        watcher,
        "/apis/example.io/v1/widgets",
        "spec.color=blue",
        run.deliver,
        run.on_expired,
        what="widgets",
        inactivity_timeout=30.0,
        retry_seconds=2.5,
        sleep=run.sleep,
        logger=logger,
        clock=clock,
    )
    await follow_until(reflector.follow(version), watcher, watches)


async def test_an_ended_watch_resumes_from_the_last_version_seen_and_a_bookmark_moves_it_on() -> None:
    watcher = ScriptedWatcher(
        ([("ADDED", widget(11)), ("MODIFIED", widget(12))], None),
        ([bookmark(20)], None),
        ([("DELETED", widget(21))], None),
    )
    run = Run()
    await reflect(watcher, run, "10", 4)
    assert watcher.versions() == ["10", "12", "20", "21"]
    assert run.delivered == [("ADDED", "11"), ("MODIFIED", "12"), ("DELETED", "21")]  # no bookmark
    assert (run.expired, run.sleeps) == (0, [])
    request = watcher.requests[0]
    assert (request.method, request.path) == ("GET", "/apis/example.io/v1/widgets")
    assert request.params["fieldSelector"] == "spec.color=blue"
    assert request.params["timeoutSeconds"] == str(WATCH_SECONDS)
    assert watcher.timeouts == [30.0] * 4


async def test_410_gone_asks_expired_for_the_version_to_start_from_without_a_pause() -> None:
    watcher = ScriptedWatcher(([("ADDED", widget(11))], api_error(410)))
    run = Run("42")
    await reflect(watcher, run, "10", 2)
    assert watcher.versions() == ["10", "42"]
    assert run.expired == 1
    assert run.sleeps == []


async def test_with_no_version_to_start_from_expired_is_asked_first() -> None:
    watcher = ScriptedWatcher()
    run = Run("")
    await reflect(watcher, run, None, 1)
    assert run.expired == 1
    assert watcher.versions() == [None]  # "": the current state first


@pytest.mark.parametrize(
    "error",
    [
        api_error(500),
        aiohttp.ClientConnectionError("reset by peer"),
        TimeoutError(),  # silent for longer than the inactivity timeout
        json.JSONDecodeError("Unterminated string", '{"type": "ADD', 9),  # a line cut short
    ],
    ids=["api-error", "connection", "silent", "cut-line"],
)
async def test_other_failures_are_retried_from_the_same_version_after_a_pause(error: Exception) -> None:
    watcher = ScriptedWatcher(([("ADDED", widget(11))], error), ([], error))
    run = Run()
    await reflect(watcher, run, "10", 3)
    assert watcher.versions() == ["10", "11", "11"]
    assert run.sleeps == [2.5, 2.5]
    assert run.expired == 0


@pytest.mark.parametrize("error", [api_error(410), api_error(503), aiohttp.ClientConnectionError("refused")])
async def test_a_failure_of_expired_is_retried_after_a_pause(error: Exception) -> None:
    watcher = ScriptedWatcher(([], api_error(410)))
    run = Run(error, "42")
    await reflect(watcher, run, "10", 2)
    assert watcher.versions() == ["10", "42"]
    assert run.expired == 2
    assert run.sleeps == [2.5]  # between the failed list and the next one, not after the 410


async def test_messages_go_to_the_owners_logger_and_name_what_is_watched(
    caplog: pytest.LogCaptureFixture,
) -> None:
    owner = logging.getLogger("promsched.test_owner")
    watcher = ScriptedWatcher(([], api_error(410)), ([], aiohttp.ClientConnectionError("reset")))
    with caplog.at_level(logging.INFO, logger=owner.name):
        await reflect(watcher, Run(""), "10", 3, logger=owner)
    assert [(record.name, record.levelno) for record in caplog.records] == [
        (owner.name, logging.INFO),
        (owner.name, logging.WARNING),
    ]
    expired, broke = (record.getMessage() for record in caplog.records)
    assert expired.startswith("The watch of widgets expired (")
    assert broke == "The watch of widgets broke (resuming): reset"


NOTHING: tuple[list[Event], None] = ([], None)  # a watch the API server ends with no event in it


@pytest.mark.parametrize(
    "ending", [None, aiohttp.ClientConnectionError("refused")], ids=["closed-at-once", "refused"]
)
async def test_watches_that_bring_nothing_in_a_row_are_retried_after_pauses_doubling_up_to_a_cap(
    ending: Exception | None,
) -> None:
    watcher = ScriptedWatcher(*[([], ending)] * 7)
    run = Run()
    await reflect(watcher, run, "10", 8, clock=Clock(100.0))  # each watch over at once
    assert run.sleeps == [2.5, 5.0, 10.0, 20.0, MAX_RETRY_SECONDS, MAX_RETRY_SECONDS, MAX_RETRY_SECONDS]
    assert watcher.versions() == ["10"] * 8
    assert run.expired == 0


async def test_a_watch_that_worked_starts_the_pauses_over(caplog: pytest.LogCaptureFixture) -> None:
    watcher = ScriptedWatcher(
        NOTHING,
        NOTHING,
        ([bookmark(20)], None),  # a bookmark is something: resumed at once
        NOTHING,
        ([("ADDED", widget(21))], aiohttp.ClientConnectionError("reset")),
        NOTHING,
    )
    run = Run()
    with caplog.at_level(logging.WARNING):
        await reflect(watcher, run, "10", 7, clock=Clock(100.0))
    assert run.sleeps == [2.5, 5.0, 2.5, 2.5, 2.5]
    assert watcher.versions() == ["10", "10", "10", "20", "20", "21", "21"]
    assert "The watch of widgets closed at once with nothing in it (resuming in 2.5s)" in caplog.messages


async def test_a_watch_that_lasted_a_second_with_nothing_in_it_is_resumed_at_once() -> None:
    ticks = itertools.count(100.0, SHORT_WATCH_SECONDS)  # each reading of the clock a second on
    watcher = ScriptedWatcher(NOTHING, NOTHING)
    run = Run()
    await reflect(watcher, run, "10", 3, clock=lambda: next(ticks))
    assert run.sleeps == []
    assert watcher.versions() == ["10", "10", "10"]
