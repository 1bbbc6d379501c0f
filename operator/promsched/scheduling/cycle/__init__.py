"""One scheduling decision: filter, score, rank, and preempt when the pod fits nowhere."""
