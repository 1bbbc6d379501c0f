"""Simulated nodes' metrics: load profiles, pods' usage, the exporter, and Prometheus scraping it."""
