"""Settings to engine options and batching limits, for a CPU and for a GPU."""

from __future__ import annotations

from pathlib import Path

import pytest

from ttsfarm.errors import InvalidInput
from ttsfarm.settings import Settings
from worker.local import BatchPolicy, engine_options


def test_defaults_depend_on_the_device() -> None:
    gpu = BatchPolicy.for_settings(Settings(), on_gpu=True)
    cpu = BatchPolicy.for_settings(Settings(), on_gpu=False)
    assert (gpu.max_batch, gpu.max_padded_ids, gpu.max_padding_ratio) == (32, 16_384, 1.0)
    assert (cpu.max_batch, cpu.max_padded_ids, cpu.max_padding_ratio) == (1, None, 0.15)


def test_settings_win_over_device_defaults() -> None:
    settings = Settings.load({"TTSFARM_MAX_BATCH": "4", "TTSFARM_MAX_PADDING_RATIO": "0"})
    policy = BatchPolicy.for_settings(settings, on_gpu=True)
    assert (policy.max_batch, policy.max_padding_ratio) == (4, 0.0)


def test_engine_options_from_settings() -> None:
    options = engine_options(
        Settings.load({"TTSFARM_PRECISION": "fp32", "TTSFARM_SHAPE_BUCKETS": "off", "TTSFARM_GPU": "3"})
    )
    assert (options.precision, options.shape_buckets, options.device_id) == ("fp32", False, 3)
    with pytest.raises(InvalidInput, match="TTSFARM_PRECISION must be"):
        engine_options(Settings(precision="int4"))


def test_shipped_config_loads_and_env_wins() -> None:
    config = Path(__file__).parent.parent / "configs" / "ttsfarm.toml"
    settings = Settings.load({"TTSFARM_VOICE": "other"}, config_path=config)
    assert settings.voice == "other" and settings.storage_url == "ttsfarm-output"
    assert settings.max_batch is None  # the device decides


def test_a_bad_batch_size_is_a_clear_error() -> None:
    with pytest.raises(InvalidInput, match="TTSFARM_MAX_BATCH must be at least 1"):
        BatchPolicy.for_settings(Settings(max_batch=0), on_gpu=False)
