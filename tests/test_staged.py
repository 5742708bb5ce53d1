"""Engine v2 on the CPU: the voice cut into stages, and the staged engine against the single one.

On the CPU both engines compute the same arithmetic in the same order, so with the noise off
the staged engine's audio equals the single engine's, sample for sample.
"""

from __future__ import annotations

import json
import logging
import pickle
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.utils import Extractor

from synthesis.batcher import Batcher
from synthesis.build import engine_options
from synthesis.devices import device
from synthesis.engine import Engine, EngineItem, EngineOptions, Scales
from synthesis.engines import load_engine, wants_staged
from synthesis.frame_plan import FRAME_BUCKETS, frame_bucket
from synthesis.host_buffers import KEPT_FREE
from synthesis.phonemes import Phonemizer
from synthesis.sessions import FIXED_SHAPE_ARENA, NHWC
from synthesis.stage_options import GRAPH_OPTIONS, stage_cuda_options, waveform_cuda_options
from synthesis.staged import STAGES, StagedEngine
from synthesis.stages import (
    EXPAND_DURATIONS,
    EXPAND_FRAMES,
    NOISE_OP,
    PLAN_INDEX,
    PLAN_MASK,
    UnsupportedGraph,
    split_voice,
)
from tests.conftest import DETERMINISTIC
from tests.helpers_engine import SENTENCES
from ttsfarm.core.errors import SettingsError
from ttsfarm.core.settings import Settings
from ttsfarm.core.voices import Voice, resolve_voice

CPU = EngineOptions(provider="cpu", warmup=False)
BUCKETS = EngineOptions(provider="cpu", warmup=False, shape_buckets=True)
SPEAKER_GAINS = (1.0, 0.5)


def _model(voice: Voice) -> onnx.ModelProto:
    return onnx.load(str(voice.model_path))


def _node_of(model: onnx.ModelProto, op_type: str, name: str) -> onnx.NodeProto:
    found: onnx.NodeProto = next(n for n in model.graph.node if n.op_type == op_type and n.name == name)
    return found


def _save_copy(voice: Voice, model: onnx.ModelProto, path: Path, **config: object) -> Voice:
    onnx.save(model, str(path))
    settings = json.loads(voice.config_path.read_text())
    settings.update(config)
    path.with_suffix(".onnx.json").write_text(json.dumps(settings))
    return resolve_voice(str(path))


def without_prior_noise(voice: Voice) -> onnx.ModelProto:
    """Joe with the prior's noise drawn uniformly: a working voice that does not split."""
    model = _model(voice)
    _node_of(model, NOISE_OP, "/RandomNormalLike").op_type = "RandomUniformLike"
    return model


def speaker_gain_copy(voice: Voice) -> onnx.ModelProto:
    """Joe with a ``sid`` input that scales the audio: ``output = audio * gain[sid]``.

    The gain is computed from ``sid`` alone and read by a node downstream of the prior, so the
    waveform stage needs it from the front, as a real multi-speaker voice's speaker embedding.
    """
    model = _model(voice)
    for tensor in model.graph.initializer:  # the single-speaker graph has a constant "sid"
        if tensor.name == "sid":
            tensor.name = "sid_constant"
    for node in model.graph.node:
        node.input[:] = ["sid_constant" if name == "sid" else name for name in node.input]
    last = next(node for node in model.graph.node if "output" in node.output)
    last.output[:] = ["speaker/audio"]
    table = np.array([[gain] for gain in SPEAKER_GAINS], dtype=np.float32)
    model.graph.initializer.extend(
        [
            numpy_helper.from_array(table, "speaker/table"),
            numpy_helper.from_array(np.array([2, 3], dtype=np.int64), "speaker/axes"),
        ]
    )
    model.graph.node.extend(
        [
            helper.make_node("Gather", ["speaker/table", "sid"], ["speaker/gain_2d"], axis=0),
            helper.make_node("Unsqueeze", ["speaker/gain_2d", "speaker/axes"], ["speaker/gain"]),
            helper.make_node("Mul", ["speaker/audio", "speaker/gain"], ["output"], name="speaker/Mul"),
        ]
    )
    model.graph.input.append(helper.make_tensor_value_info("sid", TensorProto.INT64, ["batch_size"]))
    model.graph.value_info.extend(  # as the exporter writes them for every tensor (split_voice needs them)
        [
            helper.make_tensor_value_info("speaker/gain_2d", TensorProto.FLOAT, ["batch_size", 1]),
            helper.make_tensor_value_info("speaker/gain", TensorProto.FLOAT, ["batch_size", 1, 1, 1]),
        ]
    )
    onnx.checker.check_model(model)
    return model


