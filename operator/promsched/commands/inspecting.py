"""The commands a user runs against a cluster, which `kubectl promsched` carries too: explain, score,
status, version and completion."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import click
from click.shell_completion import get_completion_class

from promsched import __version__
from promsched.commands.options import (
    cluster_options,
    complete_pods,
    complete_policies,
    env_option,
    output_option,
    screen,
    show,
)

SHELLS = ("bash", "zsh", "fish")


@click.command()
@cluster_options
@env_option(
    "-n",
    "--namespace",
    env="PROMSCHED_NAMESPACE",
    help="the pod's namespace (default: the kubeconfig context's, as kubectl takes it)",
)
@output_option("the same as table: every recorded fact is shown")
@click.argument("pod", metavar="POD", shell_complete=complete_pods)
def explain(
    kubeconfig: Path | None, context: str | None, namespace: str | None, output: str, pod: str
) -> int:
    """Why promsched placed a pod where it did: its recorded decision.

    POD is a pod's name in -n's namespace, or NAMESPACE/POD.
    """
    from promsched.operating.inspecting import explain_pod

    found = explain_pod(kubeconfig, pod, namespace=namespace, context=context, output=output, screen=screen())
    return show(asyncio.run(found), output)


@click.command()
@cluster_options
@output_option("also each plugin's PromQL query")
@click.option(
    "--policy",
    "policy_file",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="a SchedulingPolicy YAML file",
)
@click.option(
    "--pod",
    "pod_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="a Pod, or a workload with spec.template (default: a pod with no requests)",
)
@env_option(
    "--prometheus-url",
    env="PROMSCHED_PROMETHEUS_URL",
    help="query this Prometheus instead of the policy's (e.g. a port-forward)",
)
def score(
    kubeconfig: Path | None,
    context: str | None,
    output: str,
    policy_file: Path,
    pod_file: Path | None,
    prometheus_url: str | None,
) -> int:
    """Dry run: how a policy file ranks the live cluster's nodes now (binds nothing)."""
    from promsched.operating.inspecting import score_policy

    # Failed queries are listed in the output; the metrics layer's warnings would only repeat them.
    logging.basicConfig(level=logging.ERROR)
    ranked = score_policy(
        kubeconfig, policy_file, pod_file, prometheus_url, context=context, output=output, screen=screen()
    )
    return show(asyncio.run(ranked), output)


@click.command()
@cluster_options
@output_option("every decision the status keeps, not the last 5")
@click.argument("policies", metavar="[POLICY]...", nargs=-1, shell_complete=complete_policies)
def status(kubeconfig: Path | None, context: str | None, output: str, policies: tuple[str, ...]) -> int:
    """Each SchedulingPolicy (or those named): mode, Ready and why, the last decisions, what is
    unschedulable and why, and the rebalance state, from its status."""
    from promsched.operating.summaries import policies_status

    shown = policies_status(kubeconfig, policies, context=context, output=output, screen=screen())
    return show(asyncio.run(shown), output)


@click.command()
def version() -> int:
    """Print promsched's version."""
    return show(f"promsched {__version__}")


@click.command()
@click.argument("shell", type=click.Choice(SHELLS))
@click.pass_context
def completion(ctx: click.Context, shell: str) -> int:
    """Print the shell completion script for bash, zsh or fish.

    \b
    bash: source <(promsched completion bash)      (or write it to /etc/bash_completion.d/)
    zsh:  source <(promsched completion zsh)
    fish: promsched completion fish > ~/.config/fish/completions/promsched.fish
    """
    root = ctx.find_root()
    # `kubectl promsched` is the executable kubectl-promsched to a shell.
    program = (root.info_name or "promsched").replace(" ", "-")
    variable = "_{}_COMPLETE".format(program.replace("-", "_").upper())
    completer = get_completion_class(shell)
    assert completer is not None  # every one of SHELLS is click's
    return show(completer(root.command, {}, program, variable).source())


PLUGIN_COMMANDS = (explain, score, status, version, completion)
