"""The ``ttsfarm`` command as a user runs it: real processes, real files."""

from __future__ import annotations

from pathlib import Path

import click
import pytest
import soundfile as sf
from click.testing import CliRunner

from bench.farm import free_port
from tests.helpers_cli import ttsfarm_text as ttsfarm
from ttsfarm.cli import main
from ttsfarm.core.jobs import MAX_TEXT_CHARS


def test_synth_text_to_wav(tmp_path: Path) -> None:
    run = ttsfarm("synth", "Hello from the farm. It works.", "-o", "hello.wav", "-q", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    audio, rate = sf.read(tmp_path / "hello.wav")
    assert rate == 22050 and 1.0 < len(audio) / rate < 5.0
    assert "hello.wav" in run.stdout
    size = (tmp_path / "hello.wav").stat().st_size
    assert f"{size / 1024:.0f} KiB" in run.stdout  # the result describes the file written


def test_synth_file_to_mp3_with_options(tmp_path: Path) -> None:
    (tmp_path / "chapter.txt").write_text("A short chapter. It has two sentences.", encoding="utf-8")
    run = ttsfarm(
        "synth",
        "-f",
        "chapter.txt",
        "-o",
        "out/ch.mp3",
        "--length-scale",
        "1.3",
        "--voice",
        "joe",
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stderr
    info = sf.info(tmp_path / "out" / "ch.mp3")
    assert info.format == "MP3" and info.duration > 2.0


def test_voices_lists_joe(tmp_path: Path) -> None:
    run = ttsfarm("voices", cwd=tmp_path)
    assert run.returncode == 0
    assert run.stdout.startswith("joe ") and "22050 Hz" in run.stdout


def bad_inputs(tmp_path: Path) -> list[tuple[list[str], str]]:
    (tmp_path / "latin1.txt").write_bytes("caf\xe9 au lait".encode("latin-1"))
    (tmp_path / "huge.txt").write_text("word " * (MAX_TEXT_CHARS // 5 + 10))
    (tmp_path / "a-file").write_text("x")
    return [
        (["synth", "", "-o", "x.wav"], "the text is empty"),
        (["synth", "   \n\t ", "-o", "x.wav"], "the text is empty"),
        (["synth", "-f", "missing.txt", "-o", "x.wav"], "file missing.txt does not exist"),
        (["synth", "-f", "latin1.txt", "-o", "x.wav"], "is not UTF-8 text"),
        (["synth", "hi", "--voice", "nobody", "-o", "x.wav"], "unknown voice 'nobody'"),
        (["synth", "hi", "-o", "a-file/x.wav"], "cannot write to a-file"),
        (["synth", "hi", "-o", "x.aiff"], "unknown audio format 'aiff'"),
        (["synth", "hi", "-o", "x.wav", "--format", "m4a"], "unknown audio format 'm4a'"),
        (["synth", "-f", "huge.txt", "-o", "x.wav"], "over the limit of 200,000"),
        (["synth", "hi", "--speaker", "3", "-o", "x.wav"], "has a single speaker"),
        (["synth", "hi", "--length-scale", "0", "-o", "x.wav"], "length scale must be between"),
    ]


@pytest.mark.parametrize("case", range(11))
def test_bad_input_gives_one_clear_line(tmp_path: Path, case: int) -> None:
    args, message = bad_inputs(tmp_path)[case]
    run = ttsfarm(*args, cwd=tmp_path)
    assert run.returncode == 1
    assert "Traceback" not in run.stderr
    assert message in run.stderr
    assert run.stderr.strip().count("\n") == 0, run.stderr
    assert not (tmp_path / "x.wav").exists()


def dead_broker(password: str = "") -> dict[str, str]:
    """A farm whose broker (a closed port) never answers: what is checked before it is reached."""
    return {"TTSFARM_BROKER_URL": f"redis://:{password}@127.0.0.1:{free_port()}/0"}


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (
            [b"synth", b"caf\xe9 au lait", b"-o", b"x.wav"],
            {},
            "the text has a byte 0xE9 at character 4 that is not UTF-8: save or pass the text as UTF-8",
        ),
        (
            [b"submit", b"\xe2\x82\xac 5 or \xa35"],  # the euro sign in UTF-8, then Latin-1's pound
            dead_broker(),
            "the text has a byte 0xA3 at character 8 that is not UTF-8",
        ),
        ([b"submit", b"Hi.", b"--key", b"k\xe9"], dead_broker(), "the key has a byte 0xE9 at character 2"),
        (
            [b"submit", b"Hi.", b"--voice", b"jo\xe9"],
            dead_broker(),
            "the voice has a byte 0xE9 at character 3",
        ),
    ],
)
def test_a_byte_that_is_not_utf8_in_an_argument_is_one_clear_line(
    tmp_path: Path, args: list[bytes], env: dict[str, str], message: str
) -> None:
    """Python hands such bytes over as U+DC80..U+DCFF: refused with the byte and its place, before
    any synthesis, and before the broker (which cannot be reached here) is asked for anything."""
    run = ttsfarm(*args, cwd=tmp_path, env=env)
    assert run.returncode == 1
    assert run.stderr.startswith(f"Error: {message}"), run.stderr
    assert run.stderr.strip().count("\n") == 0 and "Traceback" not in run.stderr, run.stderr
    assert run.stdout == "" and not (tmp_path / "x.wav").exists()


@pytest.mark.parametrize(
    "args",
    [
        ["submit", "Hello."],
        ["keys", "list"],
        ["status", "0" * 32],
        ["cancel", "0" * 32],
        ["fetch", "0" * 32, "-o", "x.wav"],
    ],
)
@pytest.mark.slow
def test_the_broker_password_is_never_printed(tmp_path: Path, args: list[str]) -> None:
    env = dead_broker(password="hunter2")
    run = ttsfarm(*args, cwd=tmp_path, env=env)
    assert run.returncode == 1
    assert "hunter2" not in run.stdout + run.stderr
    assert run.stderr.startswith("Error: cannot reach ") and "at redis://***@127.0.0.1:" in run.stderr
    assert run.stderr.strip().count("\n") == 0 and "Traceback" not in run.stderr, run.stderr


def visible_options() -> dict[str, dict[str, click.Option]]:
    """Each command's options as --help shows them, by parameter name."""
    return {
        name: {p.name or "": p for p in command.params if isinstance(p, click.Option) and not p.hidden}
        for name, command in main.commands.items()
    }


def test_each_idea_is_one_option_with_one_default_in_every_command() -> None:
    spellings: dict[str, set[tuple[str, ...]]] = {}
    for options in visible_options().values():
        for name, option in options.items():
            spellings.setdefault(name, set()).add(tuple(option.opts))
    assert {name: found for name, found in spellings.items() if len(found) > 1} == {}
    loudness = {
        name: options["loudness"] for name, options in visible_options().items() if "loudness" in options
    }
    assert sorted(loudness) == ["audiobook", "submit", "synth"]
    assert {option.default for option in loudness.values()} == {"-18"}
    assert spellings["output"] == {("-o", "--output")} and spellings["log_level"] == {("-l", "--log-level")}
    shown = {name for options in visible_options().values() for o in options.values() for name in o.opts}
    assert not shown & {"--target-lufs", "--outdir", "--loglevel", "--provider"}  # old names: hidden


def test_an_old_option_name_still_works_and_says_what_replaced_it() -> None:
    runner = CliRunner()
    no_broker = {"TTSFARM_BROKER_URL": None, "TTSFARM_CONFIG": None}
    old = runner.invoke(main, ["worker", "--loglevel", "DEBUG"], env=no_broker)
    assert old.exit_code == 1 and "no broker configured" in old.stderr
    assert old.stderr.startswith("ttsfarm: --loglevel is deprecated: use --log-level\n")
    both = runner.invoke(main, ["worker", "--log-level", "info", "--loglevel", "info"], env=no_broker)
    assert both.exit_code == 2 and "give --log-level or --loglevel (its old name), not both" in both.stderr
    devices = runner.invoke(main, ["worker", "--gpu", "0", "--cpu"], env=no_broker)
    assert devices.exit_code == 2 and "give --gpu N or --cpu, not both" in devices.stderr
