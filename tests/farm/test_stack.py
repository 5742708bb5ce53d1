"""The container stack as an operator runs it, on a small CPU-only host: the images built by the
documented scripts, `docker compose up -d` with COMPOSE_PROFILES=cpu and an S3 endpoint instead
of MinIO (moto's server, on the host network), then a job submitted and fetched into a mounted
folder, the gateway's speech endpoint and Flower's page.

It needs a Docker daemon and Compose (docker-compose 1.28+ or the plugin); the base image is
built first if it is missing, which needs root and debootstrap. Where any of that is missing the
test is skipped, saying which. It takes a few minutes: the app image is rebuilt from HEAD."""

from __future__ import annotations

import os
import re
import shutil
import ssl
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import soundfile as sf

from tests.farm.conftest import free_port, wait_for

ROOT = Path(__file__).resolve().parents[2]
IMAGE = "ttsfarm-cpu-test"
BASE = "ttsfarm-base:bookworm"


def compose_command() -> list[str] | None:
    for command in (["docker", "compose"], ["docker-compose"]):
        if (
            shutil.which(command[0])
            and subprocess.run([*command, "version"], capture_output=True).returncode == 0
        ):
            return command
    return None


def docker_ready() -> str | None:
    """Why the stack cannot be run here, or ``None``."""
    if shutil.which("docker") is None:
        return "no docker command"
    if subprocess.run(["docker", "info"], capture_output=True).returncode:
        return "no Docker daemon answers (start dockerd)"
    if compose_command() is None:
        return "no Compose (docker-compose 1.28+ or the docker compose plugin)"
    base_there = subprocess.run(["docker", "image", "inspect", BASE], capture_output=True).returncode == 0
    if not base_there and (os.geteuid() != 0 or shutil.which("debootstrap") is None):
        return f"{BASE} is missing, and building it needs root and debootstrap"
    return None


def run(*command: str, cwd: Path = ROOT, env: dict[str, str] | None = None, timeout: float = 1200) -> str:
    done = subprocess.run(
        command, cwd=cwd, env={**os.environ, **(env or {})}, capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, f"{' '.join(command)}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


@pytest.fixture(scope="module")
def images() -> None:
    why = docker_ready()
    if why is not None:
        pytest.skip(f"the container stack is not run here: {why}")
    if subprocess.run(["docker", "image", "inspect", BASE], capture_output=True).returncode:
        # the snapshot archive is out of reach of many hosts: today's packages from Debian's mirror
        run("docker/build-base.sh", env={"DEBIAN_SNAPSHOT": ""})
    # The system's CA bundle goes in as EXTRA_CA_CERTS: behind a TLS-inspecting proxy, pip in the
    # build needs the proxy's certificate, which the system trusts.
    run(
        "docker/build-image.sh",
        "--build-arg",
        "ORT_EXTRAS=",
        env={"IMAGE_NAME": IMAGE, "EXTRA_CA_CERTS": ssl.get_default_verify_paths().cafile or ""},
    )


@pytest.fixture
def stack(images: None, s3_endpoint: str, tmp_path: Path) -> Iterator[dict[str, str]]:
    """The stack up in a folder of its own: compose.yaml, docker/ and a .env from env.example."""
    folder = tmp_path / "stack"
    folder.mkdir()
    shutil.copy(ROOT / "compose.yaml", folder)
    shutil.copytree(ROOT / "docker", folder / "docker")
    ports = {name: str(free_port()) for name in ("redis", "flower", "gateway", "metrics")}
    given = {
        "COMPOSE_PROFILES": "cpu",
        "FARM_IMAGE": f"{IMAGE}:latest",
        "REDIS_PASSWORD": uuid.uuid4().hex,
        "REDIS_PORT": ports["redis"],
        "MINIO_ROOT_PASSWORD": "not-used-here",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_ACCESS_KEY_ID": "test",
        "TTSFARM_S3_ENDPOINT_URL": s3_endpoint,
        "TTSFARM_STORAGE_URL": f"s3://stack-{uuid.uuid4().hex[:8]}/audio",  # made by the worker
        "FLOWER_BASIC_AUTH": "ops:flower-secret",
        "FLOWER_PORT": ports["flower"],
        "GATEWAY_PORT": ports["gateway"],
        "GATEWAY_PROCESSES": "1",
        "WORKER_CPU_METRICS_PORT": ports["metrics"],
    }
    text = (ROOT / "docker" / "env.example").read_text(encoding="utf-8")
    for key, value in given.items():
        text, count = re.subn(rf"^{key}=.*$", f"{key}={value}", text, flags=re.M)
        assert count == 1, key
    (folder / ".env").write_text(text, encoding="utf-8")
    project = f"ttsfarm-test-{uuid.uuid4().hex[:6]}"
    compose = [*(compose_command() or []), "-p", project]
    try:
        run(*compose, "up", "-d", cwd=folder)
        yield {"folder": str(folder), "compose": "\0".join(compose), "project": project, **ports}
    finally:
        logs = subprocess.run(
            [*compose, "logs", "--no-color", "--tail", "40"], cwd=folder, capture_output=True
        )
        print(logs.stdout.decode(errors="replace")[-6000:])
        subprocess.run([*compose, "down", "-v", "--remove-orphans"], cwd=folder, capture_output=True)


def healthy(project: str) -> bool:
    """Whether the project's four long-running services are up and healthy."""
    listed = subprocess.run(
        [
            "docker",
            "ps",
            "--filter",
            f"label=com.docker.compose.project={project}",
            "--format",
            "{{.Status}}",
        ],
        capture_output=True,
        text=True,
    ).stdout.splitlines()
    return len(listed) == 4 and all("(healthy)" in status for status in listed)


def test_the_cpu_stack_runs_a_job_end_to_end(stack: dict[str, str]) -> None:
    folder, compose = Path(stack["folder"]), stack["compose"].split("\0")
    wait_for(lambda: healthy(stack["project"]), 300, "redis, worker-cpu, flower and gateway to be healthy")
    submitted = run(
        *compose, "run", "--rm", "producer", "submit", "Hello from the containers.", "--wait", cwd=folder
    )
    job_id = submitted.split()[0]
    out = folder / "out"
    out.mkdir()
    user = f"{os.getuid()}:{os.getgid()}"  # as docs/deploy.md says: a mounted folder the user owns
    run(
        *compose,
        "run",
        "--rm",
        "--user",
        user,
        "-v",
        f"{out}:/out",
        "producer",
        "fetch",
        job_id,
        "-o",
        "/out/hello.wav",
        cwd=folder,
    )
    assert 1.0 < sf.info(str(out / "hello.wav")).duration < 5.0

    key = run(*compose, "run", "--rm", "producer", "keys", "add", "stack-test", cwd=folder).split()[-1]
    gateway = f"http://127.0.0.1:{stack['gateway']}"
    speech = httpx.post(
        f"{gateway}/v1/audio/speech",
        headers={"Authorization": f"Bearer {key}"},
        json={
            "model": "tts-1",
            "input": "Speech through the gateway.",
            "voice": "alloy",
            "response_format": "wav",
        },
        timeout=120,
    )
    assert speech.status_code == 200, speech.text
    (out / "speech.wav").write_bytes(speech.content)
    assert sf.info(str(out / "speech.wav")).duration > 1.0

    flower = f"http://127.0.0.1:{stack['flower']}"
    assert httpx.get(f"{flower}/workers", timeout=30).status_code == 401
    page = httpx.get(f"{flower}/workers", auth=("ops", "flower-secret"), timeout=30)
    assert page.status_code == 200 and "ttsfarm-cpu@" in page.text