def _items(phonemizer: Phonemizer) -> list[EngineItem]:
    return [EngineItem(phonemizer.ids(text)) for text in SENTENCES]


def _assert_same_audio(expected: list[np.ndarray], actual: list[np.ndarray]) -> None:
    assert [len(wave) for wave in actual] == [len(wave) for wave in expected]
    for reference, wave in zip(expected, actual, strict=True):
        assert wave.dtype == np.float32
        assert np.max(np.abs(wave - reference)) <= 1e-6


@pytest.fixture(scope="module")
def staged(voice: Voice) -> StagedEngine:
    return StagedEngine(voice, CPU)


@pytest.fixture(scope="module")
def staged_buckets(voice: Voice) -> StagedEngine:
    return StagedEngine(voice, BUCKETS)


@pytest.fixture(scope="module")
def single_buckets(voice: Voice) -> Engine:
    return Engine.load(voice, BUCKETS)


@pytest.fixture(scope="module")
def speaker_voice(voice: Voice, tmp_path_factory: pytest.TempPathFactory) -> Voice:
    path = tmp_path_factory.mktemp("speakers") / "gains.onnx"
    speakers = {"loud": 0, "quiet": 1}
    return _save_copy(voice, speaker_gain_copy(voice), path, num_speakers=2, speaker_id_map=speakers)


# the cut


def test_joe_splits_at_the_durations_and_the_prior(voice: Voice) -> None:
    model = _model(voice)
    stages = split_voice(model)
    names = stages.names
    ceil = next(node for node in model.graph.node if node.op_type == "Ceil")
    assert names.durations == ceil.output[0]
    assert names.channels == 192
    assert names.extras == ()
    assert [value.name for value in stages.front.graph.input] == ["input", "input_lengths", "scales"]
    made = {out for node in model.graph.node for out in node.output}
    for name in (names.mean_t, names.log_std_t, names.prior, names.mask):
        assert name in made
    front_outputs = [out.name for out in stages.front.graph.output]
    assert front_outputs == [names.mean_t, names.log_std_t, names.durations]
    assert [i.name for i in stages.waveform.graph.input] == [names.prior, names.mask]
    assert [out.name for out in stages.waveform.graph.output] == ["output"]
    assert all(node.op_type != NOISE_OP for node in stages.waveform.graph.node)
    assert sum(node.op_type == NOISE_OP for node in stages.expand.graph.node) == 1
    front_made = {out for node in stages.front.graph.node for out in node.output}
    waveform_made = {out for node in stages.waveform.graph.node for out in node.output}
    assert front_made and waveform_made and not front_made & waveform_made
    assert "output" in waveform_made and names.durations in front_made


def test_a_graph_without_the_cut_points_is_refused(voice: Voice) -> None:
    no_ceil = _model(voice)
    _node_of(no_ceil, "Ceil", "/Ceil").op_type = "Floor"
    with pytest.raises(UnsupportedGraph, match=r"one Ceil \(the durations\), found 0"):
        split_voice(no_ceil)
    with pytest.raises(UnsupportedGraph, match=f"one {NOISE_OP} after the durations, found 0"):
        split_voice(without_prior_noise(voice))
    not_added = _model(voice)
    prior = split_voice(_model(voice)).names.prior
    next(node for node in not_added.graph.node if prior in node.output).op_type = "Sub"
    with pytest.raises(UnsupportedGraph, match="noise to be added to its mean"):
        split_voice(not_added)


# staged against single


