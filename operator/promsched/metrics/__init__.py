"""Prometheus snapshots and the scoring plugins that read them (no Kubernetes, no Kopf)."""
