"""The `promsched` command line, and `kubectl-promsched`, the kubectl plugin with what a user runs
against a cluster (explain, score, status, version, completion)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import click
from click.shell_completion import ShellComplete

from promsched import __version__
from promsched.commands.inspecting import PLUGIN_COMMANDS
from promsched.commands.operating import OPERATOR_COMMANDS
from promsched.commands.sandboxing import SANDBOX_COMMANDS

# What the sandbox needs beyond a plain install (the `sandbox` extra).
SANDBOX_EXTRA_MODULES = frozenset({"cryptography"})
PLUGIN_PROGRAM = "kubectl promsched"
CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 110}


def _group(help_text: str, commands: Sequence[click.Command]) -> click.Group:
    group = click.Group(help=help_text, context_settings=CONTEXT_SETTINGS)
    click.version_option(__version__, "--version", message="promsched %(version)s")(group)
    for command in commands:
        group.add_command(command)
    return group


promsched = _group(
    "A load-aware Kubernetes scheduler.", (*OPERATOR_COMMANDS, *PLUGIN_COMMANDS, *SANDBOX_COMMANDS)
)
kubectl_promsched = _group(
    "promsched as a kubectl plugin: why pods went where they went, and each policy's state.", PLUGIN_COMMANDS
)


def parse(argv: Sequence[str], group: click.Group = promsched) -> dict[str, Any]:
    """The parameters of the command `argv` names, as parsed (defaults included), without running it."""
    with group.make_context("promsched", list(argv), resilient_parsing=False) as context:
        names = [*context._protected_args, *context.args]
        command: click.Command | None = group
        while isinstance(command, click.Group):
            parent = context
            name, command, rest = command.resolve_command(parent, names)
            assert command is not None
            context = command.make_context(name, rest, parent=parent)
            names = [*getattr(context, "_protected_args", []), *context.args]
        return dict(context.params)


def main(argv: Sequence[str] | None = None, prog: str = "promsched", group: click.Group = promsched) -> int:
    from promsched.api.converting import ConversionError
    from promsched.kube.credentials import CredentialsError
    from promsched.operating.inspections import InspectError
    from promsched.operating.listening import StartupError
    from promsched.sandbox.builds.imaging import ImageError
    from promsched.sandbox.builds.installing import InstallError
    from promsched.sandbox.control_plane.clusters import SandboxError
    from promsched.sandbox.node_metrics.profiles import ProfileError

    try:
        result = group.main(
            args=list(argv) if argv is not None else None,
            prog_name=prog,
            complete_var="_{}_COMPLETE".format(prog.replace(" ", "_").replace("-", "_").upper()),
            standalone_mode=False,
        )
    except click.UsageError as error:
        _usage_error(error)
        return 2
    except click.ClickException as error:
        error.show()
        return error.exit_code
    except click.Abort:
        click.echo("Aborted!", err=True)
        return 1
    except (
        SandboxError,
        InstallError,
        ImageError,
        ProfileError,
        ConversionError,
        InspectError,
        CredentialsError,
        StartupError,
    ) as error:
        click.echo(f"{prog}: {error}", err=True)
        return 1
    except ModuleNotFoundError as error:
        if error.name not in SANDBOX_EXTRA_MODULES:
            raise
        click.echo(
            f"{prog}: the sandbox needs the `sandbox` extra, which this install lacks ({error.name}): "
            "from a checkout, pip install '.[sandbox]' (pipx: pipx install --force '.[sandbox]'); "
            f"from a wheel, pip install 'dist/promsched-{__version__}-py3-none-any.whl[sandbox]'",
            err=True,
        )
        return 1
    return result if isinstance(result, int) else 0


def _usage_error(error: click.UsageError) -> None:
    """As argparse said it, so scripts and logs that read these lines keep working: the usage, then
    `PROG COMMAND: error: argument FLAG: WHAT`."""
    context = error.ctx
    where = context.command_path if context is not None else "promsched"
    if context is not None:
        click.echo(context.get_usage(), err=True)
    if isinstance(error, click.BadParameter) and error.param is not None:
        named = "/".join(error.param.opts) if error.param.opts else error.param.human_readable_name
        click.echo(f"{where}: error: argument {named}: {error.message}", err=True)
    else:
        click.echo(f"{where}: error: {error.message}", err=True)


def kubectl_main() -> int:
    """`kubectl promsched ...`: kubectl runs `kubectl-promsched` from PATH with the arguments after it."""
    return main(prog=PLUGIN_PROGRAM, group=kubectl_promsched)


def kubectl_complete() -> int:
    """`kubectl_complete-promsched`: kubectl (1.26 and later) runs it from PATH to complete `kubectl promsched
    ...`, with the words after `promsched`, the last one the word being completed; it reads Cobra's answer,
    a completion a line, then `:4` (no file names)."""
    *args, incomplete = sys.argv[1:] or [""]
    completer = ShellComplete(kubectl_promsched, {}, PLUGIN_PROGRAM, "_KUBECTL_PROMSCHED_COMPLETE")
    for item in completer.get_completions(args, incomplete):
        click.echo(f"{item.value}\t{item.help}" if item.help else item.value)
    click.echo(":4")
    return 0


if __name__ == "__main__":
    sys.exit(main())
