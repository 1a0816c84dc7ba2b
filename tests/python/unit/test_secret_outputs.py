"""Nothing secret in any output, as units: URLs lose their ``user:password@`` wherever they
are shown, a URL is parsed before anything connects, a file that is not an environments file
is never quoted back, secrets read from a variable the user named are redacted like the
default ones, and the result on stdout is redacted like the result file.

The end-to-end canaries (real subprocesses, the lab, every process's command line) are in
tests/python/integration/test_no_secret_leaks.py.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_jenkins_apply import CHOICES, CONFIG, JOBS, TOKEN, USER, Replay

from gpuops import logs
from gpuops.cli.main import run
from gpuops.core.urls import parse_http, shown_url, without_userinfo
from gpuops.errors import InvalidInput, Unreachable
from gpuops.usecases import jenkinsjobs
from gpuops.usecases.jenkinsjobs import ApplyRequest

PW = "Pw-canary-3f9a1c"


@pytest.fixture(autouse=True)
def _forget_secrets() -> None:
    logs._KNOWN.clear()


@pytest.fixture
def replay(monkeypatch: pytest.MonkeyPatch) -> Iterator[Replay]:
    """The recorded Jenkins of test_jenkins_apply.py, on 127.0.0.1."""
    server = Replay()
    threading.Thread(target=server.server.serve_forever, daemon=True).start()
    monkeypatch.setenv("GPUOPS_JENKINS_TOKEN", TOKEN)
    try:
        yield server
    finally:
        server.server.shutdown()
        server.server.server_close()


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (f"https://admin:{PW}@jenkins.example.com/ci/", "https://jenkins.example.com/ci/"),
        (f"http://admin:{PW}@[::1]:8080/x?q=1", "http://[::1]:8080/x?q=1"),
        (f"http://{PW}@host", "http://host"),
        (f"http://a:{PW}@[::1/x", "http://[::1/x"),  # not parseable: still stripped
        (f"see http://u:{PW}@h:1/ and ftp://v:{PW}@g/", "see http://h:1/ and ftp://g/"),
        # up to the LAST "@": a password may hold "/" (hiding too much is the right error)
        ("https://plain.example.com:8443/a@b", "https://b"),
        ("https://plain.example.com:8443/a b@c", "https://plain.example.com:8443/a b@c"),
    ],
)
def test_a_url_is_shown_without_its_userinfo(url: str, shown: str) -> None:
    assert without_userinfo(url) == shown
    assert PW not in shown_url(url)


def test_parse_http_refuses_bad_urls_without_showing_the_password() -> None:
    for bad in ("http://[::1", f"http://u:{PW}@[::1", "ftp://h/", "http://", "http://h:99999/",
                f"http://u:{PW}@h/ x", "http://h/\x85"):  # fmt: skip
        with pytest.raises(InvalidInput) as info:
            parse_http(bad, "--url", userinfo=True)
        assert PW not in info.value.message
    with pytest.raises(InvalidInput, match="user name or password") as info:
        parse_http(f"https://u:{PW}@h/", "--link")
    assert PW not in info.value.message
    assert parse_http(f"https://u:{PW}@h:8/", userinfo=True).hostname == "h"
    assert PW in logs.secret_values({})  # a password in a URL is a secret from now on


def test_a_jenkins_url_that_cannot_be_parsed_is_bad_input(tmp_path: Path) -> None:
    config = tmp_path / "r.yaml"
    config.write_text(CONFIG)
    err = tmp_path / "err.json"
    for url in ("http://[::1", "http://127.0.0.1:99999/", "http://:8080/"):
        code = run(["--error-file", str(err), "jenkins", "apply", "--config", str(config),
                    "--url", url])  # fmt: skip
        assert code == 2, err.read_text()
        assert json.loads(err.read_text())["error"]["field"] == "url"


def test_the_jenkins_url_is_never_shown_with_its_password(replay: Replay, tmp_path: Path) -> None:
    config = tmp_path / "r.yaml"
    config.write_text(CONFIG)
    replay.start_of_apply()
    for job in JOBS:
        replay.job_is(job, False)
    url = replay.url.replace("http://", f"http://admin:{PW}@") + "/"
    out = jenkinsjobs.apply(
        ApplyRequest(str(config), url, USER, check=True), choices_for=lambda req, rel: CHOICES
    ).result
    assert not replay.problems, replay.problems
    assert [j.action for j in out.jobs] == ["would-create"] * len(JOBS)
    assert out.to_dict()["jenkins"] == replay.url + "/"
    assert PW not in json.dumps(out.to_dict())
    dead = ApplyRequest(str(config), f"http://admin:{PW}@127.0.0.1:9/", USER)
    with pytest.raises(Unreachable) as info:
        jenkinsjobs.apply(dead, choices_for=lambda req, rel: CHOICES)
    assert PW not in info.value.message and "http://127.0.0.1:9/" in info.value.message


SHADOW = (
    "root:$y$j9T$Kq0saltsalt$hashhashhashhashhashhashhash:19000:0:99999:7:::\n"
    "daemon:*:19000:0:99999:7:::\n"
)


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        (SHADOW, "19000"),
        (SHADOW, "daemon"),
        ("root$y$j9T$Kq0saltsalt$hashhash: 1\n", "hashhash"),
        ("environments:\n  x$y$j9T$saltsalthash: {}\n", "saltsalthash"),
        ("a: !Tag-secretvalue x\n", "secretvalue"),
        ("a: !secretvalue!x y\n", "secretvalue"),
        ("a: b\n  c: secretvalue: d\n", "secretvalue"),
    ],
)
def test_a_file_that_is_not_an_environments_file_is_never_quoted(
    tmp_path: Path, text: str, secret: str
) -> None:
    path = tmp_path / "not-an-environments-file"
    path.write_text(text)
    err = tmp_path / "err.json"
    code = run(["--error-file", str(err), "release", "status", "--config", str(path),
                "--environment", "prod"])  # fmt: skip
    doc = json.loads(err.read_text())
    assert code == 2, doc
    assert secret not in json.dumps(doc), doc
    assert str(path) in doc["error"]["message"]  # the file is named, its content is not


def test_a_password_in_a_variable_the_user_named_is_a_secret(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from gpuops.usecases.images.registryops import RegistryAccess

    monkeypatch.setenv("ROBOT_USER", "robot")
    monkeypatch.setenv("ROBOT_PASS", PW)  # a name that says nothing of secrets
    assert PW not in logs.secret_values()
    creds = RegistryAccess(False, None, "ROBOT_USER", "ROBOT_PASS").credentials()
    assert creds is not None and creds.password == PW
    assert PW in logs.secret_values()


def test_the_jenkins_token_from_a_named_variable_is_a_secret(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from gpuops.adapters.jenkins import JenkinsClient

    monkeypatch.setenv("CI_API", PW)
    JenkinsClient.connect("http://127.0.0.1:9/", "bot", "CI_API")
    assert PW in logs.secret_values()


def test_the_result_on_stdout_is_redacted(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--output json`` and text on stdout go through the same redaction as the files."""
    from gpuops.cli import main
    from gpuops.cli.base import Runtime, Shown

    logs.remember_secret(PW)
    for output in ("json", "text"):
        runtime = Runtime(output=output)
        runtime.command = "x"
        main._emit(runtime, Shown({"note": f"the registry said {PW}"}, f"said {PW}"))
        out = capsys.readouterr().out
        assert PW not in out and "****" in out, out


