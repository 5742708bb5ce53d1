"""How many jobs a second does one producer process queue with ``Client.submit_many``?

    python benchmarks/submit_rate.py [--jobs 2000] [--repeats 3] [--checkout DIR ...]

Queues --jobs one-sentence jobs in one call onto a queue no worker reads, in a process of its
own, --repeats times; with --checkout, each other checkout (the code before a change, say) runs
in turn with this one, so that all are compared in one run on the same Redis (--redis-url,
default database 9 of the local one, emptied before and after). Prints a table of jobs/s.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

import redis

from bench.checkouts import checkout_env

ROOT = Path(__file__).resolve().parent.parent


def submit_once(redis_url: str, jobs: int) -> float:
    """Run in the checkout's own process (``--once``): the jobs/s of one ``submit_many``."""
    from producer import Client
    from producer.client import JobSpec
    from ttsfarm.core.settings import Settings

    settings = Settings(broker_url=redis_url, queue=f"submit-rate-{uuid.uuid4().hex[:6]}")
    texts = [f"This is sentence number {n} of a catalog of prompts to speak." for n in range(jobs)]
    with Client(settings) as client:
        client.submit_many([JobSpec(text) for text in texts[:20]])  # connections made, code warm
        started = time.perf_counter()
        client.submit_many([JobSpec(text) for text in texts])
        return jobs / (time.perf_counter() - started)


def measure(checkout: Path, redis_url: str, jobs: int) -> float:
    command = [sys.executable, str(ROOT / "benchmarks" / "submit_rate.py"), "--once", "--jobs", str(jobs)]
    command += ["--redis-url", redis_url]
    done = subprocess.run(command, env=checkout_env(checkout), cwd=checkout, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"{checkout}: the submit failed:\n{done.stderr[-2000:]}")
    return float(json.loads(done.stdout.splitlines()[-1])["jobs_per_s"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--checkout", type=Path, nargs="*", default=[], help="other checkouts to compare")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/9")
    parser.add_argument("--once", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.once:
        print(json.dumps({"jobs_per_s": round(submit_once(args.redis_url, args.jobs), 1)}))
        return
    checkouts = [ROOT, *(path.resolve() for path in args.checkout)]
    rates: dict[Path, list[float]] = {checkout: [] for checkout in checkouts}
    server = redis.Redis.from_url(args.redis_url)
    server.flushdb()
    try:
        for _ in range(args.repeats):
            for checkout in checkouts:  # alternating: a slow moment of the machine hits all alike
                rates[checkout].append(measure(checkout, args.redis_url, args.jobs))
    finally:
        server.flushdb()
    print(f"| checkout | jobs/s, median of {args.repeats} | each |")
    print("|---|---|---|")
    for checkout, found in rates.items():
        name = "this one" if checkout == ROOT else str(checkout)
        print(f"| {name} | {statistics.median(found):.0f} | {', '.join(f'{r:.0f}' for r in found)} |")


if __name__ == "__main__":
    main()
