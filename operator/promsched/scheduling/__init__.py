"""The scheduling core: queue, filters, scoring, assume cache, binding. Knows nothing of Kopf."""