def test_a_jenkins_repository_with_a_password_is_refused_unquoted(tmp_path: Path) -> None:
    """It would be written into every job's config.xml (and the --check diff): refused, and
    the message names it without the password."""
    from gpuops.core import jenkinsjobs as core

    doc = {"jenkins": {"name": "infer", "repository": f"https://ci:{PW}@git.example.com/a.git"}}
    with pytest.raises(InvalidInput, match="carries a password") as info:
        core.parse(doc, "r.yaml")
    assert PW not in info.value.message and "git.example.com" in info.value.message
    doc["jenkins"]["repository"] = "git@git.example.com:ai/infer.git"  # scp-like: a user only
    assert core.parse(doc, "r.yaml").repository == "git@git.example.com:ai/infer.git"


def test_a_driver_repository_url_a_here_document_cannot_carry_is_refused() -> None:
    from gpuops.core.inventory import Host
    from gpuops.usecases.nodes import common

    for url in (f'http://u:{PW}@h/x"y', f"http://u:{PW}@h/a b", "http://h/\u00e9"):
        host = Host("n1", ("gpu",), {"gpu_nodes_driver_repo_url": url,
                                     "gpu_nodes_driver_version": "550.90.07"})  # fmt: skip
        with pytest.raises(InvalidInput, match="gpu_nodes_driver_repo_url") as info:
            common.probe([host], check_runs=True)
        assert PW not in info.value.message
    script = common.probe_script([f"http://u:{PW}@h/NVIDIA.run"])
    assert f"\nsecret http://u:{PW}@h/NVIDIA.run\n@@GPUOPS-URLS@@\n" in script  # stdin, a line


