"""``ttsfarm synth --lines`` and ``--jsonl``: one file per input line, as dataset builders use
piper, run as a user runs it (real processes, the real voice on CPU, real files)."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest
import soundfile as sf

from tests.helpers_cli import ttsfarm, zero_runs
from ttsfarm.cli.lines import MANIFEST_COLUMNS, line_request, read_lines
from ttsfarm.core.jobs import SynthesisOptions
from ttsfarm.core.voices import resolve_voice

FIXED = ("--noise-scale", "0", "--noise-w", "0", "--loudness", "off")
"""The same speech every run, at the voice's own level: lengths and silences can be compared."""


def manifest(folder: Path) -> list[dict[str, str]]:
    with (folder / "manifest.csv").open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert rows == [] or tuple(rows[0]) == MANIFEST_COLUMNS
    return rows


def test_text_lines_each_make_a_file_named_by_line_with_a_manifest(tmp_path: Path) -> None:
    (tmp_path / "lines.txt").write_text("The first line.\n\nA second, longer line, with more words.\n")
    run = ttsfarm("synth", "--lines", "-f", "lines.txt", "-o", "set", "--format", "flac", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    stderr = run.stderr.decode()
    assert "lines: 100%" in stderr and "2/2" in stderr  # a bar over lines, not segments
    folder = tmp_path / "set"
    assert sorted(p.name for p in folder.iterdir()) == ["1.flac", "3.flac", "manifest.csv"]  # blank skipped
    rows = manifest(folder)
    assert [(r["id"], r["file"], r["text"]) for r in rows] == [
        ("1", "1.flac", "The first line."),
        ("3", "3.flac", "A second, longer line, with more words."),
    ]
    for row in rows:
        info = sf.info(str(folder / row["file"]))
        assert info.samplerate == 22050 and abs(info.duration - float(row["duration"])) < 0.01
    assert 0.5 < float(rows[0]["duration"]) < float(rows[1]["duration"])
    assert re.search(r"set: 2 files, [\d.]+ s of flac audio at 22050 Hz; made in", run.stdout.decode())


def test_segments_of_different_lines_share_batches(tmp_path: Path) -> None:
    lines = "".join(f"Line {word} is here.\n" for word in ("one", "two", "three", "four", "five", "six"))
    (tmp_path / "lines.txt").write_text(lines)
    run = ttsfarm(
        "synth",
        "--lines",
        "-f",
        "lines.txt",
        "-o",
        "out",
        *FIXED,
        cwd=tmp_path,
        env={"TTSFARM_MAX_BATCH": "4"},
    )
    assert run.returncode == 0, run.stderr
    batches = re.search(r"batches: (\d+), mean size ([\d.]+)", run.stderr.decode())
    assert batches is not None, run.stderr
    assert int(batches[1]) < 6 and float(batches[2]) > 1.5  # one line at a time would be 6 batches of 1
    assert len(manifest(tmp_path / "out")) == 6


def test_json_lines_take_ids_and_options_and_bad_lines_are_named_without_stopping_the_others(
    tmp_path: Path,
) -> None:
    good = [
        {"id": "utt001", "text": "Slow and steady."},
        {"id": "utt002", "text": "Slow and steady.", "length_scale": 1.6},
        {"id": 3, "text": "First. Second.", "sentence_silence": 1.0, "speaker_id": 0},  # piper's name
    ]
    bad = [
        "{not json",
        json.dumps({"id": "utt004", "text": "   "}),
        json.dumps({"id": "utt005", "text": "Hi.", "length_scale": 50}),
        json.dumps({"id": "UTT001", "text": "Taken."}),
        json.dumps({"id": "../up", "text": "Out of the folder."}),
        json.dumps({"id": "utt008", "text": "Hi.", "lenght_scale": 1.2}),
        json.dumps({"id": "utt009", "text": "Hi.", "speaker": 2}),
        json.dumps({"id": "utt010", "text": "* * *"}),  # no letter or digit: found as it is read
    ]
    source = [json.dumps(good[0]), json.dumps(good[1]), *bad[:4], json.dumps(good[2]), *bad[4:]]
    (tmp_path / "utts.jsonl").write_text("\n".join(source) + "\n")
    run = ttsfarm("synth", "--json-input", "-f", "utts.jsonl", "-o", "out", *FIXED, cwd=tmp_path)
    assert run.returncode == 1
    stderr = run.stderr.decode()
    for number, message in (
        (3, "not valid JSON: Expecting property name enclosed in double quotes at column 2"),
        (4, "the text is empty"),
        (5, "length scale must be between 0.1 and 10"),
        (6, "the id 'UTT001' names the file of line 1 already"),
        (8, "the id '../up' cannot name a file"),
        (9, "unknown key 'lenght_scale'"),
        (10, "voice 'joe' has a single speaker"),
        (11, "the text has nothing to speak"),
    ):
        assert f"utts.jsonl, line {number}: {message}" in stderr, stderr
    assert stderr.rstrip().endswith("Error: 8 of 11 lines failed (lines 3, 4, 5, 6, 8, 9, 10, 11)")
    assert "Traceback" not in stderr
    folder = tmp_path / "out"
    assert sorted(p.name for p in folder.iterdir()) == ["3.wav", "manifest.csv", "utt001.wav", "utt002.wav"]
    assert not (tmp_path / "up.wav").exists()
    rows = {row["id"]: row for row in manifest(folder)}
    assert list(rows) == ["utt001", "utt002", "3"] and rows["3"]["speaker"] == "0"
    assert float(rows["utt002"]["duration"]) / float(rows["utt001"]["duration"]) == pytest.approx(
        1.6, rel=0.1
    )
    audio, rate = sf.read(folder / "3.wav", dtype="int16")
    assert [n for n in zero_runs(audio) if n > 0.1 * rate] == [pytest.approx(rate, abs=0.03 * rate)]


def test_fail_fast_stops_at_the_first_bad_line(tmp_path: Path) -> None:
    (tmp_path / "bad.jsonl").write_text('{"text": "Fine."}\n{"text": 5}\n')
    checked = ttsfarm("synth", "--jsonl", "--fail-fast", "-f", "bad.jsonl", "-o", "out", cwd=tmp_path)
    assert checked.returncode == 1
    assert checked.stderr.decode().splitlines() == [
        "bad.jsonl, line 2: the text must be a string, not int",
        "Error: 1 bad line (--fail-fast): nothing was spoken",
    ]
    assert not (tmp_path / "out").exists() or list((tmp_path / "out").iterdir()) == []
    later = "".join(f"Line {n} is fine.\n" for n in range(2, 7))
    # U+A71D, a modifier letter: it passes the text check but holds no word, so it fails as it is spoken
    (tmp_path / "lines.txt").write_text("\ua71d\n" + later)
    stopped = ttsfarm("synth", "--lines", "--fail-fast", "-f", "lines.txt", "-o", "out", "-q", cwd=tmp_path)
    assert stopped.returncode == 1
    assert "lines.txt, line 1: the text has nothing to speak" in stopped.stderr.decode()
    assert "stopped there (--fail-fast)" in stopped.stderr.decode()
    made = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert len(made) <= 2 and not any(name.endswith(".partial.wav") for name in made)  # line 2 at most


def test_lines_mode_is_refused_where_it_cannot_work(tmp_path: Path) -> None:
    (tmp_path / "taken.wav").write_bytes(b"")
    (tmp_path / "lines.txt").write_text("Hello.\n")
    for args, message in (
        (["--lines", "-f", "lines.txt", "-o", "taken.wav"], b"-o names a folder, not 'taken.wav'"),
        (["--lines", "-f", "lines.txt", "-o", "-"], b"-o names a folder"),
        (["--lines", "Hello.", "-o", "out"], b"give the lines with -f FILE or on standard input"),
        (["Hello.", "--fail-fast", "-o", "x.wav"], b"--fail-fast goes with --lines or --jsonl"),
    ):
        run = ttsfarm("synth", *args, cwd=tmp_path)
        assert run.returncode == 2 and message in run.stderr, run.stderr
    empty = ttsfarm("synth", "--lines", "-o", "out", cwd=tmp_path, stdin=b"\n  \n")
    assert empty.returncode == 1 and b"Error: standard input has no lines to speak" in empty.stderr
    voice = ttsfarm("synth", "--lines", "-f", "lines.txt", "-o", "out", "--speaker", "1", cwd=tmp_path)
    assert voice.returncode == 1 and voice.stderr.count(b"single speaker") == 1  # once, not per line


def test_lines_are_numbered_by_their_place_in_the_input() -> None:
    request = line_request(resolve_voice("joe"), SynthesisOptions(), "wav", None, 0.2)
    text = "\n".join(["A."] * 9 + ["", "B.", '{"x": 1}'])
    lines, errors = read_lines(text, False, request)
    assert [line.name for line in lines] == [f"{n:02d}" for n in (1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 12)]
    assert lines[-1].request.text == '{"x": 1}' and lines[0].request.sentence_silence == 0.2
    assert errors == []
    lines, errors = read_lines('{"id": "07", "text": "A."}\n{"text": "B."}\n', True, request)
    assert [line.name for line in lines] == ["07", "2"]
