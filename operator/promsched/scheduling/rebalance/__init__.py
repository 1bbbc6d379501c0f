"""Rebalance cycles: which nodes stayed hot, what moves off them, and the evictions that move it."""
