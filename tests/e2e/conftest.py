"""The e2e tier: the promsched operator running against the sandbox (fixtures in tests/conftest.py)."""
