"""`promsched explain` and `promsched score`: why a pod went where it went, and where one would go now.

`explain` reads what the scheduler recorded: the full decision in its policy's status (bounded by
`spec.decisionHistory`), else the compact `promsched.io/decision` annotation the binding put on the pod.
`score` runs the scheduler's own `decide()` once, on a cache built from the live cluster and one fresh
Prometheus snapshot, and binds nothing. Gathering talks to the API server through a `SupportsSend`; rendering
is pure (data in, text out), so both are tested without a cluster.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import aiohttp
import yaml

from promsched.api.annotations import (
    DECISION_ANNOTATION,
    AnnotatedDecision,
    AnnotationError,
    decode_decision,
)
from promsched.api.policies import (
    GROUP,
    PLURAL,
    VERSION,
    Decision,
    FilteredCount,
    Mode,
    NodeScore,
    PluginScore,
    PolicyError,
    Preflight,
    SchedulingPolicy,
)
from promsched.kube.configuring import discover
from promsched.kube.credentials import CredentialsError
from promsched.kube.requests import Request
from promsched.kube.sending import ApiError, KubeClient, SupportsSend, list_all
from promsched.metrics.planning import endpoint_from_policy, plan_from_policy
from promsched.metrics.preflighting import preflight_report
from promsched.metrics.querying import PrometheusClient
from promsched.metrics.refreshing import take_snapshot
from promsched.operating.secrets import SecretCache
from promsched.scheduling.caches import ClusterCache
from promsched.scheduling.deciding import Outcome, decide
from promsched.scheduling.pods import PodInfo, PodSpecError
from promsched.scheduling.schedulers import TOP_NODES, Scheduler

POLICIES_PATH = f"/apis/{GROUP}/{VERSION}/{PLURAL}"
CHOSEN_MARK = "*"
LEGEND = (
    "Each cell: the plugin's raw value → its score (0-100, higher is better; -: no fresh sample).\n"
    "(wN): the plugin's weight. TOTAL: the weighted mean of the scores that count for the node."
)
_SI_PREFIXES = ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))
# `-o`: the human table (default), else "json" or "yaml": the same facts as a document.
TABLE = "table"


class InspectError(RuntimeError):
    """`explain` or `score` cannot answer; the message says why and what to do about it."""


# ----- rendering (pure) ------------------------------------------------------------------------------


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


def aligned_columns(rows: Sequence[Sequence[str]]) -> str:
    """Rows as left-aligned columns two spaces apart, without trailing blanks."""
    widths = [max(len(row[index]) for row in rows) for index in range(len(rows[0]))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows
    )


def ranking_table(
    nodes: Sequence[NodeScore],
    weights: Mapping[str, int],
    *,
    chosen: str | None = None,
    pods: Mapping[str, int] | None = None,
) -> str:
    """One row per node, best first as given: each plugin's raw value and score, the weighted total.

    `weights` come from the policy (a plugin it no longer has shows w?); `pods`, when given, adds how
    many pods each node holds.
    """
    plugins = list(dict.fromkeys(plugin.name for node in nodes for plugin in node.plugins))
    header = [
        "NODE",
        *(["PODS"] if pods is not None else []),
        *(f"{name} (w{weights.get(name, '?')})" for name in plugins),
        "TOTAL",
    ]
    rows = [header]
    for node in nodes:
        cells = {plugin.name: _plugin_cell(plugin) for plugin in node.plugins}
        rows.append(
            [
                f"{node.node} {CHOSEN_MARK}" if node.node == chosen else node.node,
                *([str(pods.get(node.node, 0))] if pods is not None else []),
                *(cells.get(name, "") for name in plugins),
                f"{node.total:.1f}",
            ]
        )
    return aligned_columns(rows)


def _plugin_cell(plugin: PluginScore) -> str:
    if plugin.raw is None and plugin.score is None:
        return "-"  # no sample, and onMissingMetrics: Ignore left the plugin out of this node's total
    return f"{format_value(plugin.raw)} → {format_value(plugin.score)}"


def filtered_lines(filtered: Sequence[FilteredCount]) -> list[str]:
    """Nodes filtered out by reason, most first, counted as kube-scheduler's FailedScheduling does."""
    if not filtered:
        return ["Filtered out: none."]
    total = sum(entry.count for entry in filtered)
    width = max(len(str(entry.count)) for entry in filtered)
    lines = [f"Filtered out ({total} node{'s' if total != 1 else ''}):"]
    lines.extend(
        f"  {entry.count:>{width}}  {entry.reason}"
        for entry in sorted(filtered, key=lambda entry: -entry.count)
    )
    return lines


