"""The deployment files agree with the code: compose.yaml, docker/env.example, docker/healthcheck.py.

compose.yaml is read as YAML and its ``${VAR...}`` references are filled in the way Compose does,
from docker/env.example, so the environment each service gets is checked against the real
``Settings`` and each command against the real ``ttsfarm`` CLI. No Docker is needed.
"""

from __future__ import annotations

import http.server
import importlib.metadata
import importlib.util
import os
import re
import socket
import subprocess
import sys
import threading
import tomllib
from collections.abc import Iterator
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.helpers_deploy import load_healthcheck
from ttsfarm.cli import main as cli
from ttsfarm.core.settings import ENV_PREFIX, Settings

ROOT = Path(__file__).resolve().parents[1]
COMPOSE = ROOT / "compose.yaml"
ENV_EXAMPLE = ROOT / "docker" / "env.example"
DOCKERFILE = ROOT / "docker" / "Dockerfile"
SETTING_VARIABLES = {ENV_PREFIX + f.name.upper() for f in fields(Settings)} | {f"{ENV_PREFIX}CONFIG"}
REFERENCE = re.compile(r"\$\{(?P<name>\w+)(?:(?P<op>:?[-?])(?P<arg>[^}]*))?\}")
MIN_WORKER_GRACE_SECONDS = 5 * 60
SECRETS = {
    "REDIS_PASSWORD": "test-secret",
    "MINIO_ROOT_PASSWORD": "test-secret",
    "AWS_SECRET_ACCESS_KEY": "test-secret",
    "FLOWER_BASIC_AUTH": "ops:test-secret",
}
"""Filled in by hand in a real .env: the example leaves every secret empty."""


def env_example() -> dict[str, str]:
    values = {}
    for line in ENV_EXAMPLE.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, value = line.partition("=")
            values[name.strip()] = value.strip().strip('"')
    return values


def interpolate(value: Any, env: dict[str, str]) -> Any:
    """Compose's ``${NAME}``, ``${NAME:-default}``, ``${NAME-default}``, ``${NAME:?error}``, ``$$``."""
    if isinstance(value, dict):
        return {key: interpolate(item, env) for key, item in value.items()}
    if isinstance(value, list):
        return [interpolate(item, env) for item in value]
    if not isinstance(value, str):
        return value

    def fill(match: re.Match[str]) -> str:
        name, op, arg = match["name"], match["op"] or "", match["arg"]
        # With a colon an empty value counts as unset; without one only a missing name does.
        if env.get(name) or (name in env and not op.startswith(":")):
            return env[name]
        if op.endswith("?"):
            raise KeyError(f"{name} is required: {arg}")
        return arg or ""

    parts = value.split("$$")
    return "$".join(REFERENCE.sub(fill, part) for part in parts)


def durations(text: str) -> float:
    """Compose durations such as ``15m``, ``1m30s``, ``90s`` in seconds."""
    units = {"h": 3600, "m": 60, "s": 1}
    found = re.findall(r"(\d+(?:\.\d+)?)([hms])", text)
    assert found and "".join(n + u for n, u in found) == text, f"not a duration: {text!r}"
    return sum(float(number) * units[unit] for number, unit in found)


@pytest.fixture(scope="module")
def raw() -> dict[str, Any]:
    data = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


@pytest.fixture(scope="module")
def services(raw: dict[str, Any]) -> dict[str, dict[str, Any]]:
    resolved = interpolate(raw["services"], {**env_example(), **SECRETS})
    assert isinstance(resolved, dict)
    return resolved


def worker_names(services: dict[str, dict[str, Any]]) -> list[str]:
    return [name for name in services if name.startswith("worker-")]


def test_the_stack_has_its_services(services: dict[str, dict[str, Any]]) -> None:
    assert {"redis", "minio", "worker-gpu0", "worker-cpu", "flower", "producer"} <= set(services)


def test_every_ttsfarm_variable_is_a_setting(raw: dict[str, Any]) -> None:
    texts = [COMPOSE.read_text(encoding="utf-8"), ENV_EXAMPLE.read_text(encoding="utf-8")]
    named = {m for text in texts for m in re.findall(rf"\b{ENV_PREFIX}[A-Z0-9_]+\b", text)}
    assert named, "compose.yaml names no TTSFARM_ variable"
    assert named <= SETTING_VARIABLES, f"not settings: {sorted(named - SETTING_VARIABLES)}"


