"""What the commands share: kubectl's cluster flags, `-o`, environment variables, shell completion from
the cluster, and how a result reaches the terminal."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

import click
from click.shell_completion import CompletionItem

from promsched.operating.inspections import JSONPATH_PREFIX, TABLE, WIDE
from promsched.operating.tables import Screen, screen_of

F = TypeVar("F", bound=Callable[..., Any])
OUTPUT_FORMATS = (TABLE, WIDE, "json", "yaml")


class OutputFormat(click.ParamType[str]):
    """`-o`: table (default), wide, json, yaml, or jsonpath=TEMPLATE, as kubectl takes them."""

    name = "FORMAT"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        text = str(value)
        if text not in OUTPUT_FORMATS and not (
            text.startswith(JSONPATH_PREFIX) and len(text) > len(JSONPATH_PREFIX)
        ):
            self.fail(
                f"must be one of {', '.join(OUTPUT_FORMATS)} or jsonpath=TEMPLATE, not {text!r}", param, ctx
            )
        return text

    def shell_complete(
        self, ctx: click.Context, param: click.Parameter, incomplete: str
    ) -> list[CompletionItem]:
        return [
            CompletionItem(name) for name in (*OUTPUT_FORMATS, JSONPATH_PREFIX) if name.startswith(incomplete)
        ]


def env_option(*names: str, env: str | None = None, **settings: Any) -> Callable[[F], F]:
    """A click option whose default may come from environment variable `env`, shown in --help."""
    return click.option(*names, envvar=env, show_envvar=env is not None, **settings)


def cluster_options(command: F) -> F:
    """--kubeconfig and --context, found as kubectl finds them."""
    command = env_option(
        "--context",
        env="PROMSCHED_CONTEXT",
        help="the kubeconfig context to use (default: its current-context)",
    )(command)
    return click.option(
        "--kubeconfig",
        type=click.Path(dir_okay=False, path_type=Path),
        help="default: $KUBECONFIG (files joined with ':' are merged), in-cluster, ~/.kube/config",
    )(command)


def output_option(wide: str) -> Callable[[F], F]:
    """-o, with what `wide` adds to the table for this command."""
    return env_option(
        "-o",
        "--output",
        env="PROMSCHED_OUTPUT",
        type=OutputFormat(),
        default=TABLE,
        help=f"table (default); wide: {wide}; json, yaml or jsonpath=TEMPLATE for scripts",
    )


def cluster_names(
    ctx: click.Context, lister: Callable[..., Coroutine[Any, Any, list[str]]], *args: Any
) -> list[str]:
    """Names read from the cluster of the options given so far, for shell completion: none on any error,
    as a shell must not show a traceback while one presses Tab."""
    kubeconfig, context = ctx.params.get("kubeconfig"), ctx.params.get("context")
    try:
        return asyncio.run(asyncio.wait_for(lister(kubeconfig, context, *args), timeout=5))
    except Exception:
        return []


def complete_pods(ctx: click.Context, _param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    from promsched.operating.listing import complete_pods as names

    namespace, slash, prefix = incomplete.rpartition("/")
    found = cluster_names(ctx, names, namespace or ctx.params.get("namespace"), prefix)
    return [CompletionItem(f"{namespace}{slash}{name}") for name in found]


def complete_policies(ctx: click.Context, _param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    from promsched.operating.listing import complete_policies as names

    return [CompletionItem(name) for name in cluster_names(ctx, names, incomplete)]


def show(text: str, output: str = TABLE) -> int:
    """Print a command's result; on a terminal it may hold colour, which click drops in a pipe. As
    kubectl's, a jsonpath's text ends where the template ends: no newline is added."""
    click.echo(text, nl=not output.startswith(JSONPATH_PREFIX))
    return 0


def screen() -> Screen:
    """How stdout shows tables: colour and width on a terminal, plain text otherwise (NO_COLOR too)."""
    return screen_of(sys.stdout)
