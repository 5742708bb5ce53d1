"""Where do a profile's samples go? Shares of py-spy's folded stacks, by function.

    python benchmarks/profile_shares.py OUT/profile-*-gil.txt              # top functions
    python benchmarks/profile_shares.py OUT/profile-*-gil.txt --under run_job   # what it calls

Reads the raw files of ``short_jobs.py --profile-consumers`` or ``farm_gpu.py --profile`` (one
stack a line: frames joined by ``;``, then the sample count) and prints, as shares of all their
samples, the functions most often on the stack (inclusive) and at its top (self). ``--under
NAME`` prints instead what the first frame whose function starts with NAME spent its samples in,
one line per function it called directly.

A caution from run 52: with ``--gil``, py-spy counts the moments a thread has just let the lock
go as the line it stood on. A Celery consumer's loop showed 14% of its samples on kombu's
``Channel.active_queues``, which its 736 calls spent 4.6 ms in: read a share under 15% near a
poll or a socket as the wait it may be, and check it with a counter before acting on it.
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

LOCATION = re.compile(r"\s*\((?P<file>[^()]*?):\d+\)$")
"""py-spy's ``function (file.py:line)``: the line is dropped, so one function is one key."""


def stacks(paths: list[Path]) -> Iterator[tuple[list[str], int]]:
    """Each folded stack's frames (outermost first, as ``function (file)``) and its samples."""
    for path in paths:
        for line in path.read_text().splitlines():
            stack, _, count = line.rpartition(" ")
            if stack and count.isdigit():
                yield [LOCATION.sub(r" (\g<file>)", frame) for frame in stack.split(";")], int(count)


def shares(paths: list[Path], top: int) -> str:
    inclusive: Counter[str] = Counter()
    own: Counter[str] = Counter()
    total = 0
    for frames, count in stacks(paths):
        total += count
        inclusive.update(dict.fromkeys(frames, count))
        own[frames[-1]] += count
    lines = [f"{total} samples", "", "| on the stack | at the top | function |", "|---|---|---|"]
    for name, count in inclusive.most_common(top):
        lines.append(f"| {100 * count / total:.1f}% | {100 * own[name] / total:.1f}% | {name} |")
    return "\n".join(lines)


def under(paths: list[Path], name: str, top: int) -> str:
    callees: Counter[str] = Counter()
    total = 0
    for frames, count in stacks(paths):
        first = next((i for i, frame in enumerate(frames) if frame.startswith(name)), None)
        if first is not None:
            total += count
            callees[frames[first + 1] if first + 1 < len(frames) else "(itself)"] += count
    lines = [f"{total} samples under {name}", "", "| share | calls |", "|---|---|"]
    lines += [
        f"| {100 * count / max(total, 1):.1f}% | {callee} |" for callee, count in callees.most_common(top)
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("profiles", type=Path, nargs="+", help="py-spy raw (folded) files, added up")
    parser.add_argument("--under", help="what this function's samples were spent in")
    parser.add_argument("--top", type=int, default=40)
    args = parser.parse_args()
    print(under(args.profiles, args.under, args.top) if args.under else shares(args.profiles, args.top))


if __name__ == "__main__":
    main()