def test_env_example_defines_every_variable_compose_reads() -> None:
    referenced = {m["name"] for m in REFERENCE.finditer(COMPOSE.read_text(encoding="utf-8"))}
    assert referenced - set(env_example()) == set()


def test_an_empty_endpoint_means_aws(raw: dict[str, Any]) -> None:
    worker = interpolate(raw["services"], {**env_example(), **SECRETS, "TTSFARM_S3_ENDPOINT_URL": ""})[
        "worker-gpu0"
    ]
    environment = {key: str(value) for key, value in worker["environment"].items()}
    assert Settings.load(environ=environment).s3_endpoint_url is None


def test_required_variables_are_required(raw: dict[str, Any]) -> None:
    example = {**env_example(), **SECRETS}
    for name in ("REDIS_PASSWORD", "FLOWER_BASIC_AUTH", "MINIO_ROOT_PASSWORD"):
        with pytest.raises(KeyError, match=name):
            interpolate(raw["services"], {k: v for k, v in example.items() if k != name})
        with pytest.raises(KeyError, match=name):  # the example's empty placeholder does not pass
            interpolate(raw["services"], {**example, name: ""})


def test_aws_keys_may_be_empty_for_an_instance_profile(raw: dict[str, Any]) -> None:
    env = {**env_example(), **SECRETS, "AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": ""}
    worker = interpolate(raw["services"], env)["worker-gpu0"]["environment"]
    assert worker["AWS_ACCESS_KEY_ID"] == "" and worker["AWS_SECRET_ACCESS_KEY"] == ""


@pytest.mark.parametrize("name", ["worker-gpu0", "worker-cpu", "flower", "producer", "gateway"])
def test_each_service_environment_loads_as_settings(services: dict[str, dict[str, Any]], name: str) -> None:
    environment = {key: str(value) for key, value in services[name]["environment"].items()}
    settings = Settings.load(environ=environment, config_path=None)
    assert settings.broker_url == "redis://:test-secret@127.0.0.1:6379/0"
    if name != "flower":
        assert settings.storage_url.startswith("s3://")
        assert settings.s3_endpoint_url == "http://127.0.0.1:9000"
        assert "AWS_ACCESS_KEY_ID" in environment and "AWS_SECRET_ACCESS_KEY" in environment
    if name.startswith("worker-"):
        assert settings.s3_create_bucket is True
        assert settings.visibility_timeout_seconds >= MIN_WORKER_GRACE_SECONDS


def test_workers_run_the_cli_and_their_health_check_pings_them(services: dict[str, dict[str, Any]]) -> None:
    assert len(worker_names(services)) >= 2
    for name in worker_names(services):
        service = services[name]
        command = service["command"]
        assert command[:2] == ["ttsfarm", "worker"], name
        params = cli.commands["worker"].make_context("worker", list(command[2:])).params
        node = params["hostname"]
        assert node.endswith("@%h"), name
        assert service["healthcheck"]["test"] == ["CMD", "ttsfarm-healthcheck", "worker", node[: -len("@%h")]]
        devices = service.get("deploy", {}).get("resources", {}).get("reservations", {}).get("devices", [])
        if params["cpu"]:
            assert not devices, name
            continue
        (device,) = devices
        assert device["driver"] == "nvidia" and "gpu" in device["capabilities"]
        (host_gpu,) = device["device_ids"]
        # The container sees only its reserved GPU, as number 0; the name keeps the host's number.
        assert params["gpu"] == 0 and node == f"ttsfarm-gpu{host_gpu}@%h"


def test_workers_stop_gracefully(services: dict[str, dict[str, Any]]) -> None:
    for name in worker_names(services):
        service = services[name]
        assert service.get("stop_signal", "SIGTERM") == "SIGTERM"
        assert durations(service["stop_grace_period"]) >= MIN_WORKER_GRACE_SECONDS, name
        settings = Settings.load(environ={k: str(v) for k, v in service["environment"].items()})
        # Docker kills the worker only after its own grace has run out and its jobs went back.
        assert durations(service["stop_grace_period"]) >= settings.stop_grace_seconds + 30, name
        assert service["init"] is True and service["restart"] == "unless-stopped"
        assert service["depends_on"]["redis"]["condition"] == "service_healthy"


def test_each_worker_of_a_host_serves_metrics_on_its_own_port(services: dict[str, dict[str, Any]]) -> None:
    ports = [
        Settings.load(environ={k: str(v) for k, v in services[name]["environment"].items()}).metrics_port
        for name in worker_names(services)
    ]
    assert all(ports) and len(set(ports)) == len(ports)


