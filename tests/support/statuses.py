"""Reading filter results in tests."""

from __future__ import annotations

from promsched.scheduling.framework import Status


def reason_of(status: Status | None) -> str | None:
    """The reason a filter gave, or None when the node passed."""
    return None if status is None else status.reason
