"""The command line as the README shows it, against the sandbox and the operator of conftest: its
examples run in bash as written (the pod, namespace and context names swapped for this test's), the
kubectl plugin through kubectl's own plugin discovery, and completion of names read from the cluster."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from promsched.sandbox.control_plane.clusters import Sandbox
from support.clusters import Cluster
from support.polling import eventually

pytestmark = pytest.mark.integration

REPO = Path(__file__).parents[2]
README_SECTION = "## The command line, and `kubectl promsched`"
BIN = Path(sys.executable).parent  # promsched, kubectl-promsched and kubectl_complete-promsched
CONTEXT = "prod"  # the README's context name; this test's kubeconfig has it


def readme_examples() -> list[str]:
    """The commands of the README's command-line section, one a line, comments dropped."""
    text = (REPO / "README.md").read_text()
    section = text[text.index(README_SECTION) :]
    start = section.index("```sh\n") + len("```sh\n")
    block = section[start : section.index("\n```", start)]
    return [re.sub(r"\s+#.*$", "", line) for line in block.splitlines() if line.strip()]


@pytest.fixture
def world(sandbox: Sandbox, cluster: Cluster, tmp_path: Path) -> dict[str, str]:
    """A placed pod web-0, an unschedulable one, and a kubeconfig whose current context is `prod`, in the
    test's namespace: what the README's examples name."""
    policy = cluster.policy([{"name": "cpu", "weight": 1, "timeRange": "1m"}])
    cluster.pod("web-0")
    cluster.pod("huge", cpu="1000")
    node = eventually(
        lambda: cluster.node_of().get("web-0"), lambda found: found is not None, what="web-0 placed"
    )
    eventually(
        lambda: cluster.status(policy).get("unschedulableNow", 0),
        lambda count: count >= 1,
        what="huge found unschedulable",
    )
    config = yaml.safe_load(sandbox.kubeconfig.read_text())
    (context,) = config["contexts"]
    context["name"] = CONTEXT
    context["context"]["namespace"] = cluster.namespace
    config["current-context"] = CONTEXT
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(yaml.safe_dump(config))
    return {
        "KUBECONFIG": str(kubeconfig),
        "PROMETHEUS_URL": sandbox.prometheus_url,
        "PATH": f"{BIN}:{sandbox.state.bin_dir}:/usr/bin:/bin",
        "policy": policy,
        "node": str(node),
        "namespace": cluster.namespace,
    }


def shell(command: str, world: dict[str, str], **extra: str) -> subprocess.CompletedProcess[str]:
    env = {
        key: value for key, value in os.environ.items() if not key.startswith(("PROMSCHED_", "KUBECONFIG"))
    }
    env.update({key: world[key] for key in ("KUBECONFIG", "PROMETHEUS_URL", "PATH")}, **extra)
    return subprocess.run(
        ["bash", "-c", command], env=env, cwd=REPO, capture_output=True, text=True, timeout=120, check=False
    )


def test_the_readmes_examples_run_as_written(world: dict[str, str]) -> None:
    examples = readme_examples()
    assert len(examples) == 6
    outputs = []
    for example in examples:
        command = re.sub(r"\bshop\b", world["namespace"], example)
        done = shell(command, world)
        assert done.returncode == 0, f"{command}\n{done.stderr}"
        outputs.append(done.stdout)
    explained, node, status, scored, plugin, completion = outputs
    assert f"pod         {world['namespace']}/web-0 (on {world['node']})" in explained.splitlines()
    assert node == f"{world['node']}\n"
    # Other modules' policies may be on the shared sandbox too: this test's screen starts at its name.
    lines = status.splitlines()
    lines = lines[next(index for index, line in enumerate(lines) if f" {world['policy']} (" in line) :]
    fields = dict(line.split(None, 1) for line in lines[: lines.index("")])
    scheduler_name = world["policy"].rsplit("-", 1)[0]
    assert fields["policy"] == f"{world['policy']} (schedulerName {scheduler_name}, generation 1)"
    assert fields["ready"].startswith("True")
    unschedulable = lines[lines.index("Unschedulable (the latest decision that found no node, per pod):") + 1]
    assert unschedulable.split()[0] == f"{world['namespace']}/huge"
    assert "Insufficient cpu" in unschedulable
    assert "(dry run: nothing is bound)" in scored
    assert "Queries:" in scored  # -o wide
    assert plugin == explained  # kubectl found kubectl-promsched on PATH and passed it the flags
    assert completion == ""


def test_the_pod_is_found_by_n_by_namespace_slash_pod_and_in_the_contexts_namespace(
    world: dict[str, str],
) -> None:
    namespace = world["namespace"]
    found = [
        json.loads(shell(f"promsched explain {pod} -o json", world).stdout)["pod"]
        for pod in (f"-n {namespace} web-0", f"{namespace}/web-0", "web-0")
    ]
    assert found == [f"{namespace}/web-0"] * 3
    near = shell("kubectl promsched explain web0", world)
    assert near.returncode == 1
    assert near.stderr == (
        f"kubectl promsched: pod {namespace}/web0 not found (did you mean web-0?); list the pods with: "
        f"kubectl get pods -n {namespace}\n"
    )


def test_kubectls_flags_before_the_plugins_name_are_refused_by_kubectl(world: dict[str, str]) -> None:
    refused = shell(f"kubectl --context {CONTEXT} promsched version", world)
    assert refused.returncode != 0
    assert "flags cannot be placed before plugin name: --context" in refused.stderr
    assert shell("kubectl plugin list", world).stdout.count("kubectl-promsched") == 1


def test_completion_reads_pod_and_policy_names_from_the_cluster(world: dict[str, str]) -> None:
    namespace = world["namespace"]
    pods = shell(
        "promsched",
        world,
        _PROMSCHED_COMPLETE="bash_complete",
        COMP_WORDS=f"promsched explain -n {namespace} w",
        COMP_CWORD="4",
    )
    assert pods.stdout.splitlines() == ["plain,web-0"]
    script = "source <(promsched completion bash); COMP_WORDS=(promsched status ''); COMP_CWORD=2; "
    script += '_promsched_completion promsched; printf "%s\\n" "${COMPREPLY[@]}"'
    assert world["policy"] in shell(script, world).stdout.splitlines()
    # kubectl's own completion of plugins runs kubectl_complete-promsched.
    through_kubectl = shell(f"kubectl __complete promsched explain --context {CONTEXT} we", world)
    assert through_kubectl.stdout.splitlines() == ["web-0", ":4"]
