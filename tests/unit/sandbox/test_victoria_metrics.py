"""`promsched sandbox up --metrics victoriametrics`: how VictoriaMetrics and vmalert are built, started,
fed the backfilled history, and told apart from Prometheus in the sandbox's state and status."""

from __future__ import annotations

from pathlib import Path

import pytest

from promsched.cli import main
from promsched.sandbox import launching
from promsched.sandbox.builds import installing
from promsched.sandbox.builds.components import (
    VICTORIAMETRICS_BUILDS,
    GoBuild,
    victoriametrics_bin_dir,
)
from promsched.sandbox.control_plane.clusters import SandboxError, SandboxState
from promsched.sandbox.node_metrics import monitoring, victoria_metrics


def test_history_lines_become_prometheus_text_in_milliseconds() -> None:
    openmetrics = [
        'node_cpu_seconds_total{job="node-exporter",cpu="0",mode="idle"} 12.5 1700000000.123\n',
        'node_memory_MemTotal_bytes{job="node-exporter",instance="node-0:9100"} 1.7e+10 1700000002.000\n',
        "# EOF\n",
    ]
    assert list(victoria_metrics.prometheus_text(openmetrics)) == [
        'node_cpu_seconds_total{job="node-exporter",cpu="0",mode="idle"} 12.5 1700000000123\n',
        'node_memory_MemTotal_bytes{job="node-exporter",instance="node-0:9100"} 1.7e+10 1700000002000\n',
    ]


def test_the_scrape_configuration_is_prometheus_without_its_rules() -> None:
    state = SandboxState("/s", "/b", "r", ["node-0"], {"exporter": 1, "node_exporter": 2, "prometheus": 3})
    prometheus = monitoring._prometheus_config(state, monitoring.SCRAPE_SECONDS)
    config = victoria_metrics.scrape_config("2s", prometheus["scrape_configs"])  # type: ignore[arg-type]
    assert config == {"global": {"scrape_interval": "2s"}, "scrape_configs": prometheus["scrape_configs"]}


def test_prometheus_scrapes_and_evaluates_its_rules_as_often_as_asked() -> None:
    state = SandboxState("/s", "/b", "r", ["node-0"], {"exporter": 1, "node_exporter": 2, "prometheus": 3})
    assert monitoring._prometheus_config(state, monitoring.SCRAPE_SECONDS)["global"] == {
        "scrape_interval": "2s",
        "evaluation_interval": "2s",
    }
    # As kube-prometheus-stack scrapes node_exporter and evaluates the node mixin's rules.
    assert monitoring._prometheus_config(state, 30.0)["global"] == {
        "scrape_interval": "30s",
        "evaluation_interval": "30s",
    }


def test_the_defaults_that_would_hide_recent_samples_are_off(tmp_path: Path) -> None:
    server = victoria_metrics.server_command(tmp_path / "victoria-metrics", tmp_path, 8428)
    assert "-search.latencyOffset=0s" in server
    assert "-httpListenAddr=127.0.0.1:8428" in server
    assert f"-promscrape.config={tmp_path / victoria_metrics.SCRAPE_CONFIG_FILE}" in server
    rules = victoria_metrics.vmalert_command(tmp_path / "vmalert", tmp_path / "r.yml", "http://vm", 8880, 2)
    assert {"-rule.evalDelay=0s", "-evaluationInterval=2s", "-remoteWrite.url=http://vm"} <= set(rules)


def test_the_first_backend_serves_the_sandboxs_prometheus_url_and_the_others_their_own_ports() -> None:
    assert monitoring.port_names(["prometheus"]) == ["prometheus"]
    both = monitoring.port_names(["victoriametrics", "prometheus"])
    assert both == ["prometheus", "metrics:prometheus", "vmalert"]
    state = SandboxState("/s", "/b", "r", [], {"prometheus": 9090, "metrics:prometheus": 9091, "vmalert": 1})
    assert monitoring.metrics_url(state, "victoriametrics") == "http://127.0.0.1:9090"
    assert monitoring.metrics_url(state, "prometheus") == "http://127.0.0.1:9091"


def test_status_lists_the_processes_of_the_backends_that_were_started() -> None:
    common = launching.COMPONENTS[:-1]
    assert launching._components(["etcd", "victoria-metrics", "vmalert"]) == (
        *common,
        "victoria-metrics",
        "vmalert",
    )
    assert launching._components(["etcd"]) == launching.COMPONENTS
    assert launching._components(["prometheus", "victoria-metrics"])[-3:] == (
        "prometheus",
        "victoria-metrics",
        "vmalert",
    )


@pytest.mark.parametrize("metrics", [["graphite"], [], ["prometheus", "prometheus"]])
def test_an_unknown_or_repeated_backend_is_refused_before_anything_starts(
    tmp_path: Path, metrics: list[str]
) -> None:
    with pytest.raises(SandboxError, match="--metrics takes each of prometheus, victoriametrics"):
        launching.up(tmp_path, metrics=metrics)


def test_victoriametrics_builds_its_two_commands_from_its_wrapper_module_into_its_own_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PROMSCHED_CACHE", str(tmp_path))
    built: list[tuple[str, Path]] = []

    def build_go(build: GoBuild, target: Path, _report: installing.Report) -> None:
        built.append((build.binary, target))
        target.mkdir(parents=True, exist_ok=True)
        (target / build.binary).write_text("#!/bin/sh\n")
        (target / build.binary).chmod(0o755)

    monkeypatch.setattr(installing, "build_go", build_go)
    assert installing.install_victoriametrics(lambda _line: None) == victoriametrics_bin_dir()
    assert built == [(name, victoriametrics_bin_dir()) for name in ("victoria-metrics", "vmalert")]
    installing.install_victoriametrics(lambda _line: None)  # cached: nothing built again
    assert len(built) == 2
    for build in VICTORIAMETRICS_BUILDS:
        command, cwd, _env = installing._go_command(build, tmp_path)
        assert cwd is not None
        assert (cwd / "go.mod").exists()
        assert command[-1] == f"github.com/VictoriaMetrics/VictoriaMetrics/app/{build.binary}"
        assert any(flag.endswith("-tags-v1.151.0") for flag in build.ldflags)


def test_the_install_command_builds_victoriametrics_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    monkeypatch.setattr(installing, "install", lambda only=None: calls.append("sandbox") or Path())
    monkeypatch.setattr(installing, "install_victoriametrics", lambda: calls.append("vm") or Path())
    assert main(["sandbox", "install", "--with", "victoriametrics"]) == 0
    assert calls == ["sandbox", "vm"]


@pytest.mark.parametrize(
    ("arguments", "backend"), [([], "prometheus"), (["--metrics", "victoriametrics"], "victoriametrics")]
)
def test_sandbox_up_starts_the_backend_it_is_told(
    monkeypatch: pytest.MonkeyPatch, arguments: list[str], backend: str
) -> None:
    asked: list[object] = []

    def up(_directory: Path, **options: object) -> object:
        asked.append(options["metrics"])
        raise SandboxError("stop here")

    monkeypatch.setattr(launching, "up", up)
    assert main(["sandbox", "up", *arguments]) != 0
    assert asked == [(backend,)]
