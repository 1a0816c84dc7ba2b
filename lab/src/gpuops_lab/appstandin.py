"""The lab's app stand-in: one process playing the containers of the lab's app pods.

A lab stand-in, not a real workload: kwok runs no container, so nothing would answer at a
pod's IP. This process watches the lab's API server for pods labelled ``gpuops.io/lab-app``
(list, then watch; again from a fresh list whenever the watch ends) and, for each that runs
(:func:`gpuops_lab.labapp.from_pod`):

* serves HTTP on the pod's IP, port 8080 (the lab's pod network makes kwok's pod IPs local
  addresses: :mod:`gpuops_lab.kube.podnet`), so the API server's pod proxy
  ``/api/v1/namespaces/{ns}/pods/{pod}:8080/proxy/healthz`` reaches it: ``/healthz`` answers
  JSON ``{"status": "ok"|"degraded", "version": "<image tag>"}``, ``/metrics`` that pod's series;
* exports every pod's series on one loopback port (``/metrics``), which the lab's Prometheus
  scrapes (``honor_labels``: the series carry ``namespace``, ``pod``, ``app``, ``track``), and
  ``/pods`` (JSON: the pods it plays now).

What each pod answers and counts is :mod:`gpuops_lab.labapp`. In a real cluster each pod's
own container answers on its IP and Prometheus discovers the pods through the API server
(``kubernetes_sd_configs``) and scrapes each of them.

Run by the lab component :mod:`gpuops_lab.apps` as
``python -m gpuops_lab.appstandin <config.json>`` (API server, CA, token file, pod CIDR,
exporter port); the standard library only, so that it starts in well under a second.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import ipaddress
import json
import logging
import signal
import ssl
import sys
import threading
import time
import urllib.parse
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

from gpuops_lab import kwokstages, labapp

log = logging.getLogger("gpuops_lab.appstandin")

WATCH_TIMEOUT_S = 240
RETRY_S = 0.5


class Handler(BaseHTTPRequestHandler):
    """Requests to one pod's address (``pod`` set) or to the exporter (``pod`` None)."""

    server: PodServer | ExporterServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s %s", self.address_string(), format % args)

    def _send(self, code: int, body: bytes, ctype: str) -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        path = urllib.parse.urlsplit(self.path).path
        srv = self.server
        if isinstance(srv, PodServer):
            app = srv.app
            if path == "/healthz":
                if app.behaviour == kwokstages.SLOW:
                    time.sleep(labapp.latency(0, app.latency_s))
                body = json.dumps(app.healthz()).encode()
                self._send(200, body, "application/json")
            elif path == "/metrics":
                text = srv.standin.exposition(lambda a: a.uid == app.uid)
                self._send(200, text.encode(), "text/plain; version=0.0.4")
            else:
                self._send(404, b"404 page not found\n", "text/plain")
            return
        if path == "/metrics":
            self._send(200, srv.standin.exposition().encode(), "text/plain; version=0.0.4")
        elif path == "/pods":
            body = json.dumps(srv.standin.playing(), sort_keys=True).encode()
            self._send(200, body, "application/json")
        elif path == "/healthz":
            self._send(200, b"ok\n", "text/plain")
        else:
            self._send(404, b"404 page not found\n", "text/plain")


class PodServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, standin: StandIn, app: labapp.PodApp) -> None:
        self.standin = standin
        self.app = app
        super().__init__((app.ip, labapp.PORT), Handler)


class ExporterServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, standin: StandIn, port: int) -> None:
        self.standin = standin
        super().__init__(("127.0.0.1", port), Handler)


