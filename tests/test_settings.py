"""Settings are built and checked at the edge; nothing below reads the environment."""

from __future__ import annotations

import dataclasses
import inspect
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from producer import Client
from synthesis.build import engine_options, waveform_layout
from synthesis.gpus import gpu_present
from synthesis.sessions import NHWC
from ttsfarm.core.errors import InvalidInput, PermanentError, SettingsError, VoiceNotFound
from ttsfarm.core.settings import ENV_PREFIX, Settings

ROOT = Path(__file__).resolve().parent.parent
GROUPS = ("farm", "storage", "engine", "batching", "gateway", "metrics")
"""The concerns settings are grouped by, in ttsfarm/core/settings.py and wherever they are listed."""
NOT_DOCUMENTED: set[str] = set()
"""Settings no user or operator is told about: none (a switch to compare with is a benchmark's
option, never a setting)."""


@pytest.mark.parametrize(
    "environ, message",
    [
        ({"TTSFARM_PROVIDER": "gpu"}, "TTSFARM_PROVIDER must be auto, cuda or cpu, not 'gpu'"),
        ({"TTSFARM_ENGINE": "v3"}, "TTSFARM_ENGINE must be auto, single or staged, not 'v3'"),
        ({"TTSFARM_CUDA_LAYOUT": "nhcw"}, "TTSFARM_CUDA_LAYOUT must be auto, nchw or nhwc, not 'nhcw'"),
        ({"TTSFARM_MAX_BATCH": "0"}, "TTSFARM_MAX_BATCH must be at least 1, not 0"),
        ({"TTSFARM_MAX_PHONEME_IDS": "8"}, "TTSFARM_MAX_PHONEME_IDS must be at least 16, not 8"),
        ({"TTSFARM_MAX_WAIT_MS": "soon"}, "TTSFARM_MAX_WAIT_MS='soon' is not a valid float"),
    ],
)
def test_a_bad_setting_is_a_settings_error_where_the_settings_are_made(
    environ: dict[str, str], message: str
) -> None:
    with pytest.raises(SettingsError, match=message) as raised:
        Settings.load(environ)
    assert isinstance(raised.value, PermanentError) and not isinstance(raised.value, InvalidInput)


def test_the_cuda_layout_reaches_the_engine_as_a_waveform_provider_option() -> None:
    nchw = engine_options(Settings.load({"TTSFARM_CUDA_LAYOUT": "nchw"}))
    assert (nchw.cuda_options, nchw.waveform_cuda_options) == ((), ())
    if not gpu_present():  # auto: no GPU memory to go by, NCHW
        assert engine_options(Settings.load({})).waveform_cuda_options == ()
    nhwc = engine_options(Settings.load({"TTSFARM_CUDA_LAYOUT": "nhwc"}))
    assert nhwc.cuda_options == ()  # every session, durations included: not the layout
    assert nhwc.waveform_cuda_options == (("prefer_nhwc", "1"),)


def test_auto_takes_nhwc_only_where_the_gpu_has_room_for_it_free() -> None:
    gib = 2**30
    assert waveform_layout("auto", 32, 140 * gib) == (NHWC,)  # an H200 with nothing else on it
    assert waveform_layout("auto", 32, 80 * gib) == ()  # peaks of 76-83 GB would not fit
    assert waveform_layout("auto", 64, 140 * gib) == ()  # NHWC was never measured past 32 rows
    assert waveform_layout("auto", 8, None) == ()  # NVML could not say
    assert waveform_layout("nhwc", 64, None) == (NHWC,)  # as set, whatever the GPU
    assert waveform_layout("nchw", 32, 141 * gib) == ()


def test_with_options_keeps_a_setting_whose_option_was_left_out() -> None:
    settings = Settings(voice="joe", gpu=2)
    changed = settings.with_options(gpu=None, voice="other", provider="cpu")
    assert (changed.voice, changed.gpu, changed.provider) == ("other", 2, "cpu")
    assert dataclasses.replace(settings, voices_dir=None).voices_dir is None  # the stdlib's, untouched
    with pytest.raises(SettingsError, match="TTSFARM_PRECISION"):
        settings.with_options(precision="int4")


