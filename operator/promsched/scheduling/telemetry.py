"""The operator's own metrics (served on /metrics), named as kube-scheduler names its equivalents."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

schedule_attempts = Counter(
    "promsched_schedule_attempts_total",
    "Scheduling attempts by result (scheduled, unschedulable, error) and policy.",
    ["result", "policy"],
)
attempt_duration = Histogram(
    "promsched_scheduling_attempt_duration_seconds",
    "Time to filter and score one pod.",
    ["policy"],
    buckets=LATENCY_BUCKETS,
)
e2e_latency = Histogram(
    "promsched_pod_scheduling_duration_seconds",
    "Time from a pod entering the queue to its binding.",
    ["policy"],
    buckets=LATENCY_BUCKETS,
)
event_loop_lag = Histogram(
    "promsched_event_loop_lag_seconds",
    "How much later than asked the event loop woke a task: the stalls every pod waits behind; "
    "during_refresh says whether a metrics refresh ran meanwhile.",
    ["during_refresh"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
)
pending_pods = Gauge("promsched_pending_pods", "Pods in the scheduling queue by sub-queue.", ["queue"])
leader = Gauge(
    "promsched_leader",
    "1 while this replica leads (holds the lease, or runs without leader election) and so schedules, "
    "else 0; as kube-scheduler's leader_election_master_status.",
)
policy_ready = Gauge(
    "promsched_policy_ready", "1 while the policy's Ready condition is True, else 0.", ["policy"]
)
snapshot_age = Gauge(
    "promsched_policy_snapshot_age_seconds",
    "Seconds since every plugin of the policy last had an answer from Prometheus (a plugin that never "
    "had one counts from when the policy started refreshing).",
    ["policy"],
)
refresh_interval = Gauge(
    "promsched_policy_refresh_interval_seconds", "The policy's spec.refreshInterval.", ["policy"]
)
bind_duration = Histogram(
    "promsched_binding_duration_seconds",
    "Duration of pods/binding requests.",
    ["result"],
    buckets=LATENCY_BUCKETS,
)
query_duration = Histogram(
    "promsched_prometheus_query_duration_seconds",
    "Duration of Prometheus queries by policy and plugin.",
    ["policy", "plugin"],
    buckets=LATENCY_BUCKETS,
)
query_errors = Counter(
    "promsched_prometheus_query_errors_total",
    "Failed Prometheus queries by policy and plugin.",
    ["policy", "plugin"],
)
query_warnings = Counter(
    "promsched_prometheus_query_warnings_total",
    "Metric queries answered with warnings or a partial result (Thanos, VictoriaMetrics cluster).",
    ["policy", "plugin"],
)
metric_age = Gauge(
    "promsched_metric_age_seconds",
    "Age of the newest samples of each plugin at the last refresh.",
    ["policy", "plugin"],
)
decisions_per_node = Counter("promsched_node_decisions_total", "Pods bound per node.", ["node"])
pod_estimates = Counter(
    "promsched_pod_estimates_total",
    "Usage estimates of decided pods (spec.estimation), by policy, resource (cpu, memory) and where the "
    "amount came from (siblings, limit, request, unrequested).",
    ["policy", "resource", "source"],
)
cache_drift = Counter(
    "promsched_cache_drift_total",
    "Differences between the cluster cache and a fresh list that no watch event explained, by kind "
    "(each one repaired).",
    ["kind"],
)
task_restarts = Counter(
    "promsched_task_restarts_total",
    "Background tasks (the scheduling loop, the rebalancer, the status writer, refreshes, the Lease...) "
    "restarted after they ended by an unexpected error, by task; the log holds each error's traceback.",
    ["task"],
)
api_writes_dropped = Counter(
    "promsched_api_writes_dropped_total",
    "Informational writes (events, pod conditions) dropped because their queue was full, by kind.",
    ["kind"],
)
rebalance_evictions = Counter(
    "promsched_rebalance_evictions_total",
    "Pods evicted off hot nodes by a policy's rebalance, by the plugin the node was hot by.",
    ["policy", "reason"],
)
rebalance_blocked = Counter(
    "promsched_rebalance_blocked_total",
    "Moves off hot nodes that did not happen, by why (NoDestination, DestinationOverTarget, "
    "PodDisruptionBudget, MetricsNotFresh, ...).",
    ["reason"],
)
rebalance_cycle_duration = Histogram(
    "promsched_rebalance_cycle_duration_seconds",
    "Time one rebalance cycle took (its sustained-value queries, plan and evictions), by policy; the count "
    "is the cycles run (as the descheduler's descheduler_loop_duration_seconds).",
    ["policy"],
    buckets=LATENCY_BUCKETS,
)
rebalance_cycle_errors = Counter(
    "promsched_rebalance_cycle_errors_total",
    "Rebalance cycles that ended by an error (Prometheus or the API server unreachable, or a bug; the "
    "log says which), by policy. The next cycle runs as usual.",
    ["policy"],
)
preemption_attempts = Counter(
    "promsched_preemption_attempts_total",
    "Preemption attempts for pods that fit nowhere (kube-scheduler's scheduler_preemption_attempts_total).",
)
preemption_victims = Histogram(
    "promsched_preemption_victims",
    "Victims chosen per preemption (kube-scheduler's scheduler_preemption_victims).",
    buckets=(1, 2, 4, 8, 16, 32, 64),
)
preemption_evictions = Counter(
    "promsched_preemption_evictions_total",
    "Evictions of preemption victims by result: evicted (or already gone), refused (429: a "
    "PodDisruptionBudget allows no disruption), failed.",
    ["result"],
)
