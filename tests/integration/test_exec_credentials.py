"""promsched with the kind of kubeconfig EKS, GKE and AKS hand out, against the sandbox: the user's token
comes from an exec plugin (here a script printing a ServiceAccount token from `kubectl create token`),
the kubeconfig is split over files merged from KUBECONFIG, and the context is picked with --context.

This module's operator runs on the same credentials (Kopf's watches included), so the pod it places is
placed with them, and `explain` and `score` read the cluster with them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from promsched.api.crds import render_crd_yaml
from promsched.sandbox.control_plane.clusters import Sandbox
from support.clusters import Cluster, Operator
from support.kubeconfigs import exec_plugin, exec_user, kubeconfig, runs_of, write_kubeconfig
from support.polling import eventually

pytestmark = pytest.mark.integration

EXAMPLES = Path(__file__).parents[2] / "examples"
AWS_HINT = "aws is the AWS CLI: https://aws.amazon.com/cli/"


@dataclass(frozen=True)
class ExecAccess:
    combined: Path  # every cluster, user and context in one file; its current-context (eks) cannot work
    clusters: Path  # the cluster and contexts, for KUBECONFIG=clusters:users
    users: Path  # the users: `exec` (the plugin) and `eks` (aws, not installed here)
    runs: Path  # a line per run of the plugin

    def merged(self) -> str:
        return f"{self.clusters}{os.pathsep}{self.users}"


@pytest.fixture(scope="module")
def access(sandbox: Sandbox, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ExecAccess]:
    directory = tmp_path_factory.mktemp("exec-credentials")
    account = f"promsched-exec-{uuid.uuid4().hex[:6]}"
    sandbox.kubectl("create", "serviceaccount", account, "-n", "default")
    sandbox.kubectl(
        "create",
        "clusterrolebinding",
        account,
        "--clusterrole=cluster-admin",
        f"--serviceaccount=default:{account}",
    )
    runs = directory / "runs.log"
    token = (
        f"$({sandbox.binary('kubectl')} --kubeconfig {sandbox.kubeconfig} "
        f"create token {account} -n default --duration 10m)"
    )
    plugin = exec_plugin(directory / "plugin", token, runs=runs)
    cluster = yaml.safe_load(sandbox.kubeconfig.read_text())["clusters"][0]["cluster"]
    clusters = {"sandbox": cluster}
    contexts = {"exec": {"cluster": "sandbox", "user": "exec"}, "eks": {"cluster": "sandbox", "user": "eks"}}
    users = {
        "exec": exec_user(str(plugin)),
        "eks": exec_user("aws", "eks", "get-token", "--cluster-name", "sandbox", install_hint=AWS_HINT),
    }
    try:
        yield ExecAccess(
            combined=write_kubeconfig(
                directory / "combined",
                kubeconfig(clusters=clusters, users=users, contexts=contexts, current="eks"),
            ),
            clusters=write_kubeconfig(
                directory / "clusters", kubeconfig(clusters=clusters, contexts=contexts, current="eks")
            ),
            users=write_kubeconfig(directory / "users", kubeconfig(users=users)),
            runs=runs,
        )
    finally:
        sandbox.kubectl("delete", "clusterrolebinding", account, "--ignore-not-found")
        sandbox.kubectl("delete", "serviceaccount", account, "-n", "default", "--ignore-not-found")


@pytest.fixture(scope="module")
def operator(sandbox: Sandbox, access: ExecAccess) -> Iterator[Operator]:
    """Overrides conftest's: `promsched run --context exec` on the combined kubeconfig, no admin
    certificate, so both its own requests and Kopf's watches authenticate with the plugin's token."""
    sandbox.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", input=render_crd_yaml())
    sandbox.wait_established("schedulingpolicies.promsched.io")
    running = Operator(
        sandbox, name="promsched-exec", extra=("--kubeconfig", str(access.combined), "--context", "exec")
    ).start()
    try:
        yield running
    finally:
        running.stop()


def promsched(*args: str, kubeconfig: str | None = None) -> subprocess.CompletedProcess[str]:
    """The promsched command as a user runs it; only system tools on PATH (no aws)."""
    env = {key: value for key, value in os.environ.items() if key != "KUBECONFIG"}
    env["PATH"] = "/usr/bin:/bin"
    if kubeconfig is not None:
        env["KUBECONFIG"] = kubeconfig
    return subprocess.run(
        [sys.executable, "-m", "promsched.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )


def succeeded(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_the_operator_explain_and_score_work_on_an_exec_plugins_token(
    sandbox: Sandbox, cluster: Cluster, access: ExecAccess
) -> None:
    policy = cluster.policy([{"name": "cpu", "weight": 1, "timeRange": "1m"}])
    cluster.pod("web")
    placed = eventually(
        lambda: cluster.node_of().get("web"),
        lambda node: node is not None,
        what="web placed by the operator running on the exec plugin's credentials",
    )
    before = runs_of(access.runs)
    explained = json.loads(
        succeeded(
            promsched(
                "explain",
                f"{cluster.namespace}/web",
                "--kubeconfig",
                str(access.combined),
                "--context",
                "exec",
                "-o",
                "json",
            )
        )
    )
    assert (explained["pod"], explained["boundTo"]) == (f"{cluster.namespace}/web", placed)
    assert (explained["policy"]["name"], explained["decision"]["node"]) == (policy, placed)
    assert runs_of(access.runs) == before + 1, "one run of the plugin serves every request of the command"
    scored = yaml.safe_load(
        succeeded(
            promsched(
                "score",
                "--policy",
                str(EXAMPLES / "sandbox-policy.yaml"),
                "--prometheus-url",
                sandbox.prometheus_url,
                "--kubeconfig",
                str(access.combined),
                "--context",
                "exec",
                "-o",
                "yaml",
            )
        )
    )
    assert scored["dryRun"] is True
    assert scored["node"] in sandbox.node_names
    assert {entry["node"] for entry in scored["ranked"]} == set(sandbox.node_names)
    assert scored["ranked"][0]["node"] == scored["node"]


def test_merged_kubeconfig_files_and_context(sandbox: Sandbox, cluster: Cluster, access: ExecAccess) -> None:
    cluster.policy([{"name": "cpu", "weight": 1, "timeRange": "1m"}])
    cluster.pod("api")
    node = eventually(
        lambda: cluster.node_of().get("api"), lambda found: found is not None, what="api placed"
    )
    text = succeeded(
        promsched("explain", f"{cluster.namespace}/api", "--context", "exec", kubeconfig=access.merged())
    )
    assert f"pod         {cluster.namespace}/api (on {node})" in text.splitlines()
    scored = succeeded(
        promsched(
            "score",
            "--policy",
            str(EXAMPLES / "sandbox-policy.yaml"),
            "--prometheus-url",
            sandbox.prometheus_url,
            "--context",
            "exec",
            kubeconfig=access.merged(),
        )
    )
    assert "(dry run: nothing is bound)" in scored
    # The current-context of the merged files is eks, whose plugin is not installed here: the error
    # says so, with the kubeconfig's install hint, instead of a 401.
    failed = promsched("explain", f"{cluster.namespace}/api", kubeconfig=access.merged())
    assert (failed.returncode, failed.stderr) == (
        1,
        f"promsched: exec plugin aws not found on PATH; {AWS_HINT}\n",
    )
