"""Which pods run on which sandbox node, kept from the API server's pods as a watch delivers them.

A pod counts from when kwok marks it Running (phase Running, bound to a sandbox node, not being
deleted) until it ends (Succeeded, Failed), starts being deleted, or is gone.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

from promsched.sandbox.node_metrics.counters import NodeCounters, container_counters
from promsched.sandbox.node_metrics.usages import (
    ANNOTATION,
    ZERO_USAGE,
    PodUsage,
    UsageError,
    container_shares,
    default_usage,
    usage_of,
)
from promsched.scheduling.objects.fields import FieldError

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RunningPod:
    node: str
    usage: PodUsage
    # What the usage was read from: an event that changes neither leaves the pod's counters alone.
    source: tuple[str | None, str]


def _source(pod: Mapping[str, Any]) -> tuple[str | None, str]:
    annotation = (pod["metadata"].get("annotations") or {}).get(ANNOTATION)
    return annotation, repr(pod.get("spec", {}).get("containers")) + repr(
        pod.get("spec", {}).get("initContainers")
    )


def _usage(pod: Mapping[str, Any], where: str) -> PodUsage:
    """The pod's usage; a bad annotation or request is logged, never fatal to the exporter."""
    try:
        return usage_of(pod)
    except UsageError as error:
        logger.warning("%s: %s; using the default share of its requests", where, error)
    except FieldError as error:
        logger.warning("%s: %s; counting no usage", where, error)
        return ZERO_USAGE
    try:
        return default_usage(pod.get("spec") or {})
    except FieldError as error:
        logger.warning("%s: %s; counting no usage", where, error)
        return ZERO_USAGE


class PodLedger:
    """The running pods, by UID, each counted on its node's counters."""

    def __init__(self, nodes: Mapping[str, NodeCounters], clock: Callable[[], float] = time.time) -> None:
        self.nodes = nodes
        self.clock = clock
        self.running: dict[str, RunningPod] = {}

    def _running_on(self, pod: Mapping[str, Any]) -> str | None:
        node = (pod.get("spec") or {}).get("nodeName")
        if (
            node in self.nodes
            and (pod.get("status") or {}).get("phase") == "Running"
            and not pod["metadata"].get("deletionTimestamp")
        ):
            return str(node)
        return None

    def observe(self, pod: Mapping[str, Any]) -> None:
        """A pod was added or changed."""
        uid = pod["metadata"]["uid"]
        node = self._running_on(pod)
        if node is None:
            self.forget(pod)
            return
        source = _source(pod)
        known = self.running.get(uid)
        if known is not None and known.node == node and known.source == source:
            return
        if known is not None and known.node != node:
            self.nodes[known.node].remove(uid, self.clock())
        metadata = pod["metadata"]
        where = f"pod {metadata.get('namespace')}/{metadata.get('name')}"
        usage = _usage(pod, where)
        try:
            shares = container_shares(pod.get("spec") or {})
        except FieldError as error:
            logger.warning("%s: %s; serving no container series", where, error)
            shares = []
        containers = container_counters(
            metadata.get("namespace", ""), metadata.get("name", ""), node, usage, shares
        )
        self.nodes[node].place(uid, usage, containers, self.clock())
        self.running[uid] = RunningPod(node, usage, source)

    def forget(self, pod: Mapping[str, Any]) -> None:
        """A pod was deleted, or no longer runs."""
        known = self.running.pop(pod["metadata"]["uid"], None)
        if known is not None:
            self.nodes[known.node].remove(pod["metadata"]["uid"], self.clock())

    def retain(self, uids: Collection[str]) -> None:
        """After a fresh list: the running pods it did not hold are gone."""
        for uid in set(self.running) - set(uids):
            known = self.running.pop(uid)
            self.nodes[known.node].remove(uid, self.clock())
