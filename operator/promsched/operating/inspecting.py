"""`promsched explain` and `promsched score`: why a pod went where it went, and where one would go now.

`explain` reads what the scheduler recorded: the full decision in its policy's status (bounded by
`spec.decisionHistory`), else the compact `promsched.io/decision` annotation the binding put on the pod.
`score` runs the scheduler's own `decide()` once, on a cache built from the live cluster and one fresh
Prometheus snapshot, and binds nothing. Gathering talks to the API server through a `SupportsSend`; rendering
is pure (data in, text out), so both are tested without a cluster.
"""

from __future__ import annotations

from collections.abc import Awaitable, Coroutine, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from promsched.api.annotations import (
    DECISION_ANNOTATION,
    AnnotatedDecision,
    AnnotationError,
    decode_decision,
)
from promsched.api.fields import PolicyError
from promsched.api.policies import SchedulingPolicy
from promsched.api.statuses import Decision
from promsched.kube.requests import Request
from promsched.kube.sending import ApiError, SupportsSend, list_all
from promsched.metrics.planning import endpoint_from_policy, plan_from_policy
from promsched.metrics.preflighting import preflight_report
from promsched.metrics.querying import PrometheusClient
from promsched.metrics.refreshing import take_snapshot
from promsched.operating.connecting import connected
from promsched.operating.inspections import TABLE, WIDE, Explanation, InspectError, Ranking, RebalanceMention
from promsched.operating.listing import POLICIES_PATH, near_pods
from promsched.operating.rendering import (
    explanation_document,
    ranking_document,
    render_document,
    render_explanation,
    render_ranking,
)
from promsched.operating.secrets import SecretCache
from promsched.operating.tables import PLAIN, Screen
from promsched.scheduling.cluster.caches import ClusterCache
from promsched.scheduling.cycle.deciding import decide
from promsched.scheduling.cycle.memos import DecisionMemo
from promsched.scheduling.intake.following import Intake
from promsched.scheduling.objects.pods import PodInfo, PodSpecError
from promsched.scheduling.queues import SchedulingQueue

# Workloads that own their pods themselves, whose running pods a usage estimate reads as siblings.
DIRECT_CONTROLLERS = frozenset({"ReplicaSet", "StatefulSet", "Job", "DaemonSet", "ReplicationController"})


# ----- explain ---------------------------------------------------------------------------------------


def parse_annotation(text: str) -> AnnotatedDecision:
    """The pod's decision annotation, or an error `explain` can print."""
    try:
        return decode_decision(text)
    except AnnotationError as error:
        raise InspectError(str(error)) from None


async def explain(sender: SupportsSend, namespace: str, name: str) -> Explanation:
    """The recorded decision for pod `namespace/name`; InspectError when there is none to show."""
    key = f"{namespace}/{name}"
    try:
        pod = await sender.send(Request("GET", f"/api/v1/namespaces/{namespace}/pods/{name}"))
    except ApiError as error:
        if error.status == 404:
            near = await near_pods(sender, namespace, name)
            hint = f" (did you mean {' or '.join(near)}?)" if near else ""
            raise InspectError(
                f"pod {key} not found{hint}; list the pods with: kubectl get pods -n {namespace}"
            ) from None
        raise
    metadata, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    scheduler_name = spec.get("schedulerName") or "default-scheduler"
    bound_to = spec.get("nodeName") or ""
    policies = await valid_policies(sender)
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
        return Explanation(key, bound_to, policy, decision, _rebalance_mentions(policies, key))
    owner = claimants[0]
    annotation = (metadata.get("annotations") or {}).get(DECISION_ANNOTATION)
    if annotation is not None:
        recorded = parse_annotation(annotation)
        return Explanation(key, bound_to, owner, recorded, _rebalance_mentions(policies, key))
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


def _rebalance_mentions(policies: list[SchedulingPolicy], key: str) -> tuple[RebalanceMention, ...]:
    """Where the policies' latest rebalance cycles moved or kept pod `key`: any policy's, as one may
    select pods of other scheduler names (spec.rebalance.pods.selector)."""
    mentions = []
    for policy in policies:
        cycle = policy.status.rebalance if policy.status is not None else None
        if cycle is None:
            continue
        mentions += [
            RebalanceMention(policy.name, cycle, move.node, move.destination, move.reason)
            for move in cycle.moves
            if move.pod == key
        ]
        mentions += [
            RebalanceMention(policy.name, cycle, kept.node, "", kept.reason)
            for kept in cycle.blocked
            if kept.pod == key
        ]
    return tuple(mentions)


async def valid_policies(sender: SupportsSend) -> list[SchedulingPolicy]:
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
            metadata = dict(document.get("metadata") or {})
            if document.get("kind") in DIRECT_CONTROLLERS:
                # Its running pods are the new pod's siblings (a Deployment's are its ReplicaSet's).
                owner = {"kind": document["kind"], "name": metadata.get("name", ""), "controller": True}
                metadata["ownerReferences"] = [owner]
            pod = {"metadata": metadata, "spec": template.get("spec") or {}}
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
    """The scheduler's own cache of the live cluster, filled by its intake's startup listing: nodes,
    pods, namespaces, claims and volumes. Also the nodes it cannot use (a malformed field), with why."""
    cache = ClusterCache()
    intake = Intake(
        sender,
        cache,
        SchedulingQueue(),
        schedules=lambda _pod: False,  # nothing is scheduled: the queue stays empty
        refuse=lambda _obj, _message: None,
        spawn=_no_background_work,
        resync_interval=0,
    )
    await intake.sync(retry=False)
    skipped = [f"{name}: {why}" for name, why in sorted(intake.unusable_nodes.items())]
    return cache, skipped


def _no_background_work(work: Awaitable[None]) -> None:
    """A one-shot listing starts no relists or resyncs."""
    if isinstance(work, Coroutine):
        work.close()


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
    memo = DecisionMemo(snapshot)
    outcome = decide(pod, cache, snapshot, memo=memo, preference_weight=spec.placement_preferences.weight)
    return Ranking(
        policy=policy,
        pod=pod_description,
        outcome=outcome,
        preflight=preflight_report(snapshot, cache.nodes),
        skipped_nodes=tuple(skipped),
        estimate=memo.estimates_for(cache).of(pod).to_api(),
    )


# ----- the commands' entry points --------------------------------------------------------------------


async def explain_pod(
    kubeconfig: Path | None,
    pod: str,
    *,
    namespace: str | None = None,
    context: str | None = None,
    output: str = TABLE,
    screen: Screen = PLAIN,
) -> str:
    """`promsched explain`: `pod` is NAME in `namespace` (default: the kubeconfig context's), or
    NAMESPACE/NAME."""
    named, _slash, name = pod.rpartition("/")
    if not name:
        raise InspectError(f"{pod!r} names no pod; give NAMESPACE/NAME, e.g. default/web-0")
    if named and namespace and named != namespace:
        raise InspectError(f"{pod!r} is in namespace {named}, not {namespace} (-n): give one of them")
    async with connected(kubeconfig, context) as client:
        explanation = await explain(client, named or namespace or client.credentials.default_namespace, name)
    if output in (TABLE, WIDE):
        return render_explanation(explanation, screen)
    return render_document(explanation_document(explanation), output)


async def score_policy(
    kubeconfig: Path | None,
    policy_file: Path,
    pod_file: Path | None,
    prometheus_url: str | None,
    *,
    context: str | None = None,
    output: str = TABLE,
    screen: Screen = PLAIN,
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
    if output in (TABLE, WIDE):
        return render_ranking(ranking, screen, wide=output == WIDE)
    return render_document(ranking_document(ranking), output)