def test_an_unknown_parameter_is_named_only_when_it_is_a_name(tmp_path: Path) -> None:
    """A parameters file's keys that are no option are named when short (a typo), never
    quoted whole (a key can be anything a file holds: here 80 letters and digits)."""
    params, err = tmp_path / "params.json", tmp_path / "err.json"
    secret = "a" + PW.replace("-", "") * 5
    params.write_text(json.dumps({secret: 1, "tyop": 2}))
    code = run(["--params-file", str(params), "--error-file", str(err), "release", "status"])
    message = json.loads(err.read_text())["error"]["message"]
    assert code == 2 and secret[:20] not in message and "tyop" in message, message


def test_a_log_line_never_shows_a_urls_password() -> None:
    import logging

    record = logging.LogRecord(
        "gpuops.x", logging.INFO, __file__, 1, "GET %s", (f"http://u:{PW}@h/",), None
    )
    assert logs.RedactingFilter([]).filter(record)
    assert record.getMessage() == "GET http://h/"


# -- issue 16 review: a password with '/', '?', '#' or '@' in it -------------------------------

ODD_PASSWORDS = ["s3cr/et-Zq", "s3cr#et-Zq", "s3cr?et-Zq", "s3cr@et-Zq", "a/b?c#d@e-Zq"]


@pytest.mark.parametrize("password", ODD_PASSWORDS)
def test_a_url_password_with_a_delimiter_in_it_is_hidden_and_remembered(password: str) -> None:
    """The userinfo is everything between ``scheme://`` and the last ``@`` before a blank."""
    from gpuops.core.urls import remember_userinfo

    url = f"https://admin:{password}@jenkins.example/ci/"
    assert without_userinfo(url) == "https://jenkins.example/ci/"
    assert (
        without_userinfo(f"see {url} and http://h/")
        == "see https://jenkins.example/ci/ and http://h/"
    )
    assert "Zq" not in shown_url(url)
    remember_userinfo(url)
    assert password in logs.secret_values({})
    remember_userinfo(f"https://admin:{password.replace('@', '%40')}x@h/")
    assert password + "x" in logs.secret_values({})  # percent-decoded too


