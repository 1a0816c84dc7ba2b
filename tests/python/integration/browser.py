"""Reports as a person sees them: served with Jenkins' default CSP, opened in Debian's headless
Chromium (tests/browser/check_page.mjs, playwright-core), screenshot taken.

``open_page(folder, page)`` serves ``folder`` on 127.0.0.1 with the header Jenkins puts on
archived files, loads the page and returns what the browser met: console messages (CSP
violations land there), requests (all must stay on the server), failed requests, the text of
``data-key`` elements, the number of script elements, and the screenshot's path.
"""

from __future__ import annotations

import functools
import json
import shutil
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]
CHECKER = ROOT / "tests" / "browser" / "check_page.mjs"
#: What Jenkins sends with every archived artifact (hudson.model.DirectoryBrowserSupport.CSP).
JENKINS_CSP = "sandbox; default-src 'none'; img-src 'self'; style-src 'self';"
#: Where screenshots are kept for people to look at (git-ignored).
SHOTS = ROOT / "reports" / "screenshots"


class _CspHandler(SimpleHTTPRequestHandler):
    def end_headers(self) -> None:
        self.send_header("Content-Security-Policy", JENKINS_CSP)
        self.send_header("X-Content-Type-Options", "nosniff")
        super().end_headers()

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def served(folder: Path) -> Iterator[str]:
    server = ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(_CspHandler, directory=str(folder))
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@dataclass
class Seen:
    status: int
    console: list[dict[str, str]]
    requests: list[str]
    failed: list[dict[str, str]]
    data: dict[str, list[str]]
    scripts: int
    screenshot: Path
    base: str

    def one(self, key: str) -> str:
        values = self.data.get(key, [])
        assert len(values) == 1, f"data-key {key!r}: {values}"
        return values[0]

    def assert_clean(self) -> None:
        """What every report must satisfy under the CSP."""
        assert self.status == 200
        assert self.console == [], f"console messages (CSP violations?): {self.console}"
        assert self.failed == [], f"failed requests: {self.failed}"
        assert self.scripts == 0
        outside = [u for u in self.requests if not u.startswith(self.base)]
        assert outside == [], f"requests outside the page's folder: {outside}"


def open_page(folder: Path, page: str, shot_name: str) -> Seen:
    node = shutil.which("node")
    assert node, "node is needed for the browser checks (scripts/setup.sh installs it)"
    SHOTS.mkdir(parents=True, exist_ok=True)
    shot = SHOTS / f"{shot_name}.png"
    with served(folder) as base:
        proc = subprocess.run(
            [node, str(CHECKER), f"{base}/{page}", str(shot)],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=ROOT,
            check=False,
        )
    assert proc.returncode == 0, proc.stderr
    doc: dict[str, Any] = json.loads(proc.stdout)
    return Seen(
        status=int(doc["status"]),
        console=list(doc["console"]),
        requests=list(doc["requests"]),
        failed=list(doc["failed"]),
        data={k: list(v) for k, v in doc["data"].items()},
        scripts=int(doc["scripts"]),
        screenshot=shot,
        base=base,
    )
