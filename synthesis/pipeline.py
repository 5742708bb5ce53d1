"""The job pipeline: text in, one stored audio file out, with bounded memory for any length."""

from __future__ import annotations

import itertools
import logging
import threading
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass
from typing import IO, Final

from synthesis.audio import AudioListener, SegmentWriter
from synthesis.batching import SegmentBatcher
from synthesis.engine import EngineItem, Scales, Spoken
from synthesis.frontend import TextFrontend
from synthesis.scratch import job_file, job_folder
from synthesis.text import Segment
from synthesis.word_timings import even_frames, word_marks
from ttsfarm.core.breaks import PAUSE_SENTENCE
from ttsfarm.core.errors import InvalidInput, raise_if_cancelled
from ttsfarm.core.files import sha256_and_size
from ttsfarm.core.jobs import CONTENT_TYPES, JobRequest, JobResult, SynthesisOptions
from ttsfarm.core.processes import HelperPool
from ttsfarm.core.synth_file import BLOCK_SECONDS, Tags, finish
from ttsfarm.core.voices import Voice, resolve_voice
from ttsfarm.storage import Storage, StoredObject

log = logging.getLogger(__name__)

SEGMENTS_AHEAD_PER_BATCH: Final = 3
"""A job keeps this many batches' worth of segments queued in the batcher: enough to
fill batches, few enough that finished audio waiting to be written stays small."""


@dataclass(frozen=True)
class Progress:
    """How far a job has come."""

    segments_done: int
    segments_total: int
    audio_seconds: float

    @property
    def fraction(self) -> float:
        return self.segments_done / self.segments_total if self.segments_total else 1.0


ProgressCallback = Callable[[Progress], None]