@pytest.mark.parametrize("password", ["s3cr/et-Zq", "s3cr#et-Zq", "s3cr?et-Zq"])
def test_jenkins_apply_never_shows_a_url_password_with_a_delimiter(
    tmp_path: Path, password: str, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "r.yaml"
    config.write_text(CONFIG)
    err = tmp_path / "err.json"
    code = run(["--error-file", str(err), "jenkins", "apply", "--config", str(config),
                "--url", f"https://admin:{password}@jenkins.example/"])  # fmt: skip
    doc = err.read_text()
    captured = capsys.readouterr()
    assert code == 2, doc
    for text in (doc, captured.err, captured.out):
        assert "Zq" not in text and "s3cr" not in text, text


def test_a_jenkins_repository_with_a_slash_in_its_password_is_refused() -> None:
    from gpuops.core import jenkinsjobs as core

    for password in ("pa/ss-Zq", "pa#ss-Zq", "pa?ss-Zq"):
        repo = f"https://ci:{password}@git.example.com/a.git"
        doc = {"jenkins": {"name": "infer", "repository": repo}}
        with pytest.raises(InvalidInput, match="carries a password") as info:
            core.parse(doc, "r.yaml")
        assert "Zq" not in info.value.message


def test_a_docker_host_with_a_slash_in_its_password_is_refused_unquoted() -> None:
    from gpuops.cli.common import docker_host

    for password in ("pa/ss-Zq", "pa#ss-Zq", "pa@ss-Zq"):
        with pytest.raises(InvalidInput, match="password") as info:
            docker_host(f"tcp://u:{password}@h:2375")
        assert "Zq" not in info.value.message, info.value.message
    assert docker_host("ssh://core@h") == "ssh://core@h"
    assert docker_host("unix:///run/podman/podman.sock") == "unix:///run/podman/podman.sock"


def test_a_driver_repository_password_with_a_slash_goes_as_a_secret() -> None:
    from gpuops.usecases.nodes import common

    script = common.probe_script(["http://u:pa/ss-Zq@h/NVIDIA.run"])
    assert "\nsecret http://u:pa/ss-Zq@h/NVIDIA.run\n" in script


# -- issue 16 review: every escaping gpuops writes is redacted ---------------------------------

#: A secret with every character an escaping changes; "S3CR" marks each piece of it.
ODD_SECRET = "S3CRa\"S3CRb'S3CRc<S3CRd&S3CRe>S3CRf\nS3CRg"


def test_redact_knows_every_escaping() -> None:
    import html

    import markupsafe

    forms = [ODD_SECRET, json.dumps(ODD_SECRET), html.escape(ODD_SECRET),
             html.escape(ODD_SECRET, quote=False), str(markupsafe.escape(ODD_SECRET))]  # fmt: skip
    for form in forms:
        assert "S3CR" not in logs.redact(f"x {form} y", [ODD_SECRET]), form


def test_a_junit_file_and_a_page_never_hold_a_secret_in_any_escaping(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rendered by the real renderers: ElementTree (text and attributes) and Jinja2."""
    from gpuops import fsio
    from gpuops.core.junit import Case, junit_xml
    from gpuops.render.html import releases

    monkeypatch.setenv("GPUOPS_REGISTRY_PASSWORD", ODD_SECRET)
    junit = junit_xml(f"suite {ODD_SECRET}", [Case(f"case {ODD_SECRET}", "c", 1.0,
                                                   failure=f"failed: {ODD_SECRET}")])  # fmt: skip
    assert "S3CR" in junit  # the renderer wrote it, escaped
    out = fsio.OutDir(tmp_path, option="out")
    out.save_text("junit.xml", junit)
    record = {"number": 1, "action": "promote", "status": "failed", "tag": "42",
              "started": "2026-11-30T10:00:00Z", "reason": f"it said {ODD_SECRET}",
              "link": f"https://ci.example/job?k={ODD_SECRET}"}  # fmt: skip
    result = {"environment": "production", "namespace": "ai", "current": None,
              "rollback_choices": [], "releases": [record]}  # fmt: skip
    written = releases.write(result, out)
    for path in (tmp_path / "junit.xml", *written.files):
        text = path.read_text()
        assert "S3CR" not in text, (path.name, text)
    assert "****" in (tmp_path / "junit.xml").read_text()


# -- issue 16 review: progress lines on stderr are redacted ------------------------------------


def test_a_progress_line_is_redacted_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    from gpuops.cli.base import Runtime
    from gpuops.cli.release import _deps
    from gpuops.usecases.nodes import common

    logs.remember_secret(PW)
    common.say(f"[n1] login with {PW} at http://u:x-Zq@h/")
    release_say = _deps(Runtime(output="text")).say
    release_say(f"pushing with {PW}")
    err = capsys.readouterr().err
    assert PW not in err and "Zq" not in err and err.count("****") == 2, err


def test_a_history_link_loses_its_userinfo() -> None:
    from gpuops.render.html import releases

    assert releases._link(f"https://bot:{PW}@ci.example/job/1/") == "https://ci.example/job/1/"
    assert releases._link("https://ci.example/job/1/") == "https://ci.example/job/1/"
    assert releases._link("javascript:alert(1)") is None


def test_a_build_line_is_redacted_with_the_password_read_after_the_build_began(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--registry-password-env ROBOT_PASS``: a name that says nothing of secrets, read by
    the build (after the command began); a build line echoing it shows ``****``."""
    from gpuops.errors import OperationFailed
    from gpuops.usecases.images import build

    def fake_build(request: build.BuildRequest, on_line: object) -> build.BuildRecord:
        assert callable(on_line)
        request.access.credentials()  # where the real build reads them
        on_line(f"#5 RUN echo {PW}")
        raise OperationFailed("the build stopped here")

    monkeypatch.setattr(build, "build", fake_build)
    monkeypatch.setenv("ROBOT_USER", "robot")
    monkeypatch.setenv("ROBOT_PASS", PW)
    (tmp_path / "Dockerfile").write_text("FROM scratch\n")
    code = run(["image", "build", "--image", "127.0.0.1:5000/team/x", "--context",
                str(tmp_path), "--build-number", "1", "--registry-username-env", "ROBOT_USER",
                "--registry-password-env", "ROBOT_PASS"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 1 and "#5 RUN echo ****" in err and PW not in err, err


def test_finding_userinfo_is_linear_in_the_text() -> None:
    """A message can quote a megabyte of input: many ``x://`` after an ``@`` (a regex that
    backtracks to the last ``@`` took 26 s for these 80 kB) must not stall gpuops."""
    import time

    started = time.monotonic()
    for text in ("@ " + "a://" * 20000, "@ " + "a." * 200000 + "://u:p@h", "a://b@" * 100000):
        without_userinfo(text)
    assert time.monotonic() - started < 3
    assert without_userinfo("x a://u:p@h b://v@g/@ c") == "x a://h b:// c"
