"""The preemption part kube-scheduler 1.37 adds to every FailedScheduling message (its DefaultPreemption
PostFilter's status, appended as " preemption: <text>")."""

from __future__ import annotations


def preemption_note(text: str) -> str:
    return f" preemption: {text}"


def no_victims(nodes: int) -> str:
    """Every node fails for a reason evictions could lift, but holds no pod of lower priority."""
    return preemption_note(
        f"0/{nodes} nodes are available: {nodes} No preemption victims found for incoming pod."
    )


def not_helpful(nodes: int) -> str:
    """No node fails for a reason evictions could lift."""
    return preemption_note(
        f"0/{nodes} nodes are available: {nodes} Preemption is not helpful for scheduling."
    )


def found(node: str, victims: int) -> str:
    """Preemption found a node: its victims are being evicted."""
    return preemption_note(
        f"found a potential placement for pod on node {node}, preempting {victims} victims"
    )
