"""Issue 40's scoreboard (bench/quality_scoreboard.py, `--seeds` of bench/quality.py): each seed measured
in turn, the medians across seeds, the estimation errors pooled over the seeds' pods, and the issue's
targets judged on the medians."""

from __future__ import annotations

import dataclasses
import hashlib
import math
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest
from bench import quality
from bench.quality_scoreboard import ended_in_turn, markdown, medians, pooled_estimation, scoreboard, targets

from promsched.sandbox.control_plane.clusters import SandboxError


def _run(
    variant: str, hot: float, std: float, wait: float, pending: float = 0.0, **extra: Any
) -> dict[str, Any]:
    return {
        "variant": variant,
        "label": variant,
        "hot_cpu_node_s": hot,
        "cpu_std": std,
        "wait_mean_s": wait,
        "wait_max_s": 2 * wait,
        "pods_bound": 10.0,
        "pending_at_end": pending,
        "cpu_grid": {"node-0": [1.0]},
        **extra,
    }


def _estimation(pods: float, ours: float, koordinator: float) -> dict[str, Any]:
    return {"Siblings": {"cpu": {"pods": pods, "mae_pct": ours, "koordinator_mae_pct": koordinator}}}


SEEDS = {
    1: [
        _run("promsched", 100.0, 6.0, 0.1, estimation=_estimation(10, 10.0, 50.0)),
        _run("ks-default", 300.0, 10.0, 0.2),
        _run("trimaran-tlp", 150.0, 9.0, 0.2),
    ],
    2: [
        _run("promsched", 40.0, 5.0, 0.3, estimation=_estimation(30, 20.0, 30.0)),
        _run("ks-default", 200.0, 8.0, 0.2),
        _run("trimaran-tlp", 60.0, 7.0, 0.2),
    ],
    3: [
        _run("promsched", 90.0, 7.0, 0.2, pending=1.0),
        _run("ks-default", 100.0, 9.0, 0.1),
        _run("trimaran-tlp", 130.0, 8.0, 0.2),
    ],
}


def _outage_run(variant: str, hot: float, recovery: float) -> dict[str, Any]:
    outage = {
        "outage_s": 90.0,
        "hot_cpu_node_s": hot,
        "pods_arrived": 3.0,
        "waiting_at_end_of_outage": 0.0,
        "wait_mean_s": 0.5,
        "wait_max_s": 1.0,
        "recovery_s": recovery,
    }
    return {"variant": variant, "label": variant, "outage": outage, "refresh_s": 15.0, "evictions": 0}


OUTAGE = [_outage_run("promsched", 50.0, 4.0), _outage_run("ks-default", 60.0, math.nan)]


def _measured(tmp_path: Path) -> dict[str, Any]:
    policy = tmp_path / "policy.yaml"
    policy.write_text("kind: SchedulingPolicy\n")
    written: list[int] = []
    results = scoreboard(
        [(1, False), (2, False), (3, False), (1, True)],
        {"nodes": 20, "minutes": 6.0, "requested": 0.7, "refresh": "15s", "outage_minutes": 1.5},
        policy,
        lambda seed, outage: {
            "trace": {"pods": 10},
            "runs": OUTAGE if outage else SEEDS[seed],
            "wall_s": 60.0,
        },
        lambda results: written.append(len(results["per_seed"]) + len(results["outage"])),
        1,
        lambda _line: None,
    )
    # One run at a time: the seeds in turn, then the outage's two runs.
    assert written == [1, 2, 3, 5]
    return results


def _ended(result: int) -> Future[int]:
    future: Future[int] = Future()
    future.set_result(result)
    return future


def test_runs_that_ended_together_are_taken_in_the_order_given() -> None:
    futures = [_ended(index) for index in range(40)]

    assert [future.result() for future in ended_in_turn(futures)] == list(range(40))


def test_a_run_that_ends_first_is_taken_first() -> None:
    first: Future[int] = Future()
    ending = ended_in_turn([first, _ended(2)])

    assert next(ending).result() == 2
    first.set_result(1)
    assert next(ending).result() == 1
    assert list(ending) == []


@pytest.fixture(autouse=True)
def _repo_is_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("bench.quality_scoreboard.REPO", tmp_path)


def test_each_seed_is_kept_with_its_rows_the_seeds_and_the_policy_hash(tmp_path: Path) -> None:
    results = _measured(tmp_path)

    assert results["seeds"] == [1, 2, 3]
    assert results["policy"] == {
        "file": "policy.yaml",
        "sha256": hashlib.sha256(b"kind: SchedulingPolicy\n").hexdigest(),
    }
    assert [seed["seed"] for seed in results["per_seed"]] == [1, 2, 3]
    # The outage scenario's runs are its own rows, not a seed's.
    assert [(run["seed"], run["variant"]) for run in results["outage"]] == [
        (1, "promsched"),
        (1, "ks-default"),
    ]
    # The per-step grids stay in each seed's own results.
    assert all("cpu_grid" not in run for seed in results["per_seed"] for run in seed["runs"])
    assert "commit" in results["revision"]


