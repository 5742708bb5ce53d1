"""The farm benchmarks run end to end on the CPU with tiny numbers: their own Redis, real worker
processes, jobs through ``Client``, and the tables they print."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import redis

from tests.farm.conftest import REDIS_SERVER, free_port

BENCHMARKS = Path(__file__).parents[2] / "benchmarks"
pytestmark = pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs redis-server")


def _run(script: str, out: Path, *extra: str) -> str:
    command = [
        sys.executable,
        str(BENCHMARKS / script),
        "--out",
        str(out),
        "--smoke",
        "--port",
        str(free_port()),
    ]
    done = subprocess.run([*command, *extra], capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@pytest.mark.timeout(420)
def test_short_job_load_test_on_the_cpu(tmp_path: Path) -> None:
    printed = _run("short_jobs.py", tmp_path, "--workers-per-gpu", "2")
    results = json.loads((tmp_path / "short_jobs.json").read_text())
    assert results["engine"]["jobs_per_s"] > 0 and results["engine"]["sentences"] == 6
    run = results["default x2"]
    assert run["workers"] == 2
    assert run["burst"]["succeeded"] == run["burst"]["jobs"] == 6
    # two processes queue 6 jobs far faster than CPU workers make them: the farm was the limit
    assert run["burst"]["submitted_per_s"] > run["burst"]["jobs_per_s"]
    assert run["burst"]["producer_limited"] is run["open_loop"]["producer_limited"] is False
    cpu = run["burst"]["cpu_ms_per_job"]
    assert cpu["worker"] > 0 and cpu["machine"] >= cpu["worker"] and cpu["machine_cores_busy"] > 0
    start = run["start"]  # where the first worker's start went, from its log
    assert 0 < start["engine_loading"] <= start["engine_ready"] <= start["connected"] <= start["ready"]
    calls = run["burst"]["redis_calls_per_job"]  # each job is taken off its queue once at least
    assert calls["brpop"] >= 1 and calls["total"] > calls["brpop"]
    assert run["open_loop"]["succeeded"] == run["open_loop"]["jobs"] >= 1
    assert 0 < run["open_loop"]["p50_ms"] <= run["open_loop"]["p99_ms"]
    assert "| default x2 | 2 |" in printed and "engine alone:" in printed


@pytest.mark.timeout(420)
def test_scale_out_benchmark_on_the_cpu(tmp_path: Path) -> None:
    """Two CPU workers (one worker is the same code with one): every job counted, and each
    worker's share. Alone in its run, the two are their own base: 1.00 of linear."""
    printed = _run("scale_out.py", tmp_path, "--gpus", "2")
    results = json.loads((tmp_path / "scale_out.json").read_text())
    assert list(results) == ["2"]
    assert results["2"]["succeeded"] == results["2"]["jobs"] == 6
    shares = results["2"]["worker_share"]
    assert len(shares) == 2 and abs(sum(shares.values()) - 1.0) < 0.01  # both workers counted
    assert results["2"]["queue_wait_p99_s"] >= results["2"]["queue_wait_p50_s"] >= 0
    assert results["2"]["host_cores_busy"] > 0
    assert "| 2 |" in printed and "| 1.00 |" in printed


@pytest.mark.timeout(600)
@pytest.mark.parametrize("where", [[], ["--farm", "--s3"]], ids=["in-process", "farm"])
def test_book_benchmark_on_the_cpu(tmp_path: Path, where: list[str]) -> None:
    """benchmarks/book.py: a small book in-process, and through a farm of one CPU worker with
    moto's S3 (its own Redis), each stage timed and the second run doing nothing."""
    figures = tmp_path / "book.json"
    command = [sys.executable, str(BENCHMARKS / "book.py"), "--hours", "0.01", "--chapters", "2", "--cpu"]
    command += [
        *where,
        "--redis-server",
        shutil.which("redis-server") or "",
        "--port",
        str(free_port()),
        "--measure",
    ]
    done = subprocess.run([*command, "--json", str(figures)], capture_output=True, text=True, timeout=560)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(figures.read_text())
    assert result["book"]["chapters"] == 2 and result["audio_s"] > 20
    ended = result["ended_s"]
    assert 0 < ended["synthesis"] <= ended["finishing"] <= ended["concat"] <= result["total_s"]
    work = result["finish_work_s"]
    assert work["master"] > 0 and work["encode"] > 0 and work["cpu"] > 0
    assert (work["fetch"] > 0) == bool(where)  # only a worker fetches the parts
    assert (result["upload_s"] is not None) == bool(where)
    assert result["bar_end"] == 1.0
    assert result["second_run"]["finished_already"] is True
    assert "| finishing: master |" in done.stdout and "| concat (m4b and mp3, stream copy) |" in done.stdout
    for kind, figures in result["final_files"].items():  # each chapter, as the final files hold it
        assert -18.5 <= figures["lufs"][0] <= figures["lufs"][1] <= -17.5, (kind, figures)
        assert figures["dbtp_max"] <= -1.0, (kind, figures)


def test_submit_rate_benchmark_times_this_checkout_against_another(tmp_path: Path) -> None:
    """``submit_rate.py`` queues jobs from this checkout and from another (here a copy of this
    one) in processes of their own, on a Redis database it empties again."""
    copy = tmp_path / "copy"
    for package in ("producer", "ttsfarm"):
        shutil.copytree(BENCHMARKS.parent / package, copy / package)
    url = f"{REDIS_SERVER}/7"  # a database of its own: the script empties it
    command = [sys.executable, str(BENCHMARKS / "submit_rate.py"), "--jobs", "30", "--repeats", "1"]
    done = subprocess.run(
        [*command, "--checkout", str(copy), "--redis-url", url], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [line.split("|") for line in done.stdout.splitlines() if line.startswith("| ")][1:]
    assert [row[1].strip() for row in rows] == ["this one", str(copy)]
    assert all(float(row[2]) > 0 for row in rows)
    assert redis.Redis.from_url(url).dbsize() == 0
