"""`make bench`'s repeated runs: medians, ranges, and the targets read from medians."""

from __future__ import annotations

import math
from typing import Any

from bench import commanding, reporting
from bench.benchmark import _parse_args
from bench.quality_measures import percentile
from bench.summaries import rows, summarise
from bench.targets import targets
from bench.variants import LABELS


def run(
    variant: str, mode: str, throughput: float, cpu_s: float, bound: int = 100, **extra: Any
) -> dict[str, Any]:
    return {
        "variant": variant,
        "label": LABELS[variant],
        "mode": mode,
        "pods": 100,
        "bound": bound,
        "throughput": throughput,
        "p99_ms": 10 * throughput,
        "scheduler_cpu_s": cpu_s,
        "peak_rss_mb": 80.0,
        "queries_per_pod": 0.01,
        "spread": {"cpu_std": throughput / 10, "memory_std": 1.0},
        "latencies_s": [throughput],
        "watch_restarts": [],
        **extra,
    }


def test_a_summary_holds_the_medians_and_ranges_of_its_repeats() -> None:
    summary = summarise(
        [
            run("promsched", "burst", 90, 0.4),
            run("promsched", "burst", 110, 0.2),
            run("promsched", "burst", 100, 0.3),
        ]
    )

    assert summary["repeats"] == 3
    assert summary["throughput"] == 100
    assert summary["range"]["throughput"] == [90, 110]
    assert summary["scheduler_cpu_ms_per_pod"] == 3.0  # 0.3 s over 100 pods
    assert summary["range"]["scheduler_cpu_ms_per_pod"] == [2.0, 4.0]
    assert summary["spread"]["cpu_std"] == 10
    assert summary["latencies_s"] == [100]  # the repeat of the median throughput


def test_a_summary_pools_every_repeats_pods_for_one_more_p99() -> None:
    # 300 pods over three runs, four slow ones in one run: the median of the runs' p99s is a fast run's,
    # the p99 of all 300 the fourth slowest (numpy's interpolation: 1% of the way to the third).
    fast = [0.010 + i * 0.0001 for i in range(100)]
    slow = [*fast[:96], 0.4, 0.5, 0.6, 0.7]
    runs = [run("promsched", "rate", 50, 0.5, latencies_s=latencies) for latencies in (fast, slow, fast)]

    summary = summarise(runs)

    assert summary["p99_pooled_ms"] == 1000 * percentile([*fast, *slow, *fast], 0.99)
    assert round(summary["p99_pooled_ms"]) == 401
    assert math.isnan(summarise([run("promsched", "rate", 50, 0.5, latencies_s=[])])["p99_pooled_ms"])


def test_a_figure_no_repeat_measured_stays_unmeasured() -> None:
    summary = summarise(
        [run("promsched", "burst", 90, 0.4, bound=0), run("promsched", "burst", 80, 0.4, bound=0)]
    )

    assert math.isnan(summary["scheduler_cpu_ms_per_pod"])
    assert "scheduler_cpu_ms_per_pod" not in summary["range"]


def test_interleaved_runs_group_by_variant_and_mode_in_first_run_order() -> None:
    runs = [run(v, "burst", t, 0.1) for t in (1, 2, 3) for v in ("promsched", "ks-raised")]

    summaries = rows(runs)

    assert [(s["variant"], s["throughput"], s["repeats"]) for s in summaries] == [
        ("promsched", 2, 3),
        ("ks-raised", 2, 3),
    ]


def test_a_cell_shows_the_median_with_its_range_once_repeated() -> None:
    repeated = summarise([run("promsched", "burst", 90, 0.1), run("promsched", "burst", 110, 0.1)])
    single = summarise([run("promsched", "burst", 90, 0.1)])

    assert reporting._cell(repeated, "throughput", "{:.1f}") == "100.0 (90.0-110.0)"
    assert reporting._cell(single, "throughput", "{:.1f}") == "90.0"


def results(ours: list[dict[str, Any]], theirs: list[dict[str, Any]], nodes: int = 1000) -> dict[str, Any]:
    return {
        "settings": {"rate": 50.0},
        "node_counts": [{"nodes": nodes, "runs": [*ours, *theirs], "extra_runs": []}],
    }


def test_the_cpu_and_throughput_targets_compare_medians_with_kube_scheduler_raised() -> None:
    # One slow repeat of promsched does not decide the target; its median does.
    ours = [run("promsched", "burst", t, c) for t, c in ((120, 0.2), (20, 2.0), (110, 0.25))]
    theirs = [run("ks-raised", "burst", t, 0.6) for t in (100, 100, 105)]

    found = {t["target"]: t for t in targets(results(ours, theirs))}

    cpu = found["1000 nodes, burst: scheduler CPU per pod <= 1.0x kube-scheduler (QPS 1000/2000)'s"]
    assert cpu["status"] == "met"  # 2.5 ms vs 6 ms
    throughput = found["1000 nodes: burst throughput >= kube-scheduler (QPS 1000/2000)'s"]
    assert throughput["status"] == "met"  # 110 vs 100
    assert "x1.10" in throughput["value"]
    at_rate = "1000 nodes, at 50 pods/s: scheduler CPU per pod <= 1.0x kube-scheduler (QPS 1000/2000)'s"
    assert found[at_rate]["status"] == "not measured"
    p99 = found["5000 nodes: p99 creation-to-bind at 50 pods/s <= 1.5x kube-scheduler (QPS 1000/2000)'s"]
    assert p99["status"] == "not measured"


