"""The alerts gate (issue 21): Alertmanager matchers checked before anything runs, the gate's
decisions (fire, resolve within the wait, hold naming the alerts, fail closed), the adapter's
reading of API v2 answers. The Alertmanager here is a fake :class:`Source` (a pure unit); the
real one is in tests/python/integration/test_nodes_alerts_lab.py."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import pytest

from gpuops.adapters import alertmanager as am
from gpuops.core import alertmatchers
from gpuops.core.alertmatchers import Matcher
from gpuops.errors import InvalidInput, OperationFailed, Unreachable
from gpuops.usecases.nodes import alerts as gate
from gpuops.usecases.nodes.gates import GateContext

# -- matchers ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ('severity="critical"', [Matcher("severity", "=", "critical")]),
        (
            '{severity="critical", team=~"gpu|infra"}',
            [Matcher("severity", "=", "critical"), Matcher("team", "=~", "gpu|infra")],
        ),
        (
            "alertname=GpuXid,cluster!=lab",
            [Matcher("alertname", "=", "GpuXid"), Matcher("cluster", "!=", "lab")],
        ),
        (
            'severity="crit", job!~"node.*"',
            [Matcher("severity", "=", "crit"), Matcher("job", "!~", "node.*")],
        ),
        (r'msg="a \"quoted\" \\ word"', [Matcher("msg", "=", 'a "quoted" \\ word')]),
        (r'code=~"5\d\d"', [Matcher("code", "=~", r"5\d\d")]),  # a spurious escape stays
        ("__name__:x=up", [Matcher("__name__:x", "=", "up")]),
    ],
)
def test_alertmanager_matchers_are_parsed(text: str, want: list[Matcher]) -> None:
    assert list(alertmatchers.parse(text)) == want


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("", "no matcher given"),
        ("{}", "no matcher given"),
        ("severity", "no =, !=, =~ or !~"),
        ('1abc="x"', "does not start with a label name"),
        ('severity=="x"', "neither a double-quoted string"),
        ('severity="critical" team="gpu"', "expected ','"),
        ('severity="critical",', "trailing ','"),
        ('severity="crit', "neither a double-quoted string"),
        ('team=~"gpu(|"', "is no regular expression"),
        (r'team=~"(a)\1"', "backreference or look-around"),
        ('team=~"(?!gpu)"', "backreference or look-around"),
        ('team=~"x{99999999999}"', "more than 1000 repetitions"),  # re: OverflowError
        ('team=~"x{2,1001}"', "more than 1000 repetitions"),  # RE2's limit
        ('team=~"' + "(" * 500 + "x" + ")" * 500 + '"', "is no regular expression"),  # re: deep
        ('team=~".*"', "would match every alert"),
        ('team!="gpu"', "would match every alert"),
        ('team=""', "would match every alert"),
        ("severity=crit;rm", "expected ','"),
        ("x" * 3000, "longer than"),
    ],
)
def test_bad_selectors_are_refused_naming_what_is_wrong(text: str, said: str) -> None:
    with pytest.raises(InvalidInput, match="--alerts-selector") as info:
        alertmatchers.parse(text)
    assert said in info.value.message


def test_a_matcher_matches_as_alertmanager_does_and_is_written_quoted() -> None:
    (crit, team, job) = alertmatchers.parse('severity="critical",team=~"gpu|infra",job!~"x.*"')
    assert crit.matches({"severity": "critical"}) and not crit.matches({})
    assert team.matches({"team": "gpu"}) and not team.matches({"team": "gpus"})  # anchored
    assert job.matches({}) and not job.matches({"job": "xy"})
    odd = Matcher("msg", "=", 'a "b" \\ c\nd')
    assert odd.text() == r'msg="a \"b\" \\ c\nd"'
    assert alertmatchers.parse(odd.text()) == (odd,)


# -- the gate ------------------------------------------------------------------------------

XID = am.Alert({"alertname": "GpuXid", "severity": "critical", "instance": "gpu-h800-01"})
TEMP = am.Alert({"alertname": "GpuHot", "severity": "critical", "instance": "gpu-h800-02"})


@dataclass
class Fake:
    """Alertmanager's answers in turn (an exception is raised); the last one repeats."""

    answers: list[list[am.Alert] | Exception]
    url: str = "http://alertmanager.test:9093"
    asked: list[tuple[Matcher, ...]] = field(default_factory=list)

    def firing(self, matchers: Sequence[Matcher]) -> list[am.Alert]:
        self.asked.append(tuple(matchers))
        answer = self.answers[min(len(self.asked), len(self.answers)) - 1]
        if isinstance(answer, Exception):
            raise answer
        return answer


