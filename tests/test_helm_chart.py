"""The Helm chart (``deploy/helm/ttsfarm``) renders valid Kubernetes, and what it renders is what
the farm's code needs. No cluster is needed.

``helm template`` (the binary of the ``helm-binary`` package) renders the chart for its default
values and for values with autoscaling, the gateway and Flower on. Every manifest of a built-in
kind is validated against Kubernetes 1.30's own schemas (``kubernetes-validate``, strict: an
unknown field fails). KEDA's ScaledObject is a custom resource those schemas lack: the fields its
CRD requires are checked here by hand. Then what the plan rests on is checked against the code:
one GPU per worker pod, the command and health probe the CLI and ``docker/healthcheck.py``
really have, a grace period above the worker's own, settings that ``Settings`` loads, and Redis
lists that the producer's jobs land in (real Redis).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import re
import subprocess
from collections.abc import Iterator
from dataclasses import fields
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import redis
import yaml

from producer import Client, JobSpec
from tests.conftest import emptied, redis_server
from tests.helpers_deploy import load_healthcheck
from ttsfarm.cli import main as cli
from ttsfarm.core.finishing import FinishRequest, PartAudio
from ttsfarm.core.settings import ENV_PREFIX, PROBE_TIMEOUT_SECONDS, Settings
from ttsfarm.farm.celeryconf import MESSAGE_PRIORITIES, finish_queue

ROOT = Path(__file__).resolve().parents[1]
CHART = ROOT / "deploy" / "helm" / "ttsfarm"
KUBE_VERSION = "1.30.0"
RELEASE = "farm"
SETTING_VARIABLES = {ENV_PREFIX + f.name.upper() for f in fields(Settings)} | {f"{ENV_PREFIX}CONFIG"}
OTHER_VARIABLES = {"REDIS_PASSWORD", "FLOWER_BASIC_AUTH", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"}
"""What a ttsfarm container may be given besides settings: Redis's password (for the broker URL
and KEDA), Flower's logins, boto3's keys."""
SECRETS = {
    "ttsfarm-redis": {"password": "test-secret"},
    "ttsfarm-s3": {"AWS_ACCESS_KEY_ID": "test-key", "AWS_SECRET_ACCESS_KEY": "test-secret"},
    "ttsfarm-flower": {"basic-auth": "ops:test-secret"},
}
"""The Secrets docs/kubernetes.md has the operator make, as a cluster would hand them over."""
EVERYTHING: dict[str, Any] = {
    "autoscaling": {"enabled": True},
    "gateway": {"enabled": True},
    "flower": {"enabled": True},
    "s3": {"credentialsSecret": "ttsfarm-s3", "endpointUrl": "http://minio:9000"},
    "worker": {"consumers": 6, "settings": {"TTSFARM_TEXT_PROCESSES": "4"}},
}
SCALED_TO_ZERO: dict[str, Any] = {
    "autoscaling": {"enabled": True, "minReplicaCount": 0},
    "gateway": {"enabled": True},
}
BUILT_IN = {"ConfigMap", "Deployment", "Service"}
REFERENCE = re.compile(r"\$\((\w+)\)")
COMPOSE_WORKER_START_SECONDS = 180
"""compose.yaml's worker start_period (3m): the pod waits as long for its first healthy probe."""
URL = f"{redis_server()}/6"


def helm() -> Path:
    """The helm binary the helm-binary package installed (a script of the environment)."""
    try:
        files = importlib.metadata.distribution("helm-binary").files or []
    except importlib.metadata.PackageNotFoundError:
        pytest.fail("helm-binary is not installed: scripts/install installs the test tools")
    (binary,) = [f for f in files if f.name == "helm"]
    return Path(str(binary.locate())).resolve()


