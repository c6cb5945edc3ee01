#!/usr/bin/env python3
"""Renders deploy/kubernetes/ from the compose file and autumn.toml.

The compose file is where this project says how its processes run: which command each
runs, which settings they share, how long a web replica needs to leave, how its health is
asked. The Kubernetes manifests say the same things in another dialect, so they are
rendered from it rather than kept by hand beside it: change docker-compose.yml or
autumn.toml, run this, commit both. `--check` (run by CI) fails when the committed files
are not what this renders.

What differs, and why, is written here once:
- the database URLs name servers outside the cluster, so they come from a Secret (an
  overlay's database.env, e.g. overlays/external-postgres), never from the ConfigMap;
  autumn.toml's URL lines are left out of the ConfigMap's copy;
- each process logs in as compose's login for it (`AUTUMN_DATABASE__USER`), its password
  a file from a Secret of its own (`bookmarks-login-<login>`, made by the overlay) mounted
  where compose mounts it;
- a web pod's readiness asks `/ready?scope=replica`: a shard that is down is down for every
  replica, and a Service that dropped them all would turn one shard's outage into all;
- a web pod waits `PRE_STOP` seconds before it is told to stop, so that every node's
  proxies have taken it out of the Service before it drains; its grace period is compose's
  stop_grace_period plus that wait;
- the connection budget counts the processes a rolling update can run at once.

Needs PyYAML (the kubernetes-validate environment has it: scripts/check-kubernetes.sh).
"""

from __future__ import annotations

import argparse
import re
import sys
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "deploy" / "kubernetes"
BASE = OUT / "base"

NAME = "bookmarks-sharded"
IMAGE = "bookmarks-sharded:latest"
WEB_REPLICAS = 2
WEB_MAX_SURGE = 1
WORKER_REPLICAS = 1
# Endpoint removal reaches every node's kube-proxy and the ingress a little after a pod is
# marked terminating; requests sent meanwhile must find it still serving.
PRE_STOP = 5
SECRET = "bookmarks-database"
CONFIG = "bookmarks-config"
HEADER = (
    "# Rendered by scripts/render-kubernetes.py from docker-compose.yml and autumn.toml.\n"
    "# Do not edit: change those and render again (docs/kubernetes.md).\n"
)

DEFAULTED = re.compile(r"\$\{(\w+):-([^}]*)\}")
SECONDS = re.compile(r"^(\d+)s$")


def compose_value(raw: object) -> str:
    """A compose value with `${VAR:-default}` read as its default (what a plain `up` gets)."""
    text = str(raw)
    if "$" in DEFAULTED.sub("", text):
        sys.exit(f"render-kubernetes: {text!r} uses a variable without a default")
    return DEFAULTED.sub(lambda m: m.group(2), text)


def seconds(raw: str) -> int:
    match = SECONDS.match(raw)
    if not match:
        sys.exit(f"render-kubernetes: cannot read {raw!r} as whole seconds")
    return int(match.group(1))


class Compose:
    """What the manifests take from docker-compose.yml."""

    def __init__(self, path: Path):
        self.services = yaml.safe_load(path.read_text())["services"]

    def env(self, service: str) -> dict[str, str]:
        raw = self.services[service].get("environment", {})
        return {k: compose_value(v) for k, v in raw.items()}

    def command(self, service: str) -> list[str]:
        return [str(c) for c in self.services[service]["command"]]

    def entrypoint(self, service: str) -> list[str]:
        return [str(c) for c in self.services[service]["entrypoint"]]

    def grace(self, service: str) -> int:
        return seconds(self.services[service]["stop_grace_period"])

    def health_path(self, service: str) -> str:
        test = self.services[service]["healthcheck"]["test"]
        urls = [t for t in test if str(t).startswith("http://")]
        if len(urls) != 1:
            sys.exit(f"render-kubernetes: {service}'s healthcheck asks no single URL")
        return "/" + urls[0].split("/", 3)[3]


def is_url(var: str) -> bool:
    return var.startswith("AUTUMN_DATABASE__") and var.endswith("_URL")


PASSWORD_FILE = "AUTUMN_DATABASE__PASSWORD_FILE"
SECRETS_DIR = re.compile(r"^/run/secrets/db-([a-z-]+)/password$")


def login(compose: Compose, service: str) -> str:
    """Which of compose's database logins a service uses: the `db-<login>` folder of its
    password file (web, owner, move-slot)."""
    match = SECRETS_DIR.match(compose.env(service).get(PASSWORD_FILE, ""))
    if not match:
        sys.exit(f"render-kubernetes: {service} reads no /run/secrets/db-<login>/password")
    return match.group(1)


