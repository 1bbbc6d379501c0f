"""Feeding the cache: Kopf's watch events, the scheduler's own lists and watches, the secondary kinds."""
