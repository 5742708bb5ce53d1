"""Shape buckets, the bucketed engine, the benchmark table and a benchmark's wait for a
prepared engine, on the CPU with the real voice."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from synthesis.buckets import FRAME_STEP, ID_BUCKETS, ID_STEP_PAST_BUCKETS, Bucket, bucket_for
from synthesis.engine import Engine, EngineItem, EngineOptions
from synthesis.phonemes import Phonemizer
from tests.conftest import DETERMINISTIC
from ttsfarm.cli import main
from ttsfarm.cli.sweep import TABLE_HEADER, corpus_items, format_table, short_latency, sweep
from ttsfarm.core.voices import Voice

TEXT = "Hi. The ferry carried farmers across the water. Not everyone was pleased, said the baker."


def test_buckets_round_up() -> None:
    assert bucket_for(1, 10, 1.0) == Bucket(1, ID_BUCKETS[0], 96)
    bucket = bucket_for(3, 129, 1.0)
    assert (bucket.rows, bucket.ids) == (4, 160)
    assert bucket.frames % FRAME_STEP == 0 and bucket.frames >= 2.7 * 160
    assert bucket_for(65, ID_BUCKETS[-1] + 1, 1.0).ids == 2 * ID_STEP_PAST_BUCKETS * 2
    assert bucket_for(65, 10, 1.0).rows == 128
    assert bucket_for(1, 100, 2.0).frames > bucket_for(1, 100, 1.0).frames  # slower speech, more frames
    with pytest.raises(ValueError):
        bucket_for(0, 10, 1.0)


@pytest.fixture(scope="module")
def bucketed(voice: Voice) -> Engine:
    return Engine.load(voice, EngineOptions(provider="cpu", shape_buckets=True))


def test_bucketed_engine_matches_the_plain_one(
    engine: Engine, bucketed: Engine, phonemizer: Phonemizer
) -> None:
    items = [EngineItem(phonemizer.ids(text)) for text in TEXT.split(". ")]
    plain = engine.run(items, DETERMINISTIC)
    padded = bucketed.run(items, DETERMINISTIC)
    assert bucketed.last_bucket is not None and bucketed.last_bucket.rows == 4  # three items, four rows
    for a, b in zip(plain, padded, strict=True):
        assert len(a) == len(b)
        assert np.max(np.abs(a - b)) < 1e-3
    built = bucketed.sessions_built
    again = bucketed.run(items[:2], DETERMINISTIC)  # two rows fit the four-row session: none built
    assert bucketed.sessions_built == built
    assert [len(w) for w in again] == [len(w) for w in plain[:2]]


def test_long_batches_run_in_parts(
    voice: Voice, phonemizer: Phonemizer, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    small = Engine.load(voice, EngineOptions(provider="cpu", max_batch_frames=200, warmup=False))
    items = [EngineItem(phonemizer.ids(text)) for text in TEXT.split(". ")]
    runs: list[int] = []
    run_once = small._run_once
    monkeypatch.setattr(
        small, "_run_once", lambda batch, scales: runs.append(len(batch)) or run_once(batch, scales)
    )
    parts = small.run(items, DETERMINISTIC)
    assert len(runs) > 1 and sum(runs) == len(items)
    whole = engine.run(items, DETERMINISTIC)
    assert [len(w) for w in parts] == [len(w) for w in whole]


def test_sweep_prints_one_line_per_batch_size(engine: Engine) -> None:
    items = corpus_items(engine.voice, TEXT)
    rows = sweep(engine, items, [1, 2], batches_per_size=1)
    table = format_table(rows).splitlines()
    assert table[0] == TABLE_HEADER and len(table) == 4
    assert all(row.mixed.audio_per_second > 0 and row.ceiling.padding == 0.0 for row in rows)
    assert rows[1].batcher.audio_per_second > 0
    assert short_latency(engine, 2).p50_ms > 0


def test_bench_command_on_cpu(tmp_path: Path) -> None:
    text = tmp_path / "text.txt"
    text.write_text(TEXT, encoding="utf-8")
    args = ["bench", "--cpu", "--batch-sizes", "1", "--batches", "1", "--short-runs", "1"]
    result = CliRunner().invoke(main, [*args, "--text", str(text), "--json", str(tmp_path / "out.json")])
    assert result.exit_code == 0, result.output
    assert TABLE_HEADER in result.output
    assert "batch 1, short sentence" in result.output
    assert (tmp_path / "out.json").is_file()


def test_a_benchmark_waits_until_the_preparation_given_before_has_run() -> None:
    import threading

    from bench.engines import until_prepared
    from synthesis.background import Background

    wait = 60.0
    background = Background("ttsfarm-test")
    held, done = threading.Event(), []
    background.submit(lambda: held.wait(wait) and done.append(1), "a test's hold")
    waiting = threading.Thread(target=until_prepared, args=(background,))
    waiting.start()
    waiting.join(0.3)
    assert waiting.is_alive() and not done  # the hold is still under way
    held.set()
    waiting.join(wait)
    assert not waiting.is_alive() and done == [1]
    background.close()
    until_prepared(background)  # closed: returns at once