def test_every_long_running_service_has_a_health_check_and_restarts(
    services: dict[str, dict[str, Any]],
) -> None:
    for name, service in services.items():
        if "tools" in service.get("profiles", []):
            continue
        assert service["healthcheck"]["test"][0] in ("CMD", "CMD-SHELL"), name
        assert service["restart"] == "unless-stopped", name


def test_flower_takes_basic_auth_from_the_environment(services: dict[str, dict[str, Any]]) -> None:
    flower = services["flower"]
    assert flower["command"][:4] == ["celery", "-A", "worker.app", "flower"]
    assert not any("basic" in part for part in flower["command"]), "credentials belong in the environment"
    assert re.fullmatch(r"[^:,]+:[^,]+(,[^:,]+:[^,]+)*", flower["environment"]["FLOWER_BASIC_AUTH"])
    assert flower["healthcheck"]["test"] == ["CMD", "ttsfarm-healthcheck", "flower", "5555"]


def test_gateway_serves_with_keys_and_its_health_check_asks_it(services: dict[str, dict[str, Any]]) -> None:
    gateway = services["gateway"]
    command = gateway["command"]
    assert command[:2] == ["ttsfarm", "serve"]
    params = cli.commands["serve"].make_context("serve", list(command[2:])).params
    assert params["host"] == "127.0.0.1" and params["workers"] >= 1
    assert gateway["healthcheck"]["test"] == ["CMD", "ttsfarm-healthcheck", "gateway", str(params["port"])]
    settings = Settings.load(environ={k: str(v) for k, v in gateway["environment"].items()}, config_path=None)
    assert settings.gateway_auth is True and settings.gateway_rate_limit > 0
    assert gateway["depends_on"]["redis"]["condition"] == "service_healthy"
    assert "keys" in cli.commands and {"add", "list", "revoke"} <= set(cli.commands["keys"].commands)  # type: ignore[attr-defined]


def test_producer_runs_the_cli(services: dict[str, dict[str, Any]]) -> None:
    producer = services["producer"]
    assert producer["entrypoint"] == ["ttsfarm"]
    assert {"submit", "status", "fetch", "cancel"} <= set(cli.commands)


def test_ttsfarm_services_use_the_built_image(services: dict[str, dict[str, Any]]) -> None:
    for name in [*worker_names(services), "flower", "producer", "gateway"]:
        assert services[name]["image"] == "ttsfarm:latest" and services[name]["pull_policy"] == "never"
        assert services[name]["network_mode"] == "host", name
    assert "COPY docker/healthcheck.py /usr/local/bin/ttsfarm-healthcheck" in DOCKERFILE.read_text()


@pytest.mark.parametrize("dockerfile", ["Dockerfile", "Dockerfile.redis"])
def test_what_the_dockerfiles_copy_exists(dockerfile: str) -> None:
    path = ROOT / "docker" / dockerfile
    context = ROOT if dockerfile == "Dockerfile" else ROOT / "docker"
    sources = [line.split()[1] for line in path.read_text().splitlines() if line.startswith("COPY ")]
    assert sources
    assert [source for source in sources if not (context / source).exists()] == []


def test_the_image_gets_every_package() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = project["tool"]["setuptools"]["packages"]["find"]["include"]
    packages = {pattern.rstrip("*") for pattern in patterns}
    copied = set(re.findall(r"^COPY (\w+) /src/\1$", DOCKERFILE.read_text(), flags=re.MULTILINE))
    assert packages <= copied


class _Health(http.server.BaseHTTPRequestHandler):
    """Answers as Flower (/healthcheck) and the gateway (/healthz) do."""

    def do_GET(self) -> None:
        answers = {"/healthcheck": b"OK", "/healthz": b'{"status":"ok"}'}
        body = answers.get(self.path, b"nope")
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def flower_like() -> Iterator[int]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Health)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@pytest.mark.parametrize("service", ["flower", "gateway"])
def test_http_health_checks(flower_like: int, service: str) -> None:
    healthcheck = load_healthcheck()
    assert healthcheck.main([service, str(flower_like)]) == 0
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    assert healthcheck.main([service, str(closed)]) == 1
    assert healthcheck.main([]) == 2


def size_bytes(text: str) -> int:
    """Compose sizes such as ``512m``, ``16g``."""
    found = re.fullmatch(r"(\d+)([kmg])b?", str(text).lower())
    assert found, f"not a size: {text!r}"
    return int(found[1]) * 1024 ** "kmg".index(found[2]) * 1024


