"""The Grafana dashboard only charts metrics the operator exports, and every query is filtered by the
cluster variable, as kube-prometheus-stack's dashboards are (the kubernetes-mixin convention)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rendering import FULLNAME, NAMESPACE, needs_helm, render

from support.metric_names import exported_series, promsched_series_in

DASHBOARD_FILE = Path(__file__).parents[3] / "charts" / "promsched" / "dashboards" / "promsched.json"
DASHBOARD = json.loads(DASHBOARD_FILE.read_text())
QUERIES = [target["expr"] for panel in DASHBOARD["panels"] for target in panel.get("targets", [])]


def variables(dashboard: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {variable["name"]: variable for variable in dashboard["templating"]["list"]}


def test_every_series_the_dashboard_queries_is_exported() -> None:
    used = promsched_series_in(QUERIES)
    assert used, "the dashboard queries no promsched metric"
    assert used - exported_series() == set()


def test_every_query_selects_the_cluster_variables_cluster() -> None:
    # On a single cluster the variable is empty, and cluster="" selects the series without the label.
    assert [query for query in QUERIES if 'cluster="$cluster"' not in query] == []
    lookups = [
        variable["definition"]
        for name, variable in variables(DASHBOARD).items()
        if variable["type"] == "query" and name != "cluster"
    ]
    assert lookups
    assert [lookup for lookup in lookups if 'cluster="$cluster"' not in lookup] == []


def test_the_cluster_variable_lists_the_clusters_of_the_operators_series_and_is_hidden() -> None:
    cluster = variables(DASHBOARD)["cluster"]

    assert cluster["definition"] == cluster["query"]["query"] == "label_values(promsched_leader, cluster)"
    assert cluster["includeAll"] is False  # one cluster at a time, as in the mixin
    assert cluster["hide"] == 2  # kube-prometheus-stack's default, unless multicluster
    names = list(variables(DASHBOARD))
    assert names.index("cluster") < names.index("job") < names.index("policy")  # each filters the next


@needs_helm
def test_multicluster_shows_the_cluster_variable_of_the_same_dashboard(tmp_path: Path) -> None:
    values = {"grafanaDashboard": {"enabled": True, "multicluster": True}}
    config_map = render(tmp_path, values)[("ConfigMap", f"{NAMESPACE}/{FULLNAME}-dashboard")]

    shipped = json.loads(config_map["data"]["promsched.json"])

    assert variables(shipped)["cluster"]["hide"] == 0
    variables(shipped)["cluster"]["hide"] = 2
    assert shipped == DASHBOARD
