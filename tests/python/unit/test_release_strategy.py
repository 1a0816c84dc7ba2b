"""A progressive release's strategy (issue 20): what ``strategy`` accepts, the errors that name
file and key, the canary's replicas, the query placeholders."""

from __future__ import annotations

from typing import Any

import pytest

from gpuops.core import releaseconfig
from gpuops.core.releasestrategy import (
    AnalysisStep,
    ApprovalStep,
    CanaryReplicas,
    GpuCheck,
    HttpCheck,
    InPlace,
    JobCheck,
    Pause,
    PrometheusCheck,
    Strategy,
    parse_strategy,
    step_kind,
    substitute,
)
from gpuops.errors import ExitCode, InvalidInput

SOURCE = "app/gpuops-release.yaml"
PROM = {"url": "http://prometheus.monitoring:9090", "query": "up", "max": 0.05}


def _doc(strategy: Any, deployment: str = "infer") -> dict[str, Any]:
    env = {"namespace": "ai", "deployment": deployment, "image": "h.example.com/ai/infer"}
    return {"environments": {"production": {**env, "strategy": strategy}}}


def _parse(strategy: Any, deployment: str = "infer") -> Strategy | None:
    cfg = releaseconfig.parse(_doc(strategy, deployment), SOURCE)
    return cfg.environment("production").strategy


def test_the_designs_example_parses_to_its_types() -> None:
    strategy = _parse(
        {
            "steps": [
                {"replicas": 1},
                {"pause_seconds": 120},
                {
                    "analysis": {
                        "name": "error-rate",
                        "interval_seconds": 10,
                        "count": 5,
                        "failure_limit": 1,
                        "inconclusive": "fail",
                        "prometheus": {
                            **PROM,
                            "token_env": "PROM_TOKEN",
                            "query": 'sum(rate(x{namespace="$namespace"}[1m]))\n/ 2',
                        },
                    }
                },
                {
                    "analysis": {
                        "http": {
                            "port": 8080,
                            "path": "/healthz",
                            "status": 200,
                            "max_latency_ms": 500,
                            "json": {"field": "status", "equals": "ok"},
                        }
                    }
                },
                {
                    "analysis": {
                        "job": {"command": ["python", "-m", "smoke"], "timeout_seconds": 30}
                    }
                },
                {"analysis": {"gpu": {"inventory": "ansible/inventory/production"}}},
                {"replicas": "50%"},
                {"approval": {"approvers": ["release-managers"], "timeout_minutes": 60}},
            ],
            "in_place": {"max_unavailable": 1},
        }
    )
    assert strategy is not None and strategy.canary
    s = strategy.steps
    assert s[0] == CanaryReplicas(count=1) and s[1] == Pause(120)
    assert s[2] == AnalysisStep(
        "error-rate",
        PrometheusCheck(
            PROM["url"], 'sum(rate(x{namespace="$namespace"}[1m]))\n/ 2', None, 0.05, "PROM_TOKEN"
        ),
        10,
        5,
        1,
        "fail",
    )
    assert isinstance(s[2], AnalysisStep) and s[2].kind == "prometheus"
    # defaults: name "<kind>-<step index>", interval 10, count 1, no failure allowed, fail
    assert s[3] == AnalysisStep(
        "http-3", HttpCheck(8080, "/healthz", 200, 500, "status", "ok"), 10, 1, 0, "fail"
    )
    assert s[4] == AnalysisStep("job-4", JobCheck(("python", "-m", "smoke"), 30), 1, 1, 0, "fail")
    assert s[5] == AnalysisStep("gpu-5", GpuCheck("ansible/inventory/production"))
    assert s[6] == CanaryReplicas(percent=50)
    assert s[7] == ApprovalStep(("release-managers",), 60)
    assert [step_kind(x) for x in s] == ["replicas", "pause"] + ["analysis"] * 4 + [
        "replicas",
        "approval",
    ]
    assert strategy.in_place == InPlace(1)


def test_no_strategy_is_todays_release_and_in_place_alone_is_one() -> None:
    env = _doc(None)["environments"]["production"]
    del env["strategy"]
    cfg = releaseconfig.parse({"environments": {"production": env}}, SOURCE)
    assert cfg.environment("production").strategy is None
    only = _parse({"in_place": {}})
    assert only == Strategy((), InPlace(1)) and not only.canary


