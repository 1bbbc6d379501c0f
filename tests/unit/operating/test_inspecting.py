"""`promsched explain` and `promsched score` without a cluster: a fake API server answers the reads,
a fake Prometheus the queries, and the tables are checked as text."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web

import promsched.sandbox
from promsched import cli
from promsched.api.annotations import DECISION_ANNOTATION, AnnotatedDecision
from promsched.api.policies import SchedulingPolicy
from promsched.api.statuses import (
    Decision,
    FilteredCount,
    MissingSeries,
    NodeScore,
    PluginScore,
    Preflight,
    PreflightQuery,
)
from promsched.metrics.scoring import NodeResult, PluginResult
from promsched.operating import inspecting, rendering
from promsched.operating.inspecting import explain
from promsched.operating.inspections import Explanation, InspectError, Ranking
from promsched.operating.rendering import (
    explanation_document,
    format_value,
    ranking_document,
    ranking_table,
    render_document,
    render_explanation,
    render_ranking,
)
from promsched.scheduling.cycle.deciding import Outcome
from promsched.scheduling.intake.kinds import NODES, PODS, WATCHED
from promsched.scheduling.objects.pods import PodInfo
from support import objects, policies
from support.fake_apis import FakeSender
from support.fake_prometheus import FakePrometheus, RecordedRequest
from support.kubeconfigs import kubeconfig, write_kubeconfig

POD_CREATED = "2030-01-01T10:00:00Z"
DECIDED = "2030-01-01T10:00:01.500000Z"


def policy_object(
    name: str = "web",
    scheduler_name: str = "promsched",
    generation: int = 1,
    status: Mapping[str, Any] | None = None,
    created: str = "2029-12-01T00:00:00Z",
) -> dict[str, Any]:
    plugins = ({"name": "cpu", "weight": 3}, {"name": "memory", "weight": 1})
    spec = policies.spec_document(*plugins, schedulerName=scheduler_name)
    return policies.policy_object(name, spec, generation=generation, created=created, status=status)


def decision_object(pod: str = "shop/web-0", node: str | None = "node-1", **fields: Any) -> dict[str, Any]:
    decision = {
        "pod": pod,
        "time": DECIDED,
        "latencyMs": 12.4,
        "generation": 1,
        "mode": "Enforce",
        "topNodes": [
            {
                "node": "node-1",
                "total": 85.0,
                "plugins": [
                    {"name": "cpu", "raw": 10.0, "score": 90.0},
                    {"name": "memory", "raw": 30.0, "score": 70.0},
                ],
            },
            {
                "node": "node-0",
                "total": 25.0,
                "plugins": [
                    {"name": "cpu", "raw": 80.0, "score": 20.0},
                    {"name": "memory", "raw": 60.0, "score": 40.0},
                ],
            },
        ],
        "filtered": [{"reason": "Insufficient cpu", "count": 2}],
        **fields,
    }
    if node is not None:
        decision["node"] = node
    return decision


def pod_object(
    name: str = "web-0",
    scheduler_name: str = "promsched",
    node: str = "node-1",
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    return objects.pod_object(
        name,
        "shop",
        node_name=node,
        annotations=annotations,
        created=POD_CREATED,
        schedulerName=scheduler_name,
    )


# What the scheduler lists besides nodes and pods (for placement rules); empty here.
PLACEMENT_LISTS = tuple(kind.path for kind in WATCHED if kind not in (NODES, PODS))


def api_with(pod: Mapping[str, Any], *policies: Mapping[str, Any]) -> FakeSender:
    name = pod["metadata"]["name"]
    return FakeSender(
        {
            f"/api/v1/namespaces/shop/pods/{name}": pod,
            inspecting.POLICIES_PATH: {"items": list(policies)},
        },
        strict=True,
    )


# ----- rendering ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (None, "-"),
        (0.0, "0.0"),
        (42.25, "42.2"),
        (0.0035, "0.0035"),
        (999.94, "999.9"),
        (1500.0, "1.5k"),
        (80_000_000.0, "80.0M"),
        (-2_500_000.0, "-2.5M"),
    ],
)
def test_values_are_shown_in_a_few_characters(value: float | None, shown: str) -> None:
    assert format_value(value) == shown


def test_the_ranking_table_shows_raw_value_score_weight_and_total_per_node() -> None:
    nodes = [
        NodeScore(
            node="node-1",
            total=85.0,
            plugins=[
                PluginScore(name="cpu", raw=10.0, score=90.0),
                PluginScore(name="gpu", raw=None, score=None),
            ],
        ),
        NodeScore(
            node="node-0",
            total=50.0,
            plugins=[
                PluginScore(name="cpu", raw=None, score=50.0),
                PluginScore(name="gpu", raw=3e6, score=0.0),
            ],
        ),
    ]
    table = ranking_table(nodes, {"cpu": 3}, chosen="node-1", pods={"node-0": 2})
    assert table.splitlines() == [
        "NODE      PODS  cpu (w3)     gpu (w?)    TOTAL",
        "node-1 *  0     10.0 → 90.0  -           85.0",
        "node-0    2     - → 50.0     3.0M → 0.0  50.0",
    ]


def test_filtered_nodes_are_counted_by_reason_most_first() -> None:
    lines = rendering.filtered_lines(
        [
            FilteredCount(reason="cpu load above 85%", count=1),
            FilteredCount(reason="Insufficient cpu", count=12),
        ]
    )
    assert lines == ["Filtered out (13 nodes):", "  12  Insufficient cpu", "   1  cpu load above 85%"]
    assert rendering.filtered_lines([]) == ["Filtered out: none."]


def explanation(recorded: Decision | AnnotatedDecision, generation: int = 1, bound_to: str = "node-1") -> str:
    policy = SchedulingPolicy.from_object(policy_object(generation=generation))
    return render_explanation(Explanation("shop/web-0", bound_to, policy, recorded))


def test_an_explanation_shows_the_recorded_decision_with_the_policy_weights() -> None:
    text = explanation(Decision.model_validate(decision_object()))
    lines = text.splitlines()
    assert lines[:6] == [
        "pod         shop/web-0 (on node-1)",
        "policy      web (schedulerName promsched)",
        "generation  1 (the policy has not changed since)",
        "decided     2030-01-01T10:00:01Z, 12 ms after the pod was queued (Enforce mode)",
        "chosen      node-1",
        "source      status of SchedulingPolicy web",
    ]
    assert "NODE      cpu (w3)     memory (w1)  TOTAL" in lines
    assert "node-1 *  10.0 → 90.0  30.0 → 70.0  85.0" in lines
    assert "node-0    80.0 → 20.0  60.0 → 40.0  25.0" in lines
    assert lines[-2:] == ["Filtered out (2 nodes):", "  2  Insufficient cpu"]


def test_an_explanation_says_when_the_policy_changed_after_the_decision() -> None:
    text = explanation(Decision.model_validate(decision_object()), generation=4)
    assert (
        "generation  1 (the policy has changed since: it is at generation 4, whose weights are shown)" in text
    )


def test_a_shadow_decision_says_nothing_was_bound_and_where_the_pod_runs() -> None:
    decision = Decision.model_validate(decision_object(node="node-0", mode="Shadow"))
    text = explanation(decision, bound_to="node-1")
    assert (
        "chosen      node-0 (Shadow mode: promsched would have chosen it and bound nothing; "
        "the pod runs on node-1)" in text
    )
    assert "node-0 *  80.0 → 20.0" in text


def test_an_unschedulable_decision_shows_why_no_node_fitted() -> None:
    decision = Decision.model_validate(decision_object(node=None, topNodes=[]))
    text = explanation(decision, bound_to="")
    assert "pod         shop/web-0 (Pending)" in text
    assert "chosen      none: no node fitted (see Filtered out)" in text
    assert "NODE" not in text
    assert text.endswith("Filtered out (2 nodes):\n  2  Insufficient cpu")


def test_an_explanation_from_the_annotation_says_what_is_not_known() -> None:
    annotated = inspecting.parse_annotation(
        '{"node":"node-1","top":[{"node":"node-1","total":85.0,"plugins":{"cpu":90.0,"memory":70.0}}]}'
    )
    text = explanation(annotated, generation=3)
    assert "generation  not recorded on the pod (the policy is at generation 3 now)" in text
    assert (
        "no longer holds this one, so raw values, filtered nodes and the generation used are unknown" in text
    )
    assert "node-1 *  - → 90.0  - → 70.0     85.0" in text
    assert "Filtered out" not in text


def test_an_unreadable_annotation_is_an_error_naming_it() -> None:
    with pytest.raises(InspectError, match=f"{DECISION_ANNOTATION} annotation cannot be read"):
        inspecting.parse_annotation('{"node": "node-1"}')


def ranking(outcome: Outcome, preflight: Preflight, on_missing: str = "Neutral") -> str:
    document = policy_object()
    document["spec"]["onMissingMetrics"] = on_missing
    policy = SchedulingPolicy.from_object(document)
    return render_ranking(Ranking(policy, "any pod", outcome, preflight, skipped_nodes=("node-9: bad",)))


def test_a_ranking_shows_the_chosen_node_and_what_prometheus_could_not_answer() -> None:
    ranked = (
        NodeResult("node-1", 85.0, (PluginResult("cpu", 10.0, 90.0), PluginResult("memory", 30.0, 70.0)), ()),
        NodeResult("node-2", 50.0, (PluginResult("cpu", 50.0, 50.0), PluginResult("memory", None, 50.0)), ()),
    )
    preflight = Preflight(
        checked_at=datetime(2030, 1, 1, 10, 0, tzinfo=UTC),
        queries=[
            PreflightQuery(plugin="cpu", query="q1", ok=True),
            PreflightQuery(plugin="memory", query="q2", ok=False, error="bad_data: parse error"),
        ],
        missing_series=[
            MissingSeries(
                plugin="cpu",
                nodes=["node-2"],
                count=1,
                unmatched_series=['instance="10.0.0.9:9100" (no single nodename in node_uname_info)'],
            )
        ],
    )
    outcome = Outcome("node-1", ranked, {"cpu load above 85%": 1}, 4)
    lines = ranking(outcome, preflight).splitlines()
    assert lines[:4] == [
        "policy   web (schedulerName promsched)",
        "pod      any pod",
        "metrics  http://prometheus.invalid:9090 at 2030-01-01T10:00:00Z",
        "result   promsched would bind the pod to node-1 (dry run: nothing is bound)",
    ]
    assert "node-1 *  10.0 → 90.0  30.0 → 70.0  85.0" in lines
    assert "node-2    50.0 → 50.0  - → 50.0     50.0" in lines
    assert lines[-8:] == [
        "Filtered out (1 node):",
        "  1  cpu load above 85%",
        "",
        "Problems:",
        "  memory: query failed: bad_data: parse error",
        "  cpu: no usable series for 1 node(s): node-2",
        '    a series for no known node: instance="10.0.0.9:9100" (no single nodename in node_uname_info)',
        "  node node-9: bad",
    ]


def test_a_ranking_with_no_feasible_node_gives_the_schedulers_message() -> None:
    outcome = Outcome(None, (), {"Insufficient cpu": 3}, 3, "0/3 nodes are available: 3 Insufficient cpu.")
    failed = Preflight(
        checked_at=datetime(2030, 1, 1, tzinfo=UTC),
        queries=[PreflightQuery(plugin="cpu", query="q", ok=False, error="unreachable")],
    )
    text = ranking(outcome, failed)
    assert (
        "result   no node fits: 0/3 nodes are available: 3 Insufficient cpu. (dry run: nothing is bound)"
        in text
    )
    assert "Prometheus answered no query: every node has the onMissingMetrics (Neutral) value" in text
    assert "NODE" not in text
    by_requests = ranking(outcome, failed, on_missing="Requests")
    assert (
        "every node has the onMissingMetrics (Requests) value for every plugin, its pods' requests for cpu "
        "and memory." in " ".join(by_requests.split())
    )


# ----- documents (-o json|yaml) -----------------------------------------------------------------------


def test_an_explanation_as_a_document_holds_the_recorded_decision_and_names_its_source() -> None:
    policy = SchedulingPolicy.from_object(policy_object(generation=2))
    decision = Decision.model_validate(decision_object())
    text = render_document(
        explanation_document(Explanation("shop/web-0", "node-1", policy, decision)), "json"
    )
    assert json.loads(text) == {
        "pod": "shop/web-0",
        "boundTo": "node-1",
        "policy": {
            "name": "web",
            "schedulerName": "promsched",
            "generation": 2,
            "weights": {"cpu": 3, "memory": 1},
        },
        "source": "policyStatus",
        "decision": decision.to_object(),
    }
    annotated = inspecting.parse_annotation(
        '{"node":"node-1","top":[{"node":"node-1","total":85.0,"plugins":{"cpu":90.0}}]}'
    )
    text = render_document(explanation_document(Explanation("shop/web-0", "", policy, annotated)), "yaml")
    document = yaml.safe_load(text)
    assert (document["boundTo"], document["source"]) == (None, "podAnnotation")
    assert document["decision"] == {
        "node": "node-1",
        "topNodes": [{"node": "node-1", "total": 85.0, "plugins": [{"name": "cpu", "score": 90.0}]}],
    }


def test_a_ranking_as_a_document_holds_every_node_filter_and_problem() -> None:
    policy = SchedulingPolicy.from_object(policy_object())
    ranked = (
        NodeResult("node-1", 85.0, (PluginResult("cpu", 10.0, 90.0),), ()),
        NodeResult("node-2", 50.0, (PluginResult("cpu", None, 50.0),), ()),
    )
    preflight = Preflight(
        checked_at=datetime(2030, 1, 1, 10, 0, tzinfo=UTC),
        queries=[PreflightQuery(plugin="cpu", query="q1", ok=False, error="bad_data")],
    )
    outcome = Outcome("node-1", ranked, {"Insufficient cpu": 1, "cpu load above 85%": 2}, 5)
    ranking = Ranking(policy, "any pod", outcome, preflight, skipped_nodes=("node-9: bad",))
    document = json.loads(render_document(ranking_document(ranking), "json"))
    assert document == {
        "policy": {
            "name": "web",
            "schedulerName": "promsched",
            "generation": 1,
            "weights": {"cpu": 3, "memory": 1},
        },
        "pod": "any pod",
        "dryRun": True,
        "node": "node-1",
        "message": None,
        "prometheus": "http://prometheus.invalid:9090",
        "ranked": [
            {"node": "node-1", "total": 85.0, "plugins": [{"name": "cpu", "raw": 10.0, "score": 90.0}]},
            {"node": "node-2", "total": 50.0, "plugins": [{"name": "cpu", "score": 50.0}]},
        ],
        "filtered": [
            {"reason": "cpu load above 85%", "count": 2},
            {"reason": "Insufficient cpu", "count": 1},
        ],
        "preflight": preflight.to_object(),
        "skippedNodes": ["node-9: bad"],
    }
    assert yaml.safe_load(render_document(ranking_document(ranking), "yaml")) == document


# ----- explain: finding the record ---------------------------------------------------------------------


async def test_explain_finds_the_decision_in_the_policy_status() -> None:
    status = {"recentDecisions": [decision_object(pod="shop/other"), decision_object()]}
    api = api_with(pod_object(), policy_object(status=status))
    found = await explain(api, "shop", "web-0")
    assert isinstance(found.recorded, Decision)
    assert found.recorded.pod == "shop/web-0"
    assert found.policy.name == "web"
    assert found.bound_to == "node-1"


async def test_explain_trusts_recent_decisions_over_a_merged_last_decision() -> None:
    # lastDecision is merge-patched, so an unschedulable decision may still carry the previous node.
    stale = decision_object(node="node-2", topNodes=[])
    exact = decision_object(node=None, topNodes=[])
    api = api_with(
        pod_object(node=""), policy_object(status={"lastDecision": stale, "recentDecisions": [exact]})
    )
    found = await explain(api, "shop", "web-0")
    assert isinstance(found.recorded, Decision)
    assert found.recorded.node is None


async def test_explain_falls_back_to_the_annotation_and_ignores_an_earlier_pods_decision() -> None:
    earlier = decision_object(node="node-0", time="2029-12-31T23:00:00Z")
    annotation = '{"node":"node-1","top":[{"node":"node-1","total":85,"plugins":{"cpu":90}}]}'
    api = api_with(
        pod_object(annotations={DECISION_ANNOTATION: annotation}),
        policy_object(status={"recentDecisions": [earlier]}),
    )
    found = await explain(api, "shop", "web-0")
    assert found.recorded == AnnotatedDecision(
        node="node-1",
        top_nodes=(NodeScore(node="node-1", total=85, plugins=[PluginScore(name="cpu", score=90)]),),
    )


async def test_explain_uses_the_oldest_policy_claiming_the_scheduler_name() -> None:
    annotation = '{"node":"node-1","top":[]}'
    api = api_with(
        pod_object(annotations={DECISION_ANNOTATION: annotation}),
        policy_object(name="younger", created="2029-12-02T00:00:00Z"),
        policy_object(name="other", scheduler_name="batch", created="2020-01-01T00:00:00Z"),
        policy_object(name="older", created="2029-11-01T00:00:00Z"),
    )
    assert (await explain(api, "shop", "web-0")).policy.name == "older"


async def test_explain_names_the_fix_for_a_pod_no_policy_claims() -> None:
    api = api_with(pod_object(scheduler_name="default-scheduler"), policy_object(scheduler_name="promsched"))
    with pytest.raises(InspectError) as raised:
        await explain(api, "shop", "web-0")
    assert str(raised.value) == (
        "pod shop/web-0 has schedulerName 'default-scheduler', which no SchedulingPolicy claims, so "
        "promsched did not schedule it; to have promsched place such pods, set the pod's "
        "spec.schedulerName to one that a policy serves (promsched)"
    )


@pytest.mark.parametrize(
    ("objects", "message"),
    [
        ({}, "pod shop/web-0 not found; list the pods with: kubectl get pods -n shop"),
        (
            {"/api/v1/namespaces/shop/pods/web-0": pod_object()},
            "the SchedulingPolicy CRD is not installed in this cluster",
        ),
    ],
)
async def test_explain_says_what_is_missing(objects: dict[str, Any], message: str) -> None:
    with pytest.raises(InspectError, match=message):
        await explain(FakeSender(objects, strict=True), "shop", "web-0")


@pytest.mark.parametrize(
    ("node", "message"),
    [
        ("node-3", "pod shop/web-0 is on node-3, but promsched has no record of deciding it"),
        ("", "promsched has not decided on pod shop/web-0 yet: check that the operator runs"),
    ],
)
async def test_explain_without_any_record_says_why(node: str, message: str) -> None:
    api = api_with(pod_object(node=node), policy_object())
    with pytest.raises(InspectError, match=message):
        await explain(api, "shop", "web-0")


# ----- score: files in, ranking out --------------------------------------------------------------------


def write(tmp_path: Path, name: str, document: Any) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(document) if not isinstance(document, str) else document)
    return path


def test_a_policy_file_is_validated_with_errors_naming_the_field(tmp_path: Path) -> None:
    document = policy_object()
    document["spec"]["plugins"][0]["weight"] = 300
    with pytest.raises(InspectError) as raised:
        inspecting.load_policy(write(tmp_path, "policy.yaml", document))
    assert str(raised.value).splitlines() == [
        f"{tmp_path / 'policy.yaml'} is not a valid SchedulingPolicy:",
        "spec.plugins[0].weight: Input should be less than or equal to 100",
    ]


def test_the_prometheus_url_can_be_overridden_and_is_validated(tmp_path: Path) -> None:
    path = write(tmp_path, "policy.yaml", policy_object())
    policy = inspecting.load_policy(path, "http://127.0.0.1:9090")
    assert policy.spec.prometheus.url == "http://127.0.0.1:9090"
    with pytest.raises(
        InspectError, match=r"with --prometheus-url is not a valid.*\nspec.prometheus.url: must be"
    ):
        inspecting.load_policy(path, "localhost:9090")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (
            "kind: SchedulingPolicy\n---\nkind: SchedulingPolicy\n",
            "expected one SchedulingPolicy document, found 2",
        ),
        ("kind: Pod\n", "expected one SchedulingPolicy document, found 0"),
        ("spec: [unclosed\n", "is not valid YAML"),
    ],
)
def test_a_policy_file_must_hold_one_policy(tmp_path: Path, content: str, message: str) -> None:
    with pytest.raises(InspectError, match=message):
        inspecting.load_policy(write(tmp_path, "policy.yaml", content))


def test_a_workload_file_gives_its_pod_template(tmp_path: Path) -> None:
    deployment = {
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "500m"}}}]},
            }
        },
    }
    pod = inspecting.load_pod(write(tmp_path, "web.yaml", deployment))
    assert (pod.key, pod.requests.milli_cpu) == ("shop/web", 500)


@pytest.mark.parametrize(
    ("document", "message"),
    [
        (
            {"kind": "Pod", "metadata": {"name": "p"}, "spec": {"resourceClaims": [{"name": "gpu"}]}},
            "promsched refuses pods that use spec.resourceClaims",
        ),
        (
            {"kind": "Pod", "metadata": {"name": "p"}, "spec": {"priority": "high"}},
            "spec.priority: expected an integer",
        ),
        ({"kind": "Service", "spec": {}}, "no Pod, and no workload with spec.template, in the file"),
    ],
)
def test_a_pod_file_promsched_cannot_schedule_is_refused(
    tmp_path: Path, document: dict[str, Any], message: str
) -> None:
    with pytest.raises(InspectError, match=message):
        inspecting.load_pod(write(tmp_path, "pod.yaml", document))


async def test_rank_runs_the_schedulers_decision_on_the_live_cluster_and_one_snapshot(
    prometheus: FakePrometheus,
) -> None:
    # node-busy has the most load; node-idle the least but no cpu left; node-mid is where it goes.
    loads = {"10.0.0.1": 90.0, "10.0.0.2": 5.0, "10.0.0.3": 40.0}
    queries: list[str] = []

    async def query(request: RecordedRequest) -> web.StreamResponse:
        queries.append(request.query)
        return prometheus.vector(*(({"instance": f"{ip}:9100"}, load) for ip, load in loads.items()))

    prometheus.handler = query
    document = policy_object()
    document["spec"].update(
        prometheus={"url": prometheus.url},
        nodeIdentity={"source": "InternalIP", "label": "instance"},
        plugins=[{"name": "cpu", "weight": 1, "threshold": 85}],
    )
    full = pod_object(name="full", node="node-idle")
    full["spec"]["containers"] = [{"name": "c", "resources": {"requests": {"cpu": "4"}}}]
    api = FakeSender(
        {
            "/api/v1/nodes": {
                "items": [
                    objects.node_object("node-busy", address="10.0.0.1"),
                    objects.node_object("node-idle", address="10.0.0.2"),
                    objects.node_object("node-mid", address="10.0.0.3"),
                ]
            },
            "/api/v1/pods": {"items": [full]},
            **{path: {"items": []} for path in PLACEMENT_LISTS},
        },
        strict=True,
    )
    policy = SchedulingPolicy.from_object(document)
    container = {"name": "c", "resources": {"requests": {"cpu": "1"}}}
    pod = PodInfo.from_object({"metadata": {"name": "new"}, "spec": {"containers": [container]}})
    result = await inspecting.rank(api, policy, pod, "new")
    assert result.outcome.node == "node-mid"
    assert [r.node for r in result.outcome.ranked] == ["node-mid"]
    assert result.outcome.filtered == {"cpu load above 85%": 1, "Insufficient cpu": 1}
    assert len(queries) == 1


# ----- the command line ----------------------------------------------------------------------------------


def test_the_commands_report_errors_as_one_clean_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["explain", "shop/"]) == 1
    assert (
        capsys.readouterr().err
        == "promsched: 'shop/' names no pod; give NAMESPACE/NAME, e.g. default/web-0\n"
    )
    assert cli.main(["score", "--policy", "/nonexistent/policy.yaml"]) == 1
    assert capsys.readouterr().err == (
        "promsched: cannot read /nonexistent/policy.yaml: No such file or directory\n"
    )


def test_a_context_the_kubeconfig_lacks_is_one_clean_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_kubeconfig(
        tmp_path / "config",
        kubeconfig(
            clusters={"api": {"server": "https://api.invalid"}},
            users={"me": {"token": "abc"}},
            contexts={"main": {"cluster": "api", "user": "me"}},
            current="main",
        ),
    )
    assert (
        cli.main(["explain", "--kubeconfig", str(config), "--context", "prod", "-o", "json", "shop/web"]) == 1
    )
    assert capsys.readouterr().err == (
        f"promsched: context 'prod' is not in kubeconfig {config} (it has: main)\n"
    )


def test_the_sandbox_without_its_extra_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # As in an install without the `sandbox` extra: cryptography cannot be imported.
    for package, name in ((promsched.sandbox, "launching"), (promsched.sandbox.control_plane, "certifying")):
        monkeypatch.delitem(sys.modules, f"{package.__name__}.{name}", raising=False)
        monkeypatch.delattr(package, name, raising=False)
    monkeypatch.setitem(sys.modules, "cryptography", None)
    assert cli.main(["sandbox", "status", "--dir", str(tmp_path)]) == 1
    assert capsys.readouterr().err == (
        "promsched: the sandbox needs the `sandbox` extra, which this install lacks (cryptography): "
        "from a checkout, pip install '.[sandbox]' (pipx: pipx install --force '.[sandbox]'); "
        f"from a wheel, pip install 'dist/promsched-{promsched.__version__}-py3-none-any.whl[sandbox]'\n"
    )