def _fields(pairs: Sequence[tuple[str, str]]) -> list[str]:
    width = max(len(key) for key, _value in pairs)
    return [f"{key.ljust(width)}  {value}" for key, value in pairs]


def _timestamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


# ----- explain ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Explanation:
    pod: str  # namespace/name
    bound_to: str  # the pod's spec.nodeName now; "" while Pending
    policy: SchedulingPolicy  # as it is now: the weights shown and the current generation
    recorded: Decision | AnnotatedDecision  # from the policy's status, else from the pod's annotation


def parse_annotation(text: str) -> AnnotatedDecision:
    """The pod's decision annotation, or an error `explain` can print."""
    try:
        return decode_decision(text)
    except AnnotationError as error:
        raise InspectError(str(error)) from None


def render_explanation(explanation: Explanation) -> str:
    policy, recorded = explanation.policy, explanation.recorded
    weights = {plugin.name: plugin.weight for plugin in policy.spec.plugins}
    fields = [
        ("pod", f"{explanation.pod} ({_placement(explanation.bound_to)})"),
        ("policy", f"{policy.name} (schedulerName {policy.spec.scheduler_name})"),
    ]
    if isinstance(recorded, Decision):
        fields += [
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
        fields += [
            ("generation", f"not recorded on the pod (the policy is at generation {policy.generation} now)"),
            ("chosen", recorded.node),
            (
                "source",
                f"the pod's {DECISION_ANNOTATION} annotation: the policy's status keeps its last "
                f"{policy.spec.decision_history} decisions and no longer holds this one, so raw values, "
                "filtered nodes and the generation used are unknown",
            ),
        ]
    lines = _fields(fields)
    top_nodes = recorded.top_nodes
    if top_nodes:
        lines += [
            "",
            ranking_table(top_nodes, weights, chosen=recorded.node),
            "",
            f"{CHOSEN_MARK}: the chosen node; only the {TOP_NODES} best nodes are recorded.",
            LEGEND,
            "cpu and memory include the requests of pods placed too recently for the metrics to show "
            "them,\nso a burst of pods spreads instead of piling onto the node that looked idlest.",
        ]
    if isinstance(recorded, Decision):
        lines += ["", *filtered_lines(recorded.filtered)]
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


async def explain(sender: SupportsSend, namespace: str, name: str) -> Explanation:
    """The recorded decision for pod `namespace/name`; InspectError when there is none to show."""
    key = f"{namespace}/{name}"
    try:
        pod = await sender.send(Request("GET", f"/api/v1/namespaces/{namespace}/pods/{name}"))
    except ApiError as error:
        if error.status == 404:
            raise InspectError(
                f"pod {key} not found; list the pods with: kubectl get pods -n {namespace}"
            ) from None
        raise
    metadata, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    scheduler_name = spec.get("schedulerName") or "default-scheduler"
    bound_to = spec.get("nodeName") or ""
    policies = await _policies(sender)
    claimants = sorted(
        (policy for policy in policies if policy.spec.scheduler_name == scheduler_name),
        key=lambda policy: (str(policy.metadata.get("creationTimestamp", "")), policy.name),
    )
    if not claimants:
        served = sorted({policy.spec.scheduler_name for policy in policies})
        fix = (
            f"set the pod's spec.schedulerName to one that a policy serves ({', '.join(served)})"
            if served
            else "create a SchedulingPolicy for it (see examples/)"
        )
        raise InspectError(
            f"pod {key} has schedulerName {scheduler_name!r}, which no SchedulingPolicy claims, so promsched "
            f"did not schedule it; to have promsched place such pods, {fix}"
        )
    created = (
        datetime.fromisoformat(metadata["creationTimestamp"]) if "creationTimestamp" in metadata else None
    )
    found = [
        (decision, policy)
        for policy in claimants
        for decision in _decisions(policy)
        # A decision older than the pod was for an earlier pod of the same name.
        if decision.pod == key and (created is None or decision.time >= created)
    ]
    if found:
        # max() keeps the first of equals: a decision's recentDecisions copy over its lastDecision one.
        decision, policy = max(found, key=lambda item: item[0].time)
        return Explanation(key, bound_to, policy, decision)
    owner = claimants[0]
    annotation = (metadata.get("annotations") or {}).get(DECISION_ANNOTATION)
    if annotation is not None:
        return Explanation(key, bound_to, owner, parse_annotation(annotation))
    if bound_to:
        raise InspectError(
            f"pod {key} is on {bound_to}, but promsched has no record of deciding it: no decision in the "
            f"status of policy {owner.name} (it keeps {owner.spec.decision_history}) and no "
            f"{DECISION_ANNOTATION} annotation; another scheduler, or spec.nodeName, placed it"
        )
    raise InspectError(
        f"promsched has not decided on pod {key} yet: check that the operator runs and that policy "
        f"{owner.name} is Ready (kubectl get schedulingpolicy {owner.name} -o yaml), "
        f"and the pod's events (kubectl describe pod -n {namespace} {name})"
    )


def _decisions(policy: SchedulingPolicy) -> list[Decision]:
    """The decisions in the policy's status, those of recentDecisions first: that list is replaced whole
    on each status write, while lastDecision is merged into the previous one, which can leave it fields
    the newer decision does not have (the node of a pod bound before an unschedulable one)."""
    status = policy.status
    if status is None:
        return []
    latest = [status.last_decision] if status.last_decision is not None else []
    return [*status.recent_decisions, *latest]


async def _policies(sender: SupportsSend) -> list[SchedulingPolicy]:
    """The valid policies; the scheduler ignores invalid ones, so they claim no scheduler name."""
    try:
        objects = await list_all(sender, POLICIES_PATH)
    except ApiError as error:
        if error.status == 404:
            raise InspectError(
                "the SchedulingPolicy CRD is not installed in this cluster; install promsched "
                "(see README.md) or apply the CRD: promsched crd | kubectl apply -f -"
            ) from None
        raise
    policies = []
    for obj in objects:
        try:
            policies.append(SchedulingPolicy.from_object(obj))
        except PolicyError:
            continue
    return policies


# ----- score -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Ranking:
    """What `decide()` makes of a pod now, and what Prometheus could not answer."""

    policy: SchedulingPolicy
    pod: str  # how the pod is described in the output
    outcome: Outcome
    preflight: Preflight  # per-plugin query errors and nodes without series, from the same snapshot
    skipped_nodes: tuple[str, ...] = ()  # nodes the scheduler could not use either, with why


def load_policy(path: Path, prometheus_url: str | None = None) -> SchedulingPolicy:
    """The one SchedulingPolicy in a YAML file, optionally with another Prometheus URL (validated too)."""
    documents = [doc for doc in _yaml_documents(path) if doc.get("kind") == "SchedulingPolicy"]
    if len(documents) != 1:
        raise InspectError(f"{path}: expected one SchedulingPolicy document, found {len(documents)}")
    policy = _validated(documents[0], str(path))
    if prometheus_url is None:
        return policy
    document = policy.to_object()
    document["spec"]["prometheus"]["url"] = prometheus_url
    return _validated(document, f"{path} with --prometheus-url")


def _validated(document: Mapping[str, Any], source: str) -> SchedulingPolicy:
    try:
        return SchedulingPolicy.from_object(document)
    except PolicyError as error:
        raise InspectError(f"{source} is not a valid SchedulingPolicy:\n{error}") from None


def load_pod(path: Path) -> PodInfo:
    """A Pod, or the pod template of a workload (Deployment, StatefulSet, Job...), from a YAML file."""
    for document in _yaml_documents(path):
        spec = document.get("spec") or {}
        if document.get("kind") == "Pod":
            pod = document
        elif isinstance(spec, dict) and isinstance(spec.get("template"), dict):
            template = spec["template"]
            # The workload's name and namespace stand in for the pods' generated ones.
            pod = {"metadata": document.get("metadata") or {}, "spec": template.get("spec") or {}}
        else:
            continue
        try:
            info = PodInfo.from_object(pod)
        except PodSpecError as error:
            raise InspectError(f"{path}: {error}") from None
        if info.unsupported:
            unsupported = ", ".join(info.unsupported)
            raise InspectError(f"{path}: promsched refuses pods that use {unsupported} (not supported yet)")
        return info
    raise InspectError(f"{path}: no Pod, and no workload with spec.template, in the file")


def _yaml_documents(path: Path) -> list[dict[str, Any]]:
    try:
        text = path.read_text()
    except OSError as error:
        raise InspectError(f"cannot read {path}: {error.strerror}") from None
    try:
        return [doc for doc in yaml.safe_load_all(text) if isinstance(doc, dict)]
    except yaml.YAMLError as error:
        raise InspectError(f"{path} is not valid YAML: {error}") from None


def example_pod(policy: SchedulingPolicy) -> PodInfo:
    """A pod with no requests, no selectors and no tolerations: the ranking of nodes as such."""
    return PodInfo(namespace="default", name="example", scheduler_name=policy.spec.scheduler_name)


async def read_cluster(sender: SupportsSend) -> tuple[ClusterCache, list[str]]:
    """The scheduler's own cache of the live cluster, filled by the same listing it starts with: nodes,
    pods, namespaces, claims and volumes. Also the nodes it cannot use (a malformed field), with why."""
    scheduler = Scheduler(sender)
    await scheduler.sync(retry=False)
    skipped = [f"{name}: {why}" for name, why in sorted(scheduler.unusable_nodes.items())]
    return scheduler.cache, skipped


async def rank(sender: SupportsSend, policy: SchedulingPolicy, pod: PodInfo, pod_description: str) -> Ranking:
    """Where `policy` would place `pod` now: one snapshot, one `decide()`, no binding."""
    # Pods that started recently weigh on their nodes for the part of their requests the metrics cannot
    # show yet, as in the scheduler (the herd adjustment `decide()` makes); their start times say.
    cache, skipped = await read_cluster(sender)
    spec = policy.spec
    try:
        endpoint = await endpoint_from_policy(spec.prometheus, SecretCache(sender).read)
    except ValueError as error:
        raise InspectError(f"spec.prometheus: {error}") from None
    async with PrometheusClient(endpoint) as client:
        snapshot = await take_snapshot(plan_from_policy(spec), client, cache.directory())
    return Ranking(
        policy=policy,
        pod=pod_description,
        outcome=decide(pod, cache, snapshot, preference_weight=spec.placement_preferences.weight),
        preflight=preflight_report(snapshot, cache.nodes),
        skipped_nodes=tuple(skipped),
    )


def render_ranking(ranking: Ranking) -> str:
    policy, outcome, preflight = ranking.policy, ranking.outcome, ranking.preflight
    failed = [query for query in preflight.queries if not query.ok]
    verdict = (
        f"promsched would bind the pod to {outcome.node}"
        if outcome.node is not None
        else f"no node fits: {outcome.message}"
    )
    lines = _fields(
        [
            ("policy", f"{policy.name or '(unnamed)'} (schedulerName {policy.spec.scheduler_name})"),
            ("pod", ranking.pod),
            ("metrics", f"{policy.spec.prometheus.url} at {_timestamp(preflight.checked_at)}"),
            ("result", f"{verdict} (dry run: nothing is bound)"),
        ]
    )
    if preflight.queries and len(failed) == len(preflight.queries):
        lines.append(
            "Prometheus answered no query: every node has the onMissingMetrics "
            f"({policy.spec.on_missing_metrics.value}) value for every plugin."
        )
    if outcome.ranked:
        weights = {plugin.name: plugin.weight for plugin in policy.spec.plugins}
        scores = [result.to_api() for result in outcome.ranked]
        lines += [
            "",
            ranking_table(scores, weights, chosen=outcome.node),
            "",
            f"{CHOSEN_MARK}: where promsched would bind the pod (among equal totals it picks at random).",
            LEGEND,
        ]
    filtered = [FilteredCount(reason=reason, count=count) for reason, count in outcome.filtered.items()]
    lines += ["", *filtered_lines(filtered)]
    problems = [f"  {query.plugin}: query failed: {query.error}" for query in failed]
    problems += [
        f"  {missing.plugin}: no usable series for {missing.count} node(s): {', '.join(missing.nodes)}"
        for missing in preflight.missing_series
    ]
    problems += [f"  node {skipped}" for skipped in ranking.skipped_nodes]
    if problems:
        lines += ["", "Problems:", *problems]
    return "\n".join(lines)


# ----- documents (-o json|yaml) ----------------------------------------------------------------------


def render_document(document: Mapping[str, Any], output: str) -> str:
    if output == "json":
        return json.dumps(document, indent=2, ensure_ascii=False)
    return yaml.safe_dump(dict(document), sort_keys=False, allow_unicode=True).rstrip("\n")


def _policy_document(policy: SchedulingPolicy) -> dict[str, Any]:
    return {
        "name": policy.name,
        "schedulerName": policy.spec.scheduler_name,
        "generation": policy.generation,
        "weights": {plugin.name: plugin.weight for plugin in policy.spec.plugins},
    }


def explanation_document(explanation: Explanation) -> dict[str, Any]:
    """What `explain` shows, named as in the policy's status: the decision whole when the status still
    holds it (source policyStatus), else the pod's compact annotation (source podAnnotation)."""
    recorded = explanation.recorded
    document = {
        "pod": explanation.pod,
        "boundTo": explanation.bound_to or None,
        "policy": _policy_document(explanation.policy),
    }
    if isinstance(recorded, Decision):
        return {**document, "source": "policyStatus", "decision": recorded.to_object()}
    top = [node.to_object() for node in recorded.top_nodes]
    return {**document, "source": "podAnnotation", "decision": {"node": recorded.node, "topNodes": top}}


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
    }


