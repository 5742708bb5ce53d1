"""benchmarks/profile_shares.py: a py-spy profile's shares, added up over files, by function."""

from __future__ import annotations

from pathlib import Path

from profile_shares import shares, under


def test_shares_count_a_function_once_per_stack_and_drop_line_numbers(tmp_path: Path) -> None:
    first, second = tmp_path / "a.txt", tmp_path / "b.txt"
    first.write_text(
        "run (worker/jobs.py:10);speak (synthesis/pipeline.py:5);speak (synthesis/pipeline.py:9) 6\n"
        "run (worker/jobs.py:11);store (worker/jobs.py:40) 2\n"
    )
    second.write_text("loop (kombu/hub.py:3) 2\nnot a stack line\n")
    table = shares([first, second], top=10)
    assert table.startswith("10 samples")
    assert "| 80.0% | 0.0% | run (worker/jobs.py) |" in table  # two lines of one function: one row
    assert "| 60.0% | 60.0% | speak (synthesis/pipeline.py) |" in table  # on the stack twice: once
    assert "| 20.0% | 20.0% | loop (kombu/hub.py) |" in table
    calls = under([first, second], "run", top=10)
    assert calls.startswith("8 samples under run")
    assert "| 75.0% | speak (synthesis/pipeline.py) |" in calls
    assert "| 25.0% | store (worker/jobs.py) |" in calls
