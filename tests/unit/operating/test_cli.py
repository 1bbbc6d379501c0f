"""The command line as a kubectl user meets it: every command's --help, the plugin's commands, -n, -o,
the PROMSCHED_* variables, and shell completion (click's protocol, and bash itself)."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import click
import pytest
from click.shell_completion import BashComplete

from promsched import cli
from promsched.operating import inspecting, listing
from promsched.operating.inspections import InspectError
from support import objects, policies
from support.fake_apis import FakeSender

BIN = Path(sys.executable).parent
DECISION = {
    "pod": "shop/web-0",
    "node": "node-1",
    "time": "2030-01-01T10:00:01Z",
    "latencyMs": 12.0,
    "generation": 1,
    "mode": "Enforce",
}


def pod_object(name: str = "web-0") -> dict[str, Any]:
    return objects.pod_object(name, "shop", node_name="node-1", created="2030-01-01T10:00:00Z")


def command_paths(group: click.Group, prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    for name, command in group.commands.items():
        yield (*prefix, name)
        if isinstance(command, click.Group):
            yield from command_paths(command, (*prefix, name))


@pytest.mark.parametrize("path", list(command_paths(cli.promsched)), ids=" ".join)
def test_every_command_has_help(path: tuple[str, ...], capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main([*path, "--help"]) == 0
    assert capsys.readouterr().out.startswith(f"Usage: promsched {' '.join(path)} ")


def test_the_plugin_carries_what_a_user_runs_against_a_cluster(capsys: pytest.CaptureFixture[str]) -> None:
    assert set(cli.kubectl_promsched.commands) == {"explain", "score", "status", "version", "completion"}
    for path in command_paths(cli.kubectl_promsched):
        assert cli.main([*path, "--help"], prog=cli.PLUGIN_PROGRAM, group=cli.kubectl_promsched) == 0
        assert capsys.readouterr().out.startswith(f"Usage: kubectl promsched {' '.join(path)} ")
    for operator_only in ("run", "sandbox", "demo"):
        assert cli.main([operator_only], prog=cli.PLUGIN_PROGRAM, group=cli.kubectl_promsched) == 2
        assert capsys.readouterr().err.splitlines()[-1] == (
            f"kubectl promsched: error: No such command '{operator_only}'."
        )


def test_options_name_their_environment_variable_and_read_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["explain", "--help"]) == 0
    shown = " ".join(capsys.readouterr().out.split())
    for variable in ("PROMSCHED_CONTEXT", "PROMSCHED_NAMESPACE", "PROMSCHED_OUTPUT"):
        assert f"env var: {variable}]" in shown
    monkeypatch.setenv("PROMSCHED_NAMESPACE", "shop")
    monkeypatch.setenv("PROMSCHED_OUTPUT", "yaml")
    assert cli.parse(["explain", "web-0"]) | {"kubeconfig": None} == {
        "kubeconfig": None,
        "context": None,
        "namespace": "shop",
        "output": "yaml",
        "pod": "web-0",
    }
    assert cli.parse(["explain", "-n", "web", "web-0", "-o", "json"])["namespace"] == "web"  # flags win


@pytest.mark.parametrize("output", ["table", "wide", "json", "yaml", "jsonpath={.decision.node}"])
def test_every_kubectl_output_format_is_taken(output: str) -> None:
    assert cli.parse(["status", "-o", output])["output"] == output


def test_an_unknown_output_format_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["score", "--policy", "p.yaml", "-o", "jsonpath="]) == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "promsched score: error: argument -o/--output: must be one of table, wide, json, yaml or "
        "jsonpath=TEMPLATE, not 'jsonpath='"
    )


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> FakeSender:
    """explain's API server: pod shop/web-0 decided by policy web; the context's namespace is shop."""
    policy = policies.policy_object("web", policies.spec_document(), status={"recentDecisions": [DECISION]})
    api = FakeSender(
        {"/api/v1/namespaces/shop/pods/web-0": pod_object(), listing.POLICIES_PATH: {"items": [policy]}},
        strict=True,
    )

    @contextlib.asynccontextmanager
    async def connected(_kubeconfig: Path | None, _context: str | None = None) -> AsyncIterator[Any]:
        api.credentials = SimpleNamespace(default_namespace="shop")  # type: ignore[attr-defined]
        yield api

    monkeypatch.setattr(inspecting, "connected", connected)
    return api


@pytest.mark.parametrize(
    "arguments",
    [["-n", "shop", "web-0"], ["shop/web-0"], ["web-0"], ["--namespace=shop", "shop/web-0"]],
    ids=["-n", "NAMESPACE/POD", "the context's namespace", "both, the same"],
)
def test_explain_finds_the_pod_in_its_namespace(
    cluster: FakeSender, arguments: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["explain", *arguments, "-o", "jsonpath={.pod} on {.decision.node}"]) == 0
    assert capsys.readouterr().out == "shop/web-0 on node-1"  # as kubectl's: no newline added


def test_a_jsonpath_the_document_cannot_follow_is_one_clean_line(
    cluster: FakeSender, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["explain", "shop/web-0", "-o", "jsonpath={.decision.nodes}"]) == 1
    assert capsys.readouterr().err == "promsched: {.decision.nodes}: nodes is not found\n"


def test_two_namespaces_for_one_pod_are_refused(
    cluster: FakeSender, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["explain", "-n", "web", "shop/web-0"]) == 1
    assert capsys.readouterr().err == (
        "promsched: 'shop/web-0' is in namespace shop, not web (-n): give one of them\n"
    )


async def test_a_pod_that_does_not_exist_gets_the_near_names_in_its_namespace() -> None:
    pods = [pod_object(name) for name in ("web-0", "web-1", "db-0")]
    api = FakeSender({"/api/v1/namespaces/shop/pods": {"items": pods}}, strict=True)
    with pytest.raises(InspectError) as raised:
        await inspecting.explain(api, "shop", "web0")
    assert str(raised.value) == (
        "pod shop/web0 not found (did you mean web-0 or web-1?); list the pods with: kubectl get pods -n shop"
    )


def completions(args: list[str], incomplete: str) -> list[str]:
    complete = BashComplete(cli.promsched, {}, "promsched", "_PROMSCHED_COMPLETE")
    return [item.value for item in complete.get_completions(args, incomplete)]


def test_pod_and_policy_names_complete_from_the_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[tuple[Any, ...]] = []

    async def pods(*args: Any) -> list[str]:
        asked.append(args)
        return [name for name in ("web-0", "web-1") if name.startswith(args[-1])]

    async def policies(*args: Any) -> list[str]:
        asked.append(args)
        return ["sandbox"]

    monkeypatch.setattr(listing, "complete_pods", pods)
    monkeypatch.setattr(listing, "complete_policies", policies)
    assert completions(["explain", "--context", "dev", "-n", "shop"], "web-") == ["web-0", "web-1"]
    assert completions(["explain"], "shop/web-1") == ["shop/web-1"]
    assert completions(["status"], "s") == ["sandbox"]
    assert asked == [(None, "dev", "shop", "web-"), (None, None, "shop", "web-1"), (None, None, "s")]


def test_completion_offers_nothing_when_the_cluster_cannot_be_read(monkeypatch: pytest.MonkeyPatch) -> None:
    async def unreachable(*_args: Any) -> list[str]:
        raise InspectError("cannot reach the API server")

    monkeypatch.setattr(listing, "complete_pods", unreachable)
    assert completions(["explain"], "we") == []


def test_commands_and_output_formats_complete() -> None:
    assert completions([], "s") == ["sandbox", "score", "status"]
    assert completions(["explain", "-o"], "j") == ["json", "jsonpath="]


def run_completion(words: str, cword: int) -> list[str]:
    env = dict(os.environ, COMP_WORDS=words, COMP_CWORD=str(cword), _PROMSCHED_COMPLETE="bash_complete")
    done = subprocess.run(
        [sys.executable, "-m", "promsched.cli"], env=env, capture_output=True, text=True, check=True
    )
    return done.stdout.splitlines()


def test_the_bash_completion_protocol_is_clicks() -> None:
    assert run_completion("promsched ex", 1) == ["plain,explain"]
    assert run_completion("promsched sandbox ", 2) == [
        f"plain,{name}" for name in ("down", "image", "install", "load", "status", "up")
    ]


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")
def test_the_bash_script_completes_in_bash(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["completion", "bash"]) == 0
    script = capsys.readouterr().out
    assert "complete -o nosort -F _promsched_completion promsched" in script
    shell = (
        f"{script}\nCOMP_WORDS=(promsched completion z); COMP_CWORD=2; _promsched_completion promsched; "
        'printf "%s\\n" "${COMPREPLY[@]}"'
    )
    env = dict(os.environ, PATH=f"{BIN}:{os.environ['PATH']}")
    done = subprocess.run(["bash", "-c", shell], env=env, capture_output=True, text=True, check=True)
    assert done.stdout.splitlines() == ["zsh"]


@pytest.mark.parametrize("shell", ["zsh", "fish"])
def test_zsh_and_fish_scripts_are_generated(shell: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["completion", shell]) == 0
    assert "_PROMSCHED_COMPLETE" in capsys.readouterr().out
    assert cli.main(["completion", shell], prog=cli.PLUGIN_PROGRAM, group=cli.kubectl_promsched) == 0
    assert "_KUBECTL_PROMSCHED_COMPLETE" in capsys.readouterr().out


def test_kubectls_plugin_completion_gets_cobras_answer(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "argv", ["kubectl_complete-promsched", "explain", "-o", "j"])
    assert cli.kubectl_complete() == 0
    assert capsys.readouterr().out == "json\njsonpath=\n:4\n"
    monkeypatch.setattr(sys, "argv", ["kubectl_complete-promsched", "r"])
    assert cli.kubectl_complete() == 0
    assert capsys.readouterr().out == ":4\n"  # run is not the plugin's


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["version"]) == 0
    assert cli.main(["--version"]) == 0
    version = f"promsched {cli.__version__}\n"
    assert capsys.readouterr().out == version * 2