def shared_env(compose: Compose, service: str) -> list[dict]:
    """A service's compose environment less the database URLs (they come from the Secret)
    and INSTANCE_NAME (the pod's own name here)."""
    env = [{"name": "INSTANCE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]
    for var, value in compose.env(service).items():
        if is_url(var) or var == "INSTANCE_NAME":
            continue
        env.append({"name": var, "value": value})
    # Pools per server × the processes that may hold them at once: both web replicas, the
    # one a rolling update adds, and the workers (app/sharding/budget.rs).
    env.append(
        {
            "name": "AUTUMN_DATABASE__PROCESSES",
            "value": str(WEB_REPLICAS + WEB_MAX_SURGE + WORKER_REPLICAS),
        }
    )
    return env


def labels(component: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": NAME, "app.kubernetes.io/component": component}


POD_SECURITY = {
    "runAsNonRoot": True,
    "runAsUser": 10001,
    "runAsGroup": 10001,
    "seccompProfile": {"type": "RuntimeDefault"},
}
CONTAINER_SECURITY = {
    "allowPrivilegeEscalation": False,
    "readOnlyRootFilesystem": True,
    "capabilities": {"drop": ["ALL"]},
}


def container(name: str, env: list[dict], login: str, **rest) -> dict:
    spec = {
        "name": name,
        "image": IMAGE,
        **rest,
        "env": env,
        "envFrom": [{"secretRef": {"name": SECRET}}],
        "volumeMounts": [
            {"name": "config", "mountPath": "/app/autumn.toml", "subPath": "autumn.toml", "readOnly": True},
            {"name": "login", "mountPath": f"/run/secrets/db-{login}", "readOnly": True},
        ],
        "securityContext": CONTAINER_SECURITY,
    }
    return spec


def pod(containers: list[dict], login: str, **rest) -> dict:
    return {
        **rest,
        "securityContext": POD_SECURITY,
        "containers": containers,
        "volumes": [
            {"name": "config", "configMap": {"name": CONFIG}},
            {"name": "login", "secret": {"secretName": f"bookmarks-login-{login}"}},
        ],
    }


def web(compose: Compose) -> list[dict]:
    env = shared_env(compose, "web1")
    health = compose.health_path("web1")
    http = {"port": "http"}
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "bookmarks-web", "labels": labels("web")},
        "spec": {
            "replicas": WEB_REPLICAS,
            "selector": {"matchLabels": labels("web")},
            # Never fewer ready replicas than asked for while a new image rolls out.
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": WEB_MAX_SURGE, "maxUnavailable": 0},
            },
            "template": {
                "metadata": {"labels": labels("web")},
                "spec": pod(
                    [
                        container(
                            "web",
                            env,
                            login(compose, "web1"),
                            args=compose.command("web1"),
                            ports=[{"name": "http", "containerPort": 3000}],
                            startupProbe={
                                "httpGet": {"path": health, **http},
                                "periodSeconds": 1,
                                "failureThreshold": 60,
                            },
                            livenessProbe={
                                "httpGet": {"path": health, **http},
                                "periodSeconds": 10,
                                "timeoutSeconds": 2,
                                "failureThreshold": 3,
                            },
                            readinessProbe={
                                "httpGet": {"path": "/ready?scope=replica", **http},
                                "periodSeconds": 2,
                                "timeoutSeconds": 3,
                                "failureThreshold": 1,
                            },
                            lifecycle={"preStop": {"exec": {"command": ["sleep", str(PRE_STOP)]}}},
                            resources={
                                "requests": {"cpu": "250m", "memory": "64Mi"},
                                "limits": {"memory": "256Mi"},
                            },
                        )
                    ],
                    login(compose, "web1"),
                    terminationGracePeriodSeconds=compose.grace("web1") + PRE_STOP,
                ),
            },
        },
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "bookmarks-web", "labels": labels("web")},
        "spec": {
            "selector": labels("web"),
            "ports": [{"name": "http", "port": 80, "targetPort": "http"}],
        },
    }
    budget = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "bookmarks-web", "labels": labels("web")},
        "spec": {"minAvailable": WEB_REPLICAS - 1, "selector": {"matchLabels": labels("web")}},
    }
    return [deployment, service, budget]


def worker(compose: Compose) -> list[dict]:
    return [
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "bookmarks-worker", "labels": labels("worker")},
            "spec": {
                "replicas": WORKER_REPLICAS,
                "selector": {"matchLabels": labels("worker")},
                "template": {
                    "metadata": {"labels": labels("worker")},
                    "spec": pod(
                        [
                            container(
                                "worker",
                                shared_env(compose, "worker"),
                                login(compose, "worker"),
                                args=compose.command("worker"),
                                resources={
                                    "requests": {"cpu": "100m", "memory": "64Mi"},
                                    "limits": {"memory": "256Mi"},
                                },
                            )
                        ],
                        login(compose, "worker"),
                        terminationGracePeriodSeconds=30,
                    ),
                },
            },
        }
    ]


def job(name: str, component: str, args: list[str], env: list[dict], login: str, command=None) -> dict:
    spec = {"args": args}
    if command:
        spec = {"command": command, **spec}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": labels(component)},
        "spec": {
            "backoffLimit": 3,
            "ttlSecondsAfterFinished": 86400,
            "template": {
                "metadata": {"labels": labels(component)},
                "spec": pod(
                    [container(component, env, login, **spec)],
                    login,
                    restartPolicy="Never",
                ),
            },
        },
    }


