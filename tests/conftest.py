"""Shared fixtures: the real joe voice on CPU, loaded once per test session."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from synthesis.batcher import Batcher
from synthesis.engine import Engine, EngineOptions, Scales
from synthesis.phonemes import Phonemizer
from synthesis.pipeline import Synthesizer
from ttsfarm.voices import Voice, resolve_voice

DETERMINISTIC = Scales(noise_scale=0.0, length_scale=1.0, noise_w=0.0)


@pytest.fixture(scope="session")
def voice() -> Voice:
    return resolve_voice("joe")


@pytest.fixture(scope="session")
def engine(voice: Voice) -> Engine:
    return Engine.load(voice, EngineOptions(provider="cpu"))


@pytest.fixture(scope="session")
def phonemizer(voice: Voice) -> Phonemizer:
    return Phonemizer(voice)


@pytest.fixture
def synthesizer(engine: Engine) -> Iterator[Synthesizer]:
    """A synthesizer whose batcher drives the shared CPU engine."""
    with Batcher(lambda voice: engine, max_batch=8, max_wait=0.05) as batcher:
        yield Synthesizer(batcher)