@pytest.mark.parametrize(
    ("name", "min_memory", "min_cpus"),
    [
        ("worker-gpu0", "8g", 6),  # docs/deploy.md, "Sizing a GPU host": about 6 cores busy per GPU
        ("worker-cpu", "2g", 1),
        ("redis", "3g", 1),  # the queue at TTSFARM_MAX_QUEUED_JOBS of the longest jobs is about 2 GB
        ("minio", "1g", 1),
        ("flower", "256m", 0.5),
        ("gateway", "512m", 1),
        ("producer", "256m", 0.5),
    ],
)
def test_every_service_has_resource_limits(
    services: dict[str, dict[str, Any]], name: str, min_memory: str, min_cpus: float
) -> None:
    """Memory is capped for every service; CPUs are either a fixed share that any host has (at
    most 1) or, where a service could use many, no limit by default (0: the host's cores, as a
    2-core host can give) that .env sets per host."""
    service = services[name]
    assert size_bytes(service["mem_limit"]) >= size_bytes(min_memory), name
    cpus = float(service["cpus"])
    assert cpus == 0 or min_cpus <= cpus <= 1, name
    # Service-level keys, which both `docker compose` and docker-compose 1.x apply without swarm.
    assert "limits" not in service.get("deploy", {}).get("resources", {}), name


def test_every_service_is_limited(services: dict[str, dict[str, Any]]) -> None:
    assert [name for name, service in services.items() if not {"mem_limit", "cpus"} <= set(service)] == []


def test_worker_temp_files_go_to_a_volume(raw: dict[str, Any], services: dict[str, dict[str, Any]]) -> None:
    for name in worker_names(services):
        service = services[name]
        temp_dir = Settings.load(environ={k: str(v) for k, v in service["environment"].items()}).temp_dir
        assert temp_dir, f"{name} sets no TTSFARM_TEMP_DIR"
        mounts = dict(volume.split(":", 1)[::-1] for volume in service["volumes"])
        assert temp_dir in mounts, f"{name}: nothing is mounted at {temp_dir}"
        assert mounts[temp_dir] in raw["volumes"], f"{name}: {mounts[temp_dir]} is not a named volume"
    # The image makes the folder, owned by its user, so that the fresh volume takes that owner.
    assert f"install -d -o ttsfarm -g ttsfarm -m 0700 {temp_dir}" in DOCKERFILE.read_text()


GPU_CONSTRAINTS = ROOT / "docker" / "constraints-gpu.txt"


def pins(path: Path) -> dict[str, str]:
    lines = [line.strip() for line in path.read_text(encoding="utf-8").splitlines()]
    pairs = [line.split("==") for line in lines if line and not line.startswith("#")]
    return {canonicalize_name(name): version for name, version in pairs}


def test_the_gpu_images_cuda_and_cudnn_wheels_are_pinned() -> None:
    pinned = pins(GPU_CONSTRAINTS)
    extras = [Requirement(r) for r in importlib.metadata.requires("onnxruntime-gpu") or []]
    wanted = [
        r for r in extras if r.marker and any(r.marker.evaluate({"extra": e}) for e in ("cuda", "cudnn"))
    ]
    assert wanted, "onnxruntime-gpu names no CUDA or cuDNN wheels"
    for requirement in wanted:
        name = canonicalize_name(requirement.name)
        assert name in pinned, f"{name} is not pinned in {GPU_CONSTRAINTS.name}"
        assert requirement.specifier.contains(pinned[name]), f"{name}=={pinned[name]} is not {requirement}"
    # The image installs the extras with both constraint files.
    assert "-c /src/docker/constraints-gpu.txt" in DOCKERFILE.read_text()
    assert not set(pinned) & set(pins(ROOT / "scripts" / "constraints.txt")), "one pin per package"


def test_the_base_is_built_from_a_debian_snapshot() -> None:
    script = (ROOT / "docker" / "build-base.sh").read_text(encoding="utf-8")
    default = re.search(r"^DEBIAN_SNAPSHOT=\$\{DEBIAN_SNAPSHOT-(\w+)\}$", script, flags=re.MULTILINE)
    assert default and re.fullmatch(r"\d{8}T\d{6}Z", default[1])
    assert "snapshot.debian.org/archive" in script and "check-valid-until=no" in script


