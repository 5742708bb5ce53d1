"""The scrape config and alert rules in docs/deploy.md load as YAML and name metrics workers serve."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from worker.metrics import WorkerMetrics

ROOT = Path(__file__).parents[1]
DEPLOY = (ROOT / "docs" / "deploy.md").read_text(encoding="utf-8")
SOURCE = (ROOT / "worker" / "metrics.py").read_text(encoding="utf-8")


def yaml_blocks() -> list[dict]:  # type: ignore[type-arg]
    return [yaml.safe_load(block) for block in re.findall(r"```yaml\n(.*?)```", DEPLOY, re.S)]


def served_names() -> set[str]:
    """What a worker's registry exposes (histograms as their series), plus the scrape-time ones."""
    names = {s.name for family in WorkerMetrics().registry.collect() for s in family.samples}
    return names | set(re.findall(r'"(ttsfarm_[a-z_]+)"', SOURCE))


def test_alert_rules_load_and_use_served_metrics() -> None:
    blocks = yaml_blocks()
    (rules,) = [b for b in blocks if "groups" in b]
    exprs = [rule["expr"] for group in rules["groups"] for rule in group["rules"]]
    assert len(exprs) >= 4
    used = {name for expr in exprs for name in re.findall(r"\b(ttsfarm_[a-z_]+|process_[a-z_]+)", expr)}
    served = served_names() | {f"{n}_total" for n in served_names()}
    assert used - served == set()
    assert any(b.get("scrape_configs") for b in blocks)


def test_every_documented_metric_is_served() -> None:
    table = set(re.findall(r"^\| `(ttsfarm_[a-z_]+)", DEPLOY, re.M))
    assert len(table) >= 10
    served = served_names()
    assert {n.removesuffix("_total") for n in table} - {n.removesuffix("_total") for n in served} == set()
