"""The GETs of ``gpuops headroom check``, sent by a process forked before the command loads.

Why: the command loads click, the CLI and its modules (~0.1 s of CPU) before it asks the API
server anything, and at 500 nodes the server's LISTs take about 0.3 s (issue 17, "The
start"). Called from the executable's entry (:mod:`gpuops.cli.start`) before the CLI loads,
:func:`start` forks a process that reads the kubeconfig as the command will
(:func:`.creds.plain_kubeconfig`) and sends, over gpuops's own transport, what
:func:`gpuops.usecases.headroom.check` will ask: the namespace and its ResourceQuotas, beside
the node LIST and the bound-pod LIST page after page (:mod:`.paths`). Each answer goes back
through a pipe (:mod:`.ahead`) while the command is still loading; the command's transport
uses one only for the identical request. A process, not a thread: in a thread the fetching
shares one interpreter with the command's imports, and the command was slower for it
(bench/results/2026-12-01-n506-lists-ahead-experiment.txt). The modules the fetching needs
(the transport, ``ssl``, ``http.client``, PyYAML) are loaded before the fork, so that the
process starts with them: the command needs them too, and loading them twice would cost
CPU the API server needs.

The fetching process writes nothing but the pipe (its standard streams are ``/dev/null``),
leaves by :func:`os._exit` (never the command's exit handlers or buffers), and the command
kills and reaps it when it ends (:meth:`.ahead._Ahead.close`). It asks nothing for a
kubeconfig it does not read itself (exec plugins, auth providers, several files, a proxy:
the official client's loaders) nor with a malformed page size: the command asks for all.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
from collections.abc import Mapping
from functools import partial
from typing import NoReturn

import yaml  # noqa: F401 - for the kubeconfig, loaded before the fork (the command's too)

from gpuops import fsio
from gpuops.adapters.kube import ahead, paths, wire
from gpuops.adapters.kube.creds import Credentials, plain_kubeconfig
from gpuops.adapters.kube.transport import Transport

_JSON = "application/json"
_LISTS = (paths.NODES, paths.POD_LIST)
_PIPE_SIZE = 1 << 20
#: The bytes of LIST pages fetched ahead, at most (and the pages in flight when it is
#: reached): the start it hides takes a fraction of a second; the pages after it are the
#: command's to fetch, decoding each as it arrives, so that a large LIST does not wait in
#: memory. At 506 nodes the LISTs are 11 MiB.
_BUDGET = 16 << 20


def start(kubeconfig: str | None, context: str | None, namespace: str) -> None:
    """Fork the process that sends the GETs of ``headroom check`` for the cluster of
    ``kubeconfig`` (else ``$KUBECONFIG``, ``~/.kube/config``) and ``context`` and the
    workload's ``namespace``. Once per process, before it starts a thread."""
    if ahead.expecting():
        return
    read_fd, write_fd = os.pipe()
    with contextlib.suppress(OSError):  # fewer, larger writes and reads (the default: 64 KiB)
        fcntl.fcntl(write_fd, fcntl.F_SETPIPE_SZ, _PIPE_SIZE)
    try:
        pid = os.fork()
    except OSError:  # no process to spare: the command sends its requests itself
        os.close(read_fd)
        os.close(write_fd)
        return
    if pid == 0:
        os.close(read_fd)
        _child(write_fd, kubeconfig, context, namespace)
    os.close(write_fd)
    ahead.expect(pid, read_fd)


def _child(fd: int, kubeconfig: str | None, context: str | None, namespace: str) -> NoReturn:
    """The fetching process: quiet, and gone by :func:`os._exit` whatever happens."""
    code = 1
    try:
        fsio.silence_stdio()
        creds = plain_kubeconfig(kubeconfig, context)
        out = ahead.Frames(fd)
        if creds is not None and not paths.PAGE_SIZE_PROBLEM:
            _fetch(Transport(creds), creds, out, namespace)
        out.close()
        code = 0
    finally:
        os._exit(code)


