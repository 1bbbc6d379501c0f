"""The binding cycle: volumes first (PreBind), the binding, and evictions for a preemption."""
