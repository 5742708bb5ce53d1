"""Voices by name, by path, from a folder, and a multi-speaker voice's ``sid`` plumbing."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest

from synthesis.engine import Engine, EngineItem, EngineOptions
from synthesis.phonemes import Phonemizer
from tests.conftest import DETERMINISTIC
from ttsfarm.core.errors import VoiceNotFound, VoiceUnusable
from ttsfarm.core.voices import Voice, list_voices, resolve_voice


def two_speaker_copy(voice: Voice, folder: Path) -> Path:
    """The joe voice with a ``sid`` input and two speakers in its config: the graph ignores
    the id, which is enough to check that ids are validated and fed per item."""
    model = onnx.load(str(voice.model_path))
    for tensor in model.graph.initializer:  # the single-speaker graph has a constant of that name
        if tensor.name == "sid":
            tensor.name = "sid_constant"
    for node in model.graph.node:
        node.input[:] = ["sid_constant" if name == "sid" else name for name in node.input]
    model.graph.input.append(
        onnx.helper.make_tensor_value_info("sid", onnx.TensorProto.INT64, ["batch_size"])
    )
    path = folder / "duo.onnx"
    onnx.save(model, str(path))
    config = json.loads(voice.config_path.read_text())
    config.update(num_speakers=2, speaker_id_map={"alice": 0, "bob": 1})
    path.with_suffix(".onnx.json").write_text(json.dumps(config))
    return path


def test_voice_by_path_and_from_a_folder(voice: Voice, tmp_path: Path) -> None:
    shutil.copy(voice.model_path, tmp_path / "mine.onnx")
    shutil.copy(voice.config_path, tmp_path / "mine.onnx.json")
    assert resolve_voice(str(tmp_path / "mine.onnx")).name == "mine"
    assert [v.name for v in list_voices(str(tmp_path))] == ["joe", "mine"]
    assert resolve_voice("mine", str(tmp_path)).sample_rate == 22050
    with pytest.raises(VoiceNotFound, match="not found"):
        resolve_voice(str(tmp_path / "missing.onnx"))


def test_one_broken_voice_file_is_one_voice_missing(
    voice: Voice, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A malformed ``.onnx.json`` in the voices folder leaves that voice out, with a warning that
    says which file and what to do; the other voices, built-in and in the folder, serve on."""
    shutil.copy(voice.model_path, tmp_path / "good.onnx")
    shutil.copy(voice.config_path, tmp_path / "good.onnx.json")
    (tmp_path / "broken.onnx").write_bytes(b"")
    (tmp_path / "broken.onnx.json").write_text('{"audio": {"sample_rate": ')
    assert [v.name for v in list_voices(str(tmp_path))] == ["joe", "good"]
    assert "broken.onnx.json" in caplog.text and "fix or remove that file" in caplog.text
    assert resolve_voice("joe", str(tmp_path)).name == "joe"
    assert resolve_voice("good", str(tmp_path)).name == "good"
    with pytest.raises(VoiceUnusable, match=r"broken\.onnx\.json.*fix or remove that file") as raised:
        resolve_voice("broken", str(tmp_path))
    assert str(tmp_path) not in raised.value.public  # what a job's client reads holds no path


def test_multi_speaker_voice(voice: Voice, tmp_path: Path) -> None:
    duo = resolve_voice(str(two_speaker_copy(voice, tmp_path)))
    assert duo.num_speakers == 2
    assert duo.speaker_id(None) == 0 and duo.speaker_id(1) == 1 and duo.speaker_id("bob") == 1
    with pytest.raises(VoiceNotFound, match=r"speakers 0\.\.1"):
        duo.speaker_id(2)
    engine = Engine.load(duo, EngineOptions(provider="cpu", warmup=False))
    ids = Phonemizer(duo).ids("Two voices, one model.")
    waves = engine.run([EngineItem(ids, 0), EngineItem(ids, 1)], DETERMINISTIC)
    assert len(waves[0]) == len(waves[1]) > 0
    assert np.allclose(waves[0], waves[1], atol=1e-3)  # this graph ignores sid by construction


def test_producer_never_imports_the_engine() -> None:
    code = (
        "import sys, producer, producer.audiobook, ttsfarm.cli; "
        "bad = [m for m in ('onnxruntime', 'onnx', 'synthesis.engine', 'piper') if m in sys.modules]; "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr
