"""SchedulingPolicies as the scheduler runs them: each one's refresher, status and decision records."""
