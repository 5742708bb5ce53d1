"""The CUDA provider options of the staged engine's sessions, by stage (``synthesis.staged``)."""

from __future__ import annotations

from typing import Final, NamedTuple

from synthesis.engine_base import EngineOptions
from synthesis.sessions import NHWC, CudaOptions

GRAPH_OPTIONS: Final = (("enable_cuda_graph", "1"),)
"""Captured graphs share one arena only where nothing but the graph lane touches the device
between a batch's expand and its replay: the waveform graphs in NCHW. A captured graph's
scratch memory is free in the arena between its replays, and a buffer made there meanwhile is
written over by the next replay. With ``prefer_nhwc`` every captured graph keeps an arena of its
own: in a shared one, jobs failed (docs/decisions/0013-nhwc-waveform-auto.md)."""


class StageCudaOptions(NamedTuple):
    """Extra CUDA provider options of the staged engine's sessions, by stage."""

    front: CudaOptions
    """The front and expand sessions: ``cuda_options`` only. The front predicts the durations,
    which set every item's length; NHWC there changed 7 of 79 lengths
    (docs/decisions/0013-nhwc-waveform-auto.md)."""
    waveform: CudaOptions
    """The waveform sessions: ``cuda_options``, ``waveform_cuda_options`` (the layout) and, when
    they are captured, :data:`GRAPH_OPTIONS`."""


def stage_cuda_options(options: EngineOptions, graphs: bool) -> StageCudaOptions:
    """What each stage's sessions get of ``options`` (see :class:`StageCudaOptions`)."""
    waveform = (*options.cuda_options, *options.waveform_cuda_options)
    return StageCudaOptions(options.cuda_options, (*waveform, *GRAPH_OPTIONS) if graphs else waveform)


def waveform_cuda_options(
    options: EngineOptions, graphs: bool, arena: CudaOptions, fp32: bool
) -> CudaOptions:
    """A waveform session's CUDA options. An fp32 slot's are NCHW whatever the layout: it is
    cuDNN's fallback where fp16 has no plan (1 to 4 rows), and in NHWC it gave wrong audio for
    single items (docs/decisions/0013-nhwc-waveform-auto.md)."""
    chosen = (*arena, *stage_cuda_options(options, graphs).waveform)
    return tuple(option for option in chosen if not (fp32 and option == NHWC))
