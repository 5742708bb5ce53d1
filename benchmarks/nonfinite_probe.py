"""Where the waveform stage (flow and decoder) first goes non-finite under a CUDA layout.

    python benchmarks/nonfinite_probe.py --out DIR [--rows 20 32]
    python benchmarks/nonfinite_probe.py --out DIR --captured nhwc   # the engine itself, graphs on
    python benchmarks/nonfinite_probe.py --out DIR --smoke        # tiny, on the CPU

Run 11 (docs/benchmarks.md) found that the NHWC waveform graphs give all-NaN audio on real
batches with noise, while random priors and noise-off batches came out right. This takes the
texts of ``benchmarks/quality_texts.txt``, runs the staged engine's front and expand once per
noise setting (the voice's default noise, and none) to get the waveform stage's real inputs,
and then feeds those same inputs to plain (uncaptured) waveform sessions of each variant:
NCHW and NHWC, fp16 and fp32. Reported per variant: non-finite samples per row and the peak.
For a variant that goes non-finite, the fp16 graph is run again with every node's output
exposed, and the first nodes (in graph order) whose output is non-finite while their inputs
are finite are printed, with the same nodes' largest magnitudes under NCHW beside them (fp16
stops at 65,504). Results go to DIR/nonfinite_probe.json.

``--captured LAYOUT`` instead runs the staged engine as a worker does (waveform graphs captured
and replayed on the graph lane, that layout's CUDA options for every session) and counts the
batches that come back with non-finite rows: the quality texts in one batch, first alone (one
thread, several times), then the same batch among corpus batches run by 3 threads, as a GPU
worker's runners call the engine; and the engine's speech audio seconds per second at batch 32
with 3 threads. Run once per layout (each in its own process: the graph arenas are per
process). Results go to DIR/captured-LAYOUT.json.
"""

from __future__ import annotations

import argparse
import json
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np
import onnx
import onnxruntime as ort

from synthesis.build import CUDA_LAYOUTS
from synthesis.engine import EngineItem, EngineOptions, Scales
from synthesis.phonemes import Phonemizer
from synthesis.precision import convert_to_fp16
from synthesis.sessions import build_session, providers_for, session_options
from synthesis.staged import StagedEngine
from ttsfarm.cli.sweep import corpus_items
from ttsfarm.core.voices import resolve_voice

HERE = Path(__file__).resolve().parent

FIRST_BAD_SHOWN = 8


def waveform_inputs(engine: StagedEngine, items: list[EngineItem], scales: Scales) -> dict[str, np.ndarray]:
    """The waveform stage's inputs for this batch, as the staged engine makes them, on the host."""
    front = engine.front.run(items, scales)
    planned = engine.plan(front, len(items))
    if planned is None:
        raise SystemExit("the batch needs more frames than one run may take")
    names = engine.stages.names
    outputs = [names.prior, names.mask, *names.extras]
    values = engine.expand(engine.expand_binding(front, planned[0], scales.noise_scale))
    return {name: value.numpy() for name, value in zip(outputs, values, strict=True)}


def exposed(model: onnx.ModelProto) -> tuple[onnx.ModelProto, list[str]]:
    """``model`` with every floating-point node output added to the graph's outputs."""
    inferred = onnx.shape_inference.infer_shapes(model)
    types = {value.name: value.type.tensor_type.elem_type for value in inferred.graph.value_info}
    floats = {onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16}
    present = {output.name for output in model.graph.output}
    probed = onnx.ModelProto()
    probed.CopyFrom(model)
    names: list[str] = []
    for node in probed.graph.node:
        for name in node.output:
            if name and name not in present and types.get(name) in floats:
                probed.graph.output.append(onnx.helper.make_tensor_value_info(name, types[name], None))
                names.append(name)
    return probed, names


def run(
    model: onnx.ModelProto, feeds: dict[str, np.ndarray], layout: str, use_cuda: bool
) -> list[np.ndarray]:
    providers = providers_for(use_cuda, 0, CUDA_LAYOUTS[layout])
    session = build_session(model.SerializeToString(), session_options(0, False), providers)
    wanted = {value.name for value in session.get_inputs()}
    outputs: list[np.ndarray] = session.run(None, {n: v for n, v in feeds.items() if n in wanted})
    return outputs


def summary(audio: np.ndarray, rows: int) -> dict[str, Any]:
    audio = audio.reshape(rows, -1)
    finite = np.isfinite(audio)
    peak = float(np.abs(np.where(finite, audio, 0)).max())
    return {"non_finite_per_row": (~finite).sum(axis=1).tolist(), "peak": round(peak, 4)}