class Synthesizer:
    """Turns job requests into stored audio. One per process; share it between threads."""

    def __init__(
        self,
        batcher: SegmentBatcher,
        frontend: TextFrontend | None = None,
        voices_dir: str | None = None,
        temp_dir: str | None = None,
        finishing: HelperPool | None = None,
    ) -> None:
        self.batcher = batcher
        self.frontend = frontend or TextFrontend()
        self.voices_dir = voices_dir
        self.temp_dir = temp_dir
        self.finishing = finishing
        """Processes that master jobs given a loudness (a worker's); ``None`` masters in the
        job's own thread (a one-off ``ttsfarm synth``)."""
        self._preloads: dict[str, threading.Thread] = {}
        self._preloads_lock = threading.Lock()
        self._voices: dict[str, Voice] = {}
        self._voices_lock = threading.Lock()

    def close(self) -> None:
        """Stop the batcher and the helper processes; jobs still running fail."""
        with self._preloads_lock:
            preloads = list(self._preloads.values())
        for thread in preloads:  # an engine still loading finishes first: no exit mid-build
            thread.join()
        self.batcher.close()
        self.frontend.close()
        if self.finishing is not None:
            self.finishing.close()

    def preload(self, voice: Voice) -> None:
        """Start loading the voice's engine in the background, once per voice.

        Building its session takes seconds and mostly runs outside the GIL, so the text is
        segmented meanwhile instead of after. A load that fails is left to the batch that needs
        the engine: it loads again and fails with the error, as without a preload.
        """
        key = str(voice.model_path)
        with self._preloads_lock:
            if key in self._preloads:
                return
            thread = threading.Thread(
                target=self._load_quietly, args=(voice,), name="ttsfarm-preload", daemon=True
            )
            self._preloads[key] = thread
        thread.start()

    def _load_quietly(self, voice: Voice) -> None:
        try:
            self.batcher.engine(voice)
        except Exception as error:  # reported by the batch that needs the engine
            log.debug("preloading voice %s failed: %s", voice.name, error)

    def voice(self, name_or_path: str) -> Voice:
        """The voice of that name, looked up on disk once per name (every job asks)."""
        with self._voices_lock:
            found = self._voices.get(name_or_path)
        if found is None:
            found = resolve_voice(name_or_path, self.voices_dir)
            with self._voices_lock:
                self._voices[name_or_path] = found
        return found

    def scales(self, voice: Voice, options: SynthesisOptions) -> Scales:
        def pick(value: float | None, default: float) -> float:
            return default if value is None else float(value)

        return Scales(
            pick(options.noise_scale, voice.noise_scale),
            pick(options.length_scale, voice.length_scale),
            pick(options.noise_w, voice.noise_w),
        )

    def check(self, request: JobRequest) -> None:
        """Raise what :meth:`synthesize` would raise before any audio (unknown voice or speaker,
        bad options, nothing to speak); only the text's first segment is made."""
        self._stream(request)

    def synthesize(
        self,
        request: JobRequest,
        storage: Storage,
        key: str,
        progress: ProgressCallback | None = None,
        cancelled: Callable[[], bool] | None = None,
        tags: Tags | None = None,
        listener: AudioListener | None = None,
    ) -> JobResult:
        """Speak ``request.text`` and store the encoded audio under ``key``, tagged with
        ``tags`` if given (``ttsfarm synth``; farm jobs are not tagged).

        Segments are made as synthesis goes (a few batches ahead), so the first audio does not
        wait for the whole text to be phonemized. The voice's engine starts loading before the
        first segment is made. Without a loudness, the audio is encoded as it is spoken into a
        temp file without a name (``synthesis.scratch.job_file``). With a loudness the speech
        goes to a WAV file first, which is then mastered and encoded
        (``ttsfarm.core.synth_file.finish``, in blocks: memory stays bounded), in one of the
        :attr:`finishing` processes where there are some. Either way the file is hashed and
        stored from the one open file. ``listener`` is told the speech as it is written, segment
        by segment, before any mastering."""
        voice, segments = self._stream(request, preload=True)

        def speak(writer: SegmentWriter) -> None:
            try:
                self._speak(voice, request, segments, writer, progress, cancelled)
            finally:
                writer.close()

        def store(file: IO[bytes]) -> tuple[StoredObject, str, int]:
            raise_if_cancelled(cancelled)
            digest, size = sha256_and_size(file)
            return storage.put(file, key, CONTENT_TYPES[request.format], digest), digest, size

        if request.loudness is None:  # encoded as it is spoken, into a file with no name to remove
            with job_file(self.temp_dir) as file:
                writer = SegmentWriter(file, voice.sample_rate, request.format, tags, listener)
                speak(writer)
                stored, digest, size = store(file)
        else:  # lossless until mastered, in a folder a finishing process can reach
            with job_folder(self.temp_dir) as folder:  # locked to this process: swept if it is killed
                spoken, encoded = folder / "spoken.wav", folder / f"speech.{request.format}"
                writer = SegmentWriter(spoken, voice.sample_rate, "wav", listener=listener)
                speak(writer)
                raise_if_cancelled(cancelled)
                work = (spoken, writer.timings, encoded, request.format, request.loudness, tags)
                if self.finishing is None:
                    finish(*work, BLOCK_SECONDS, cancelled)
                else:
                    self.finishing.run_in(folder, finish, *work, BLOCK_SECONDS, cancelled=cancelled)
                with encoded.open("rb") as file:
                    stored, digest, size = store(file)
        # DEBUG: a farm worker's Celery logs each job's end with its location and duration already
        log.debug("job %s: %.1f s of audio in %s", request.job_id, writer.duration, stored.location)
        return JobResult(
            job_id=request.job_id,
            location=stored.location,
            url=stored.url,
            format=request.format,
            sample_rate=voice.sample_rate,
            duration=writer.duration,
            size=size,
            sha256=digest,
            segments=tuple(writer.timings),
            loudness=request.loudness,
        )

    def _stream(self, request: JobRequest, preload: bool = False) -> tuple[Voice, Iterator[Segment]]:
        """Check the request, then segment its text lazily; the first segment is made here,
        so a text with nothing to speak fails before anything else happens."""
        voice = self.voice(request.options.voice)
        voice.speaker_id(request.options.speaker)
        self.scales(voice, request.options)
        if preload:
            self.preload(voice)
        segments = self.frontend.segments(voice, request.text)
        first = next(segments, None)
        if first is None:
            raise InvalidInput("the text has nothing to speak: it holds no words")
        return voice, itertools.chain([first], segments)

    def _speak(
        self,
        voice: Voice,
        request: JobRequest,
        segments: Iterator[Segment],
        writer: SegmentWriter,
        progress: ProgressCallback | None,
        cancelled: Callable[[], bool] | None,
    ) -> None:
        scales = self.scales(voice, request.options)
        speaker = voice.speaker_id(request.options.speaker)
        ahead = SEGMENTS_AHEAD_PER_BATCH * self.batcher.max_batch
        in_flight: deque[tuple[Segment, Future[Spoken]]] = deque()
        count = _SegmentCount(len(request.text))

        def fill() -> None:
            while len(in_flight) < ahead and not count.exhausted:
                segment = next(segments, None)
                if segment is None:
                    count.exhausted = True
                    return
                count.add(segment)
                item = EngineItem(segment.phoneme_ids, speaker)
                in_flight.append((segment, self.batcher.submit(voice, item, scales)))

        try:
            fill()
            done = 0
            while in_flight:
                segment, future = in_flight.popleft()
                pause = pause_after(segment, request.sentence_silence)
                spoken = future.result()
                frames = spoken.frames
                if frames is None:
                    frames = even_frames(
                        len(segment.phoneme_ids), len(spoken.audio) / voice.sample_rate, voice
                    )
                marks = word_marks(segment.word_bounds, frames, voice)
                writer.append(spoken.audio, segment.text, pause, marks)
                done += 1
                fill()  # before reporting, so the last report knows the text is exhausted
                raise_if_cancelled(cancelled)
                if progress is not None:
                    progress(Progress(done, count.total(), writer.duration))
        finally:
            for _, future in in_flight:
                future.cancel()


def pause_after(segment: Segment, sentence_silence: float | None) -> float:
    """Seconds of silence after ``segment``: its own pause, or ``sentence_silence`` where it ends
    a sentence or a paragraph. The text segmenter ends those with a pause of at least
    ``PAUSE_SENTENCE`` and every shorter piece (a clause, a word) with less; the end of the text
    has no pause, with or without a sentence silence, as piper's ``--sentence-silence``."""
    if sentence_silence is None or segment.pause_after < PAUSE_SENTENCE:
        return segment.pause_after
    return sentence_silence


class _SegmentCount:
    """How many segments a text has: exact once it is all segmented, estimated until then
    from the characters segmented so far."""

    def __init__(self, text_length: int) -> None:
        self.text_length = text_length
        self.made = 0
        self.characters = 0
        self.exhausted = False

    def add(self, segment: Segment) -> None:
        self.made += 1
        self.characters += len(segment.text) + 1  # and the space or break after it

    def total(self) -> int:
        if self.exhausted or not self.characters:
            return self.made
        return max(self.made, round(self.made * self.text_length / self.characters))