@dataclass
class Clock:
    t: float = 1000.0
    slept: list[float] = field(default_factory=list)

    def now(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.slept.append(s)
        self.t += s


def _gate(fake: Fake, wait_s: float, said: list[str]) -> tuple[gate.AlertsGate, Clock]:
    clock = Clock()
    spec = gate.AlertsSpec(
        url=fake.url,
        matchers=alertmatchers.parse('severity="critical"'),
        wait_s=wait_s,
        connect=lambda _spec: fake,
        sleep=clock.sleep,
        clock=clock.now,
    )
    ctx = GateContext(kube=None, inventory=None, rollout=None, say=said.append)  # type: ignore[arg-type]
    opened = spec.open(ctx)
    assert isinstance(opened, gate.AlertsGate)
    return opened, clock


def test_no_matching_alert_admits_the_batch_at_once() -> None:
    said: list[str] = []
    fake = Fake([[]])
    g, clock = _gate(fake, 60, said)
    assert g.admit(None, []) is None  # type: ignore[arg-type]
    assert fake.asked == [(Matcher("severity", "=", "critical"),)]
    assert clock.slept == [] and said == []


def test_an_alert_that_resolves_within_the_wait_lets_the_batch_start() -> None:
    said: list[str] = []
    fake = Fake([[XID], [XID], []])
    g, clock = _gate(fake, 60, said)
    assert g.admit(None, []) is None  # type: ignore[arg-type]
    assert clock.slept == [gate.RECHECK_S, gate.RECHECK_S]
    assert "1 alert(s) fire: 'GpuXid'{instance='gpu-h800-01', severity='critical'}" in said[0]
    assert said[-1] == "[alerts] no matching alert fires any more after 10 s"


def test_alerts_still_firing_when_the_wait_is_spent_hold_naming_them() -> None:
    said: list[str] = []
    fake = Fake([[XID, TEMP]])
    g, clock = _gate(fake, 12, said)
    hold = g.admit(None, [])  # type: ignore[arg-type]
    assert hold is not None and hold.gate == "alerts"
    assert clock.slept == [5.0, 5.0, 2.0]  # the last question at the end of the wait
    assert len(fake.asked) == 4
    assert hold.message == (
        '2 alert(s) matching severity="critical" still fire after 12 s: '
        "'GpuHot'{instance='gpu-h800-02', severity='critical'}; "
        "'GpuXid'{instance='gpu-h800-01', severity='critical'}"
    )
    assert hold.details["firing"] == 2 and hold.details["unreachable"] is None
    assert [a["alertname"] for a in hold.details["alerts"]] == ["GpuXid", "GpuHot"]
    assert hold.details["selector"] == 'severity="critical"'
    assert hold.details["url"] == fake.url


def test_no_wait_holds_after_one_question() -> None:
    fake = Fake([[XID]])
    g, clock = _gate(fake, 0, [])
    hold = g.admit(None, [])  # type: ignore[arg-type]
    assert hold is not None and "still fire after 0 s" in hold.message
    assert clock.slept == [] and len(fake.asked) == 1


def test_an_unreachable_alertmanager_is_asked_again_then_holds_fail_closed() -> None:
    said: list[str] = []
    fake = Fake([Unreachable("cannot reach Alertmanager http://alertmanager.test:9093: X")])
    g, clock = _gate(fake, 7, said)
    hold = g.admit(None, [])  # type: ignore[arg-type]
    assert hold is not None
    assert hold.message.startswith("no answer from Alertmanager after 7 s, so the batch is held")
    assert "fail closed" in hold.message and "cannot reach Alertmanager" in hold.message
    assert hold.details["unreachable"] and hold.details["alerts"] == []
    assert clock.slept == [5.0, 2.0]


def test_an_alertmanager_back_within_the_wait_with_nothing_firing_admits() -> None:
    fake = Fake([Unreachable("down"), []])
    g, _ = _gate(fake, 60, [])
    assert g.admit(None, []) is None  # type: ignore[arg-type]


def test_refused_credentials_hold_at_once() -> None:
    fake = Fake([am.AlertmanagerRefused("Alertmanager refused the request: HTTP 403")])
    g, clock = _gate(fake, 300, [])
    hold = g.admit(None, [])  # type: ignore[arg-type]
    assert hold is not None and "HTTP 403" in hold.message and clock.slept == []


def test_the_options_make_a_gate_only_with_url_and_selector(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    matchers = alertmatchers.parse('severity="critical"')
    assert gate.spec(None, None, 60) is None
    with pytest.raises(InvalidInput, match="--alerts-url without --alerts-selector"):
        gate.spec("http://am:9093", None, 60)
    with pytest.raises(InvalidInput, match="--alerts-selector without --alerts-url"):
        gate.spec(None, matchers, 60)
    with pytest.raises(InvalidInput, match="--alerts-ca-file without --alerts-url"):
        gate.spec(None, None, 60, "/etc/ssl/ca.pem")
    with pytest.raises(InvalidInput, match="query"):
        gate.spec("http://am:9093/?x=1", matchers, 60)
    with pytest.raises(InvalidInput, match="plain HTTP"):
        gate.spec("http://am:9093", matchers, 60, "/etc/ssl/ca.pem")
    monkeypatch.setenv(gate.TOKEN_ENV, "bad token")
    with pytest.raises(InvalidInput, match="bearer token"):
        gate.spec("http://am:9093", matchers, 60)
    monkeypatch.setenv(gate.TOKEN_ENV, "s3cret")
    made = gate.spec("http://am:9093/alertmanager/", matchers, 60)
    assert made is not None and made.token == "s3cret" and "s3cret" not in repr(made)


# -- the adapter's reading of answers ------------------------------------------------------

URL = "http://am:9093"


def test_an_api_v2_answer_becomes_alerts() -> None:
    body = (
        b'[{"labels":{"alertname":"GpuXid","severity":"critical"},"annotations":{"s":"x"},'
        b'"startsAt":"2026-12-02T05:00:00Z","fingerprint":"abc","status":{"state":"active",'
        b'"silencedBy":[],"inhibitedBy":[]}}]'
    )
    (alert,) = am._alerts(URL, 200, body)
    assert alert.name == "GpuXid" and alert.fingerprint == "abc" and alert.state == "active"
    assert alert.to_dict()["labels"] == {"alertname": "GpuXid", "severity": "critical"}
    assert am._alerts(URL, 200, b"[]") == []


@pytest.mark.parametrize(
    ("status", "body", "error", "said"),
    [
        (401, b"", am.AlertmanagerRefused, "HTTP 401"),
        (503, b"", Unreachable, "HTTP 503"),
        (400, b'"bad matcher format"', OperationFailed, "refused the filter"),
        (200, b"<html>login</html>", OperationFailed, "no API v2 alert list"),
        (200, b'[{"labels":{"a":1}}]', OperationFailed, "malformed alert"),
        (302, b"", OperationFailed, "HTTP 302"),
    ],
)
def test_answers_that_are_no_alert_list_are_errors_in_our_words(
    status: int, body: bytes, error: type[Exception], said: str
) -> None:
    with pytest.raises(error, match=said):
        am._alerts(URL, status, body)


def test_the_request_asks_for_unsilenced_uninhibited_active_alerts_per_matcher() -> None:
    sent: list[str] = []
    client = am.Alertmanager("http://am:9093/prefix/")

    def fake_get(path: str) -> tuple[int, bytes]:
        sent.append(path)
        return 200, b"[]"

    client._get = fake_get  # type: ignore[method-assign]
    client.firing(alertmatchers.parse('severity="critical",team=~"gpu|x"'))
    assert sent == [
        "/prefix/api/v2/alerts?active=true&silenced=false&inhibited=false"
        "&filter=severity%3D%22critical%22&filter=team%3D~%22gpu%7Cx%22"
    ]


def test_a_closed_port_is_unreachable_within_the_deadline() -> None:
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(Unreachable, match="cannot reach Alertmanager"):
        am.Alertmanager(f"http://127.0.0.1:{port}", timeout=2).firing(alertmatchers.parse("a=b"))