def test_importing_the_worker_app_builds_nothing() -> None:
    """No settings, Celery app, engine or environment read at import: ``celery -A worker.app``
    builds its app when it asks for it, and ``ttsfarm worker`` through ``run_worker``."""
    code = (
        "import sys, worker.app, worker.tasks, synthesis.engine; "
        "assert 'app' not in vars(worker.app), 'an app was built at import'; "
        "print('ok')"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env={"PATH": ""}, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


def test_a_job_is_checked_where_it_is_made() -> None:
    """``submit`` refuses what no worker could run before it touches the broker (none runs here)."""
    with Client(Settings(broker_url="redis://127.0.0.1:1/0")) as client:
        with pytest.raises(InvalidInput, match=r"length scale must be between 0\.1 and 10"):
            client.submit("Slowly.", length_scale=50)
        with pytest.raises(VoiceNotFound, match="unknown voice 'nobody': use one of joe"):
            client.submit("Who?", voice="nobody")
        with pytest.raises(VoiceNotFound, match="has a single speaker"):
            client.submit("Who?", speaker=2)


def test_a_client_needs_a_broker() -> None:
    with pytest.raises(SettingsError, match="no broker configured"):
        Client(Settings())


@pytest.mark.parametrize(
    ("limit", "expected"), [("max 100000", None), ("150000 100000", 2), ("50000 100000", 1), ("bad", None)]
)
def test_a_containers_cpu_limit_bounds_the_cpus_a_process_may_use(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, limit: str, expected: int | None
) -> None:
    """cgroup v2's ``cpu.max`` (``cpus: 1.5`` in compose is ``150000 100000``) counts, where a
    container has one; without a limit (or a file) the CPUs the process may run on."""
    from synthesis import sessions

    runs_on = len(os.sched_getaffinity(0))
    cpu_max = tmp_path / "cpu.max"
    cpu_max.write_text(f"{limit}\n")
    monkeypatch.setattr(sessions, "CGROUP_CPU_LIMIT", cpu_max)
    assert sessions.cpu_count() == (runs_on if expected is None else min(expected, runs_on))
    monkeypatch.setattr(sessions, "CGROUP_CPU_LIMIT", tmp_path / "none")
    assert sessions.cpu_count() == runs_on


def setting_groups() -> dict[str, str]:
    """Each setting's group, from the heading comment above it in the ``Settings`` class."""
    groups: dict[str, str] = {}
    group = ""
    for line in inspect.getsource(Settings).splitlines():
        heading = re.match(r"    # (\w+): ", line)
        field = re.match(r"    (\w+): ", line)
        if heading:
            group = heading[1].lower()
        elif field:
            groups[field[1]] = group
    return groups


def section(path: Path, heading: str) -> str:
    """The text of a ``## heading`` section of a Markdown file, up to the next such heading."""
    text = path.read_text(encoding="utf-8")
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else None]


def variable(name: str) -> str:
    return ENV_PREFIX + name.upper()


def test_settings_are_grouped_by_concern_in_one_order() -> None:
    groups = setting_groups()
    assert set(groups) == {f.name for f in dataclasses.fields(Settings)}
    headings = re.findall(r"^    # (\w+): ", inspect.getsource(Settings), re.M)
    assert [heading.lower() for heading in headings] == list(GROUPS)  # one heading each, in order
    assert set(groups.values()) == set(GROUPS)  # none before the first heading
    assert set(groups) >= NOT_DOCUMENTED


def test_every_setting_is_documented_once_in_its_group_user_settings_in_the_readme() -> None:
    """The settings a user sets are in the README's table; every tuning knob is in one section
    of docs/deploy.md; each in its group and in the order of ``Settings``."""
    groups = {variable(name): group for name, group in setting_groups().items() if name not in NOT_DOCUMENTED}
    user = re.findall(r"^\| (\w+) \| `(TTSFARM_\w+)`", section(ROOT / "README.md", "Configuration"), re.M)
    advanced: list[tuple[str, str]] = []
    group = ""
    for line in section(ROOT / "docs" / "deploy.md", "Advanced settings").splitlines():
        heading = re.match(r"\*\*(\w+)\*\*", line)
        group = heading[1].lower() if heading else group
        if line.startswith("| `"):
            advanced += [(group, name) for name in re.findall(r"TTSFARM_\w+", line.split(" | ")[0])]
    assert 10 <= len(user) <= 14  # about a dozen
    assert ("farm", f"{ENV_PREFIX}CONFIG") in user
    documented = [(g, name) for g, name in user + advanced if name != f"{ENV_PREFIX}CONFIG"]
    assert sorted(name for _, name in documented) == sorted(groups)  # each once, none unknown
    assert {name: g for g, name in documented} == groups
    order = list(groups)
    for table in (user, advanced):
        names = [name for _, name in table if name in groups]
        assert names == sorted(names, key=order.index)


def test_the_shipped_config_lists_settings_in_their_groups_and_each_example_loads(tmp_path: Path) -> None:
    config = (ROOT / "configs" / "ttsfarm.toml").read_text(encoding="utf-8")
    groups = setting_groups()
    headings = re.findall(r"^# --- (\w+):", config, re.M)
    assert [h.lower() for h in headings] == list(GROUPS)
    named = re.findall(r"^(?:# )?(\w+) = ", config, re.M)
    assert set(named) <= set(groups) - NOT_DOCUMENTED
    assert named == sorted(named, key=list(groups).index)
    every_example = re.sub(r"^# (\w+ = )", r"\1", config, flags=re.M)
    (tmp_path / "all.toml").write_text(every_example, encoding="utf-8")
    assert Settings.load({}, config_path=tmp_path / "all.toml").broker_url == "redis://127.0.0.1:6379/0"
