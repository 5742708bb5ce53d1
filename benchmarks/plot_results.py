"""Draw docs/img/*.png from the H200 results in benchmarks/results (needs the ``bench`` extra).

python benchmarks/plot_results.py
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
IMAGES = ROOT / "docs" / "img"


def rows(file: str, section: str) -> list[dict[str, Any]]:
    data = json.loads((RESULTS / file).read_text(encoding="utf-8"))
    found: list[dict[str, Any]] = data[section]["result"]
    return found


def series(table: list[dict[str, Any]], kind: str, field: str) -> list[float]:
    if kind == "batcher":
        return [row["batcher"][field] for row in table]
    return [row[kind][field] for row in table]


def main() -> None:
    IMAGES.mkdir(parents=True, exist_ok=True)
    best = rows("h200-run2-engine.json", "sweep best")
    stock = rows("h200-run2-system.json", "sweep stock")
    sizes = [row["batch"] for row in best]

    figure, axis = plt.subplots(figsize=(7, 4.5))
    axis.plot(sizes, series(best, "mixed", "audio_per_second"), "o-", label="buckets + fp16, mixed lengths")
    axis.plot(
        sizes, series(best, "ceiling", "audio_per_second"), "s--", label="buckets + fp16, identical rows"
    )
    axis.plot(
        sizes, series(best, "batcher", "audio_per_second"), "^:", label="buckets + fp16, through the batcher"
    )
    axis.plot(
        sizes,
        series(stock, "mixed", "audio_per_second"),
        "o-",
        color="grey",
        label="stock fp32, mixed lengths",
    )
    axis.set_xscale("log", base=2)
    axis.set_xticks(sizes, [str(size) for size in sizes])
    axis.set_xlabel("batch size")
    axis.set_ylabel("audio seconds per second")
    axis.set_title("joe-medium on one H200: throughput")
    axis.grid(True, alpha=0.3)
    axis.legend()
    figure.tight_layout()
    figure.savefig(IMAGES / "h200-throughput.png", dpi=110)

    figure, axis = plt.subplots(figsize=(7, 4.5))
    axis.plot(sizes, series(best, "mixed", "p99_ms"), "o-", label="buckets + fp16")
    axis.plot(sizes, series(stock, "mixed", "p99_ms"), "o-", color="grey", label="stock fp32")
    axis.set_ylabel("P99 latency per batch (ms)")
    axis.set_title("joe-medium on one H200: P99 batch latency, mixed lengths")
    save_batch_plot(figure, axis, sizes, "h200-p99-latency.png")
    engine_v2_plot()
    scale_out_plot()


def save_batch_plot(figure: Any, axis: Any, sizes: list[int], name: str) -> None:
    """Batch sizes on a log axis from 0 up, a grid and a legend; written to docs/img/NAME."""
    axis.set_xscale("log", base=2)
    axis.set_xticks(sizes, [str(size) for size in sizes])
    axis.set_xlabel("batch size")
    axis.set_ylim(bottom=0)
    axis.grid(True, alpha=0.3)
    axis.legend()
    figure.tight_layout()
    figure.savefig(IMAGES / name, dpi=110)


ENGINE_V2_RUNS: dict[str, list[str]] = {
    "v1": ["h200-run33-engine-v1.json"],
    "v2": [
        "h200-run34-engine-v2-b8.json",
        "h200-run34-engine-v2-b32.json",
        "h200-run35-engine-v2-b64-nchw.json",  # NHWC at 64 ran out beside its fp32 reference
    ],
}
"""Runs 33-35, back to back on one machine: each batch size of v2 in a process of its own."""


def engine_v2_plot() -> None:
    """Engine v1 against v2 (runs 33-35): speech audio s/s against batch size, 1 and 3 threads."""
    figure, axis = plt.subplots(figsize=(7, 4.5))
    for engine, color in (("v1", "grey"), ("v2", "tab:blue")):
        data: dict[str, Any] = {}
        for file in ENGINE_V2_RUNS[engine]:
            data.update(json.loads((RESULTS / file).read_text(encoding="utf-8")))
        for threads, style in ((3, "o-"), (1, "s--")):
            keys = [key for key in data if key.startswith("engine b") and key.endswith(f" t{threads}")]
            sizes = sorted(int(key.split()[1][1:]) for key in keys if "result" in data[key])
            rates = [data[f"engine b{size} t{threads}"]["result"]["audio_per_s"] for size in sizes]
            name = "v2, staged + CUDA graphs" if engine == "v2" else "v1, one session per bucket"
            label = f"{name}, {threads} thread{'s' if threads > 1 else ''}"
            axis.plot(sizes, rates, style, color=color, label=label)
    axis.set_ylabel("speech audio seconds per second")
    axis.set_title("joe-medium on one H200: engine v1 and v2 (runs 33-35)")
    save_batch_plot(figure, axis, [8, 32, 64], "h200-engine-v2.png")


def scale_out_plot() -> None:
    """Stored audio s/s against workers (one per GPU) on one host, with linear scaling (run 12)."""
    data = json.loads((RESULTS / "h200x2-run12-scale-out.json").read_text(encoding="utf-8"))
    workers = sorted(int(key) for key in data)
    rates = [data[str(n)]["stored_audio_per_s"] for n in workers]
    figure, axis = plt.subplots(figsize=(7, 4.5))
    axis.plot(workers, [rates[0] * n for n in workers], "--", color="grey", label="linear")
    axis.plot(workers, rates, "o-", color="tab:blue", label="measured (engine v2, 300 jobs per worker)")
    for n, rate in zip(workers, rates, strict=True):
        axis.annotate(
            f"{rate:,.0f} ({rate / (rates[0] * n):.2f}x linear)",
            (n, rate),
            textcoords="offset points",
            xytext=(6, -14),
        )
    axis.set_xticks(workers, [str(n) for n in workers])
    axis.set_xlabel("GPUs (one worker each)")
    axis.set_ylabel("stored audio seconds per second")
    axis.set_ylim(bottom=0)
    axis.set_title("Scale-out on one two-H200 host (run 12)")
    axis.grid(True, alpha=0.3)
    axis.legend(loc="lower right")
    figure.tight_layout()
    figure.savefig(IMAGES / "h200x2-scale-out.png", dpi=110)


if __name__ == "__main__":
    main()
