"""``TTSFARM_GATEWAY_VOICES``: OpenAI's voice names mapped to the farm's voices."""

from __future__ import annotations

import pytest

from gateway.farm import voice_map
from ttsfarm.core.errors import SettingsError
from ttsfarm.core.voices import Voice, resolve_voice


@pytest.fixture(scope="module")
def voices() -> dict[str, Voice]:
    return {"joe": resolve_voice("joe")}


def test_names_map_to_voices_of_the_farm(voices: dict[str, Voice]) -> None:
    assert voice_map("", voices, "joe") == {}
    assert voice_map(" alloy = joe , nova=joe,", voices, "joe") == {"alloy": "joe", "nova": "joe"}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("alloy", "takes name=voice pairs such as alloy=joe, not 'alloy'"),
        ("=joe", "not '=joe'"),
        ("alloy=amy", "maps 'alloy' to 'amy', not a voice of the farm (joe)"),
    ],
)
def test_a_wrong_map_says_what_to_fix(voices: dict[str, Voice], text: str, message: str) -> None:
    with pytest.raises(SettingsError, match=message.replace("(", r"\(").replace(")", r"\)")):
        voice_map(text, voices, "joe")
