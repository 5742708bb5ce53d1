"""Settings to engine options and batching limits, for a CPU and for a GPU."""

from __future__ import annotations

from pathlib import Path

import pytest
import soundfile as sf

from synthesis.build import (
    BatchPolicy,
    build_synthesizer,
    engine_options,
    gpu_text_processes,
    local_synthesizer,
)
from ttsfarm.core.errors import SettingsError
from ttsfarm.core.jobs import JobRequest
from ttsfarm.core.settings import Settings
from ttsfarm.storage import LocalStorage


def test_defaults_depend_on_the_device() -> None:
    gpu = BatchPolicy.for_settings(Settings(), on_gpu=True)
    cpu = BatchPolicy.for_settings(Settings(), on_gpu=False)
    assert (gpu.max_batch, gpu.max_padded_ids, gpu.max_padding_ratio) == (32, 16_384, 1.0)
    assert (cpu.max_batch, cpu.max_padded_ids, cpu.max_padding_ratio) == (1, None, 0.15)
    assert (gpu.runners, gpu.concurrent_runs) == (3, 3)
    assert 1 <= gpu.text_processes <= 4
    assert (cpu.runners, cpu.concurrent_runs, cpu.text_processes) == (1, 1, 0)


def test_text_processes_follow_the_cores_each_gpu_has() -> None:
    assert gpu_text_processes(cores=16, gpus=1) == 4  # one H200 host: as measured
    assert gpu_text_processes(cores=128, gpus=8) == 4
    assert gpu_text_processes(cores=64, gpus=8) == 3  # 8 cores a GPU: 5 for the worker itself
    assert gpu_text_processes(cores=32, gpus=8) == 1
    assert gpu_text_processes(cores=2, gpus=0) == 1


def test_host_side_settings_win_and_are_checked() -> None:
    settings = Settings.load(
        {"TTSFARM_BATCH_RUNNERS": "2", "TTSFARM_CONCURRENT_RUNS": "1", "TTSFARM_TEXT_PROCESSES": "0"}
    )
    policy = BatchPolicy.for_settings(settings, on_gpu=True)
    assert (policy.runners, policy.concurrent_runs, policy.text_processes) == (2, 1, 0)
    with pytest.raises(SettingsError, match="TTSFARM_BATCH_RUNNERS must be at least 1"):
        BatchPolicy.for_settings(Settings(batch_runners=0), on_gpu=False)
    with pytest.raises(SettingsError, match="TTSFARM_TEXT_PROCESSES must be 0 or more"):
        BatchPolicy.for_settings(Settings(text_processes=-1), on_gpu=False)


@pytest.mark.slow
def test_the_gpu_host_side_runs_on_a_cpu_too(tmp_path: Path) -> None:
    """Runners, concurrent runs and the text processes, as a GPU worker has them, on the CPU."""
    settings = Settings(provider="cpu", batch_runners=2, concurrent_runs=2, text_processes=1, max_batch=2)
    text = "The ferry crossed twice a day. " * 6 + "\n\nThen the river froze, and it stopped."
    with local_synthesizer(settings) as synthesizer:
        assert synthesizer.frontend.processes == 1
        assert synthesizer.batcher.runners == 2
        result = synthesizer.synthesize(JobRequest(text, format="flac"), LocalStorage(tmp_path), "out.flac")
    audio, rate = sf.read(tmp_path / "out.flac")
    assert len(result.segments) == 7
    assert result.segments[-1].text == "Then the river froze, and it stopped."
    assert abs(len(audio) / rate - result.duration) < 0.01


def test_settings_win_over_device_defaults() -> None:
    settings = Settings.load({"TTSFARM_MAX_BATCH": "4", "TTSFARM_MAX_PADDING_RATIO": "0"})
    policy = BatchPolicy.for_settings(settings, on_gpu=True)
    assert (policy.max_batch, policy.max_padding_ratio) == (4, 0.0)


def test_engine_options_from_settings() -> None:
    options = engine_options(Settings.load({"TTSFARM_PRECISION": "fp32", "TTSFARM_GPU": "3"}))
    assert (options.precision, options.shape_buckets, options.device_id) == ("fp32", None, 3)
    with pytest.raises(SettingsError, match="TTSFARM_PRECISION must be"):
        engine_options(Settings(precision="int4"))


def test_shipped_config_loads_and_env_wins() -> None:
    config = Path(__file__).parent.parent / "configs" / "ttsfarm.toml"
    settings = Settings.load({"TTSFARM_VOICE": "other"}, config_path=config)
    assert settings.voice == "other" and settings.storage_url == "ttsfarm-output"
    assert settings.max_batch is None  # the device decides


def test_a_bad_batch_size_is_a_clear_error() -> None:
    with pytest.raises(SettingsError, match="TTSFARM_MAX_BATCH must be at least 1"):
        BatchPolicy.for_settings(Settings(max_batch=0), on_gpu=False)


def test_one_off_commands_keep_their_arena_and_workers_give_memory_back() -> None:
    """Giving the CPU arena's memory back after every run cost one-off commands 10-17% of their
    engine time; a worker, which runs for days, still does it (tests/test_memory.py)."""
    settings = Settings(provider="cpu")
    with local_synthesizer(settings) as one_off:
        assert not one_off.batcher.engine(one_off.voice("joe")).options.give_back_memory
    worker = build_synthesizer(settings)
    try:
        assert worker.batcher.engine(worker.voice("joe")).options.give_back_memory
    finally:
        worker.close()
