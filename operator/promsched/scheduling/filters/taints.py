"""Taints the pod does not tolerate, as kube-scheduler's TaintToleration plugin.

Only NoSchedule and NoExecute taints keep pods off; PreferNoSchedule only weighs in scoring. The reason
names the node's first untolerated taint, in kube's words: ``{key: value}`` (``{key: }`` without value).
"""

from __future__ import annotations

from typing import Final

from promsched.scheduling.nodes import NO_EXECUTE, NO_SCHEDULE, NodeInfo, NodeUsage
from promsched.scheduling.pods import PodInfo

FILTERING_EFFECTS: Final = frozenset({NO_SCHEDULE, NO_EXECUTE})


class TaintToleration:
    name = "TaintToleration"

    def filter(self, pod: PodInfo, node: NodeInfo, usage: NodeUsage) -> str | None:
        for taint in node.taints:
            if taint.effect in FILTERING_EFFECTS and not pod.tolerates(taint):
                return f"node(s) had untolerated taint {{{taint.key}: {taint.value}}}"
        return None