def test_parse_strategy_alone_names_the_path_it_is_given() -> None:
    with pytest.raises(InvalidInput, match=r"^f\.yaml: a\.strategy\.steps\[0\]\.replicas: "):
        parse_strategy({"steps": [{"replicas": 0}]}, "f.yaml", "a.strategy")


def _analysis(**body: Any) -> dict[str, Any]:
    return {"steps": [{"replicas": 1}, {"analysis": body}]}


S = "environments.production.strategy"
A = f"{S}.steps[1].analysis"


@pytest.mark.parametrize(
    ("strategy", "where"),
    [
        ([], f"{S}: must be a mapping, not an array"),
        ({}, f"{S}: must give steps, in_place or both"),
        ({"step": []}, f"{S}.step: is not a known key"),
        ({"steps": []}, f"{S}.steps: must list at least one step"),
        ({"steps": [{"replicas": 1, "pause_seconds": 5}]}, f"{S}.steps[0]: must have exactly one"),
        ({"steps": [{}]}, f"{S}.steps[0]: must have exactly one key"),
        ({"steps": ["replicas"]}, f"{S}.steps[0]: must be a mapping"),
        ({"steps": [{"replica": 1}]}, f"{S}.steps[0].replica: is not a known key"),
        ({"steps": [{"replicas": 0}]}, f"{S}.steps[0].replicas: must be a whole number from 1"),
        ({"steps": [{"replicas": -2}]}, f"{S}.steps[0].replicas: must be a whole number"),
        ({"steps": [{"replicas": True}]}, f"{S}.steps[0].replicas: must be a whole number"),
        ({"steps": [{"replicas": 1.5}]}, f"{S}.steps[0].replicas: must be a whole number"),
        ({"steps": [{"replicas": "150%"}]}, f"{S}.steps[0].replicas: must be a whole number >= 1"),
        ({"steps": [{"replicas": "0%"}]}, f"{S}.steps[0].replicas: must be a whole number >= 1"),
        ({"steps": [{"replicas": "half"}]}, f"{S}.steps[0].replicas: must be a whole number"),
        ({"steps": [{"pause_seconds": -1}]}, f"{S}.steps[0].pause_seconds: must be a whole"),
        ({"steps": [{"pause_seconds": None}]}, f"{S}.steps[0].pause_seconds: is required"),
        ({"steps": [{"approval": {}}]}, f"{S}.steps[0].approval.approvers: must list at least"),
        (
            {"steps": [{"approval": {"approvers": ["a;rm"]}}]},
            f"{S}.steps[0].approval.approvers: must list",
        ),
        (
            {"steps": [{"approval": {"approvers": ["a"], "timeout_minutes": 0}}]},
            f"{S}.steps[0].approval.timeout_minutes: must be a whole number from 1",
        ),
        (
            {"steps": [{"analysis": {"gpu": {"inventory": "i"}}}]},
            f"{S}.steps[0]: an analysis measures the canary: put a replicas step before it",
        ),
        (_analysis(), f"{A}: must name exactly one provider"),
        (_analysis(gpu={"inventory": "i"}, job={"command": ["x"]}), f"{A}: must name exactly"),
        (_analysis(gpu={"inventory": "i"}, name="Bad_Name"), f"{A}.name: 'Bad_Name' is not a name"),
        (
            _analysis(gpu={"inventory": "i"}, interval_seconds=-5),
            f"{A}.interval_seconds: must be a whole number from 1 to 3600, not -5",
        ),
        (_analysis(gpu={"inventory": "i"}, interval_seconds=0), f"{A}.interval_seconds"),
        (_analysis(gpu={"inventory": "i"}, count=0), f"{A}.count: must be a whole number from 1"),
        (
            _analysis(gpu={"inventory": "i"}, count=2, failure_limit=2),
            f"{A}.failure_limit: is 2, not less than count (2): the analysis could never fail",
        ),
        (_analysis(gpu={"inventory": "i"}, failure_limit=-1), f"{A}.failure_limit: must be"),
        (
            _analysis(gpu={"inventory": "i"}, inconclusive="retry"),
            f"{A}.inconclusive: must be one of fail, pass, ignore, not 'retry'",
        ),
        (_analysis(gpu={}), f"{A}.gpu.inventory: is required"),
        (_analysis(gpu={"inventory": "a\nb"}), f"{A}.gpu.inventory: holds a control character"),
        (_analysis(gpu=None), f"{A}: must name exactly one provider"),
        (_analysis(prometheus={**PROM, "url": None}), f"{A}.prometheus.url: is required"),
        (
            _analysis(prometheus={**PROM, "url": "http://user:s3cret@prom:9090"}),
            f"{A}.prometheus.url: prometheus url 'http://prom:9090' is not an http(s) URL: it "
            "carries a user name or password",
        ),
        (
            _analysis(prometheus={**PROM, "url": "file:///etc/passwd"}),
            f"{A}.prometheus.url: prometheus url 'file:///etc/passwd' is not an http(s) URL: "
            "the scheme must be http or https",
        ),
        (
            _analysis(prometheus={**PROM, "url": "ftp://prom/"}),
            f"{A}.prometheus.url: prometheus url 'ftp://prom/' is not an http(s) URL",
        ),
        (
            _analysis(prometheus={**PROM, "url": "http://prom:99999"}),
            f"{A}.prometheus.url: prometheus url 'http://prom:99999' is not an http(s) URL: its",
        ),
        (
            _analysis(prometheus={**PROM, "query": "x" * 2001}),
            f"{A}.prometheus.query: is 2001 characters long; at most 2000",
        ),
        (_analysis(prometheus={**PROM, "query": "  "}), f"{A}.prometheus.query: must be a non"),
        (
            _analysis(prometheus={**PROM, "query": "up\x1b[2J"}),
            f"{A}.prometheus.query: holds a control character",
        ),
        (
            _analysis(prometheus={"url": PROM["url"], "query": "up"}),
            f"{A}.prometheus: must give max, min or both",
        ),
        (_analysis(prometheus={**PROM, "max": "0.05"}), f"{A}.prometheus.max: must be a finite"),
        (_analysis(prometheus={**PROM, "max": float("nan")}), f"{A}.prometheus.max: must be"),
        (_analysis(prometheus={**PROM, "max": float("inf")}), f"{A}.prometheus.max: must be"),
        (_analysis(prometheus={**PROM, "max": True}), f"{A}.prometheus.max: must be a finite"),
        (
            _analysis(prometheus={**PROM, "min": 1, "max": 0.5}),
            f"{A}.prometheus.min: is 1.0, above max (0.5): no value could pass",
        ),
        (
            _analysis(prometheus={**PROM, "token_env": "PROM-TOKEN"}),
            f"{A}.prometheus.token_env: 'PROM-TOKEN' is not an environment variable name",
        ),
        (
            _analysis(prometheus={**PROM, "token_env": "$(cat /etc/shadow)"}),
            f"{A}.prometheus.token_env: '$(cat /etc/shadow)' is not an environment variable",
        ),
        (
            _analysis(prometheus={**PROM, "ca_file": "/ca.pem"}),
            f"{A}.prometheus.ca_file: is for an https url",
        ),
        (_analysis(prometheus={**PROM, "token": "x"}), f"{A}.prometheus.token: is not a known key"),
        (_analysis(http={"path": "/"}), f"{A}.http.port: is required"),
        (_analysis(http={"port": 70000}), f"{A}.http.port: must be a whole number from 1 to 65535"),
        (_analysis(http={"port": 80, "path": "healthz"}), f"{A}.http.path: 'healthz' is not an"),
        (
            _analysis(http={"port": 80, "path": "/../../secrets"}),
            f"{A}.http.path: '/../../secrets'",
        ),
        (_analysis(http={"port": 80, "path": "/%2e%2e/x"}), f"{A}.http.path: '/%2e%2e/x' is not"),
        (_analysis(http={"port": 80, "path": "/a b"}), f"{A}.http.path: '/a b' is not an HTTP"),
        (_analysis(http={"port": 80, "path": "/a#b"}), f"{A}.http.path: '/a#b' is not an HTTP"),
        (_analysis(http={"port": 80, "status": 99}), f"{A}.http.status: must be a whole number"),
        (_analysis(http={"port": 80, "max_latency_ms": 0}), f"{A}.http.max_latency_ms: must be"),
        (_analysis(http={"port": 80, "json": {"equals": 1}}), f"{A}.http.json.field: is required"),
        (
            _analysis(http={"port": 80, "json": {"field": "status"}}),
            f"{A}.http.json.equals: is required",
        ),
        (
            _analysis(http={"port": 80, "json": {"field": "a..b", "equals": 1}}),
            f"{A}.http.json.field: 'a..b' is not a dotted path",
        ),
        (
            _analysis(http={"port": 80, "json": {"field": "a", "equals": [1]}}),
            f"{A}.http.json.equals: must be a string, number, boolean or null, not an array",
        ),
        (_analysis(job={}), f"{A}.job.command: must list 1 to 64 arguments, not empty"),
        (
            _analysis(job={"command": "python -m smoke"}),
            f"{A}.job.command: must be a list of arguments (no shell runs it)",
        ),
        (_analysis(job={"command": ["", "x"]}), f"{A}.job.command[0]: must be a string"),
        (_analysis(job={"command": ["x", 1]}), f"{A}.job.command[1]: must be a string"),
        (_analysis(job={"command": ["x", "a\x00b"]}), f"{A}.job.command[1]: must be a string"),
        (
            _analysis(job={"command": ["x"], "timeout_seconds": 0}),
            f"{A}.job.timeout_seconds: must be a whole number from 1",
        ),
        (
            _analysis(job={"command": ["x"]}, count=3),
            f"{A}.count: must be 1 for a job analysis (its one measurement is the Job's end)",
        ),
        (_analysis(job={"command": ["x"]}, failure_limit=1), f"{A}.failure_limit: must be 0"),
        (_analysis(job={"command": ["x"]}, interval_seconds=5), f"{A}.interval_seconds: is not"),
        ({"in_place": {"max_unavailable": 0}}, f"{S}.in_place.max_unavailable: must be a whole"),
        ({"in_place": {"max_surge": 1}}, f"{S}.in_place.max_surge: is not a known key"),
        ({"in_place": 1}, f"{S}.in_place: must be a mapping, not an integer"),
    ],
)
def test_bad_values_name_the_file_and_the_key_and_exit_2(strategy: Any, where: str) -> None:
    with pytest.raises(InvalidInput) as info:
        _parse(strategy)
    assert info.value.message.startswith(f"{SOURCE}: {where}"), info.value.message
    assert info.value.exit_code == ExitCode.INVALID_INPUT and info.value.field == "config"
    assert "s3cret" not in info.value.message


