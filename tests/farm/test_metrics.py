"""A real worker's /metrics after real jobs: what an operator alerts on is there and adds up."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from producer import Client, JobFailed
from synthesis.gpus import nvml_index
from tests.farm.conftest import WorkerProcess, broken_voice, farm_env, free_port
from ttsfarm.core.errors import SettingsError
from worker.metrics import JOB_SECONDS_BUCKETS


def scrape(worker: WorkerProcess) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    assert worker.metrics_url
    response = requests.get(worker.metrics_url, timeout=10)
    assert response.status_code == 200
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def value(samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def test_metrics_of_a_real_worker_after_real_jobs(
    client: Client, worker: WorkerProcess, tmp_path: Path
) -> None:
    before = scrape(worker)
    ids = client.submit_many(["The first short job.", "A second one, a little longer than the first."])
    results = [client.wait(job_id, timeout=120) for job_id in ids]
    bad = client.submit("No voice can load this.", voice=broken_voice(tmp_path))
    with pytest.raises(JobFailed):
        client.wait(bad, timeout=60)
    after = scrape(worker)

    def delta(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert delta("ttsfarm_jobs_total", state="succeeded") == 2
    assert delta("ttsfarm_jobs_total", state="failed") == 1
    assert ("ttsfarm_jobs_total", (("state", "cancelled"),)) in before  # present from the start
    assert delta("ttsfarm_job_queue_wait_seconds_count") == 3
    assert 0 <= delta("ttsfarm_job_queue_wait_seconds_sum") < 60
    assert delta("ttsfarm_job_duration_seconds_count", state="succeeded") == 2
    assert delta("ttsfarm_audio_seconds_total") == pytest.approx(sum(r.duration for r in results))
    assert delta("ttsfarm_job_real_time_factor_count") == 2
    assert value(after, "ttsfarm_jobs_running") == 0
    # Hours fit in the buckets: a 3-hour job and the 6-hour visibility timeout each have one.
    assert value(after, "ttsfarm_job_duration_seconds_bucket", state="succeeded", le="21600.0") > 0
    assert max(JOB_SECONDS_BUCKETS) >= 6 * 3600 and min(JOB_SECONDS_BUCKETS) <= 0.1

    batches = delta("ttsfarm_batch_size_count")
    assert batches >= 1 and delta("ttsfarm_engine_run_seconds_count") == batches
    assert delta("ttsfarm_batch_padding_ratio_count") == batches
    assert delta("ttsfarm_batch_size_sum") >= 2  # at least one segment per job
    assert 0 < delta("ttsfarm_engine_run_seconds_sum") < 60

    assert value(after, "ttsfarm_worker_on_gpu") == 0  # a CPU worker: the alert "worker on CPU" fires
    engine = {
        dict(labels)["provider"]: v for (name, labels), v in after.items() if name == "ttsfarm_worker_engine"
    }
    assert engine == {"CPUExecutionProvider": 1}
    assert value(after, "ttsfarm_text_pool_restarts_total") == 0
    assert value(after, "ttsfarm_queue_length") == 0
    assert value(after, "process_resident_memory_bytes") > 100 * 2**20
    assert not any(name.startswith("ttsfarm_gpu_memory") for name, _ in after)  # only on CUDA
    assert all(math.isfinite(v) for v in after.values())


def test_a_metrics_port_in_use_stops_the_worker_with_one_line(
    redis_url: str, s3_endpoint: str, worker: WorkerProcess, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    assert worker.metrics_url
    taken = worker.metrics_url.rsplit(":", 1)[1].split("/")[0]
    env = farm_env(redis_url, s3_endpoint, TTSFARM_METRICS_PORT=taken)
    with pytest.raises(RuntimeError, match="worker exited early") as error:
        WorkerProcess(env, tmp_path / "second.log", "second")
    log = (tmp_path / "second.log").read_text()
    assert f"cannot serve metrics on 0.0.0.0:{taken}" in log and "own TTSFARM_METRICS_PORT" in log
    assert "Traceback" not in log, log
    assert error.value


def test_nvml_numbers_follow_cuda_visible_devices() -> None:
    assert nvml_index(0, None) == 0
    assert nvml_index(1, "2,3") == 3
    assert nvml_index(0, "GPU-abc") == 0


def test_a_busy_port_is_a_settings_error() -> None:
    from worker.metrics import WorkerMetrics

    port = free_port()
    first = WorkerMetrics()
    first.serve(port, "127.0.0.1")
    with pytest.raises(SettingsError, match="its own TTSFARM_METRICS_PORT"):
        WorkerMetrics().serve(port, "127.0.0.1")


def test_flowers_own_metrics_are_open_even_with_basic_auth(flower: str) -> None:
    """As docs/deploy.md says: Flower asks a login for its pages and API, not for /metrics."""
    assert requests.get(f"{flower}/api/workers", timeout=10).status_code == 401
    opened = requests.get(f"{flower}/metrics", timeout=10)
    assert opened.status_code == 200 and "flower_" in opened.text
