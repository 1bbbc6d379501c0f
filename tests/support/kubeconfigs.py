"""Kubeconfig files and exec credential plugins written for a test, shaped as EKS, GKE and AKS hand
them out: a user whose token comes from running a command."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

EXEC_API_VERSION = "client.authentication.k8s.io/v1"


def kubeconfig(
    *,
    clusters: Mapping[str, Mapping[str, Any]] | None = None,
    users: Mapping[str, Mapping[str, Any]] | None = None,
    contexts: Mapping[str, Mapping[str, Any]] | None = None,
    current: str | None = None,
) -> dict[str, Any]:
    document: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": dict(c)} for name, c in (clusters or {}).items()],
        "users": [{"name": name, "user": dict(u)} for name, u in (users or {}).items()],
        "contexts": [{"name": name, "context": dict(c)} for name, c in (contexts or {}).items()],
    }
    if current is not None:
        document["current-context"] = current
    return document


def write_kubeconfig(path: Path, document: Mapping[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(dict(document)))
    path.chmod(0o600)
    return path


def exec_user(command: str, *args: str, install_hint: str | None = None) -> dict[str, Any]:
    """A kubeconfig user whose credential an exec plugin prints, as `aws eks update-kubeconfig` writes."""
    plugin: dict[str, Any] = {
        "apiVersion": EXEC_API_VERSION,
        "command": command,
        "args": list(args),
        "interactiveMode": "Never",
    }
    if install_hint is not None:
        plugin["installHint"] = install_hint
    return {"exec": plugin}


def exec_plugin(path: Path, token: str, *, expires: str | None = None, runs: Path | None = None) -> Path:
    """An executable script at `path` that prints an ExecCredential. `token` is shell text inside double
    quotes (`token-$n`, `$(kubectl create token ...)`); with `runs`, each run appends a line to that file
    and `$n` is the number of runs so far."""
    status: dict[str, str] = {"token": "$token"}
    if expires is not None:
        status["expirationTimestamp"] = expires
    credential = json.dumps({"apiVersion": EXEC_API_VERSION, "kind": "ExecCredential", "status": status})
    counting = f'echo run >> "{runs}"\nn=$(wc -l < "{runs}")\n' if runs is not None else ""
    path.write_text(f'#!/bin/sh\nset -e\n{counting}token="{token}"\ncat <<EOF\n{credential}\nEOF\n')
    path.chmod(0o755)
    return path


def runs_of(runs: Path) -> int:
    """How many times a plugin written with `runs` ran."""
    return len(runs.read_text().splitlines()) if runs.exists() else 0