def _fetch(http: Transport, creds: Credentials, out: ahead.Frames, namespace: str) -> None:
    """The namespace and its ResourceQuotas one after the other, beside the node LIST and the
    bound-pod LIST, each a page after the one before it."""
    reads = [paths.namespace_path(namespace), paths.quotas_path(namespace)]
    lists = [(p, q, paths.target(p, paths.page_query(q, "", paths.PAGE_SIZE))) for p, q in _LISTS]
    out.will([(t, _JSON) for t in reads] + [(first, paths.LIST_ACCEPT) for *_, first in lists])
    budget = _Budget(_BUDGET)
    work = [partial(_reads, http, creds, out, reads)]
    work += [partial(_Walk(http, creds, out, budget, p, q).run, first) for p, q, first in lists]
    threads = [threading.Thread(target=w, name="gpuops-prefetch") for w in work]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def _reads(http: Transport, creds: Credentials, out: ahead.Frames, targets: list[str]) -> None:
    for i, target in enumerate(targets):
        try:
            status, body = http.request("GET", target, what="a read ahead")
        except Exception:  # the command sends them itself, and reports what happens
            for rest in targets[i:]:
                out.gave_up(rest, _JSON)
            return
        key = ahead.request_key(creds, target, http.headers(None, "", _JSON))
        out.answer(target, _JSON, key, ahead.Answer(status, _JSON, body))


class _Walk:
    """The pages of one LIST as :meth:`.pager.Pager._read_list` asks for them: page n+1 as
    soon as page n's head has brought its continue token, up to :data:`.paths.PAGES_AHEAD`
    at once. Page n+1 is announced before page n's answer: the command, having read page n,
    knows whether page n+1 is coming. No page is asked for once the answers fetched (of every
    LIST) hold :data:`_BUDGET` bytes: the command asks for the rest itself."""

    def __init__(
        self,
        http: Transport,
        creds: Credentials,
        out: ahead.Frames,
        budget: _Budget,
        path: str,
        query: Mapping[str, str],
    ) -> None:
        self._http, self._creds, self._out, self._budget = http, creds, out, budget
        self._path, self._query = path, query
        self._slots = threading.BoundedSemaphore(paths.PAGES_AHEAD)
        self._threads: list[threading.Thread] = []

    def run(self, first: str) -> None:
        self._follow(first)
        for thread in self._threads:  # a page's thread is added by its predecessor's
            thread.join()

    def _follow(self, target: str) -> None:
        self._threads.append(threading.Thread(target=self._fetch, args=(target,)))
        self._threads[-1].start()

    def _fetch(self, target: str) -> None:
        with self._slots:
            self._page(target)

    def _page(self, target: str) -> None:
        accept, chunks = paths.LIST_ACCEPT, []
        token: str | None = None
        try:
            with self._http.stream(target, what="a LIST ahead", accept=accept) as answer:
                status, media, read = answer
                protobuf = 200 <= status < 300 and media == paths.PROTOBUF_MEDIA
                # a JSON list (a server without protobuf) is paged by the command itself
                while chunk := read(paths.READ_SIZE if token is not None else paths.HEAD_READ):
                    chunks.append(chunk)
                    if protobuf and token is None:
                        token = wire.list_continue(b"".join(chunks))
                        if token and self._budget.left():
                            following = paths.target(
                                self._path, paths.page_query(self._query, token, paths.PAGE_SIZE)
                            )
                            self._out.will([(following, accept)])
                            self._follow(following)
        except Exception:  # the command sends it itself, and reports what happens
            self._out.gave_up(target, accept)
            return
        body = b"".join(chunks)
        self._budget.spend(len(body))
        key = ahead.request_key(self._creds, target, self._http.headers(None, "", accept))
        self._out.answer(target, accept, key, ahead.Answer(status, media, body))


class _Budget:
    """Bytes of answers the fetching process may still fetch (shared by its LISTs)."""

    def __init__(self, size: int) -> None:
        self._left, self._lock = size, threading.Lock()

    def spend(self, size: int) -> None:
        with self._lock:
            self._left -= size

    def left(self) -> bool:
        with self._lock:
            return self._left > 0
