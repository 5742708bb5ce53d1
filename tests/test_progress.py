"""The audiobook's progress: the time left from both rates, and a bar that ends at 100%."""

from __future__ import annotations

import time

from ttsfarm.core.progress import BookProgress


def test_the_book_bar_ends_full_and_its_time_left_follows_the_slower_side() -> None:
    with BookProgress(disable=True) as progress:
        progress.start(sentences=20, spoken=0, finished=0, chapters=2, chapters_done=0, audio=0.0, places=1)
        assert progress.time_left() is None and progress.fraction == 0.0
        time.sleep(0.05)
        progress.part_done("a", estimated=10, sentences=10, audio=30.0)  # half spoken in 0.05 s
        speaking = progress.time_left()
        assert speaking is not None and 0.02 < speaking < 0.2
        progress.part_done("b", estimated=10, sentences=12, audio=35.0)  # all spoken; a part ran long
        assert progress.sentences == 22
        progress.chapter_started(1, 10)
        progress.chapter_started(2, 12)
        time.sleep(0.1)
        assert progress.time_left() is not None and progress.time_left() > 0  # finishing, none done yet
        progress.chapter_done(1, 10)
        left = progress.time_left()
        assert left is not None and 0.0 < left < 1.0  # chapter 2 is about as far along as 1 was
        assert 0.0 < progress.fraction < 1.0
        progress.chapter_done(2, 12)
        assert progress.time_left() == 0.0 and progress.fraction == 1.0
