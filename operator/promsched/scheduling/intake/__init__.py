"""Feeding the cache: Kopf's watch events, the scheduler's own lists and watches, and the kinds only some filters read."""