def migrate(compose: Compose) -> list[dict]:
    return [
        job(
            "bookmarks-migrate",
            "migrate",
            compose.command("migrate"),
            shared_env(compose, "migrate"),
            login(compose, "migrate"),
        )
    ]


def move_slot(compose: Compose) -> list[dict]:
    # The README's example move; edit the arguments, then `kubectl create -f` it.
    args = ["run", "--from", "shard1", "--to", "shard0", "--tenant", "acme-corp", "--confirm"]
    moving = job(
        "bookmarks-move-slot",
        "move-slot",
        args,
        shared_env(compose, "move_slot"),
        login(compose, "move_slot"),
        compose.entrypoint("move_slot"),
    )
    del moving["metadata"]["name"]
    moving["metadata"]["generateName"] = "bookmarks-move-slot-"
    # A move that failed is resumed or aborted by its operator, not run again blindly.
    moving["spec"]["backoffLimit"] = 0
    return [moving]


URL_LINE = re.compile(r'^(\s*)(\w+_url)\s*=\s*".*"\s*$')


def config_toml(source: str) -> str:
    """autumn.toml with its database URLs left to the Secret."""
    lines = []
    for line in source.splitlines():
        match = URL_LINE.match(line)
        if match:
            indent, key = match.groups()
            line = f"{indent}# {key}: from the {SECRET} Secret (database.env)"
        lines.append(line)
    return "\n".join(lines) + "\n"


def database_env(compose: Compose) -> str:
    """The Secret's variables: compose's URLs, pointed at placeholder servers."""
    out = [
        "# The database servers of every process: copy to database.env (which git ignores) and",
        "# point each at your servers. One line per URL the topology in base/autumn.toml has;",
        "# no login or password: each process's are in its bookmarks-login-… Secret",
        "# (login-*.env; docs/kubernetes.md). Rendered by scripts/render-kubernetes.py from",
        "# docker-compose.yml.",
    ]
    for var, value in compose.env("web1").items():
        if not is_url(var):
            continue
        url = re.sub(r"//([^@/]+@)?([^:/]+)", lambda m: f"//{m.group(2)}.db.example.internal", value)
        out.append(f"{var}={url}")
    return "\n".join(out) + "\n"


def login_env(compose: Compose, service: str) -> str:
    """A login Secret's variables (kubernetes.io/basic-auth): compose's login for a service."""
    user = compose.env(service)["AUTUMN_DATABASE__USER"]
    return (
        f"# The password of `{user}`, the login of {service} in docker-compose.yml: copy to\n"
        f"# login-{login(compose, service)}.env (which git ignores) and put it in\n"
        "# (docs/kubernetes.md). Rendered by scripts/render-kubernetes.py.\n"
        f"username={user}\npassword=CHANGE-ME\n"
    )


class Literal(str):
    pass


def literal(dumper: yaml.SafeDumper, text: Literal):
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style="|")


yaml.SafeDumper.add_representer(Literal, literal)


def documents(resources: list[dict]) -> str:
    return HEADER + "---\n".join(
        yaml.safe_dump(r, sort_keys=False, width=100) for r in resources
    )


def rendered() -> dict[Path, str]:
    compose = Compose(ROOT / "docker-compose.yml")
    toml_text = (ROOT / "autumn.toml").read_text()
    tomllib.loads(toml_text)  # a broken autumn.toml must not be rendered
    config = config_toml(toml_text)
    tomllib.loads(config)
    return {
        BASE / "autumn.toml": "# Rendered by scripts/render-kubernetes.py from autumn.toml (URLs left to the\n"
        "# Secret). Do not edit: change autumn.toml and render again.\n" + config,
        OUT / "overlays" / "external-postgres" / "database.env.example": database_env(compose),
        **{
            OUT / "overlays" / "external-postgres" / f"login-{login(compose, service)}.env.example": login_env(
                compose, service
            )
            for service in ("web1", "migrate", "move_slot")
        },
        BASE / "web.yaml": documents(web(compose)),
        BASE / "worker.yaml": documents(worker(compose)),
        BASE / "migrate.yaml": documents(migrate(compose)),
        OUT / "jobs" / "move-slot.yaml": documents(move_slot(compose)),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if the committed files differ")
    args = parser.parse_args()
    stale = []
    for path, text in rendered().items():
        if args.check:
            if not path.exists() or path.read_text() != text:
                stale.append(path.relative_to(ROOT))
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        print(f"render-kubernetes: wrote {path.relative_to(ROOT)}")
    if stale:
        names = ", ".join(str(p) for p in stale)
        print(
            f"render-kubernetes: {names} differ from what docker-compose.yml and autumn.toml "
            "render; run scripts/render-kubernetes.py and commit the result",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