# ----- the commands' entry points --------------------------------------------------------------------


@contextlib.asynccontextmanager
async def connected(kubeconfig: Path | None, context: str | None = None) -> AsyncIterator[KubeClient]:
    """A client for the cluster of `kubeconfig` (or $KUBECONFIG, in-cluster, ~/.kube/config) and
    `context` (default: the current one); credential, API and connection failures become InspectErrors."""
    try:
        credentials = discover(kubeconfig, context)
    except CredentialsError as error:
        raise InspectError(str(error)) from None
    try:
        async with KubeClient(credentials) as client:
            yield client
    except CredentialsError as error:
        raise InspectError(str(error)) from None
    except ApiError as error:
        raise InspectError(f"the API server refused a request: {error}") from None
    except (aiohttp.ClientError, TimeoutError, OSError) as error:
        raise InspectError(f"cannot reach the API server at {credentials.server}: {error}") from None


async def explain_pod(
    kubeconfig: Path | None, pod: str, *, context: str | None = None, output: str = TABLE
) -> str:
    """`promsched explain`: `pod` is NAMESPACE/NAME, or NAME in the kubeconfig context's namespace."""
    namespace, _slash, name = pod.rpartition("/")
    if not name:
        raise InspectError(f"{pod!r} names no pod; give NAMESPACE/NAME, e.g. default/web-0")
    async with connected(kubeconfig, context) as client:
        explanation = await explain(client, namespace or client.credentials.default_namespace, name)
    if output == TABLE:
        return render_explanation(explanation)
    return render_document(explanation_document(explanation), output)


async def score_policy(
    kubeconfig: Path | None,
    policy_file: Path,
    pod_file: Path | None,
    prometheus_url: str | None,
    *,
    context: str | None = None,
    output: str = TABLE,
) -> str:
    """`promsched score`: the ranking a policy file gives now, for a pod file or a pod with no requests."""
    policy = load_policy(policy_file, prometheus_url)
    pod = load_pod(pod_file) if pod_file is not None else example_pod(policy)
    description = (
        f"{pod.key} from {pod_file}"
        if pod_file is not None
        else "any pod with no requests (--pod FILE: yours)"
    )
    async with connected(kubeconfig, context) as client:
        ranking = await rank(client, policy, pod, description)
    if output == TABLE:
        return render_ranking(ranking)
    return render_document(ranking_document(ranking), output)
