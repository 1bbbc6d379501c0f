"""PromQL evaluated by promtool (Debian's `prometheus` package) over series scraped every 15s, for 10
minutes: exact values, not just syntax."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml

from promsched.metrics import promql

STEPS = "x40"  # 40 samples after the first at 15s: 10 minutes
EVAL_TIME = "8m"


def series(metric: str, labels: dict[str, str], values: str) -> dict[str, str]:
    """An input series in promtool's expanding notation (``0+15x16 240x7``)."""
    matchers = ",".join(f"{name}={promql.quote(value)}" for name, value in labels.items())
    return {"series": f"{metric}{{{matchers}}}", "values": values}


def counter(metric: str, labels: dict[str, str], per_second: float) -> dict[str, str]:
    return series(metric, labels, f"0+{per_second * 15}{STEPS}")


def gauge(metric: str, labels: dict[str, str], value: float) -> dict[str, str]:
    return series(metric, labels, f"{value}+0{STEPS}")


def _label_text(labels: dict[str, str]) -> str:
    return "{" + ",".join(f"{name}={promql.quote(value)}" for name, value in sorted(labels.items())) + "}"


def assert_evaluates_to(
    tmp_path: Path,
    input_series: list[dict[str, str]],
    query: str,
    expected: list[tuple[dict[str, str], float]],
    rules: dict[str, str] | None = None,
) -> None:
    """promtool gives `query` exactly `expected` at `EVAL_TIME` over `input_series`, with `rules`
    (record -> expr) recorded every 15s like a scrape."""
    rule_files = []
    if rules:
        rule_file = tmp_path / "rules.yaml"
        records = [{"record": name, "expr": expr} for name, expr in rules.items()]
        rule_file.write_text(yaml.safe_dump({"groups": [{"name": "recorded", "rules": records}]}))
        rule_files.append(str(rule_file))
    test_file = {
        "rule_files": rule_files,
        "evaluation_interval": "15s",
        "tests": [
            {
                "interval": "15s",
                "input_series": input_series,
                "promql_expr_test": [
                    {
                        "expr": query,
                        "eval_time": EVAL_TIME,
                        "exp_samples": [
                            {"labels": _label_text(labels), "value": value} for labels, value in expected
                        ],
                    }
                ],
            }
        ],
    }
    path = tmp_path / "test.yaml"
    path.write_text(yaml.safe_dump(test_file))
    command = ["promtool", "test", "rules", str(path)]
    run = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, f"{query}\n{run.stdout}{run.stderr}"
