"""Wiring of Kubernetes events (through Kopf) into the scheduling core."""
