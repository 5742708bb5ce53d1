"""The staged engine's front: phoneme ids to the prior and the durations, one batch per run.

It runs per ``(rows, phoneme ids)`` bucket, fp32, one plain session per bucket with fixed shapes
(dynamic shapes without buckets), in the caller's thread, and never in the layout
``TTSFARM_CUDA_LAYOUT`` sets: NHWC there changes the durations, and so the lengths
(``synthesis.stage_options``). Its outputs stay on the device, but for the durations: the host
reads those (a few kilobytes) to plan the batch's frames.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort

from synthesis.buckets import bucket_for, row_bucket
from synthesis.items import EngineItem, Scales, padded_feeds
from synthesis.session_cache import SessionBuilds, SessionCache
from synthesis.stages import StageNames, with_fixed_inputs

FrontKey = tuple[int, int] | None
"""A front bucket, ``(rows, ids)``; ``None`` without buckets (one session of dynamic shapes)."""


@dataclass(frozen=True)
class FrontResult:
    """What the front hands to expand: device values, and the durations on the host."""

    mean_t: ort.OrtValue
    log_std_t: ort.OrtValue
    extras: dict[str, ort.OrtValue]
    durations: np.ndarray
    """Frames per phoneme, ``(rows, ids)``, int64."""


class FrontStage:
    """The front's sessions, by bucket, and its runs."""

    def __init__(
        self,
        model: onnx.ModelProto,
        names: StageNames,
        *,
        buckets: bool,
        sessions: SessionCache[FrontKey, ort.InferenceSession],
        builds: SessionBuilds,
        session_options: ort.SessionOptions,
        providers: list[Any],
        device: str,
        device_id: int,
    ) -> None:
        self.model = model
        self.names = names
        self.buckets = buckets
        self.sessions = sessions
        self._builds = builds
        self._session_options = session_options
        self._providers = providers
        self._device = device
        self._device_id = device_id
        self.planned_rows: tuple[int, ...] = ()
        """The row buckets being prepared in the background (``StagedEngine.prepare_later``)."""
        self.input_names: frozenset[str] = frozenset()
        """The front graph's inputs (a multi-speaker voice's take ``sid``), known once one is built."""

    def plan_rows(self, batch_sizes: Sequence[int]) -> None:
        """Note that buckets for batches of these sizes are being prepared (see :meth:`key`)."""
        planned = {row_bucket(size) for size in batch_sizes}
        self.planned_rows = tuple(sorted({*self.planned_rows, *planned}))

    def key(self, rows: int, longest: int) -> FrontKey:
        """The batch's (rows, ids) bucket, or a built one with more rows: a build costs a
        second or so, more than the spare rows (``prepare`` builds the full batch size). With
        none built yet, the bucket of the rows being prepared, if they hold the batch: a batch
        that comes while the engine is prepared builds (or waits for) what the preparation
        builds, not a bucket of its own, nor the waveform slots of its rows."""
        if not self.buckets:
            return None
        bucket = bucket_for(rows, longest, 1.0)
        built = self.sessions.keys()
        if (bucket.rows, bucket.ids) in built:
            return bucket.rows, bucket.ids
        larger = [key for key in built if key and key[1] == bucket.ids and key[0] > bucket.rows]
        if larger:
            return min(larger)
        planned = [size for size in self.planned_rows if size >= bucket.rows]
        return (min(planned) if planned else bucket.rows), bucket.ids

    def session(self, key: FrontKey) -> ort.InferenceSession:
        """The bucket's session, built on first use."""

        def make() -> ort.InferenceSession:
            model = self.model
            if key is not None:
                rows, ids = key
                dims = {"input": (rows, ids), "input_lengths": (rows,), "sid": (rows,)}
                model = with_fixed_inputs(model, dims)
            built = self._builds.build(model.SerializeToString(), self._session_options, self._providers)
            self.input_names = frozenset(value.name for value in built.get_inputs())
            return built

        return self.sessions.get(key, make)

    def run(self, items: Sequence[EngineItem], scales: Scales) -> FrontResult:
        """Run the front on a batch, padded to its bucket."""
        longest = max(len(item.phoneme_ids) for item in items)
        key = self.key(len(items), longest)
        rows, width = key if key else (len(items), longest)
        session = self.session(key)
        feeds = padded_feeds(items, rows, width, scales, "sid" in self.input_names)
        binding = session.io_binding()
        for name, value in feeds.items():
            if name in self.input_names:
                binding.bind_cpu_input(name, value)
        names = self.names
        for name in (names.mean_t, names.log_std_t, *names.extras):
            binding.bind_output(name, self._device, self._device_id)
        binding.bind_output(names.durations, "cpu")
        session.run_with_iobinding(binding)
        values = binding.get_outputs()
        durations = values[-1].numpy().reshape(rows, width).astype(np.int64)
        extras = dict(zip(names.extras, values[2:-1], strict=True))
        return FrontResult(values[0], values[1], extras, durations)
