"""How `promsched explain` and `promsched score` show what they found: pure, data in and text out.

The human table by default (`-o wide`: with more detail); with `-o json|yaml|jsonpath=...` the same
facts as a document.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import yaml

from promsched.api.annotations import DECISION_ANNOTATION
from promsched.api.fields import Mode
from promsched.api.policies import OnMissingMetrics, SchedulingPolicy
from promsched.api.rebalances import RebalanceMode
from promsched.api.statuses import Decision, FilteredCount, NodeScore, PluginScore, UsageEstimate
from promsched.operating.inspections import JSONPATH_PREFIX, Explanation, Ranking, RebalanceMention
from promsched.operating.jsonpaths import render_jsonpath
from promsched.operating.tables import PLAIN, Screen, table
from promsched.scheduling.cycle.estimating import format_bytes, format_milli_cpu
from promsched.scheduling.policies.decisions import TOP_NODES

CHOSEN_MARK = "*"
LEGEND = (
    "Each cell: the plugin's raw value → its score (0-100, higher is better; -: no fresh sample).\n"
    "(wN): the plugin's weight. TOTAL: the weighted mean of the scores that count for the node."
)
_SI_PREFIXES = ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))


def format_value(value: float | None) -> str:
    """A raw value or score in a few characters: 42.5, 0.0035, 80.0M; '-' for no value."""
    if value is None:
        return "-"
    for factor, prefix in _SI_PREFIXES:
        if abs(value) >= factor:
            return f"{value / factor:.1f}{prefix}"
    if value and abs(value) < 0.1:
        return f"{value:.2g}"
    return f"{value:.1f}"


def ranking_table(
    nodes: Sequence[NodeScore],
    weights: Mapping[str, int],
    *,
    chosen: str | None = None,
    pods: Mapping[str, int] | None = None,
    aggregations: Mapping[str, str] | None = None,
    screen: Screen = PLAIN,
) -> str:
    """One row per node, best first as given: each plugin's raw value and score, the weighted total.

    `weights` come from the policy (a plugin it no longer has shows w?); `pods`, when given, adds how
    many pods each node holds; `aggregations`, how a plugin sums up its window where not the mean
    (`policy_aggregations`), beside its weight.
    """
    plugins = list(dict.fromkeys(plugin.name for node in nodes for plugin in node.plugins))
    summed_up = aggregations or {}
    header = [
        "NODE",
        *(["PODS"] if pods is not None else []),
        *(_plugin_heading(name, f"w{weights.get(name, '?')}", summed_up.get(name)) for name in plugins),
        "TOTAL",
    ]
    rows = [header]
    marked = None
    for index, node in enumerate(nodes):
        marked = index if node.node == chosen else marked
        cells = {plugin.name: _plugin_cell(plugin) for plugin in node.plugins}
        rows.append(
            [
                f"{node.node} {CHOSEN_MARK}" if node.node == chosen else node.node,
                *([str(pods.get(node.node, 0))] if pods is not None else []),
                *(cells.get(name, "") for name in plugins),
                f"{node.total:.1f}",
            ]
        )
    return table(rows, screen=screen, marked=marked)


def _plugin_heading(name: str, *notes: str | None) -> str:
    """``cpu (w3)``, ``cpu (w3, p90)``: the plugin and what is said of it."""
    said = ", ".join(note for note in notes if note)
    return f"{name} ({said})" if said else name


def _plugin_cell(plugin: PluginScore) -> str:
    if plugin.raw is None and plugin.score is None:
        return "-"  # no sample, and onMissingMetrics: Ignore left the plugin out of this node's total
    return f"{format_value(plugin.raw)} → {format_value(plugin.score)}"


def policy_aggregations(policy: SchedulingPolicy) -> dict[str, str]:
    """plugin -> how it sums up its timeRange, for the plugins that do not take the mean: max or pNN."""
    return {
        plugin.name: plugin.aggregation
        for plugin in policy.spec.plugins
        if plugin.aggregation is not None and plugin.window_percentile is not None
    }


def filtered_lines(filtered: Sequence[FilteredCount], screen: Screen = PLAIN) -> list[str]:
    """Nodes filtered out by reason, most first, counted as kube-scheduler's FailedScheduling does."""
    if not filtered:
        return ["Filtered out: none."]
    total = sum(entry.count for entry in filtered)
    rows = [(str(entry.count), entry.reason) for entry in sorted(filtered, key=lambda entry: -entry.count)]
    return [
        f"Filtered out ({total} node{'s' if total != 1 else ''}):",
        *table(rows, screen=screen, header=False, right=(0,), indent=2).splitlines(),
    ]


def fields(pairs: Sequence[tuple[str, str]], screen: Screen = PLAIN) -> list[str]:
    """Named values, one a line, the values aligned."""
    return table(pairs, screen=screen, header=False).splitlines()


