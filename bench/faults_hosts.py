"""`bench/faults.py --hosts`: past one machine. Needs root (network
namespaces), Debian's iproute2, haproxy and socat.

Two "hosts", each a network namespace joined to this machine by a veth pair, each running
`manage.py serve --workers 2` with its own task cluster, behind HAProxy configured by
deploy/haproxy.cfg as shipped (its addresses from the environment), sharing PostgreSQL and
Redis:

    clients (readers, REST + /mcp, the producer) ── 127.0.0.1:<lb> HAProxy ─┬─ 10.231.1.2:8000 connect-h1
                                                                            └─ 10.231.2.2:8000 connect-h2
    10.231.1.1 (this machine's end of h1's veth): the rig's redis-server, a socat forwarder to
    PostgreSQL on 127.0.0.1:5432 (PostgreSQL listens on loopback only; its global configuration is
    not touched), and the webhook receivers. h2 reaches 10.231.1.1 through its own veth: the
    address is local to this machine, so no forwarding is enabled.

Only loopback and these namespace addresses are used. Each phase opens a fresh workspace with
resuming streams through the balancer, a receiver that holds each request 0.3 s (so a batch is
in flight), the background client and a producer; one host is killed (SIGKILL to every process
in its namespace: a host that dies, not one that shuts down) mid-stream and mid-delivery; then
the invariants are checked and the host is started again. Phase 1 kills h1, phase 2 kills h2.
Everything made is removed at the end (namespaces, veths, processes)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import httpx
from django.conf import settings

from bench.faults_report import table
from tests.faults import harness
from tests.faults.harness import Outcome, Producer, RedisServer, Scenario, rig_env, wait_until
from tests.servers import ROOT, free_port

HOSTS = {"connect-h1": 1, "connect-h2": 2}
SERVE_PORT = 8000
PG_FORWARD_PORT = 15432


def sh(*command: str) -> None:
    subprocess.run(command, check=True, capture_output=True, text=True)


def root_address(n: int) -> str:
    return f"10.231.{n}.1"


def host_address(n: int) -> str:
    return f"10.231.{n}.2"


class Topology:
    def __init__(self, logs: Path) -> None:
        for tool in ("ip", "haproxy", "socat"):
            if shutil.which(tool) is None:
                raise SystemExit(f"--hosts needs {tool} (apt-get install iproute2 haproxy socat)")
        if os.geteuid() != 0:
            raise SystemExit("--hosts needs root (network namespaces)")
        self.logs = logs
        self.processes: list[subprocess.Popen] = []
        self.hosts: dict[str, subprocess.Popen | None] = {}
        self.redis: RedisServer | None = None

    # -- setup and teardown --

    def __enter__(self) -> "Topology":
        try:
            for name, n in HOSTS.items():
                outside, inside = f"cfh{n}r", f"cfh{n}n"
                subprocess.run(["ip", "netns", "del", name], capture_output=True)  # a previous run's
                subprocess.run(["ip", "link", "del", outside], capture_output=True)
                sh("ip", "netns", "add", name)
                sh("ip", "link", "add", outside, "type", "veth", "peer", "name", inside)
                sh("ip", "link", "set", inside, "netns", name)
                sh("ip", "addr", "add", f"{root_address(n)}/24", "dev", outside)
                sh("ip", "link", "set", outside, "up")
                sh("ip", "netns", "exec", name, "ip", "addr", "add", f"{host_address(n)}/24", "dev", inside)
                sh("ip", "netns", "exec", name, "ip", "link", "set", inside, "up")
                sh("ip", "netns", "exec", name, "ip", "link", "set", "lo", "up")
                sh("ip", "netns", "exec", name, "ip", "route", "add", "default", "via", root_address(n))
            shared = root_address(1)
            self.redis = RedisServer(self.logs, bind=shared)
            db = settings.DATABASES["default"]
            self.spawn("pg-forward", ["socat", f"TCP-LISTEN:{PG_FORWARD_PORT},bind={shared},reuseaddr,fork",
                                      f"TCP:{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}"])
            auth = db["USER"] + (f":{db['PASSWORD']}" if db.get("PASSWORD") else "")
            self.host_database_url = f"postgres://{auth}@{shared}:{PG_FORWARD_PORT}/{db['NAME']}"
            self.lb_port = free_port()
            self.url = f"http://127.0.0.1:{self.lb_port}"
            self.app_name = f"connect-hosts-{os.getpid()}"
            self.env = {
                **os.environ, **rig_env(self.redis.url, self.app_name),
                "CONNECT_BASE_URL": self.url, "CONNECT_DEVELOPMENT": "1",
                "DJANGO_SETTINGS_MODULE": "tests.settings", "PYTHONUNBUFFERED": "1",
                "ALLOWED_HOSTS": ",".join(["127.0.0.1", "localhost", *(host_address(n) for n in HOSTS.values())]),
            }
            self.env.pop("DEBUG", None)
            for name in HOSTS:
                self.start_host(name)
            self.spawn("haproxy", ["haproxy", "-db", "-f", str(ROOT / "deploy" / "haproxy.cfg")], env={
                **os.environ, "CONNECT_LB_BIND": f"127.0.0.1:{self.lb_port}", "CONNECT_PUBLIC_HOST": "127.0.0.1",
                "CONNECT_HOST1": f"{host_address(1)}:{SERVE_PORT}", "CONNECT_HOST2": f"{host_address(2)}:{SERVE_PORT}"})
            wait_until(lambda: _ok(f"{self.url}/readyz"), what="the balancer", timeout=60)
            # The producer runs here, on the loopback database and the shared Redis.
            self.server = SimpleNamespace(env={**self.env, "DATABASE_URL": _loopback_database_url()})
            self.log_dir = self.logs
            return self
        except BaseException:
            self.__exit__(None, None, None)
            raise

    def __exit__(self, *exc) -> None:
        """Removes everything, each step whatever the others did."""
        steps = [lambda name=name: self.kill_host(name) for name in HOSTS]
        steps += [lambda process=process: _kill_group(process) for process in self.processes]
        steps += [lambda: self.redis and self.redis.stop()]
        for name, n in HOSTS.items():
            steps += [lambda name=name: subprocess.run(["ip", "netns", "del", name], capture_output=True),
                      lambda n=n: subprocess.run(["ip", "link", "del", f"cfh{n}r"], capture_output=True)]
        for step in steps:
            try:
                step()
            except Exception as error:  # noqa: BLE001 - clean up the rest regardless
                print(f"cleanup: {error!r}", file=sys.stderr)

    def spawn(self, label: str, command: list[str], env: dict | None = None) -> subprocess.Popen:
        out = (self.logs / f"{label}.log").open("a")
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, process_group=0)
        self.processes.append(process)
        return process

    # -- hosts --

    def start_host(self, name: str) -> None:
        n = HOSTS[name]
        env = {**self.env, "DATABASE_URL": self.host_database_url, "PGAPPNAME": f"{self.app_name}-h{n}"}
        log = (self.logs / f"{name}.log").open("a")
        self.hosts[name] = subprocess.Popen(
            ["ip", "netns", "exec", name, sys.executable, "manage.py", "serve", "--host", host_address(n),
             "--port", str(SERVE_PORT), "--workers", "2"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        wait_until(lambda: _ok(f"http://{host_address(n)}:{SERVE_PORT}/readyz"), what=f"{name} ready", timeout=180)

    def kill_host(self, name: str) -> list[int]:
        """SIGKILL every process in the host's namespace, as a host that loses power."""
        listed = subprocess.run(["ip", "netns", "pids", name], capture_output=True, text=True).stdout.split()
        pids = [int(p) for p in listed]
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        process = self.hosts.get(name)
        if process is not None:
            process.kill()  # `ip netns exec` has exec'd serve: the same process
            process.wait(timeout=30)
        self.hosts[name] = None
        return pids

    def streams_on(self, name: str) -> int:
        try:
            stats = httpx.get(f"http://{host_address(HOSTS[name])}:{SERVE_PORT}/api/v1/events/_stats", timeout=5)
            return stats.json()["streams"]
        except (httpx.HTTPError, ValueError, KeyError):
            return 0

    def produce(self, slug: str, *, sessions: int, segments: int, interval: float) -> Producer:
        return Producer(self, slug, sessions=sessions, segments=segments, interval=interval)