class StandIn:
    """The lab-app pods the API server reports, those played now, their servers and traffic."""

    def __init__(self, pod_cidr: str) -> None:
        self.cidr = ipaddress.IPv4Network(pod_cidr)
        self.lock = threading.Lock()  # the fields below
        self.sync = threading.Lock()  # one reconcile at a time
        self.pods: dict[str, Mapping[str, Any]] = {}  # by pod uid, as the API reports them
        self.first_seen: dict[str, float] = {}
        self.apps: dict[str, labapp.PodApp] = {}  # played now, by pod uid
        self.traffic: dict[str, labapp.Traffic] = {}
        self.servers: dict[str, PodServer] = {}
        self.unbound = 0  # running pods whose address could not be bound yet

    # -- pods ------------------------------------------------------------------------
    def replace(self, pods: Mapping[str, Mapping[str, Any]]) -> None:
        """The full list (by uid), as a fresh list of the API server says."""
        with self.lock:
            self.pods = dict(pods)
        self.reconcile()

    def update(self, uid: str, pod: Mapping[str, Any] | None) -> None:
        """One watch event: the pod as it is now, None when it was deleted."""
        with self.lock:
            if pod is None:
                self.pods.pop(uid, None)
            else:
                self.pods[uid] = pod
        self.reconcile()

    def reconcile(self) -> None:
        """Play exactly the pods that run now: stop the servers of the others, start theirs."""
        with self.sync:
            self._reconcile()

    def _reconcile(self) -> None:
        now = time.time()
        wanted: dict[str, labapp.PodApp] = {}
        with self.lock:
            pods = dict(self.pods)
            for uid in set(self.first_seen) - set(pods):
                del self.first_seen[uid]
        for uid, pod in pods.items():
            app = labapp.from_pod(pod, self.first_seen.setdefault(uid, now))
            if app is None:
                continue
            if ipaddress.IPv4Address(app.ip) not in self.cidr:
                log.warning("pod %s/%s: IP %s outside the lab's pod network %s: not played",
                            app.namespace, app.pod, app.ip, self.cidr)  # fmt: skip
                continue
            wanted[uid] = app
        with self.lock:
            gone = [u for u, a in self.apps.items() if wanted.get(u) != a]
            stopped = [self.servers.pop(u) for u in gone if u in self.servers]
            for uid in gone:
                self.apps.pop(uid, None)
                self.traffic.pop(uid, None)
        for server in stopped:  # outside the lock: a request in flight may need it
            server.shutdown()
            server.server_close()
        unbound = 0
        for uid, app in wanted.items():
            if uid in self.servers:
                continue
            try:
                server = PodServer(self, app)
            except OSError as exc:  # its IP still held by a pod just gone: next round
                log.warning("pod %s/%s: cannot listen on %s:%d yet: %s",
                            app.namespace, app.pod, app.ip, labapp.PORT, exc)  # fmt: skip
                unbound += 1
                continue
            threading.Thread(target=server.serve_forever, daemon=True).start()
            with self.lock:
                self.apps[uid] = app
                self.traffic[uid] = labapp.Traffic(app)
                self.servers[uid] = server
            log.info("playing pod %s/%s on %s:%d (%s, tag %s)", app.namespace, app.pod,
                     app.ip, labapp.PORT, app.behaviour, app.tag)  # fmt: skip
        self.unbound = unbound

    def playing(self) -> list[dict[str, Any]]:
        with self.lock:
            return [a.to_dict() for a in sorted(self.apps.values(), key=_key)]

    def exposition(self, which: Callable[[labapp.PodApp], bool] = lambda _a: True) -> str:
        now = time.time()
        with self.lock:
            chosen = [t for t in self.traffic.values() if which(t.app)]
            for t in chosen:
                t.advance(now)
            chosen.sort(key=lambda t: _key(t.app))
            return labapp.exposition(chosen)

    def close(self) -> None:
        with self.lock:
            servers = list(self.servers.values())
            self.servers.clear()
        for server in servers:
            server.shutdown()
            server.server_close()


def _key(app: labapp.PodApp) -> tuple[str, str]:
    return (app.namespace, app.pod)