@pytest.mark.parametrize("dockerfile", ["Dockerfile", "Dockerfile.redis"])
def test_hadolint_passes_and_each_exception_says_why(dockerfile: str) -> None:
    hadolint = Path(sys.executable).parent / "hadolint"
    if not hadolint.exists():
        pytest.skip("hadolint is not installed (scripts/install installs it)")
    path = ROOT / "docker" / dockerfile
    answer = subprocess.run(
        [str(hadolint), "--no-color", str(path)], capture_output=True, text=True, timeout=60
    )
    assert answer.returncode == 0, answer.stdout + answer.stderr
    lines = path.read_text(encoding="utf-8").splitlines()
    for number, line in enumerate(lines):
        if line.startswith("# hadolint ignore="):
            rule = line.split("=", 1)[1]
            explained = [above for above in lines[:number] if above.startswith("#")][-3:]
            assert any(rule in above for above in explained), (
                f"{dockerfile}:{number + 1}: {rule} not explained"
            )


def test_profiles_choose_workers_and_minio_and_nothing_waits_for_minio(
    services: dict[str, dict[str, Any]],
) -> None:
    """A CPU-only host (cpu,minio), a GPU host (gpu,minio) and a host storing to AWS S3 or another
    endpoint (gpu or cpu alone) each start with `docker compose up -d` and COMPOSE_PROFILES: no
    service outside the minio profile waits for MinIO, so leaving it out needs no --no-deps."""
    assert services["minio"]["profiles"] == ["minio"]
    assert all(services[name]["profiles"] in (["gpu"], ["cpu"]) for name in worker_names(services))
    for name, service in services.items():
        assert "minio" not in service.get("depends_on", {}), name
    profiles = env_example()["COMPOSE_PROFILES"].split(",")
    assert sorted(profiles) == ["gpu", "minio"]
    always = {name for name, service in services.items() if "profiles" not in service}
    assert always == {"redis", "flower", "gateway"}


@pytest.mark.slow
def test_the_host_command_reads_the_stacks_env_file(tmp_path: Path) -> None:
    """`ttsfarm --env-file .env` takes the broker URL compose builds (password, host, port, db), and
    the TTSFARM_* and AWS_* values; what the environment sets already wins."""
    from ttsfarm.core.env_file import stack_environment

    env_file = tmp_path / ".env"
    lines = ENV_EXAMPLE.read_text(encoding="utf-8").splitlines()
    given = {"REDIS_PASSWORD": "s3cret-pw", "REDIS_PORT": str(closed_port()), "REDIS_DB": "2"}
    env_file.write_text(
        "\n".join(
            f"{line.split('=')[0]}={given[line.split('=')[0]]}" if line.split("=")[0] in given else line
            for line in lines
        )
        + "\n",
        encoding="utf-8",
    )
    found = stack_environment(env_file, environ={"TTSFARM_VOICE": "mine"})
    assert found["TTSFARM_BROKER_URL"] == f"redis://:s3cret-pw@127.0.0.1:{given['REDIS_PORT']}/2"
    assert found["TTSFARM_STORAGE_URL"] == "s3://ttsfarm/audio" and "TTSFARM_VOICE" not in found
    assert "REDIS_PASSWORD" not in found and "COMPOSE_PROFILES" not in found
    run = subprocess.run(
        [sys.executable, "-m", "ttsfarm", "--env-file", str(env_file), "submit", "Hello."],
        capture_output=True,
        text=True,
        timeout=120,
        env={k: v for k, v in os.environ.items() if not k.startswith(("TTSFARM_", "AWS_"))},
    )
    assert run.returncode == 1
    assert f"cannot reach the broker at redis://***@127.0.0.1:{given['REDIS_PORT']}/2" in run.stderr
    assert "s3cret-pw" not in run.stderr
    missing = subprocess.run(
        [sys.executable, "-m", "ttsfarm", "--env-file", str(tmp_path / "nope.env"), "status", "x"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert missing.returncode == 1 and "cp docker/env.example .env" in missing.stderr


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_check_env_names_a_cpu_limit_over_the_hosts_cores(tmp_path: Path) -> None:
    script = ROOT / "docker" / "check-env.sh"
    fine = subprocess.run([str(script), str(ENV_EXAMPLE)], capture_output=True, text=True, timeout=30)
    assert fine.returncode == 0, fine.stderr
    too_many = tmp_path / ".env"
    too_many.write_text(f"WORKER_CPUS={len(os.sched_getaffinity(0))}\nREDIS_CPUS=9999\n", encoding="utf-8")
    refused = subprocess.run([str(script), str(too_many)], capture_output=True, text=True, timeout=30)
    assert refused.returncode == 1
    assert refused.stderr.count("\n") == 1 and refused.stderr.startswith("check-env.sh: REDIS_CPUS=9999 ")