def _kill_group(process: subprocess.Popen) -> None:
    # Its own process group: socat's per-connection children go with it.
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait(timeout=10)


def _ok(url: str) -> bool:
    try:
        return httpx.get(url, timeout=5).status_code == 200
    except httpx.HTTPError:
        return False


def _loopback_database_url() -> str:
    from tests.servers import database_url_for_test_db

    return database_url_for_test_db()


def phase(topology: Topology, victim: str, args) -> Outcome:
    scenario = Scenario(topology, f"hosts-{victim}", streams=args.streams,
                        receivers={"held": harness.hold(0.3)}, receiver_host=root_address(1))
    try:
        # Leastconn spreads the streams; the victim must hold some for the phase to mean anything.
        wait_until(lambda: topology.streams_on(victim) > 0, what=f"streams on {victim}", timeout=30)
        on_victim = topology.streams_on(victim)
        producer = scenario.produce(sessions=args.sessions, segments=args.segments, interval=args.interval)
        endpoint = scenario.endpoints[0]
        wait_until(lambda: len(endpoint.receiver.requests) >= 2, what="deliveries in flight")
        with scenario.fault():
            killed = topology.kill_host(victim)
            # The window lasts until every stream is open again (through the other host).
            time.sleep(1)
            wait_until(lambda: all(r.connected for r in scenario.readers), what="every stream reopened")
        producer.wait(timeout=1800)
        outcome = scenario.check(cut_attempts_allowed=True, settle=300)
        outcome.faults = 1
        outcome.notes.append(f"{victim} killed ({len(killed)} processes) with {on_victim} of "
                             f"{len(scenario.readers)} streams on it")
        return outcome
    finally:
        scenario.close()
        if topology.hosts.get(victim) is None:
            topology.start_host(victim)
            wait_until(lambda: _ok(f"{topology.url}/readyz"), what="the balancer")


def main(logs: Path, args) -> int:
    outcomes = []
    with Topology(logs) as topology:
        print(f"balancer {topology.url}; hosts {', '.join(HOSTS)}", flush=True)
        for victim in HOSTS:
            outcome = phase(topology, victim, args)
            outcomes.append(outcome)
            print(harness.describe(outcome).replace("\n", " "), flush=True)
    print(table(outcomes))
    return 1 if any(o.violations for o in outcomes) else 0
