"""Credentials as kubectl finds them: exec plugins (cached until they expire), merged KUBECONFIG files,
contexts, proxies, tls-server-name, the in-cluster ServiceAccount, and temp files gone at exit.

The kubeconfigs and plugins are real files in tmp_path, read by the `kubernetes` package's loader."""

from __future__ import annotations

import base64
import os
import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from promsched.kube import credentials as credentials_module
from promsched.kube.configuring import discover, from_kubeconfig, in_cluster, kubeconfig_paths
from promsched.kube.credentials import (
    EXPIRY_MARGIN,
    TOKEN_FILE_REREAD,
    CredentialsError,
    ExecToken,
    FileToken,
)
from support.kubeconfigs import exec_plugin, exec_user, kubeconfig, runs_of, write_kubeconfig

SERVER = "https://api.example:6443"
EXPIRES = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)


def single(
    tmp_path: Path, user: dict[str, Any], cluster: dict[str, Any] | None = None, name: str = "config"
) -> Path:
    """A kubeconfig with one context, `main`, of cluster `api` and user `me`."""
    return write_kubeconfig(
        tmp_path / name,
        kubeconfig(
            clusters={"api": cluster or {"server": SERVER}},
            users={"me": user},
            contexts={"main": {"cluster": "api", "user": "me", "namespace": "shop"}},
            current="main",
        ),
    )


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[datetime]:
    """The time token sources see: set `clock[0]`."""
    now = [EXPIRES - timedelta(hours=1)]
    monkeypatch.setattr(credentials_module, "_now", lambda: now[0])
    return now


# ----- exec plugins ---------------------------------------------------------------------------------------


def test_an_exec_plugins_credential_is_kept_until_it_expires(tmp_path: Path, clock: list[datetime]) -> None:
    runs = tmp_path / "runs.log"
    plugin = exec_plugin(tmp_path / "plugin", "token-$n", expires="2030-01-01T12:00:00Z", runs=runs)
    credentials = from_kubeconfig(single(tmp_path, exec_user(str(plugin))))
    assert credentials.token is not None
    assert runs_of(runs) == 1, "the plugin runs when the kubeconfig is loaded, so a broken one fails there"
    assert (credentials.token.fetch(), credentials.token.fetch()) == ("token-1", "token-1")
    assert runs_of(runs) == 1
    clock[0] = EXPIRES - EXPIRY_MARGIN
    assert credentials.token.cached() is None
    assert credentials.token.fetch() == "token-2"
    assert runs_of(runs) == 2


def test_a_credential_without_expiry_is_kept_until_rejected(tmp_path: Path) -> None:
    runs = tmp_path / "runs.log"
    plugin = exec_plugin(tmp_path / "plugin", "token-$n", runs=runs)
    token = from_kubeconfig(single(tmp_path, exec_user(str(plugin)))).token
    assert token is not None
    assert token.fetch() == "token-1"
    assert token.refresh(rejected="token-1") == "token-2"
    # A caller that saw token-1 rejected too gets the renewed token without another run.
    assert token.refresh(rejected="token-1") == "token-2"
    assert runs_of(runs) == 2


