"""The client calls of ``gpuops headroom check``, made by a process forked before the command
has loaded.

Why: the command loads click, the CLI and its modules (~0.1 s of CPU) before it asks the API
server anything, the server's LISTs of 500 nodes then take ~0.3 s, and decoding them costs
the command as much CPU as loading did (issue 17, "The start"). Called from the executable's
entry (:mod:`gpuops.cli.start`) before the CLI loads, :func:`start` forks a process that

1. reads the kubeconfig as the command will (:func:`.creds.plain_kubeconfig`) and sends,
   over gpuops's own transport, the GETs the calls will need: the namespace and its
   ResourceQuotas, beside the node and bound-pod LISTs, their pages asked for ahead as the
   pager asks for them (:class:`_Walk`), up to :data:`_BUDGET` bytes;
2. meanwhile loads the client and makes the use case's calls (``ensure_namespace``,
   ``quota_limits``, ``list_nodes_and_bound_pods``: the same code the command would run),
   its transport taking the answers of step 1 for the identical requests (:mod:`.ahead`);
3. hands each call's result to the command through a pipe, while the command still loads.

The command's client takes a result only for the identical call (:func:`.client.call_key`);
every other call, and every call the process failed or gave up, the command makes itself.
A process, not a thread: in a thread the calls share one interpreter with the command's
imports, and the command was slower for it (bench/results/, 2026-12-01-n506-lists-ahead-*).
The transport, ``ssl``, ``http.client`` and PyYAML are loaded before the fork, so that the
GETs go out at once; the client and its decoders are loaded by the process alone, while the
server prepares the first pages.

The process writes nothing but the pipe (its standard streams are ``/dev/null``), leaves by
:func:`os._exit` (never the command's exit handlers or buffers), and the command kills and
reaps it when it ends (:meth:`.ahead.Channel.close`). It asks nothing for a kubeconfig it
does not read itself (exec plugins, auth providers, several files, a proxy: the official
client's loaders, in the command alone), nor with a malformed page size.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any, NoReturn

import yaml  # noqa: F401 - for the kubeconfig, loaded before the fork (the command's too)

from gpuops.adapters.kube import ahead, paths, wire
from gpuops.adapters.kube.creds import Credentials, plain_kubeconfig
from gpuops.adapters.kube.transport import Transport

#: Calls of :class:`.client.KubeClient`, each its method's name and its arguments: the calls
#: of a group one after the other, the groups side by side.
Calls = Sequence[Sequence[tuple[str, tuple[Any, ...]]]]

_JSON = "application/json"
_LISTS = (paths.NODES, paths.POD_LIST)
_PIPE_SIZE = 1 << 20
#: The bytes of LIST pages fetched ahead of the calls, at most (and the pages in flight when
#: it is reached; the calls' pager asks for the rest, decoding each as it arrives): what is
#: fetched waits in memory until the calls have read it. At 506 nodes the LISTs are 11 MiB.
_BUDGET = 16 << 20


def start(
    kubeconfig: str | None, context: str | None, namespace: str, calls: Callable[[], Calls]
) -> None:
    """Fork the process that makes ``calls()`` (worked out there) on a client of the cluster
    of ``kubeconfig`` (else ``$KUBECONFIG``, ``~/.kube/config``) and ``context``, having
    sent the GETs of a headroom check for ``namespace`` first. Once per process, before it
    starts a thread."""
    if ahead.expecting() or not hasattr(os, "fork"):
        return
    read_fd, write_fd = os.pipe()
    with contextlib.suppress(OSError):  # fewer, larger writes and reads (the default: 64 KiB)
        fcntl.fcntl(write_fd, fcntl.F_SETPIPE_SZ, _PIPE_SIZE)
    try:
        pid = os.fork()
    except OSError:  # no process to spare: the command makes its calls itself
        os.close(read_fd)
        os.close(write_fd)
        return
    if pid == 0:
        os.close(read_fd)
        _child(write_fd, kubeconfig, context, namespace, calls)
    os.close(write_fd)
    ahead.expect(pid, read_fd)


def _child(
    fd: int,
    kubeconfig: str | None,
    context: str | None,
    namespace: str,
    calls: Callable[[], Calls],
) -> NoReturn:
    """The fetching process: quiet, and gone by :func:`os._exit` whatever happens."""
    code = 1
    try:
        null = os.open(os.devnull, os.O_RDWR)
        for std in (0, 1, 2):
            os.dup2(null, std)
        creds = plain_kubeconfig(kubeconfig, context)
        to_command = ahead.Frames(fd)
        if creds is not None and not paths.PAGE_SIZE_PROBLEM:
            http = Transport(creds, ahead=False)
            answers_fd, fetched_fd = os.pipe()  # the GETs sent ahead, to this process
            fetching = threading.Thread(
                target=_fetch, args=(http, creds, ahead.Frames(fetched_fd), namespace)
            )
            fetching.start()
            ahead.expect(0, answers_fd)
            _make(creds, calls(), to_command)
            fetching.join()
        to_command.close()
        code = 0
    finally:
        os._exit(code)


def _make(creds: Credentials, calls: Calls, out: ahead.Frames) -> None:
    """Announce every call's key, then make the groups side by side; a call that fails is
    given up with the rest of its group (the command makes them, and reports what happens)."""
    from gpuops.adapters.kube.client import KubeClient, call_key  # noqa: PLC0415 - here only

    who = ahead.identity(creds)
    keyed = [[(call_key(who, name, *args), name, args) for name, args in g] for g in calls]
    out.will([key for group in keyed for key, _, _ in group])
    kube = KubeClient(creds)

    def one_by_one(group: list[tuple[str, str, tuple[Any, ...]]]) -> None:
        for i, (key, name, args) in enumerate(group):
            try:
                result = getattr(kube, name)(*args)
            except Exception:
                for rest, _, _ in group[i:]:
                    out.gave_up(rest)
                return
            out.result(key, result)

    threads = [threading.Thread(target=one_by_one, args=(group,)) for group in keyed]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    kube.close()


def _fetch(http: Transport, creds: Credentials, out: ahead.Frames, namespace: str) -> None:
    """The namespace and its ResourceQuotas one after the other, beside the node LIST and the
    bound-pod LIST."""
    reads = [paths.namespace_path(namespace), paths.quotas_path(namespace)]
    lists = [(p, q, paths.target(p, paths.page_query(q, "", paths.PAGE_SIZE))) for p, q in _LISTS]
    json_key = partial(_key, http, creds, _JSON)
    list_key = partial(_key, http, creds, paths.LIST_ACCEPT)
    out.will([json_key(t) for t in reads] + [list_key(first) for *_, first in lists])
    budget = _Budget(_BUDGET)
    work = [partial(_reads, http, out, reads, json_key)]
    work += [partial(_Walk(http, out, budget, list_key, p, q).run, first) for p, q, first in lists]
    threads = [threading.Thread(target=w, name="gpuops-prefetch") for w in work]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    out.close()


def _key(http: Transport, creds: Credentials, accept: str, target: str) -> str:
    return ahead.request_key(creds, target, http.headers(None, "", accept))


def _reads(
    http: Transport, out: ahead.Frames, targets: list[str], key: Callable[[str], str]
) -> None:
    for i, target in enumerate(targets):
        try:
            status, body = http.request("GET", target, what="a read ahead")
        except Exception:  # the calls send them themselves, and report what happens
            for rest in targets[i:]:
                out.gave_up(key(rest))
            return
        out.answer(key(target), ahead.Answer(status, _JSON, body))


class _Walk:
    """The pages of one LIST as :meth:`.pager.Pager._read_list` asks for them: page n+1 as
    soon as page n's head has brought its continue token, up to :data:`.paths.PAGES_AHEAD`
    at once. Page n+1 is announced before page n's answer: a taker, having read page n,
    knows whether page n+1 is coming. No page is asked for once the answers fetched (of every
    LIST) hold :data:`_BUDGET` bytes."""

    def __init__(
        self,
        http: Transport,
        out: ahead.Frames,
        budget: _Budget,
        key: Callable[[str], str],
        path: str,
        query: Mapping[str, str],
    ) -> None:
        self._http, self._out, self._budget, self._key = http, out, budget, key
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
        chunks: list[bytes] = []
        token: str | None = None
        try:
            with self._http.stream(target, what="a LIST ahead", accept=paths.LIST_ACCEPT) as (
                status,
                media,
                read,
            ):
                protobuf = 200 <= status < 300 and media == paths.PROTOBUF_MEDIA
                # a JSON list (a server without protobuf) is paged by the calls themselves
                while chunk := read(paths.READ_SIZE if token is not None else paths.HEAD_READ):
                    chunks.append(chunk)
                    if protobuf and token is None:
                        token = wire.list_continue(b"".join(chunks))
                        if token and self._budget.left():
                            following = paths.target(
                                self._path, paths.page_query(self._query, token, paths.PAGE_SIZE)
                            )
                            self._out.will([self._key(following)])
                            self._follow(following)
        except Exception:  # the calls send it themselves, and report what happens
            self._out.gave_up(self._key(target))
            return
        body = b"".join(chunks)
        self._budget.spend(len(body))
        self._out.answer(self._key(target), ahead.Answer(status, media, body))


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