class Chart:
    """The chart rendered by helm, with values over its defaults, in a helm home of its own."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.binary = helm()
        self.env = {
            **os.environ,
            **{f"HELM_{kind}_HOME": str(home / kind) for kind in ("CACHE", "CONFIG", "DATA")},
        }
        self.written = 0

    def run(self, values: dict[str, Any] | None, *command: str) -> subprocess.CompletedProcess[str]:
        """``helm COMMAND... CHART`` for Kubernetes 1.30 with these values."""
        args = [str(self.binary), *command, CHART.as_posix(), "--kube-version", KUBE_VERSION]
        if values is not None:
            self.written += 1
            path = self.home / f"values-{self.written}.yaml"
            path.write_text(yaml.safe_dump(values), encoding="utf-8")
            args += ["--values", str(path)]
        return subprocess.run(args, capture_output=True, text=True, timeout=60, env=self.env)

    def __call__(self, values: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        """The manifests ``helm template`` renders."""
        done = self.run(values, "template", RELEASE)
        assert done.returncode == 0, done.stderr
        return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


@pytest.fixture(scope="module")
def render(tmp_path_factory: pytest.TempPathFactory) -> Chart:
    return Chart(tmp_path_factory.mktemp("helm"))


def one(manifests: list[dict[str, Any]], kind: str, component: str | None = None) -> dict[str, Any]:
    found = [
        m
        for m in manifests
        if m["kind"] == kind
        and (component is None or m["metadata"]["labels"].get("app.kubernetes.io/component") == component)
    ]
    assert len(found) == 1, f"{len(found)} {kind} {component or ''}"
    return found[0]


def container(manifests: list[dict[str, Any]], component: str) -> dict[str, Any]:
    (only,) = one(manifests, "Deployment", component)["spec"]["template"]["spec"]["containers"]
    assert isinstance(only, dict)
    return only


def environment(manifests: list[dict[str, Any]], found: dict[str, Any]) -> dict[str, str]:
    """The container's variables as the kubelet sets them: ``envFrom`` first, then ``env`` in
    order, where ``$(NAME)`` takes only a variable defined before it."""
    maps = {m["metadata"]["name"]: m.get("data", {}) for m in manifests if m["kind"] == "ConfigMap"}
    env: dict[str, str] = {}
    for source in found.get("envFrom", []):
        if "configMapRef" in source:
            env.update(maps[source["configMapRef"]["name"]])
        else:
            env.update(SECRETS[source["secretRef"]["name"]])
    for item in found.get("env", []):
        if "value" in item:
            missing = [name for name in REFERENCE.findall(item["value"]) if name not in env]
            assert not missing, f"{item['name']} uses {missing} before they are defined"
            env[item["name"]] = REFERENCE.sub(lambda m: env[m[1]], item["value"])
        else:
            secret = item["valueFrom"]["secretKeyRef"]
            env[item["name"]] = SECRETS[secret["name"]][secret["key"]]
    return env


@pytest.mark.parametrize(
    "values", [None, EVERYTHING, SCALED_TO_ZERO], ids=["defaults", "everything", "to-zero"]
)
def test_every_manifest_is_valid_kubernetes(render: Chart, values: dict[str, Any] | None) -> None:
    manifests = render(values)
    for manifest in manifests:
        if manifest["kind"] in BUILT_IN:
            kubernetes_validate.validate(manifest, KUBE_VERSION, strict=True)
        else:
            assert manifest["kind"] == "ScaledObject"
            with pytest.raises(kubernetes_validate.SchemaNotFoundError):  # a CRD: checked below
                kubernetes_validate.validate(manifest, KUBE_VERSION, strict=True)
    kinds = sorted(m["kind"] for m in manifests)
    if values is None:
        assert kinds == ["ConfigMap", "ConfigMap", "Deployment"]
    elif values is EVERYTHING:
        assert kinds == [*["ConfigMap"] * 2, *["Deployment"] * 3, "ScaledObject", *["Service"] * 2]
    linted = render.run(values, "lint", "--strict")
    assert linted.returncode == 0, linted.stdout + linted.stderr


def test_the_validation_catches_a_wrong_manifest(render: Chart) -> None:
    """So that the test above can fail: a misspelt field and a wrong type are refused."""
    worker = one(render(), "Deployment", "worker")
    worker["spec"]["template"]["spec"]["terminationGracePeriodSecond"] = 360
    with pytest.raises(kubernetes_validate.ValidationError, match="terminationGracePeriodSecond"):
        kubernetes_validate.validate(worker, KUBE_VERSION, strict=True)
    del worker["spec"]["template"]["spec"]["terminationGracePeriodSecond"]
    worker["spec"]["replicas"] = "1"
    with pytest.raises(kubernetes_validate.ValidationError, match="is not of type"):
        kubernetes_validate.validate(worker, KUBE_VERSION, strict=True)


@pytest.mark.parametrize("values", [None, EVERYTHING], ids=["defaults", "everything"])
def test_a_worker_pod_has_one_gpu_on_a_gpu_node(render: Chart, values: dict[str, Any] | None) -> None:
    pod = one(render(values), "Deployment", "worker")["spec"]["template"]["spec"]
    (worker,) = pod["containers"]
    assert worker["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert "nvidia.com/gpu" not in worker["resources"].get("requests", {})  # the limit sets it
    assert pod["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
    # About 6 cores busy per worker at full speed (docs/deploy.md, "Sizing a GPU host").
    assert float(worker["resources"]["requests"]["cpu"]) >= 6


def test_the_chart_refuses_a_second_gpu_or_a_setting_it_sets_itself(render: Chart) -> None:
    two = render.run({"worker": {"resources": {"limits": {"nvidia.com/gpu": 2}}}}, "template", RELEASE)
    assert two.returncode != 0 and "one GPU" in two.stderr
    queue = render.run({"settings": {"TTSFARM_QUEUE": "other"}}, "template", RELEASE)
    assert queue.returncode != 0 and "TTSFARM_QUEUE is set by the chart" in queue.stderr


def test_the_worker_runs_the_cli_and_its_probes_ask_it(render: Chart) -> None:
    worker = container(render(), "worker")
    command = worker["command"]
    assert command[:2] == ["ttsfarm", "worker"]
    params = cli.commands["worker"].make_context("worker", list(command[2:])).params
    # The pod's one GPU is number 0 inside it; %h is the pod's name, which the probe adds too.
    assert params["gpu"] == 0 and not params["cpu"]
    node = params["hostname"]
    assert node.endswith("@%h")
    healthcheck = load_healthcheck()
    for probe in ("startupProbe", "livenessProbe"):
        found = worker[probe]
        assert found["exec"]["command"] == ["ttsfarm-healthcheck", "worker", node.removesuffix("@%h")]
        # The check waits for the probe batch and the reply: the kubelet must wait longer.
        assert found["timeoutSeconds"] > PROBE_TIMEOUT_SECONDS + healthcheck.PING_TIMEOUT_SECONDS
    startup = worker["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] >= COMPOSE_WORKER_START_SECONDS
    dockerfile = (ROOT / "docker" / "Dockerfile").read_text(encoding="utf-8")
    assert "COPY docker/healthcheck.py /usr/local/bin/ttsfarm-healthcheck" in dockerfile


@pytest.mark.parametrize("values", [None, {"worker": {"stopGraceSeconds": 900}}], ids=["defaults", "longer"])
def test_workers_stop_gracefully(render: Chart, values: dict[str, Any] | None) -> None:
    manifests = render(values)
    pod = one(manifests, "Deployment", "worker")["spec"]["template"]["spec"]
    settings = Settings.load(environ=environment(manifests, pod["containers"][0]), config_path=None)
    assert settings.stop_grace_seconds >= 300
    # Killed only after the worker's own grace ran out and its jobs went back (as compose.yaml).
    assert pod["terminationGracePeriodSeconds"] >= settings.stop_grace_seconds + 30
    # SIGTERM itself starts the warm shutdown: nothing to run before it.
    assert "lifecycle" not in pod["containers"][0]
    assert "STOPSIGNAL SIGTERM" in (ROOT / "docker" / "Dockerfile").read_text(encoding="utf-8")


@pytest.mark.parametrize("component", ["worker", "gateway", "flower"])
def test_every_variable_is_a_setting_and_loads(render: Chart, component: str) -> None:
    manifests = render(EVERYTHING)
    for config in (m for m in manifests if m["kind"] == "ConfigMap"):
        assert set(config["data"]) <= SETTING_VARIABLES, config["metadata"]["name"]
    env = environment(manifests, container(manifests, component))
    assert {name for name in env if not name.startswith(ENV_PREFIX)} <= OTHER_VARIABLES
    assert {name for name in env if name.startswith(ENV_PREFIX)} <= SETTING_VARIABLES
    settings = Settings.load(environ=env, config_path=None)
    assert settings.broker_url == "redis://:test-secret@redis:6379/0"
    assert settings.queue == "ttsfarm"
    if component == "flower":
        assert env["FLOWER_BASIC_AUTH"] == "ops:test-secret"
        return
    assert settings.storage_url == "s3://ttsfarm/audio"
    assert settings.s3_endpoint_url == "http://minio:9000"
    assert env["AWS_ACCESS_KEY_ID"] == "test-key"
    if component == "worker":
        assert settings.s3_create_bucket and settings.consumers == 6 and settings.text_processes == 4
        worker = container(manifests, "worker")
        (mount,) = worker["volumeMounts"]
        assert mount["mountPath"] == settings.temp_dir
        assert worker["ports"][0]["containerPort"] == settings.metrics_port


def test_default_storage_is_aws_s3(render: Chart) -> None:
    manifests = render()
    settings = Settings.load(environ=environment(manifests, container(manifests, "worker")), config_path=None)
    assert settings.s3_endpoint_url is None and settings.storage_url.startswith("s3://")


def test_the_scaled_object_has_what_kedas_crd_requires(render: Chart) -> None:
    """Required by KEDA's CRD (keda.sh/v1alpha1): spec.scaleTargetRef.name and spec.triggers, each
    trigger a type and string metadata; a formula needs a target above 0 (KEDA's webhook)."""
    manifests = render(EVERYTHING)
    scaled = one(manifests, "ScaledObject")
    assert scaled["apiVersion"] == "keda.sh/v1alpha1" and scaled["metadata"]["name"]
    spec = scaled["spec"]
    workers = one(manifests, "Deployment", "worker")
    assert "replicas" not in workers["spec"]  # KEDA's HPA owns the count
    target = spec["scaleTargetRef"]
    assert target["name"] == workers["metadata"]["name"]
    worker = container(manifests, "worker")
    assert target["envSourceContainerName"] == worker["name"]
    assert 0 <= spec["minReplicaCount"] <= spec["maxReplicaCount"] and spec["maxReplicaCount"] >= 1
    assert spec["pollingInterval"] >= 1 and spec["cooldownPeriod"] >= 0
    env = environment(manifests, worker)
    names = []
    for trigger in spec["triggers"]:
        assert trigger["type"] == "redis"
        metadata = trigger["metadata"]
        assert all(isinstance(value, str) for value in metadata.values()), trigger["name"]
        assert {"address", "listName", "listLength"} <= set(metadata)
        assert metadata["address"] == "redis:6379" and metadata["databaseIndex"] == "0"
        assert env[metadata["passwordFromEnv"]] == "test-secret"
        assert int(metadata["listLength"]) > 0
        assert re.fullmatch(r"[a-z]+", trigger["name"])  # a name the formula can use
        names.append(trigger["name"])
    modifiers = spec["advanced"]["scalingModifiers"]
    assert sorted(modifiers["formula"].split(" + ")) == sorted(names)  # every list counts, once
    assert float(modifiers["target"]) > 0 and modifiers["metricType"] in ("AverageValue", "Value")
    behavior = spec["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]
    assert behavior["scaleDown"]["stabilizationWindowSeconds"] >= 60


def test_the_queue_can_ask_for_every_worker(render: Chart) -> None:
    """Producers refuse jobs past TTSFARM_MAX_QUEUED_JOBS, so a target above that over the most
    workers would leave workers the queue can never ask for."""
    manifests = render(EVERYTHING)
    spec = one(manifests, "ScaledObject")["spec"]
    settings = Settings.load(environ=environment(manifests, container(manifests, "worker")), config_path=None)
    target = float(spec["advanced"]["scalingModifiers"]["target"])
    assert target * spec["maxReplicaCount"] <= settings.max_queued_jobs


@pytest.fixture
def broker() -> Iterator[redis.Redis]:
    yield from emptied(URL)


def test_the_scaler_counts_the_lists_jobs_wait_in(render: Chart, broker: redis.Redis) -> None:
    """Jobs of each priority and a chapter to finish, queued by the real producer on a real Redis:
    each lands in a list the scaler reads, and the lists add up to every waiting job."""
    manifests = render(EVERYTHING)
    lists = {t["name"]: t["metadata"]["listName"] for t in one(manifests, "ScaledObject")["spec"]["triggers"]}
    queue = Settings.load(environ=environment(manifests, container(manifests, "worker"))).queue
    part = PartAudio(location="s3://ttsfarm/audio/part.flac", sha256="0" * 64, pause_after=0.0, segments=())
    with Client(Settings(broker_url=URL, queue=queue)) as client:
        for copies, priority in enumerate(MESSAGE_PRIORITIES, 1):
            client.submit_many([JobSpec(f"Job {n}.", priority=priority) for n in range(copies)])
        client.submit_finish(FinishRequest(parts=(part,), sample_rate=22050, loudness=-18.0))
    lengths = {name: broker.llen(key) for name, key in lists.items()}
    assert lengths == {"interactive": 1, "bulk": 2, "finish": 1}
    assert lists["finish"] == finish_queue(queue)
    waiting = sum(broker.llen(key) for key in broker.scan_iter(match=f"{queue}*", _type="list"))
    assert sum(lengths.values()) == waiting


def test_gateways_stay_in_their_service_while_workers_are_at_zero(render: Chart) -> None:
    """/readyz fails while no worker answers: with workers scaled to zero that would keep every
    gateway out of its Service, and no job could come to wake them."""
    for values, path in ((EVERYTHING, "/readyz"), (SCALED_TO_ZERO, "/healthz")):
        manifests = render(values)
        gateway = container(manifests, "gateway")
        assert gateway["readinessProbe"]["httpGet"]["path"] == path
        assert gateway["livenessProbe"]["httpGet"]["path"] == "/healthz"
        command = gateway["command"]
        assert command[:2] == ["ttsfarm", "serve"]
        params = cli.commands["serve"].make_context("serve", list(command[2:])).params
        assert params["host"] == "0.0.0.0" and params["workers"] >= 1
        assert gateway["ports"][0]["containerPort"] == params["port"]
        service = one(manifests, "Service", "gateway")
        assert service["spec"]["ports"][0]["targetPort"] == gateway["ports"][0]["name"]


def test_flower_runs_with_basic_auth_and_its_health_check(render: Chart) -> None:
    flower = container(render(EVERYTHING), "flower")
    assert flower["command"][:4] == ["celery", "-A", "worker.app", "flower"]
    assert not any("basic" in part for part in flower["command"]), "credentials belong in a Secret"
    auth = next(item for item in flower["env"] if item["name"] == "FLOWER_BASIC_AUTH")
    assert auth["valueFrom"]["secretKeyRef"] == {"name": "ttsfarm-flower", "key": "basic-auth"}
    assert flower["readinessProbe"]["httpGet"]["path"] == "/healthcheck"
