"""What the scheduler tells a pod and the cluster: events and conditions, through one bounded write queue."""