def test_the_plugin_gets_its_arguments_and_environment_and_runs_in_the_kubeconfigs_folder(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "kube"
    folder.mkdir()
    exec_plugin(folder / "plugin", "$1-$REGION-$(basename $(pwd))")
    user = exec_user("./plugin", "eks")
    user["exec"]["env"] = [{"name": "REGION", "value": "eu-west-1"}]
    token = from_kubeconfig(single(folder, user)).token
    assert token is not None
    assert token.fetch() == "eks-eu-west-1-kube"


def test_a_missing_plugin_is_named_with_its_install_hint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    hint = "aws is the AWS CLI: https://aws.amazon.com/cli/"
    config = single(tmp_path, exec_user("aws", "eks", "get-token", install_hint=hint))
    with pytest.raises(CredentialsError) as raised:
        from_kubeconfig(config)
    assert str(raised.value) == f"exec plugin aws not found on PATH; {hint}"


def test_a_failing_plugin_says_what_it_printed(tmp_path: Path) -> None:
    plugin = tmp_path / "plugin"
    plugin.write_text("#!/bin/sh\necho 'the SSO session has expired' >&2\nexit 3\n")
    plugin.chmod(0o755)
    with pytest.raises(CredentialsError, match=r"returned 3\. the SSO session has expired"):
        from_kubeconfig(single(tmp_path, exec_user(str(plugin))))


def test_a_plugin_that_prints_no_token_is_an_error_naming_it(tmp_path: Path) -> None:
    plugin = tmp_path / "plugin"
    plugin.write_text(
        '#!/bin/sh\necho \'{"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential", '
        '"status": {}}\'\n'
    )
    plugin.chmod(0o755)
    with pytest.raises(CredentialsError, match=rf"exec plugin {plugin} printed an ExecCredential without"):
        from_kubeconfig(single(tmp_path, exec_user(str(plugin))))


def test_an_exec_token_parses_rfc3339_expiry_and_refuses_other_text() -> None:
    token = ExecToken("p", lambda: {"token": "t", "expirationTimestamp": "2030-01-01T12:00:00.5+01:00"})
    assert token.fetch() == "t"
    assert token._expiry == datetime(2030, 1, 1, 11, 0, 0, 500000, tzinfo=UTC)
    broken = ExecToken("p", lambda: {"token": "t", "expirationTimestamp": "tomorrow"})
    with pytest.raises(
        CredentialsError, match=re.escape("status.expirationTimestamp 'tomorrow', which is not RFC 3339")
    ):
        broken.fetch()


# ----- files, contexts, settings ----------------------------------------------------------------------------


def test_kubeconfig_files_are_merged_as_kubectl_merges_them(tmp_path: Path) -> None:
    first_dir, second_dir = tmp_path / "a", tmp_path / "b"
    first_dir.mkdir()
    second_dir.mkdir()
    (second_dir / "token").write_text("from-b\n")
    first = write_kubeconfig(
        first_dir / "config",
        kubeconfig(
            clusters={"api": {"server": "https://a.example"}},
            contexts={"a": {"cluster": "api", "user": "me"}},
            current="a",
        ),
    )
    second = write_kubeconfig(
        second_dir / "config",
        kubeconfig(
            clusters={"api": {"server": "https://ignored.example"}, "other": {"server": "https://b.example"}},
            users={"me": {"tokenFile": "token"}},
            contexts={"a": {"cluster": "other"}, "b": {"cluster": "other", "user": "me", "namespace": "b"}},
            current="b",
        ),
    )
    variable = f"{first}{os.pathsep}{os.pathsep}{tmp_path / 'missing'}{os.pathsep}{second}"
    assert kubeconfig_paths(variable) == [first, tmp_path / "missing", second]
    merged = discover(environ={"KUBECONFIG": variable})
    # The first file to name a cluster, context or current-context wins; a user may come from another
    # file, and its relative paths are relative to that file.
    listed = os.pathsep.join(str(path) for path in (first, tmp_path / "missing", second))
    assert (merged.server, merged.source) == ("https://a.example", f"context a of {listed}")
    assert merged.token is not None
    assert merged.token.fetch() == "from-b"
    assert merged.token.description == f"the token in {second_dir / 'token'}"
    chosen = discover(context="b", environ={"KUBECONFIG": variable})
    assert (chosen.server, chosen.default_namespace) == ("https://b.example", "b")


def test_an_empty_kubeconfig_file_is_an_empty_config_as_kubectl_reads_it(tmp_path: Path) -> None:
    empty, blank = tmp_path / "empty", tmp_path / "blank"
    empty.write_text("")
    blank.write_text("# nothing yet\n\n")
    config = single(tmp_path, {"token": "abc"})
    variable = os.pathsep.join(str(path) for path in (empty, tmp_path / "missing", blank, config))
    credentials = discover(environ={"KUBECONFIG": variable})
    assert (credentials.server, credentials.default_namespace) == (SERVER, "shop")
    with pytest.raises(CredentialsError, match=rf"kubeconfig {empty} holds no configuration"):
        discover(empty)


def test_kubeconfig_wins_over_the_variable_and_the_context_must_exist(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = single(tmp_path, {"token": "abc"})
    credentials = discover(config, environ={"KUBECONFIG": str(tmp_path / "other")})
    assert (credentials.server, credentials.default_namespace) == (SERVER, "shop")
    assert credentials.token is not None
    assert (credentials.token.fetch(), credentials.token.refreshable) == ("abc", False)
    with pytest.raises(CredentialsError) as raised:
        discover(config, context="prod")
    assert str(raised.value) == f"context 'prod' is not in kubeconfig {config} (it has: main)"
    no_current = write_kubeconfig(
        tmp_path / "no-current",
        kubeconfig(clusters={"api": {"server": SERVER}}, contexts={"x": {"cluster": "api"}}),
    )
    with pytest.raises(CredentialsError, match=r"sets no current-context; pass --context \(one of: x\)"):
        from_kubeconfig(no_current)
    with pytest.raises(CredentialsError, match=rf"kubeconfig {tmp_path / 'nope'} does not exist"):
        discover(tmp_path / "nope")
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(CredentialsError, match="--context prod: no kubeconfig to find it in"):
        discover(context="prod", environ={"KUBERNETES_SERVICE_HOST": "10.0.0.1"})


def test_proxy_and_tls_server_name_are_read(tmp_path: Path) -> None:
    cluster = {
        "server": SERVER,
        "proxy-url": "http://proxy.corp:3128",
        "tls-server-name": "kubernetes.default.svc",
        "insecure-skip-tls-verify": False,
    }
    credentials = from_kubeconfig(single(tmp_path, {"token": "abc"}, cluster))
    assert (credentials.proxy, credentials.tls_server_name) == (
        "http://proxy.corp:3128",
        "kubernetes.default.svc",
    )
    assert not credentials.insecure
    socks = single(tmp_path, {"token": "abc"}, {"server": SERVER, "proxy-url": "socks5://proxy.corp:1080"})
    with pytest.raises(
        CredentialsError, match=re.escape("proxy-url socks5://proxy.corp:1080 is not an http:// or https://")
    ):
        from_kubeconfig(socks)


@pytest.mark.parametrize(
    ("user", "message"),
    [
        ({"username": "admin", "password": "secret"}, "has a username and password, which Kubernetes"),
        ({"auth-provider": {"name": "gcp"}}, "uses auth-provider 'gcp', which kubectl dropped in 1.26"),
        ({"client-certificate": "missing.crt", "client-key": "missing.key"}, "File does not exist"),
    ],
)
def test_a_user_that_cannot_work_says_why(tmp_path: Path, user: dict[str, Any], message: str) -> None:
    with pytest.raises(CredentialsError, match=message):
        from_kubeconfig(single(tmp_path, user))


def test_no_kubeconfig_and_no_cluster_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(CredentialsError, match="pass --kubeconfig, set KUBECONFIG, or run in a cluster"):
        discover(environ={})


# ----- in a cluster ---------------------------------------------------------------------------------------


def service_account(tmp_path: Path) -> Path:
    folder = tmp_path / "serviceaccount"
    folder.mkdir()
    (folder / "token").write_text("first")
    (folder / "ca.crt").write_text("-----BEGIN CERTIFICATE-----\n")
    (folder / "namespace").write_text("promsched\n")
    return folder


def test_in_a_cluster_the_service_account_token_is_reread_as_it_rotates(
    tmp_path: Path, clock: list[datetime]
) -> None:
    folder = service_account(tmp_path)
    environ = {"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "443"}
    credentials = in_cluster(folder, environ)
    assert (credentials.server, credentials.ca_path) == ("https://[fd00::1]:443", str(folder / "ca.crt"))
    assert credentials.default_namespace == "promsched"
    assert isinstance(credentials.token, FileToken)
    assert credentials.token.fetch() == "first"
    (folder / "token").write_text("second")
    assert credentials.token.fetch() == "first"
    clock[0] += TOKEN_FILE_REREAD
    assert credentials.token.fetch() == "second"
    (folder / "token").write_text("third")
    assert credentials.token.refresh(rejected="second") == "third"


def test_in_a_cluster_without_a_token_says_what_is_missing(tmp_path: Path) -> None:
    folder = service_account(tmp_path)
    (folder / "token").unlink()
    environ = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    with pytest.raises(
        CredentialsError, match=r"in-cluster ServiceAccount .*: Service token file does not exist"
    ):
        in_cluster(folder, environ)
    with pytest.raises(CredentialsError, match="Service host/port is not set"):
        in_cluster(folder, {})


# ----- temp files -------------------------------------------------------------------------------------------


def test_inline_certificates_are_files_while_the_process_runs_and_gone_after(tmp_path: Path) -> None:
    def data(text: str) -> str:
        return base64.b64encode(text.encode()).decode()

    config = single(
        tmp_path,
        {"client-certificate-data": data("CERT"), "client-key-data": data("KEY")},
        {"server": SERVER, "certificate-authority-data": data("CA")},
    )
    program = (
        "import sys\n"
        "from pathlib import Path\n"
        "from promsched.kube.configuring import from_kubeconfig\n"
        "c = from_kubeconfig(sys.argv[1])\n"
        "for path in (c.ca_path, c.certificate_path, c.private_key_path):\n"
        "    print(path, Path(path).read_text())\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", program, str(config)], capture_output=True, text=True, check=True, timeout=60
    )
    written = [line.split() for line in result.stdout.splitlines()]
    assert [content for _path, content in written] == ["CA", "CERT", "KEY"]
    paths = [Path(path) for path, _content in written]
    assert len({path.parent for path in paths}) == 1
    assert not paths[0].parent.exists(), "the folder of inline certificates outlived the process"