def estimate_line(estimate: UsageEstimate) -> str:
    """The pod's usage estimate and where each amount came from."""
    return (
        f"cpu {format_milli_cpu(estimate.milli_cpu)} ({estimate.cpu_basis}), "
        f"memory {format_bytes(estimate.memory)} ({estimate.memory_basis})"
    )


def rebalance_line(mention: RebalanceMention) -> str:
    """What a rebalance cycle did with the pod, and why."""
    cycle = mention.cycle
    when = f"{cycle.mode.value} cycle of policy {mention.policy} at {_timestamp(cycle.last_cycle)}"
    if not mention.destination:
        return f"kept on {mention.node} ({when}): {mention.reason}"
    moved = "evicted from" if cycle.mode is RebalanceMode.ENFORCE else "would move off"
    return f"{moved} {mention.node}, expected on {mention.destination} ({when}): {mention.reason}"


def _timestamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def render_explanation(explanation: Explanation, screen: Screen = PLAIN) -> str:
    policy, recorded = explanation.policy, explanation.recorded
    weights = {plugin.name: plugin.weight for plugin in policy.spec.plugins}
    rows = [
        ("pod", f"{explanation.pod} ({_placement(explanation.bound_to)})"),
        ("policy", f"{policy.name} (schedulerName {policy.spec.scheduler_name})"),
    ]
    if isinstance(recorded, Decision):
        rows += [
            ("generation", _generation(recorded.generation, policy.generation)),
            (
                "decided",
                f"{_timestamp(recorded.time)}, {recorded.latency_ms:.0f} ms after the pod was queued "
                f"({recorded.mode.value} mode)",
            ),
            ("chosen", _chosen(recorded.node, recorded.mode, explanation.bound_to)),
            ("source", f"status of SchedulingPolicy {policy.name}"),
        ]
    else:
        rows += [
            ("generation", f"not recorded on the pod (the policy is at generation {policy.generation} now)"),
            ("chosen", recorded.node),
            (
                "source",
                f"the pod's {DECISION_ANNOTATION} annotation: the policy's status keeps its last "
                f"{policy.spec.decision_history} decisions and no longer holds this one, so raw values, "
                "filtered nodes and the generation used are unknown",
            ),
        ]
    if recorded.estimate is not None:
        rows.append(("estimate", estimate_line(recorded.estimate)))
    rows += [("rebalance", rebalance_line(mention)) for mention in explanation.rebalance]
    lines = fields(rows, screen)
    top_nodes = recorded.top_nodes
    # Decisions recorded before spec.estimation counted pods at their requests.
    counted = "estimated usage" if recorded.estimate is not None else "requests"
    if top_nodes:
        lines += [
            "",
            ranking_table(
                top_nodes,
                weights,
                chosen=recorded.node,
                aggregations=policy_aggregations(policy),
                screen=screen,
            ),
            "",
            f"{CHOSEN_MARK}: the chosen node; only the {TOP_NODES} best nodes are recorded.",
            LEGEND,
            f"cpu and memory include the {counted} of pods placed too recently for the metrics to show "
            "them,\nso a burst of pods spreads instead of piling onto the node that looked idlest.",
        ]
    if isinstance(recorded, Decision):
        lines += ["", *filtered_lines(recorded.filtered, screen)]
    return "\n".join(lines)


def _placement(bound_to: str) -> str:
    return f"on {bound_to}" if bound_to else "Pending"


def _generation(used: int, current: int) -> str:
    if used == current:
        return f"{used} (the policy has not changed since)"
    return f"{used} (the policy has changed since: it is at generation {current}, whose weights are shown)"


def _chosen(node: str | None, mode: Mode, bound_to: str) -> str:
    if node is None:
        return "none: no node fitted (see Filtered out); promsched retries when nodes or pods change"
    if mode is Mode.SHADOW:
        where = f"the pod runs on {bound_to}" if bound_to else "the pod is not placed yet"
        return f"{node} (Shadow mode: promsched would have chosen it and bound nothing; {where})"
    return node