def test_a_canary_name_over_63_characters_is_refused_at_config_time() -> None:
    ok = "d" * 56  # + "-canary" = 63
    assert _parse({"steps": [{"replicas": 1}]}, ok) is not None
    with pytest.raises(InvalidInput) as info:
        _parse({"steps": [{"replicas": 1}]}, ok + "x")
    message = info.value.message
    assert message.startswith(f"{SOURCE}: environments.production.strategy: the canary of"), message
    assert f"would be '{ok}x-canary', 64 characters: at most 63" in message
    # no canary (in place only): the long name is fine
    assert _parse({"in_place": {}}, ok + "x") == Strategy((), InPlace(1))


@pytest.mark.parametrize(
    ("step", "total", "want"),
    [
        (CanaryReplicas(count=1), 4, 1),
        (CanaryReplicas(count=3), 4, 3),
        (CanaryReplicas(count=9), 4, 4),  # at most all replicas
        (CanaryReplicas(count=2), 0, 1),  # a Deployment at 0: its canary still gets one pod
        (CanaryReplicas(percent=50), 4, 2),
        (CanaryReplicas(percent=50), 5, 3),  # rounded up
        (CanaryReplicas(percent=1), 4, 1),  # at least 1
        (CanaryReplicas(percent=25), 10, 3),
        (CanaryReplicas(percent=100), 7, 7),
        (CanaryReplicas(percent=10), 1000, 100),
    ],
)
def test_canary_replicas_resolve(step: CanaryReplicas, total: int, want: int) -> None:
    assert step.resolve(total) == want


def test_substitute_replaces_the_four_placeholders_and_nothing_else() -> None:
    query = (
        'rate(x{namespace="$namespace",deployment="$deployment",pod=~"$canary-.*",'
        'release="$release"}[1m]) + $namespaced + $other + $ + $$namespace + ${namespace}'
    )
    out = substitute(query, namespace="ai", deployment="infer", canary="infer-canary", release="7")
    assert out == (
        'rate(x{namespace="ai",deployment="infer",pod=~"infer-canary-.*",release="7"}[1m])'
        " + $namespaced + $other + $ + $ai + ${namespace}"
    )
    assert substitute("$namespace $release", namespace="a") == "a $release"
    assert substitute("$namespace", namespace="$release", release="7") == "$release"  # one pass
    with pytest.raises(ValueError, match="no placeholder 'pod'"):
        substitute("x", pod="p")
