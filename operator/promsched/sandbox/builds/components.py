"""The pinned components of the sandbox: what is built from Go modules and what comes from Debian.

Every version is fixed here so that two machines build the same control plane. The cache folder is
named after `SANDBOX_RELEASE`, so changing a pin builds into a fresh folder instead of mixing binaries.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

KUBERNETES_VERSION = "v1.37.2"
ETCD_VERSION = "v3.6.16"
KWOK_VERSION = "v0.7.0"
HELM_VERSION = "v3.22.0"
# helm reads the Kubernetes version it assumes for `.Capabilities` from ldflags; it tracks client-go.
HELM_KUBE_MINOR = "37"
PROMETHEUS_DEBIAN = "2.42.0+ds-5+deb12u1"
NODE_EXPORTER_DEBIAN = "1.5.0-1+b6"
# Trimaran (kube-scheduler with the out-of-tree plugins): one exact scheduler-plugins release, built on
# the Kubernetes release its go.mod pins (the first whose modules the proxy serves; see gomod/trimaran).
SCHEDULER_PLUGINS_VERSION = "v0.35.4-devel"
SCHEDULER_PLUGINS_KUBERNETES = "v1.35.4"
TRIMARAN_BINARY = "trimaran-scheduler"
# VictoriaMetrics single-node and vmalert, `promsched sandbox up --metrics victoriametrics`'s backend:
# the last release of the module the proxy serves that builds with the sandbox's Go (see
# gomod/victoriametrics).
VICTORIAMETRICS_VERSION = "v1.151.0"

SANDBOX_RELEASE = f"k8s-{KUBERNETES_VERSION}-etcd-{ETCD_VERSION}-kwok-{KWOK_VERSION}-helm-{HELM_VERSION}"
GOMOD_DIR = Path(__file__).parent / "gomod"


def cache_root() -> Path:
    """Where built binaries live: `$PROMSCHED_CACHE` or `$XDG_CACHE_HOME/promsched` (default ~/.cache)."""
    explicit = os.environ.get("PROMSCHED_CACHE")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "promsched"


def bin_dir() -> Path:
    return cache_root() / SANDBOX_RELEASE / "bin"


def trimaran_bin_dir() -> Path:
    """Trimaran's own folder, named after its pin: a new pin builds anew without touching the sandbox's
    binaries (nor a sandbox's start, which never needs Trimaran)."""
    return cache_root() / f"scheduler-plugins-{SCHEDULER_PLUGINS_VERSION}" / "bin"


def victoriametrics_bin_dir() -> Path:
    """VictoriaMetrics' own folder, named after its pin, as Trimaran's is."""
    return cache_root() / f"victoriametrics-{VICTORIAMETRICS_VERSION}" / "bin"


def _kube_ldflags(version: str = KUBERNETES_VERSION) -> list[str]:
    minor = version.split(".")[1]
    pairs = {
        "k8s.io/component-base/version.gitVersion": version,
        "k8s.io/component-base/version.gitMajor": "1",
        "k8s.io/component-base/version.gitMinor": minor,
        "k8s.io/component-base/version.gitTreeState": "clean",
        "k8s.io/client-go/pkg/version.gitVersion": version,
        "k8s.io/client-go/pkg/version.gitMajor": "1",
        "k8s.io/client-go/pkg/version.gitMinor": minor,
    }
    return [f"-X {name}={value}" for name, value in pairs.items()]


def _helm_ldflags() -> list[str]:
    pairs = {
        "helm.sh/helm/v3/internal/version.version": HELM_VERSION,
        "helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor": "1",
        "helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor": HELM_KUBE_MINOR,
        "helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor": "1",
        "helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor": HELM_KUBE_MINOR,
    }
    return [f"-X {name}={value}" for name, value in pairs.items()]


@dataclass(frozen=True)
class GoBuild:
    """One `go build` producing one binary.

    `module_dir` is a wrapper module shipped with promsched (for modules that `go install` refuses);
    when it is None, `package` is built at its pinned version in module-aware mode.
    """

    label: str
    binary: str
    package: str
    ldflags: tuple[str, ...] = ()
    module_dir: Path | None = None
    env: dict[str, str] = field(default_factory=dict)


KUBERNETES_COMMANDS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")

# One build per binary, so a selection builds only what it names; the Kubernetes commands share most of
# their packages, which the second and later builds take from Go's build cache.
GO_BUILDS: tuple[GoBuild, ...] = (
    GoBuild(
        label=f"etcd {ETCD_VERSION}",
        binary="etcd",
        package="go.etcd.io/etcd/server/v3",
        module_dir=GOMOD_DIR / "etcd",
    ),
    GoBuild(
        label=f"kwok {KWOK_VERSION}",
        binary="kwok",
        package=f"sigs.k8s.io/kwok/cmd/kwok@{KWOK_VERSION}",
    ),
    GoBuild(
        label=f"helm {HELM_VERSION}",
        binary="helm",
        package=f"helm.sh/helm/v3/cmd/helm@{HELM_VERSION}",
        ldflags=tuple(_helm_ldflags()),
    ),
    *(
        GoBuild(
            label=f"{name} {KUBERNETES_VERSION}",
            binary=name,
            package=f"k8s.io/kubernetes/cmd/{name}",
            ldflags=tuple(_kube_ldflags()),
            module_dir=GOMOD_DIR / "kubernetes",
        )
        for name in KUBERNETES_COMMANDS
    ),
)

# What `promsched sandbox up` starts or calls, and so all that `promsched demo` needs. The others in
# GO_BUILDS (helm, kube-scheduler) are the tests' and the benchmarks'.
SANDBOX_UP_BINARIES = frozenset({"etcd", "kube-apiserver", "kube-controller-manager", "kubectl", "kwok"})

TRIMARAN_BUILD = GoBuild(
    label=f"Trimaran (scheduler-plugins {SCHEDULER_PLUGINS_VERSION}, k8s {SCHEDULER_PLUGINS_KUBERNETES})",
    binary=TRIMARAN_BINARY,
    package="sigs.k8s.io/scheduler-plugins/cmd/scheduler",
    ldflags=tuple(_kube_ldflags(SCHEDULER_PLUGINS_KUBERNETES)),
    module_dir=GOMOD_DIR / "trimaran",
)

VICTORIAMETRICS_BINARIES = ("victoria-metrics", "vmalert")
# Each command reports the version it was stamped with (`-version`, /api/v1/status/buildinfo).
VICTORIAMETRICS_BUILDS = tuple(
    GoBuild(
        label=f"{name} {VICTORIAMETRICS_VERSION}",
        binary=name,
        package=f"github.com/VictoriaMetrics/VictoriaMetrics/app/{name}",
        ldflags=(
            "-X github.com/VictoriaMetrics/VictoriaMetrics/lib/buildinfo.Version="
            f"{name}-promsched-tags-{VICTORIAMETRICS_VERSION}",
        ),
        module_dir=GOMOD_DIR / "victoriametrics",
    )
    for name in VICTORIAMETRICS_BINARIES
)

# kwok's own node stages, read from its module at KWOK_VERSION. kwok v0.7.0 picks its default node
# heartbeat the wrong way round (with node leases on it rewrites every node's status every 20-45 s, as
# kubelets without leases did), so the sandbox names the stages itself: initialisation, and the
# heartbeat that goes with leases (status every 10-20 minutes, as kubelets report an unchanged status).
KWOK_MODULE = f"sigs.k8s.io/kwok@{KWOK_VERSION}"
KWOK_NODE_STAGE_FILES = (
    "kustomize/stage/node/fast/node-initialize.yaml",
    "kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
)
KWOK_NODE_STAGES = "kwok-node-stages.yaml"  # in the bin folder


@dataclass(frozen=True)
class DebianPackage:
    package: str
    version: str
    binary: str


DEBIAN_PACKAGES: tuple[DebianPackage, ...] = (
    DebianPackage("prometheus", PROMETHEUS_DEBIAN, "prometheus"),
    DebianPackage("prometheus-node-exporter", NODE_EXPORTER_DEBIAN, "prometheus-node-exporter"),
)
