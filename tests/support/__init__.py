"""Helpers shared by the test tiers (importable as `support`: pytest puts tests/ on sys.path)."""
