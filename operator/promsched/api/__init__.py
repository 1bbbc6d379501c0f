"""The SchedulingPolicy API: pydantic models that are the single source of the CRD schema."""
