"""The voice's own graph with its durations as a second output, kept on disk once made.

The single-session engine speaks one item at a time on a CPU through the voice's graph as
exported, whose only output is the audio. Word timings need the durations too:
:func:`durations_model` adds them (``synthesis.graph.expose_durations``) and keeps the edited
model in the user's cache folder, so that later processes load it as they load the voice, by
path, with neither onnx nor an edit (the edit costs about 0.3 s, and a session built from bytes
about 0.25 s more than one built from a file, on 2 cores). Where the folder cannot be written, the
edited model is used from memory.
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
from pathlib import Path
from typing import Final

from ttsfarm.core.voices import Voice

log = logging.getLogger(__name__)

EDIT_VERSION: Final = 1
"""Part of every cached file's name: raise it when the edit changes, so old files are not used."""
CACHE_APP: Final = "ttsfarm"


def cache_folder() -> Path:
    """``$XDG_CACHE_HOME/ttsfarm/models``, or ``~/.cache/ttsfarm/models``."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / CACHE_APP / "models"


def cached_name(voice: Voice) -> str:
    """The edited model's file name: the voice's file, its size and time, and the edit's version."""
    path = Path(voice.model_path).resolve()
    stat = path.stat()
    identity = f"{EDIT_VERSION}:{path}:{stat.st_size}:{stat.st_mtime_ns}"
    return f"{path.stem}-{hashlib.sha256(identity.encode()).hexdigest()[:16]}-durations.onnx"


def durations_model(voice: Voice, folder: Path | None = None) -> str | bytes:
    """The voice's graph with the durations among its outputs: a file's path once cached in
    ``folder`` (:func:`cache_folder` by default), else the model's bytes."""
    folder = folder or cache_folder()
    target = folder / cached_name(voice)
    if target.is_file():
        return str(target)
    data = _edited(voice)
    part = ""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        handle, part = tempfile.mkstemp(dir=folder, prefix=".part-")
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        os.replace(part, target)  # whole or absent: processes starting at once race harmlessly
    except OSError as error:
        if part:
            Path(part).unlink(missing_ok=True)
        log.debug("cannot keep the edited voice model in %s (%s): it is used from memory", folder, error)
        return data
    return str(target)


def _edited(voice: Voice) -> bytes:
    import onnx  # only the first process to need the edit pays for the import

    from synthesis.engine_base import check_piper_names
    from synthesis.graph import expose_durations

    model = onnx.load(str(voice.model_path))
    graph = model.graph
    check_piper_names((i.name for i in graph.input), (o.name for o in graph.output), str(voice.model_path))
    expose_durations(model)
    return bytes(model.SerializeToString())