def test_a_p99_target_is_judged_on_medians_and_shows_all_repeats_pods_together_beside() -> None:
    # p99 = 10 x throughput (40 vs 50 ms: met on the medians), latencies one per run (40 s vs 50 s).
    ours = [run("promsched", "rate", 4, 0.5) for _ in range(3)]
    theirs = [run("ks-raised", "rate", 5, 0.5) for _ in range(3)]

    found = {t["target"]: t for t in targets(results(ours, theirs))}

    p99 = found["1000 nodes: p99 creation-to-bind at 50 pods/s <= 1.0x kube-scheduler (QPS 1000/2000)'s"]
    assert p99["status"] == "met"
    assert p99["value"].endswith("; all repeats' pods together 4000 vs 5000 ms (x0.80)")


def test_a_target_missed_on_medians_is_reported_not_met() -> None:
    ours = [run("promsched", "burst", t, 0.7) for t in (80, 95, 120)]
    theirs = [run("ks-raised", "burst", t, 0.6) for t in (100, 100, 100)]

    found = {t["target"]: t for t in targets(results(ours, theirs))}

    assert found["1000 nodes: burst throughput >= kube-scheduler (QPS 1000/2000)'s"]["status"] == "NOT met"
    cpu = found["1000 nodes, burst: scheduler CPU per pod <= 1.0x kube-scheduler (QPS 1000/2000)'s"]
    assert cpu["status"] == "NOT met"  # 7 ms vs 6 ms


def test_the_5000_node_targets_allow_p99_half_again_and_read_the_worse_modes_loop_lag_in_refreshes() -> None:
    # p99 = 10 x throughput: 60 pods/s gives 600 ms against 500 (x1.2, within 1.5x). The lag over the
    # whole run (90 ms) is not the target's: that is the lag while refreshes ran.
    ours = [
        *(
            run("promsched", "rate", 60, 0.5, loop_lag_refresh_p99_ms=lag, loop_lag_p99_ms=90.0)
            for lag in (12.0, 15.0, 40.0)
        ),
        *(
            run("promsched", "burst", 60, 0.5, loop_lag_refresh_p99_ms=lag, loop_lag_p99_ms=90.0)
            for lag in (19.0, 25.0, 18.0)
        ),
    ]
    theirs = [run("ks-raised", mode, 50, 0.5) for mode in ("rate", "burst")]

    found = {t["target"]: t for t in targets(results(ours, theirs, nodes=5000))}

    p99 = found["5000 nodes: p99 creation-to-bind at 50 pods/s <= 1.5x kube-scheduler (QPS 1000/2000)'s"]
    assert p99["status"] == "met"
    lag = found["5000 nodes: promsched's event loop lag during metrics refreshes, p99 over a run, < 20 ms"]
    assert (lag["status"], lag["value"]) == ("met", "19.0 ms (burst, median)")
    lagging = [{**r, "loop_lag_refresh_p99_ms": 21.0} if r["mode"] == "rate" else r for r in ours]
    late = {t["target"]: t for t in targets(results(lagging, theirs, nodes=5000))}
    missed = late["5000 nodes: promsched's event loop lag during metrics refreshes, p99 over a run, < 20 ms"]
    assert missed["status"] == "NOT met"


def test_a_node_count_run_scraped_apart_from_the_sandboxs_default_says_how_often() -> None:
    assert reporting._scraping({"settings": {"scrape_seconds": 2.0}}) == []
    assert reporting._scraping({}) == []
    [line, _] = reporting._scraping({"settings": {"scrape_seconds": 30.0}})
    assert "evaluated its rules every 30 s" in line


def test_make_bench_scrapes_as_kube_prometheus_stack_does_unless_told() -> None:
    assert _parse_args([]).scrape_seconds == commanding.DEPLOYED_SCRAPE_SECONDS == 30.0
    assert _parse_args(["--scrape-interval", "2"]).scrape_seconds == 2.0


def test_each_promsched_variants_own_figures_are_listed_the_others_named() -> None:
    runs = [
        run("promsched", "rate", 50, 0.5, loop_lag_p99_ms=19.9),
        run("promsched-baseline", "rate", 50, 0.5, loop_lag_p99_ms=9.94),
        run("ks-raised", "rate", 50, 0.5, loop_lag_p99_ms=1.0),
    ]

    [line, _] = reporting._per_run(runs, "lag", "loop_lag_p99_ms")

    assert line == "lag: rate 100 pods: 19.9 ms; promsched-baseline rate 100 pods: 9.9 ms."


def test_a_node_count_run_with_the_sandbox_niced_says_so() -> None:
    assert reporting._priorities({"settings": {"sandbox_nice": 0}}) == []
    assert reporting._priorities({}) == []
    [line, _] = reporting._priorities({"settings": {"sandbox_nice": 10}})
    assert "ran at nice 10 and the schedulers at 0" in line