@pytest.mark.slow
def test_staged_equals_single_with_dynamic_shapes(
    engine: Engine, staged: StagedEngine, phonemizer: Phonemizer
) -> None:
    items = _items(phonemizer)
    expected = engine.run(items, DETERMINISTIC)
    assert len({len(wave) for wave in expected}) == len(SENTENCES)  # lengths really differ
    _assert_same_audio(expected, staged.run(items, DETERMINISTIC))
    shorter = [items[0], items[1], items[3]]  # the longest item left out: it costs the most
    slow = Scales(0.0, 1.4, 0.0)
    slow_expected = engine.run(shorter, slow)
    assert sum(map(len, slow_expected)) > 1.15 * sum(len(expected[row]) for row in (0, 1, 3))
    _assert_same_audio(slow_expected, staged.run(shorter, slow))


@pytest.mark.slow
def test_staged_equals_single_with_shape_buckets(
    engine: Engine,
    single_buckets: Engine,
    staged_buckets: StagedEngine,
    phonemizer: Phonemizer,
) -> None:
    items = _items(phonemizer)
    waves = staged_buckets.run(items, DETERMINISTIC)
    _assert_same_audio(single_buckets.run(items, DETERMINISTIC), waves)
    bucket = staged_buckets.last_bucket
    assert bucket is not None and (bucket.rows, bucket.ids) == (4, 256)
    assert bucket.frames == frame_bucket(max(map(len, waves)) // staged_buckets.voice.hop_length)
    assert single_buckets.last_bucket is not None and single_buckets.last_bucket.frames != bucket.frames
    # padded phoneme ids move the encoder's sums a little: same lengths, nearly the same audio
    unpadded = engine.run(items, DETERMINISTIC)
    assert [len(wave) for wave in unpadded] == [len(wave) for wave in waves]
    assert all(np.max(np.abs(a - b)) < 1e-3 for a, b in zip(unpadded, waves, strict=True))


@pytest.mark.slow
def test_runs_give_their_host_buffers_back_and_reuse_them(
    staged_buckets: StagedEngine, phonemizer: Phonemizer
) -> None:
    items = _items(phonemizer)
    assert staged_buckets.waveform is not None
    pool = staged_buckets.waveform.device.host
    first = staged_buckets.run(items, DETERMINISTIC)
    kept = pool.free
    second = staged_buckets.run(items, DETERMINISTIC)
    assert pool.lent == 0
    assert 1 <= kept < KEPT_FREE  # so a buffer made anew would show in the count below
    assert pool.free == kept  # the second run took a buffer the first gave back
    assert pool is device(None).host  # one pool per device, whatever the engine
    _assert_same_audio(first, second)
    kept = [wave.copy() for wave in first]
    staged_buckets.run(list(reversed(items)), DETERMINISTIC)  # other audio in the same buffer
    _assert_same_audio(kept, first)  # the items are not views of the buffer they came in


@pytest.mark.slow
def test_batches_from_several_threads_equal_each_run_alone(
    staged_buckets: StagedEngine, phonemizer: Phonemizer
) -> None:
    """A worker's runners run batches at once: each expands into its waveform slot and copies
    the audio out in its own thread, and only the replay goes to the graph lane."""
    items = _items(phonemizer)
    shapes = [items, items[:2], items[2:], list(reversed(items))]
    alone = [staged_buckets.run(batch, DETERMINISTIC) for batch in shapes]
    with ThreadPoolExecutor(3) as pool:
        together = list(pool.map(lambda batch: staged_buckets.run(batch, DETERMINISTIC), shapes * 2))
    for index, waves in enumerate(together):
        _assert_same_audio(alone[index % len(shapes)], waves)
    assert device(None).host.lent == 0


@pytest.mark.slow
def test_a_waveform_slot_is_held_until_its_audio_is_copied(
    staged_buckets: StagedEngine, phonemizer: Phonemizer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A second batch of the same shape arrives while the first one's audio is being copied out
    (the copy held up until the second has asked for the slot, and had time to replay into it).
    It must wait for the copy, or the first batch comes back with the second one's audio."""
    first = _items(phonemizer)
    second = list(reversed(first))  # the same slot, other audio in every row
    alone = {
        "first": staged_buckets.run(first, DETERMINISTIC),
        "second": staged_buckets.run(second, DETERMINISTIC),
    }
    copying, asked, replayed = threading.Event(), threading.Event(), threading.Event()
    slots = staged_buckets.waveform
    assert slots is not None
    held_slot, replay, to_host = slots._held_slot, slots._timed_replay, slots._to_host

    def asking(rows: int, frames: int) -> Any:
        if threading.current_thread().name == "second":
            asked.set()
        return held_slot(rows, frames)

    def replaying(slot: Any, rows: int, frames: int) -> Any:
        ran = replay(slot, rows, frames)
        if asked.is_set():
            replayed.set()
        return ran

    def slow_copy(audio: Any, rows: int) -> np.ndarray:
        if threading.current_thread().name == "first":
            copying.set()
            assert asked.wait(60)
            replayed.wait(3)  # never set in time while the slot is held, as it must be
        return to_host(audio, rows)

    monkeypatch.setattr(slots, "_held_slot", asking)
    monkeypatch.setattr(slots, "_timed_replay", replaying)
    monkeypatch.setattr(slots, "_to_host", slow_copy)
    results: dict[str, list[np.ndarray]] = {}

    def run(name: str, batch: list[EngineItem]) -> None:
        results[name] = staged_buckets.run(batch, DETERMINISTIC)

    runs = {
        name: threading.Thread(target=run, args=(name, batch), name=name)
        for name, batch in (("first", first), ("second", second))
    }
    runs["first"].start()
    assert copying.wait(60)
    runs["second"].start()
    for thread in runs.values():
        thread.join(120)
    _assert_same_audio(alone["first"], results["first"])
    _assert_same_audio(alone["second"], results["second"])


class _NoFp16Plan:
    """A waveform session that fails as cuDNN does on an H200 when it has no fp16 plan for a
    convolution's shapes (the only error after which a bucket runs fp32)."""

    def run_with_iobinding(self, *args: Any) -> None:
        raise RuntimeError("[ONNXRuntimeError] : 1 : FAIL : CUDNN_FE failure 11: HEURISTIC_QUERY_FAILED")


@pytest.mark.slow
def test_a_bucket_without_an_fp16_plan_runs_fp32_and_lets_both_slots_go(
    voice: Voice, staged_buckets: StagedEngine, phonemizer: Phonemizer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first run of the fp16 slot fails: the batch's input goes to an fp32 slot, which runs
    it, comes back held and takes the bucket's place; both slots are let go after the copy."""
    engine = StagedEngine(voice, BUCKETS)
    slots = engine.waveform
    assert slots is not None
    built: list[Any] = []
    new_slot = slots._new_slot

    def without_fp16_plan(rows: int, frames: int, fp32: bool) -> Any:
        slot = new_slot(rows, frames, fp32)
        if not fp32:
            slot.session = _NoFp16Plan()
        built.append(slot)
        return slot

    monkeypatch.setattr(slots, "_new_slot", without_fp16_plan)
    items = _items(phonemizer)
    expected = staged_buckets.run(items, DETERMINISTIC)
    _assert_same_audio(expected, engine.run(items, DETERMINISTIC))
    assert engine.precision_fallbacks == 1
    assert [slot.fp32 for slot in built] == [False, True]
    assert slots.slots.values() == [built[1]]  # the fp32 slot serves the bucket from now on
    assert not any(slot.held.locked() for slot in built)
    _assert_same_audio(expected, engine.run(items, DETERMINISTIC))
    assert engine.precision_fallbacks == 1 and len(built) == 2 and built[1].runs == 2


def test_the_batchers_stats_split_each_run_into_its_stages(
    staged_buckets: StagedEngine, phonemizer: Phonemizer, voice: Voice
) -> None:
    """What ``celery inspect ttsfarm_stats`` reports of a worker: the engine runs' time added up,
    and the staged engine's time in each stage, which fits inside it."""
    before = staged_buckets.stage_totals()
    with Batcher(lambda v: staged_buckets, max_batch=4, max_wait=0.5) as batcher:
        futures = [batcher.submit(voice, item, DETERMINISTIC) for item in _items(phonemizer)]
        assert all(len(future.result(120).audio) for future in futures)
        stats = batcher.stats
    assert stats.batches >= 1
    assert set(stats.stage_seconds) == set(STAGES)
    spent = {stage: stats.stage_seconds[stage] - before[stage] for stage in before}
    assert all(seconds > 0 for seconds in spent.values())
    assert sum(spent.values()) <= stats.run_seconds
    assert pickle.loads(pickle.dumps(stats)) == stats  # as the engine link sends it to consumers


# buckets


def _frame_plan(expand: onnx.ModelProto, durations: np.ndarray, frames: int) -> tuple[np.ndarray, np.ndarray]:
    """The frame index and mask that the expand stage computes for ``durations``, on the CPU."""
    extractor = Extractor(onnx.shape_inference.infer_shapes(expand))
    plan = extractor.extract_model([EXPAND_DURATIONS, EXPAND_FRAMES], [PLAN_INDEX, PLAN_MASK])
    session = ort.InferenceSession(plan.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = {EXPAND_DURATIONS: durations.astype(np.int64), EXPAND_FRAMES: np.array(frames, dtype=np.int64)}
    index, mask = session.run([PLAN_INDEX, PLAN_MASK], feeds)
    return index, mask


def _frame_plan_by_rows(durations: np.ndarray, frames: int) -> tuple[np.ndarray, np.ndarray]:
    """The frame plan's definition, one row at a time: each id repeated for its duration, the
    frames past the row's length pointing at its first id, masked out."""
    rows, width = durations.shape
    index = np.repeat(np.arange(0, rows * width, width)[:, None], frames, axis=1)
    mask = np.zeros((rows, 1, frames), dtype=np.float32)
    for row in range(rows):
        spoken = np.repeat(np.arange(width), durations[row]) + row * width
        index[row, : len(spoken)] = spoken
        mask[row, 0, : len(spoken)] = 1.0
    return index, mask


def test_the_frame_plan_repeats_each_id_for_its_duration(staged: StagedEngine) -> None:
    rng = np.random.default_rng(3)
    durations = rng.integers(0, 4, size=(5, 7))
    durations[2] = 0  # a row that speaks nothing
    durations[4] = 3  # the longest row
    durations[1, :3] = 0  # a row that starts with silent ids
    durations[3, -2:] = 0  # and one that ends with them
    longest = int(durations.sum(axis=1).max())
    cases = [(durations, longest + 6), (durations, longest), (np.array([[3]]), 3), (np.array([[0]]), 2)]
    cases += [(rng.integers(0, 6, size=(rows, ids)), 6 * ids) for rows, ids in ((1, 1), (1, 9), (8, 40))]
    for case, frames in cases:
        index, mask = _frame_plan(staged.stages.expand, case, frames)
        assert index.dtype == np.int64 and mask.dtype == np.float32
        expected_index, expected_mask = _frame_plan_by_rows(case, frames)
        np.testing.assert_array_equal(index, expected_index)
        np.testing.assert_array_equal(mask, expected_mask)


def test_frame_bucket_is_the_smallest_that_holds_the_frames() -> None:
    assert frame_bucket(1) == 64
    assert frame_bucket(64) == 64
    assert frame_bucket(65) == 96
    assert frame_bucket(1536) == 1536
    assert frame_bucket(1537) == 1792


def test_the_cuda_layout_reaches_the_waveform_sessions_only() -> None:
    """NHWC in the front changed 7 of 79 durations, and so lengths (run 13)."""
    nhwc = engine_options(Settings.load({"TTSFARM_CUDA_LAYOUT": "nhwc"}))
    front, waveform = stage_cuda_options(nhwc, graphs=True)
    assert front == ()
    assert waveform == (NHWC, *GRAPH_OPTIONS)
    assert stage_cuda_options(nhwc, graphs=False) == ((), (NHWC,))  # the dynamic waveform session
    heuristic = (("cudnn_conv_algo_search", "HEURISTIC"),)
    everywhere = EngineOptions(cuda_options=heuristic, waveform_cuda_options=(NHWC,))
    assert stage_cuda_options(everywhere, graphs=False) == (heuristic, (*heuristic, NHWC))


@pytest.mark.slow
def test_prepare_builds_the_buckets_later_runs_use(voice: Voice, phonemizer: Phonemizer) -> None:
    engine = StagedEngine(voice, BUCKETS)
    assert engine.waveform is not None
    waveform, fronts = engine.waveform.slots, engine.front.sessions
    fronts_before, built_before = set(fronts.keys()), engine.sessions_built
    assert not waveform.keys()
    done = engine.prepare([2], max_ids=48)
    slots = set(waveform.keys())
    assert {(2, 64), (2, 96), (2, 128), (2, 160)} <= slots
    assert all(rows == 2 and frames in FRAME_BUCKETS for rows, frames in slots)
    assert set(fronts.keys()) - fronts_before == {(2, 32), (2, 48)}
    assert done == 2 + 4
    assert engine.sessions_built == built_before + 2 + len(slots)
    assert all(waveform.find(key).captured for key in slots if key[1] <= 160)  # type: ignore[union-attr]

    built = engine.sessions_built
    short = [EngineItem(phonemizer.ids("Hi.")), EngineItem(phonemizer.ids("Hello there, friend."))]
    assert max(len(item.phoneme_ids) for item in short) <= 48
    waves = engine.run(short, DETERMINISTIC)
    assert engine.last_bucket is not None and engine.last_bucket.rows == 2
    assert (2, engine.last_bucket.frames) in slots
    assert engine.sessions_built == built  # fitted prepared buckets: nothing new
    assert all(np.abs(wave).max() > 0.05 for wave in waves)

    assert len(short[1].phoneme_ids) > 32  # no 1-row front of its width exists (the warm-up's is 32)
    alone = engine.run(short[1:], DETERMINISTIC)[0]  # one item takes the prepared 2-row buckets
    assert engine.last_bucket is not None and engine.last_bucket.rows == 2
    assert engine.sessions_built == built
    assert len(alone) == len(waves[1]) and np.abs(alone - waves[1]).max() < 1e-3

    longer = [EngineItem(phonemizer.ids("Speak slowly, please."))] * 2  # 49 ids: a new front
    assert len(longer[0].phoneme_ids) == 49
    engine.run(longer, DETERMINISTIC)
    assert engine.last_bucket is not None and engine.last_bucket.frames <= 160
    assert engine.sessions_built == built + 1
    assert (2, 64) in fronts


# noise


def test_noise_is_drawn_anew_each_run(staged: StagedEngine, phonemizer: Phonemizer) -> None:
    items = _items(phonemizer)[:2]
    fixed_durations = Scales(staged.voice.noise_scale, 1.0, 0.0)
    first, second = staged.run(items, fixed_durations), staged.run(items, fixed_durations)
    assert [len(wave) for wave in first] == [len(wave) for wave in second]  # noise_w 0: same lengths
    for a, b in zip(first, second, strict=True):
        assert np.max(np.abs(a - b)) > 1e-3
    defaults = staged.default_scales()
    assert defaults.noise_w > 0
    noisy = [staged.run(items, defaults) for _ in range(4)]
    # noisy durations too: two runs can agree on both lengths by chance, four hardly ever
    assert len({tuple(len(wave) for wave in run) for run in noisy}) > 1
    for wave in [*first, *second, *(wave for run in noisy for wave in run)]:
        assert np.isfinite(wave).all()
        assert np.abs(wave).max() <= 1.0
        assert np.sqrt(np.mean(wave**2)) > 0.01


# a multi-speaker voice whose waveform stage depends on the speaker


def test_a_speaker_input_becomes_an_extra(voice: Voice) -> None:
    model = speaker_gain_copy(voice)
    stages = split_voice(model)
    assert stages.names.extras == ("speaker/gain",)
    assert "sid" in [value.name for value in stages.front.graph.input]
    assert "speaker/gain" in [out.name for out in stages.front.graph.output]
    assert "speaker/gain" in [i.name for i in stages.waveform.graph.input]


@pytest.fixture(scope="module")
def speaker_items(phonemizer: Phonemizer) -> list[EngineItem]:
    ids, other = phonemizer.ids(SENTENCES[1]), phonemizer.ids(SENTENCES[3])
    return [EngineItem(ids, 0), EngineItem(other, 1), EngineItem(ids, 1), EngineItem(other, 0)]


@pytest.fixture(scope="module")
def single_speakers(speaker_voice: Voice, speaker_items: list[EngineItem]) -> list[np.ndarray]:
    return Engine.load(speaker_voice, CPU).run(speaker_items, DETERMINISTIC)


def _assert_speaker_gains(waves: list[np.ndarray]) -> None:
    for loud, quiet in ((waves[0], waves[2]), (waves[3], waves[1])):  # same ids, speakers 0 and 1
        assert len(loud) == len(quiet) > 0
        assert np.abs(loud).max() > 0.1
        assert np.max(np.abs(quiet - SPEAKER_GAINS[1] * loud)) <= 1e-6


def test_speakers_in_the_single_engine(speaker_voice: Voice, single_speakers: list[np.ndarray]) -> None:
    assert speaker_voice.num_speakers == 2
    _assert_speaker_gains(single_speakers)


@pytest.mark.parametrize("options", [CPU, BUCKETS], ids=["dynamic", "buckets"])
def test_speakers_in_the_staged_engine(
    speaker_voice: Voice,
    speaker_items: list[EngineItem],
    single_speakers: list[np.ndarray],
    options: EngineOptions,
) -> None:
    staged = StagedEngine(speaker_voice, options)
    assert staged.stages.names.extras == ("speaker/gain",)
    waves = staged.run(speaker_items, DETERMINISTIC)
    _assert_speaker_gains(waves)
    if options.shape_buckets:  # padded ids: nearly the same audio (see the buckets test above)
        assert [len(wave) for wave in waves] == [len(wave) for wave in single_speakers]
        assert all(np.max(np.abs(a - b)) < 1e-3 for a, b in zip(single_speakers, waves, strict=True))
    else:
        _assert_same_audio(single_speakers, waves)


# which engine


def test_load_engine_picks_the_engine(voice: Voice) -> None:
    assert type(load_engine(voice, CPU, "auto")) is Engine
    assert type(load_engine(voice, CPU, "staged")) is StagedEngine


def test_a_voice_that_does_not_split_runs_in_the_single_engine(
    voice: Voice, phonemizer: Phonemizer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    uncut = _save_copy(voice, without_prior_noise(voice), tmp_path / "uncut.onnx")
    with caplog.at_level(logging.WARNING, logger="synthesis.engines"):
        engine = load_engine(uncut, CPU, "staged")
    assert type(engine) is Engine
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("uncut" in text and NOISE_OP in text for text in warnings), warnings
    wave = engine.run([EngineItem(phonemizer.ids(SENTENCES[3]))], DETERMINISTIC)[0]
    assert len(wave) % voice.hop_length == 0 and np.abs(wave).max() > 0.05


def test_an_unknown_engine_setting_is_refused() -> None:
    with pytest.raises(SettingsError, match="TTSFARM_ENGINE"):
        engine_options(Settings.load({"TTSFARM_ENGINE": "turbo"}))
    assert engine_options(Settings.load({"TTSFARM_ENGINE": "staged"})).provider == "auto"


def test_auto_takes_the_staged_engine_on_a_gpu_from_batches_of_eight() -> None:
    assert wants_staged("auto", on_gpu=True, max_batch=32)
    assert wants_staged("auto", on_gpu=True, max_batch=8)
    assert not wants_staged("auto", on_gpu=True, max_batch=4)
    assert not wants_staged("auto", on_gpu=False, max_batch=32)
    assert wants_staged("staged", on_gpu=False, max_batch=1)
    assert not wants_staged("single", on_gpu=True, max_batch=32)


def test_waveform_sessions_options() -> None:
    nhwc = EngineOptions(waveform_cuda_options=(NHWC,))
    arena = (FIXED_SHAPE_ARENA,)
    assert waveform_cuda_options(nhwc, True, arena, fp32=False) == (*arena, NHWC, *GRAPH_OPTIONS)
    assert waveform_cuda_options(nhwc, True, arena, fp32=True) == (*arena, *GRAPH_OPTIONS)  # fp32: NCHW
    assert waveform_cuda_options(nhwc, False, (), fp32=False) == (NHWC,)  # no capture: no graph option