def test_medians_are_taken_per_scheduler_across_seeds(tmp_path: Path) -> None:
    rows = {row["variant"]: row for row in _measured(tmp_path)["medians"]}

    assert list(rows) == ["promsched", "ks-default", "trimaran-tlp"]
    assert rows["promsched"]["hot_cpu_node_s"] == 90.0
    assert rows["ks-default"]["hot_cpu_node_s"] == 200.0
    assert rows["trimaran-tlp"]["cpu_std"] == 8.0
    assert rows["promsched"]["seeds"] == 3
    # A figure no seed measured stays unmeasured.
    assert math.isnan(rows["promsched"]["cpu_p95"])


def test_estimation_errors_are_pooled_over_every_seeds_pods() -> None:
    pooled = pooled_estimation(
        [{"estimation": _estimation(10, 10.0, 50.0)}, {"estimation": _estimation(30, 20.0, 30.0)}, {}]
    )

    assert pooled == {"Siblings": {"cpu": {"pods": 40.0, "mae_pct": 17.5, "koordinator_mae_pct": 35.0}}}
    assert medians([{"runs": [_run("ks-default", 1.0, 1.0, 1.0)]}])[0].get("estimation") is None


def test_targets_are_judged_on_the_medians_and_say_by_how_much(tmp_path: Path) -> None:
    found = {item["target"]: item for item in targets(_measured(tmp_path))}

    hot = found["CPU hot-node-seconds <= 0.5x kube-scheduler's"]
    assert (hot["status"], hot["value"]) == ("met", "90.00 vs 200.00 node-s: x0.45 (bound x0.5)")
    trimaran = found["CPU hot-node-seconds <= 0.8x the better Trimaran plugin's (trimaran-tlp)"]
    assert (trimaran["status"], trimaran["value"]) == ("met", "90.00 vs 130.00 node-s: x0.69 (bound x0.8)")
    std = found["time-averaged CPU std <= 0.7x kube-scheduler's"]
    assert (std["status"], std["value"]) == ("met", "6.00 vs 9.00 points: x0.67 (bound x0.7)")
    assert (
        found["mean wait no worse than kube-scheduler's (1 s the least difference counted)"]["status"]
        == "met"
    )
    # Seed 3: promsched left one pod pending where kube-scheduler left none.
    pending = found["no pod left pending that kube-scheduler placed"]
    assert (pending["status"], pending["value"]) == (
        "NOT met",
        "1 more left pending than kube-scheduler, over 3 seeds",
    )
    siblings = found["Siblings CPU estimation error <= 15% (mean absolute, all seeds' pods)"]
    assert (siblings["status"], siblings["value"]) == ("NOT met", "17.5% over 40 pods")


def test_the_report_has_the_medians_each_seed_and_the_targets(tmp_path: Path) -> None:
    text = markdown(_measured(tmp_path))

    assert "seeds 1, 2, 3" in text
    for section in (
        "## Medians across seeds",
        "## Each seed",
        "## Estimation error, all seeds' pods",
        "## Targets",
    ):
        assert section in text
    assert "| 3 | promsched | 90 | 7.00 | 0.20 | 0.4 | 10 | 1 |" in text


def test_seeds_are_a_comma_separated_list_each_run_apart_and_the_outage_on_the_first(tmp_path: Path) -> None:
    settings = quality._parse_args(
        ["--seeds", "4,5,6", "--nodes", "20", "--minutes", "6", "--outage-minutes", "1.5", "--jobs", "4"]
    )

    assert (settings.seeds, settings.jobs, settings.outage_s) == ((4, 5, 6), 4, 90.0)
    plain, outage = quality.seed_command(settings, 5, False), quality.seed_command(settings, 4, True)
    assert plain[1:3] == ["-m", "bench.quality"]
    assert plain[plain.index("--seed") + 1] == "5"
    assert "--outage-minutes" not in plain
    assert outage[outage.index("--outage-minutes") + 1] == "1.5"
    assert quality._parse_args(plain[3:]).trace == dataclasses.replace(settings.trace, seed=5)
    with pytest.raises(SystemExit):
        quality._parse_args(["--seeds", "4,x"])
    with pytest.raises(SystemExit):
        quality._parse_args(["--seeds", "4", "--minutes", "2", "--outage-minutes", "2"])


def test_a_seed_that_fails_is_reported_and_the_others_still_count(tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text("kind: SchedulingPolicy\n")

    def measure(seed: int, outage: bool) -> dict[str, Any]:
        if seed == 2:
            raise SandboxError("bench.quality --seed 2 exited 1")
        return {"trace": {"pods": 10}, "runs": SEEDS[seed]}

    results = scoreboard(
        [(1, False), (2, False), (3, False)],
        {"nodes": 20, "minutes": 6.0, "requested": 0.7, "refresh": "15s", "outage_minutes": 0.0},
        policy,
        measure,
        lambda _results: None,
        2,
        lambda _line: None,
    )

    assert [seed["seed"] for seed in results["per_seed"]] == [1, 3]
    assert results["failed"] == [{"run": "seed-2", "error": "bench.quality --seed 2 exited 1"}]
    assert "**seed-2 failed**: bench.quality --seed 2 exited 1" in markdown(results)
