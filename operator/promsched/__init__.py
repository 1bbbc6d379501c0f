"""promsched: a load-aware Kubernetes scheduler driven by Prometheus node metrics."""

__version__ = "0.1.0"
