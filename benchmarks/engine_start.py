"""Where does a worker's engine start go: loading the voice, building sessions, capturing graphs?

    python3 benchmarks/engine_start.py --repeats 2                      # this checkout
    python3 benchmarks/engine_start.py --repeats 2 --checkout ../before # and another, in turns
    python3 benchmarks/engine_start.py --cpu --repeats 1                # small, on a CPU

Each start runs in a fresh process, as a worker does (``synthesis.build``): the engine for the
settings' voice and device (``load_engine``), then ``prepare`` for the batch size, as a GPU
worker's ``TTSFARM_PREWARM`` does. It reports the seconds of each phase: imports, the engine's load (the
voice split and converted, the first session, the warm-up), ``prepare`` (the bucket sessions
built, the waveform graphs captured), and inside them the sessions built and their summed build
time (summed over threads: more than the wall time when builds go side by side) and the capture
time. The checkouts take turns, round after round; the table gives every round, with the
process's peak and final resident memory, and the final once glibc has given back its free memory.
"""

from __future__ import annotations

import time

STARTED = time.perf_counter()

import argparse  # noqa: E402
import ctypes  # noqa: E402
import importlib  # noqa: E402
import importlib.util  # noqa: E402
import json  # noqa: E402
import resource  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from dataclasses import replace  # noqa: E402
from pathlib import Path  # noqa: E402

from bench.checkouts import checkout_env  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def rss_mib() -> float:
    """This process's resident memory now."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def trimmed_rss_mib() -> float:
    """Resident memory once glibc has given back what its arenas hold free (``malloc_trim``)."""
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    return rss_mib()


def measure(cpu: bool) -> dict[str, float | int | str]:
    """One start in this process; the code is whatever ``synthesis`` the path finds first."""
    from synthesis.build import BatchPolicy, engine_options
    from synthesis.engines import load_engine

    core = "ttsfarm.core" if importlib.util.find_spec("ttsfarm.core") else "ttsfarm"  # older checkouts
    Settings = importlib.import_module(f"{core}.settings").Settings
    resolve_voice = importlib.import_module(f"{core}.voices").resolve_voice

    imported = time.perf_counter()
    settings = Settings.load().with_options(provider="cpu" if cpu else "cuda")
    policy = BatchPolicy.for_settings(settings, on_gpu=not cpu)
    batch = 2 if cpu else policy.max_batch
    options = engine_options(settings, batch)  # then as synthesis.build gives it to a worker
    options = replace(options, give_back_memory=True, concurrent_runs=policy.concurrent_runs, warmup=not cpu)
    engine = load_engine(resolve_voice(settings.voice, settings.voices_dir), options, settings.engine, batch)
    loaded = time.perf_counter()
    built_at_load, build_s_at_load = engine.sessions_built, engine.session_seconds
    engine.prepare([batch], max_ids=64 if cpu else 400)
    prepared = time.perf_counter()
    return {
        "imports_s": round(imported - STARTED, 2),
        "load_s": round(loaded - imported, 2),
        "prepare_s": round(prepared - loaded, 2),
        "ready_s": round(prepared - STARTED, 2),
        "sessions_at_load": built_at_load,
        "build_s_at_load": round(build_s_at_load, 2),
        "sessions_in_prepare": engine.sessions_built - built_at_load,
        "build_s_in_prepare": round(engine.session_seconds - build_s_at_load, 2),
        "capture_s": round(getattr(engine, "capture_seconds", 0.0), 2),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "rss_mib": round(rss_mib()),
        "rss_trimmed_mib": round(trimmed_rss_mib()),
        "engine": type(engine).__name__,
        "provider": engine.provider,
    }


def start(checkout: Path, cpu: bool) -> dict[str, float | int | str]:
    command = [sys.executable, str(Path(__file__).resolve()), "--child"] + (["--cpu"] if cpu else [])
    env = checkout_env(checkout)
    done = subprocess.run(command, env=env, cwd=checkout, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"a start from {checkout} failed:\n{done.stderr[-3000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--checkout", type=Path, help="another checkout to start in turns with this one")
    parser.add_argument("--cpu", action="store_true", help="on the CPU, small: to try the script")
    parser.add_argument("--json", type=Path, help="write every start here")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.cpu)), flush=True)
        return
    checkouts = {"this checkout": ROOT, **({"other": args.checkout.resolve()} if args.checkout else {})}
    starts = []
    columns = (
        "imports_s",
        "load_s",
        "prepare_s",
        "ready_s",
        "sessions_in_prepare",
        "build_s_in_prepare",
        "capture_s",
        "peak_rss_mib",
        "rss_mib",
        "rss_trimmed_mib",
    )
    print("| checkout | round | " + " | ".join(columns) + " |")
    print("|---" * (len(columns) + 2) + "|")
    for round_ in range(1, args.repeats + 1):
        for name, checkout in checkouts.items():
            report = {"checkout": name, "round": round_, **start(checkout, args.cpu)}
            starts.append(report)
            print(f"| {name} | {round_} | " + " | ".join(str(report[c]) for c in columns) + " |", flush=True)
    if args.json:
        args.json.write_text(json.dumps(starts, indent=1))


if __name__ == "__main__":
    main()