def render_ranking(ranking: Ranking, screen: Screen = PLAIN, *, wide: bool = False) -> str:
    policy, outcome, preflight = ranking.policy, ranking.outcome, ranking.preflight
    failed = [query for query in preflight.queries if not query.ok]
    verdict = (
        f"promsched would bind the pod to {outcome.node}"
        if outcome.node is not None
        else f"no node fits: {outcome.message}"
    )
    lines = fields(
        [
            ("policy", f"{policy.name or '(unnamed)'} (schedulerName {policy.spec.scheduler_name})"),
            ("pod", ranking.pod),
            ("metrics", f"{policy.spec.prometheus.url} at {_timestamp(preflight.checked_at)}"),
            ("result", f"{verdict} (dry run: nothing is bound)"),
            *([("estimate", estimate_line(ranking.estimate))] if ranking.estimate is not None else []),
        ],
        screen,
    )
    if preflight.queries and len(failed) == len(preflight.queries):
        on_missing = policy.spec.on_missing_metrics
        by_requests = ""
        if on_missing is OnMissingMetrics.REQUESTS:
            by_requests = ", its pods' requests for cpu and memory"
        lines.append(
            "Prometheus answered no query: every node has the onMissingMetrics "
            f"({on_missing.value}) value for every plugin{by_requests}."
        )
    if outcome.ranked:
        weights = {plugin.name: plugin.weight for plugin in policy.spec.plugins}
        scores = [result.to_api() for result in outcome.ranked]
        lines += [
            "",
            ranking_table(
                scores,
                weights,
                chosen=outcome.node,
                aggregations=policy_aggregations(policy),
                screen=screen,
            ),
            "",
            f"{CHOSEN_MARK}: where promsched would bind the pod (among equal totals it picks at random).",
            LEGEND,
        ]
    filtered = [FilteredCount(reason=reason, count=count) for reason, count in outcome.filtered.items()]
    lines += ["", *filtered_lines(filtered, screen)]
    problems = [
        f"  {_plugin_heading(query.plugin, query.aggregation)}: query failed: {query.error}"
        for query in failed
    ]
    for missing in preflight.missing_series:
        problems.append(
            f"  {missing.plugin}: no usable series for {missing.count} node(s): {', '.join(missing.nodes)}"
        )
        problems += [f"    a series for no known node: {series}" for series in missing.unmatched_series]
    problems += [f"  node {skipped}" for skipped in ranking.skipped_nodes]
    if problems:
        lines += ["", "Problems:", *problems]
    if wide:
        lines += ["", "Queries:", *(f"  {query.plugin}: {query.query}" for query in preflight.queries)]
    return "\n".join(lines)


# ----- documents (-o json|yaml) ----------------------------------------------------------------------


def render_document(document: Mapping[str, Any], output: str) -> str:
    """`document` as `output` says: json, yaml, or jsonpath=TEMPLATE (kubectl's templates)."""
    if output.startswith(JSONPATH_PREFIX):
        return render_jsonpath(document, output.removeprefix(JSONPATH_PREFIX))
    if output == "json":
        return json.dumps(document, indent=2, ensure_ascii=False)
    return yaml.safe_dump(dict(document), sort_keys=False, allow_unicode=True).rstrip("\n")


def _policy_document(policy: SchedulingPolicy) -> dict[str, Any]:
    aggregations = policy_aggregations(policy)
    return {
        "name": policy.name,
        "schedulerName": policy.spec.scheduler_name,
        "generation": policy.generation,
        "weights": {plugin.name: plugin.weight for plugin in policy.spec.plugins},
        **({"aggregations": aggregations} if aggregations else {}),
    }


def explanation_document(explanation: Explanation) -> dict[str, Any]:
    """What `explain` shows, named as in the policy's status: the decision whole when the status still
    holds it (source policyStatus), else the pod's compact annotation (source podAnnotation); with
    `rebalance`, the rebalance cycles that moved or kept it."""
    recorded = explanation.recorded
    document: dict[str, Any] = {
        "pod": explanation.pod,
        "boundTo": explanation.bound_to or None,
        "policy": _policy_document(explanation.policy),
    }
    if explanation.rebalance:
        document["rebalance"] = [_rebalance_document(mention) for mention in explanation.rebalance]
    if isinstance(recorded, Decision):
        return {**document, "source": "policyStatus", "decision": recorded.to_object()}
    top = [node.to_object() for node in recorded.top_nodes]
    decision: dict[str, Any] = {"node": recorded.node, "topNodes": top}
    if recorded.estimate is not None:
        decision["estimate"] = recorded.estimate.to_object()
    return {**document, "source": "podAnnotation", "decision": decision}


def _rebalance_document(mention: RebalanceMention) -> dict[str, Any]:
    return {
        "policy": mention.policy,
        "mode": mention.cycle.mode.value,
        "lastCycle": _timestamp(mention.cycle.last_cycle),
        "node": mention.node,
        "destination": mention.destination or None,
        "reason": mention.reason,
    }


def ranking_document(ranking: Ranking) -> dict[str, Any]:
    """What `score` shows: the would-be node (null: none fits, see message), every feasible node's
    scores best first, nodes filtered out by reason, and what Prometheus could not answer."""
    outcome = ranking.outcome
    return {
        "policy": _policy_document(ranking.policy),
        "pod": ranking.pod,
        "dryRun": True,
        "node": outcome.node,
        "message": outcome.message or None,
        "prometheus": ranking.policy.spec.prometheus.url,
        "ranked": [result.to_api().to_object() for result in outcome.ranked],
        "filtered": [
            {"reason": reason, "count": count}
            for reason, count in sorted(outcome.filtered.items(), key=lambda item: -item[1])
        ],
        "preflight": ranking.preflight.to_object(),
        "skippedNodes": list(ranking.skipped_nodes),
        **({"estimate": ranking.estimate.to_object()} if ranking.estimate is not None else {}),
    }