# -- the API server --------------------------------------------------------------------
class Api:
    """GETs to the lab's API server with its CA and a bearer token (standard library)."""

    def __init__(self, server: str, ca_pem: str, token: str) -> None:
        url = urllib.parse.urlsplit(server)
        self.host, self.port = url.hostname or "127.0.0.1", url.port or 443
        self.ctx = ssl.create_default_context(cadata=ca_pem)
        self.token = token

    def get(self, path: str, timeout: float) -> http.client.HTTPResponse:
        conn = http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=timeout)
        conn.request("GET", path, headers={"Authorization": f"Bearer {self.token}"})
        resp = conn.getresponse()
        if resp.status != 200:
            body = resp.read(300).decode(errors="replace")
            conn.close()
            where = path.split("?", maxsplit=1)[0]
            raise OSError(f"GET {where}: HTTP {resp.status}: {body}")
        return resp


def from_kubeconfig(path: Path) -> Api:
    doc = yaml.safe_load(path.read_text())
    cluster = doc["clusters"][0]["cluster"]
    ca = base64.b64decode(cluster["certificate-authority-data"]).decode()
    return Api(str(cluster["server"]), ca, str(doc["users"][0]["user"]["token"]))


def watch(api: Api, standin: StandIn, stop: threading.Event) -> None:
    """List the lab-app pods, play them, follow the watch; again from a fresh list when the
    watch ends or fails."""
    selector = urllib.parse.quote(labapp.LABEL)
    while not stop.is_set():
        try:
            resp = api.get(f"/api/v1/pods?labelSelector={selector}", timeout=30)
            doc = json.loads(resp.read())
            standin.replace({p["metadata"]["uid"]: p for p in doc.get("items") or []})
            rv = doc["metadata"]["resourceVersion"]
            path = (
                f"/api/v1/pods?labelSelector={selector}&watch=1&allowWatchBookmarks=true"
                f"&resourceVersion={rv}&timeoutSeconds={WATCH_TIMEOUT_S}"
            )
            _follow(api.get(path, timeout=WATCH_TIMEOUT_S + 30), standin, stop)
        except (OSError, ValueError, KeyError, http.client.HTTPException) as exc:
            log.info("watch of lab-app pods ended (%s); listing again", exc)
            stop.wait(RETRY_S)


def _follow(resp: http.client.HTTPResponse, standin: StandIn, stop: threading.Event) -> None:
    while not stop.is_set():
        line = resp.readline()
        if not line:
            return
        event = json.loads(line)
        kind, obj = event.get("type"), event.get("object") or {}
        if kind == "ERROR":  # e.g. 410 Gone: the resource version is too old
            raise ValueError(f"watch error: {obj.get('message')}")
        if kind == "BOOKMARK":
            continue
        standin.update(obj["metadata"]["uid"], None if kind == "DELETED" else obj)


def retry(standin: StandIn, stop: threading.Event) -> None:
    """Bind again, every :data:`RETRY_S`, the addresses that were still in use."""
    while not stop.wait(RETRY_S):
        if standin.unbound:
            standin.reconcile()


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m gpuops_lab.appstandin <config.json>", file=sys.stderr)
        return 2
    config = json.loads(Path(args[0]).read_text())
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", stream=sys.stderr
    )
    standin = StandIn(config["pod_cidr"])
    exporter = ExporterServer(standin, int(config["port"]))
    stop = threading.Event()

    def on_term(_sig: int, _frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    api = from_kubeconfig(Path(config["kubeconfig"]))
    threading.Thread(target=exporter.serve_forever, daemon=True).start()
    threading.Thread(target=watch, args=(api, standin, stop), daemon=True).start()
    threading.Thread(target=retry, args=(standin, stop), daemon=True).start()
    log.info("lab app stand-in: exporter on 127.0.0.1:%s, pod network %s",
             config["port"], config["pod_cidr"])  # fmt: skip
    stop.wait()
    with contextlib.suppress(Exception):
        exporter.shutdown()
        standin.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