def first_bad_nodes(
    model: onnx.ModelProto, feeds: dict[str, np.ndarray], layout: str, use_cuda: bool
) -> list[dict[str, Any]]:
    probed, names = exposed(model)
    bad = dict(zip(names, run(probed, feeds, layout, use_cuda)[1:], strict=True))
    good = dict(zip(names, run(probed, feeds, "nchw", use_cuda)[1:], strict=True))
    values = {**{name: np.asarray(value) for name, value in feeds.items()}, **bad}
    found = []
    for node in probed.graph.node:
        outputs = [name for name in node.output if name in bad]
        if not outputs or all(np.isfinite(bad[name]).all() for name in outputs):
            continue
        inputs_finite = all(
            np.isfinite(values[name]).all()
            for name in node.input
            if name in values and np.issubdtype(values[name].dtype, np.floating)
        )
        if inputs_finite:
            name = outputs[0]
            found.append(
                {
                    "node": node.name,
                    "op": node.op_type,
                    "non_finite": int((~np.isfinite(bad[name])).sum()),
                    "size": int(bad[name].size),
                    "nchw_max_abs": float(np.abs(good[name].astype(np.float32)).max()),
                    "attributes": {
                        a.name: str(onnx.helper.get_attribute_value(a))[:60] for a in node.attribute
                    },
                }
            )
            if len(found) >= FIRST_BAD_SHOWN:
                break
    return found


def bad_rows(waves: list[np.ndarray]) -> int:
    return sum(not np.isfinite(wave).all() for wave in waves)


def captured(layout: str, items: list[EngineItem], out: Path, smoke: bool) -> None:
    """The staged engine as a worker runs it, in ``layout``: batches with non-finite rows."""
    import engine_v2  # this folder, beside this script

    voice = resolve_voice("joe")
    options = EngineOptions(
        provider="cpu" if smoke else "cuda", waveform_cuda_options=CUDA_LAYOUTS[layout], concurrent_runs=3
    )
    engine = StagedEngine(voice, options)
    engine.prepare([32])
    scales = engine.default_scales()
    corpus = corpus_items(voice, engine_v2.CORPUS.read_text())
    batches = engine_v2.grouped_batches(corpus, 32, 1 if smoke else 4)
    found: dict[str, Any] = {"layout": layout, "provider": engine.provider}
    found["alone"] = [bad_rows(engine.run(items, scales)) for _ in range(2 if smoke else 5)]
    mixed = [items if index % 4 == 0 else batch for index, batch in enumerate(batches)]
    with ThreadPoolExecutor(3) as pool:
        results = list(pool.map(lambda batch: bad_rows(engine.run(batch, scales)), mixed))
    found["with 3 threads: batches"] = len(mixed)
    found["with 3 threads: batches with non-finite rows"] = sum(1 for bad in results if bad)
    found["with 3 threads: quality batch non-finite rows"] = [results[i] for i in range(0, len(mixed), 4)]
    found["engine b32 t3"] = engine_v2.throughput(engine, batches, 3)
    print(json.dumps(found, indent=1), flush=True)
    (out / f"captured-{layout}.json").write_text(json.dumps(found, indent=1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--rows", type=int, nargs="+", default=[20, 32])
    parser.add_argument("--captured", choices=list(CUDA_LAYOUTS), help="the engine with graphs, this layout")
    parser.add_argument("--smoke", action="store_true", help="tiny, on the CPU")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    use_cuda = not args.smoke
    voice = resolve_voice("joe")
    phonemizer = Phonemizer(voice)
    texts = [line.strip() for line in (HERE / "quality_texts.txt").read_text().splitlines() if line.strip()]
    items = [EngineItem(phonemizer.ids(text)) for text in texts]
    if args.smoke:
        items, args.rows = items[:2], [2]
    if args.captured:
        captured(args.captured, items, args.out, args.smoke)
        return
    options = EngineOptions(provider="cuda" if use_cuda else "cpu", shape_buckets=False, warmup=False)
    engine = StagedEngine(voice, options)
    models = {
        "fp16": convert_to_fp16(engine.stages.waveform, whole_graph=True),
        "fp32": engine.stages.waveform,
    }
    results: dict[str, Any] = {"onnxruntime": ort.__version__}
    for rows in args.rows:
        batch = [items[row % len(items)] for row in range(rows)]
        for noise in ("voice", "off"):
            scales = engine.default_scales() if noise == "voice" else Scales(0.0, 1.0, 0.0)
            feeds = waveform_inputs(engine, batch, scales)
            key = f"rows {rows}, noise {noise}"
            prior = feeds[engine.stages.names.prior]
            found: dict[str, Any] = {"frames": prior.shape[-1], "prior_max_abs": float(np.abs(prior).max())}
            for precision, model in models.items():
                for layout in CUDA_LAYOUTS:
                    try:
                        found[f"{layout} {precision}"] = summary(run(model, feeds, layout, use_cuda)[0], rows)
                    except Exception as error:  # onnxruntime raises its own untyped errors
                        found[f"{layout} {precision}"] = {"error": str(error).splitlines()[0][:300]}
            broken = found["nhwc fp16"].get("non_finite_per_row")
            if broken and any(broken):
                try:
                    found["nhwc fp16 first bad nodes"] = first_bad_nodes(
                        models["fp16"], feeds, "nhwc", use_cuda
                    )
                except Exception as error:  # onnxruntime raises its own untyped errors
                    found["nhwc fp16 first bad nodes"] = {"error": str(error).splitlines()[0][:300]}
            results[key] = found
            print(key, json.dumps(found, indent=1), flush=True)
            (args.out / "nonfinite_probe.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
