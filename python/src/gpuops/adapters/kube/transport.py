"""A lean HTTPS transport to one Kubernetes API server (``http.client`` and ``ssl``; plain
HTTP too, for a kubeconfig whose server is ``http://``, as ``kubectl proxy`` serves).

The official client's request path (model serialisation, urllib3 pool, response wrapping)
costs CPU per call and its import costs more than a small cluster's whole LIST; gpuops
sends plain paths and reads raw bytes, so it needs only this: one TLS context built from
:class:`~gpuops.adapters.kube.creds.Credentials` (CA, client certificate, server name,
verification), a small pool of keep-alive connections that threads share (the node and pod
LISTs run side by side), the bearer token asked for on every request (so exec-plugin and
service-account tokens refresh), connection retries like the official client's
(``Retry(connect=2)``), and a proxy only where a kubeconfig names one (urllib3, as before).

Transport failures become :class:`~gpuops.errors.Unreachable` worded here (never the
library's text); HTTP statuses are the caller's to map.
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any
from urllib.parse import urlsplit

from gpuops import __version__, fsio
from gpuops.adapters.deadline import Deadline, shutdown
from gpuops.adapters.kube.creds import Credentials
from gpuops.errors import InvalidInput, Unreachable

CONNECT_TIMEOUT_S = 5.0
READ_TIMEOUT_S = 60.0
#: sleeps before the retries of a failed connection (urllib3's backoff at factor 0.2)
_CONNECT_RETRY_SLEEP_S = (0.0, 0.4)
_USER_AGENT = f"gpuops/{__version__}"
#: a reused keep-alive connection the server closed meanwhile: resend once on a new one
_STALE = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError)


class _Conn(http.client.HTTPSConnection):
    """An HTTPS connection whose TLS name may differ from the host it dials
    (kubeconfig ``tls-server-name``) and whose read timeout is set after connecting."""

    def __init__(self, host: str, port: int, ctx: ssl.SSLContext, sni: str | None) -> None:
        super().__init__(host, port, timeout=CONNECT_TIMEOUT_S, context=ctx)
        self._ctx, self._sni = ctx, sni

    def connect(self) -> None:
        sock = socket.create_connection((self.host, self.port), CONNECT_TIMEOUT_S)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.sock = self._ctx.wrap_socket(sock, server_hostname=self._sni or self.host)
        except BaseException:
            sock.close()
            raise
        self.sock.settimeout(READ_TIMEOUT_S)


class _PlainConn(http.client.HTTPConnection):
    """A plain-HTTP connection (a kubeconfig server ``http://…``, e.g. ``kubectl proxy``),
    with the same timeouts as :class:`_Conn`."""

    def __init__(self, host: str, port: int) -> None:
        super().__init__(host, port, timeout=CONNECT_TIMEOUT_S)

    def connect(self) -> None:
        super().connect()
        assert self.sock is not None  # noqa: S101 - set by connect()
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.settimeout(READ_TIMEOUT_S)


class Transport:
    """Requests to the API server of ``creds``; thread-safe."""

    def __init__(self, creds: Credentials) -> None:
        try:
            url = urlsplit(creds.server)
            port = url.port
        except ValueError:
            url, port = urlsplit(""), None
        if url.scheme not in ("https", "http") or not url.hostname:
            raise InvalidInput(
                f"kubeconfig server {creds.server!r} is not an https:// (or http://) URL",
                hint="fix the cluster's server in the kubeconfig",
            )
        self.server = creds.server
        self._tls = url.scheme == "https"
        self._host, self._port = url.hostname, port or (443 if self._tls else 80)
        self._prefix = url.path.rstrip("/")  # e.g. a Rancher-style /k8s/clusters/<id>
        self._creds = creds
        self._ctx = _tls_context(creds)
        self._idle: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()
        self._proxy: Any = _proxy_pool(creds, self._ctx) if creds.proxy else None

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()
        if self._proxy is not None:
            self._proxy.clear()

    def request(
        self,
        method: str,
        target: str,
        body: bytes | None = None,
        content_type: str = "application/json",
        *,
        what: str,
        timeout: float | None = None,
        limit: int | None = None,
    ) -> tuple[int, bytes]:
        """Send ``method target`` (a path with its query); (status, body). Transport failures
        (refused, reset, timed out, TLS) raise :class:`Unreachable` naming ``what``.
        ``timeout``: seconds for the whole answer, headers and body (a :class:`Deadline`: a
        server trickling its answer is cut off); None: :data:`READ_TIMEOUT_S` for each read.
        ``limit``: read at most ``limit + 1`` bytes of the body (more than ``limit`` tells
        the caller the answer was longer; the connection is then closed, not reused)."""
        headers = self.headers(body, content_type)
        want = -1 if limit is None else limit + 1
        if self._proxy is not None:
            status, _media, data = self._via_proxy(
                method, self._prefix + target, body, headers, what, timeout, want
            )
            return status, data
        deadline = Deadline(timeout) if timeout is not None else None
        with deadline or contextlib.nullcontext(), self._errors(what, deadline):
            conn, resp = self._send(method, self._prefix + target, body, headers, timeout, deadline)
            try:
                data = resp.read(want) if want >= 0 else resp.read()
            except BaseException:
                conn.close()
                raise
            if deadline is not None and deadline.expired:  # an answer without a length, cut
                conn.close()
                raise TimeoutError
        if limit is not None and len(data) > limit:
            conn.close()  # the rest of the body is unread: the connection cannot serve again
        else:
            self._done(conn, resp)
        return resp.status, data

    @contextlib.contextmanager
    def stream(
        self, target: str, *, what: str, accept: str = "application/json"
    ) -> Iterator[tuple[int, str, Callable[[int], bytes]]]:
        """GET ``target`` asking for ``accept``: (status, the answer's media type, ``read``),
        where ``read(n)`` returns the body's next bytes (at most ``n``; ``b""`` at its end),
        so that a large LIST is decoded while it arrives. Transport failures raise
        :class:`Unreachable` as in :meth:`request`."""
        headers = self.headers(None, "", accept)
        if self._proxy is not None:
            status, media, data = self._via_proxy("GET", self._prefix + target, None, headers, what)
            chunks = iter((data,))
            yield status, media, lambda _n: next(chunks, b"")
            return
        with self._errors(what):
            conn, resp = self._send("GET", self._prefix + target, None, headers)

        def read(n: int) -> bytes:
            with self._errors(what):
                return resp.read(n)

        try:
            yield resp.status, media_type(resp.getheader("Content-Type")), read
        except BaseException:
            conn.close()
            raise
        if resp.isclosed():  # read to its end: the connection can serve the next request
            self._done(conn, resp)
        else:
            conn.close()

    def headers(
        self, body: bytes | None, content_type: str, accept: str = "application/json"
    ) -> dict[str, str]:
        """The headers of a request with ``body`` (of ``content_type``) accepting ``accept``."""
        headers = {"Accept": accept, "User-Agent": _USER_AGENT}
        auth = self._creds.authorization() if self._creds.authorization else None
        if auth:
            if not auth.isprintable():  # a token with a line break would split the header
                raise InvalidInput(
                    f"the kubeconfig's credentials for {self.server} are not a valid "
                    "Authorization header (a line break or control character in the token?)",
                    hint="check the token or tokenFile of the kubeconfig's user",
                )
            headers["Authorization"] = auth
        if body is not None:
            headers["Content-Type"] = content_type
        return headers

    @contextlib.contextmanager
    def _errors(self, what: str, deadline: Deadline | None = None) -> Iterator[None]:
        """Transport failures as :class:`Unreachable`, in our words (any failure once
        ``deadline`` expired is its timeout: the socket was shut down under the read)."""
        try:
            yield
        except (OSError, http.client.HTTPException) as exc:
            if deadline is not None and deadline.expired:
                raise Unreachable(
                    f"cannot reach the Kubernetes API at {self.server} ({what}): TimeoutError "
                    f"(no whole answer within {deadline.seconds:g} s)",
                    hint="is the cluster up? check the kubeconfig's server address",
                ) from None
            if isinstance(exc, ssl.SSLError):  # before OSError: SSLError is one
                raise Unreachable(
                    f"cannot reach the Kubernetes API at {self.server}: the TLS handshake "
                    f"failed ({type(exc).__name__})",
                    hint="check the kubeconfig's server and certificate authority",
                ) from None
            raise Unreachable(
                f"cannot reach the Kubernetes API at {self.server} ({what}): {type(exc).__name__}",
                hint="is the cluster up? check the kubeconfig's server address",
            ) from None

    def _send(
        self,
        method: str,
        target: str,
        body: bytes | None,
        headers: Mapping[str, str],
        timeout: float | None = None,
        deadline: Deadline | None = None,
    ) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        """The connection and the response, its body still to be read (``deadline``, when
        given, shuts the connection in use down when it passes)."""
        conn, reused = self._checkout()
        try:
            try:
                _read_timeout(conn, timeout, deadline)
                conn.request(method, target, body, dict(headers))
                return conn, conn.getresponse()
            except _STALE:
                if not reused or (deadline is not None and deadline.expired):
                    raise
                conn.close()  # the server closed an idle keep-alive connection: once more
                conn = self._new()
                _read_timeout(conn, timeout, deadline)
                conn.request(method, target, body, dict(headers))
                return conn, conn.getresponse()
        except BaseException:
            conn.close()
            raise

    def _done(self, conn: http.client.HTTPConnection, resp: http.client.HTTPResponse) -> None:
        """A response read to its end: keep its connection for the next request."""
        if resp.will_close:
            conn.close()
        else:
            _read_timeout(conn, None)  # back to the default for the next request
            with self._lock:
                self._idle.append(conn)

    def _checkout(self) -> tuple[http.client.HTTPConnection, bool]:
        with self._lock:
            if self._idle:
                return self._idle.pop(), True
        return self._new(), False

    def _new(self) -> http.client.HTTPConnection:
        """A connected connection; a refused or timed-out connect is retried twice."""
        for pause in (*_CONNECT_RETRY_SLEEP_S, None):
            conn: http.client.HTTPConnection = (
                _Conn(self._host, self._port, self._ctx, self._creds.tls_server_name)
                if self._tls
                else _PlainConn(self._host, self._port)
            )
            try:
                conn.connect()
            except ssl.SSLError:
                conn.close()
                raise
            except OSError:
                conn.close()
                if pause is None:
                    raise
                time.sleep(pause)
            else:
                return conn
        raise AssertionError("unreachable")  # pragma: no cover

    def _via_proxy(
        self,
        method: str,
        target: str,
        body: bytes | None,
        headers: Mapping[str, str],
        what: str,
        timeout: float | None = None,
        want: int = -1,
    ) -> tuple[int, str, bytes]:
        """Through the kubeconfig's proxy (urllib3). ``timeout`` bounds each read and, once
        the headers are in, the whole body; ``want``: bytes of the body to read at most (-1:
        all of it)."""
        import urllib3  # noqa: PLC0415 - only for kubeconfigs that name a proxy

        url = f"{'https' if self._tls else 'http'}://{self._host}:{self._port}{target}"
        try:
            resp = self._proxy.request(
                method,
                url,
                body=body,
                headers=dict(headers),
                timeout=urllib3.Timeout(connect=CONNECT_TIMEOUT_S, read=timeout or READ_TIMEOUT_S),
                preload_content=False,
            )
            try:
                deadline = Deadline(timeout) if timeout is not None else None
                with deadline or contextlib.nullcontext():
                    if deadline is not None:
                        deadline.watch(resp.shutdown)
                    data = resp.read(want if want >= 0 else None)
                if deadline is not None and deadline.expired:
                    raise urllib3.exceptions.ReadTimeoutError(self._proxy, url, "deadline")
            finally:
                if want < 0:
                    resp.release_conn()
                else:
                    resp.close()
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise Unreachable(
                f"cannot reach the Kubernetes API at {self.server} through its proxy "
                f"({what}): {type(exc).__name__}",
                hint="is the cluster up? check the kubeconfig's server and proxy-url",
            ) from None
        return int(resp.status), media_type(resp.headers.get("Content-Type")), bytes(data)


def _read_timeout(
    conn: http.client.HTTPConnection, timeout: float | None, deadline: Deadline | None = None
) -> None:
    """Wait ``timeout`` seconds (None: :data:`READ_TIMEOUT_S`) for each read on ``conn``, and
    shut it down when ``deadline`` passes."""
    if conn.sock is not None:
        conn.sock.settimeout(timeout or READ_TIMEOUT_S)
    if deadline is not None:
        deadline.watch(shutdown(conn.sock))


def media_type(content_type: str | None) -> str:
    """The media type of a Content-Type header, without parameters, lower case."""
    return (content_type or "").split(";", 1)[0].strip().lower()


def _tls_context(creds: Credentials) -> ssl.SSLContext:
    try:
        ctx = ssl.create_default_context(cafile=creds.ca_file, cadata=creds.ca_pem)
        if not creds.verify:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        if creds.cert_pem or creds.key_pem or creds.cert_file or creds.key_file:
            _load_client_cert(ctx, creds)
    except (ssl.SSLError, OSError, ValueError) as exc:
        raise InvalidInput(
            f"cannot use the kubeconfig's TLS settings for {creds.server}: {type(exc).__name__}",
            hint="check certificate-authority(-data), client-certificate(-data), client-key",
        ) from None
    return ctx


def _load_client_cert(ctx: ssl.SSLContext, creds: Credentials) -> None:
    """``ssl`` reads a certificate chain from files only: inline PEM goes to a private
    temporary folder (the one writer's) for the instant of loading it."""
    with fsio.private_tempdir("gpuops-tls-") as tmp:
        cert, key = creds.cert_file, creds.key_file
        if creds.cert_pem is not None:
            cert = str(tmp.save_secret("client.crt", creds.cert_pem))
        if creds.key_pem is not None:
            key = str(tmp.save_secret("client.key", creds.key_pem))
        if not cert:
            raise ValueError("a client key without a certificate")
        ctx.load_cert_chain(cert, key)


def _proxy_pool(creds: Credentials, ctx: ssl.SSLContext) -> Any:
    import urllib3  # noqa: PLC0415 - only for kubeconfigs that name a proxy

    proxy = str(creds.proxy)
    url = urlsplit(proxy)
    if url.scheme not in ("http", "https"):
        raise InvalidInput(
            f"kubeconfig proxy-url scheme {url.scheme!r} is not supported",
            hint="use an http:// or https:// proxy",
        )
    return urllib3.ProxyManager(
        proxy,
        ssl_context=ctx,
        server_hostname=creds.tls_server_name,
        retries=urllib3.Retry(total=2, connect=2, read=0, status=0, backoff_factor=0.2),
    )
