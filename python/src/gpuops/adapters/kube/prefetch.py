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

import os
import threading
from collections.abc import Callable, Mapping
from functools import partial
from typing import NoReturn

import yaml  # noqa: F401 - for the kubeconfig, loaded before the fork (the command's too)

from gpuops.adapters.kube import ahead, paths, wire
from gpuops.adapters.kube.creds import Credentials, plain_kubeconfig
from gpuops.adapters.kube.transport import Transport

_JSON = "application/json"
_LISTS = (paths.NODES, paths.POD_LIST)


def start(kubeconfig: str | None, context: str | None, namespace: str) -> None:
    """Fork the process that sends the GETs of ``headroom check`` for the cluster of
    ``kubeconfig`` (else ``$KUBECONFIG``, ``~/.kube/config``) and ``context`` and the
    workload's ``namespace``. Once per process, before it starts a thread."""
    if ahead.expecting():
        return
    read_fd, write_fd = os.pipe()
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
        null = os.open(os.devnull, os.O_RDWR)
        for std in (0, 1, 2):
            os.dup2(null, std)
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
    lists = [(p, q, paths.target(p, paths.page_query(q, ""))) for p, q in _LISTS]
    out.will([(t, _JSON) for t in reads] + [(first, paths.LIST_ACCEPT) for *_, first in lists])
    work = [partial(_reads, http, creds, out, reads)]
    work += [partial(_pages, http, creds, out, *one) for one in lists]
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


def _pages(
    http: Transport,
    creds: Credentials,
    out: ahead.Frames,
    path: str,
    query: Mapping[str, str],
    first: str,
) -> None:
    """The pages of one LIST as :meth:`.pager.Pager._read_list` asks for them: page n+1 as
    soon as page n's head has brought its continue token, up to :data:`.paths.PAGES_AHEAD`
    at once. Page n+1 is announced before page n's answer: the command, having read page n,
    knows whether page n+1 is coming."""
    slots = threading.BoundedSemaphore(paths.PAGES_AHEAD)
    threads: list[threading.Thread] = []

    def follow(target: str) -> None:
        threads.append(threading.Thread(target=fetch, args=(target,), name="gpuops-prefetch"))
        threads[-1].start()

    def fetch(target: str) -> None:
        with slots:
            _page(http, creds, out, target, partial(_next, path, query), follow)

    follow(first)
    for thread in threads:  # each page's thread is added by its predecessor's, before it ends
        thread.join()


def _next(path: str, query: Mapping[str, str], token: str) -> str:
    return paths.target(path, paths.page_query(query, token))


def _page(
    http: Transport,
    creds: Credentials,
    out: ahead.Frames,
    target: str,
    next_page: Callable[[str], str],
    follow: Callable[[str], None],
) -> None:
    accept = paths.LIST_ACCEPT
    chunks: list[bytes] = []
    token: str | None = None
    try:
        with http.stream(target, what="a LIST ahead", accept=accept) as (status, media, read):
            protobuf = 200 <= status < 300 and media == paths.PROTOBUF_MEDIA
            # a JSON list (a server without protobuf) is paged by the command itself
            while chunk := read(paths.READ_SIZE if token is not None else paths.HEAD_READ):
                chunks.append(chunk)
                if protobuf and token is None:
                    token = wire.list_continue(b"".join(chunks))
                    if token:
                        following = next_page(token)
                        out.will([(following, accept)])
                        follow(following)
    except Exception:  # the command sends it itself, and reports what happens
        out.gave_up(target, accept)
        return
    key = ahead.request_key(creds, target, http.headers(None, "", accept))
    out.answer(target, accept, key, ahead.Answer(status, media, b"".join(chunks)))
