"""Use case of ``gpuops jenkins apply``: create or update an application's build, release
and rollback jobs from the library's job template, with the rollback jobs' choices taken from
each environment's real release history. Idempotent: a job whose configuration already is
what is wanted is not written; ``check`` only says what would change. Only the elements gpuops
owns are compared and replaced (``adapters.jobxml.OWNED``); what Jenkins writes into a job's
config.xml on its own (after a Declarative run, for one) is neither drift nor overwritten. The
outcome is ok when it returns (what goes wrong raises)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, NotRequired, TypedDict

from gpuops.adapters import jobxml
from gpuops.adapters.jenkins import TOKEN_ENV, JenkinsClient
from gpuops.adapters.kube import KubeClient
from gpuops.core import jenkinsjobs
from gpuops.core.releaseconfig import ReleaseConfig
from gpuops.usecases.cluster import Cluster
from gpuops.usecases.outcome import Outcome
from gpuops.usecases.releases import config as release_config
from gpuops.usecases.releases.model import Target
from gpuops.usecases.releases.status import history

#: How many tags of a history become rollback choices.
CHOICES = 25


@dataclass(frozen=True)
class ApplyRequest:
    config: str
    url: str
    user: str | None = None
    token_env: str = TOKEN_ENV
    check: bool = False
    kubeconfig: str | None = None
    context: str | None = None


class JobChangeDocument(TypedDict):
    """One job and what ``jenkins apply`` did to it."""

    job: str  # folder/name
    kind: Annotated[str, {"enum": ["build", "release", "rollback", "clean"]}]
    action: Annotated[
        str, {"enum": ["created", "updated", "unchanged", "would-create", "would-update"]}
    ]
    environment: NotRequired[str]  # a release or rollback job: its environment
    rollback_choices: NotRequired[list[str]]  # with environment: the tags offered
    diff: NotRequired[str]  # what changed in its config.xml


class ApplyDocument(TypedDict):
    """The ``result`` of ``gpuops jenkins apply``."""

    jenkins: str  # the controller's URL, without credentials
    user: str
    check: bool
    changed: int  # jobs created or updated (or that would be)
    jobs: list[JobChangeDocument]


@dataclass
class JobChange:
    path: str
    kind: str
    action: str  # created | updated | unchanged | would-create | would-update
    diff: str = ""
    environment: str | None = None
    choices: list[str] = field(default_factory=list)

    def to_dict(self) -> JobChangeDocument:
        doc: JobChangeDocument = {"job": self.path, "kind": self.kind, "action": self.action}
        if self.environment:
            doc["environment"] = self.environment
            doc["rollback_choices"] = self.choices
        if self.diff:
            doc["diff"] = self.diff
        return doc


@dataclass
class ApplyResult:
    """The jobs on the controller (``url`` without ``user:token@``) and what changed."""

    url: str
    user: str
    check: bool
    jobs: list[JobChange]

    @property
    def changed(self) -> int:
        return sum(1 for j in self.jobs if j.action != "unchanged")

    def to_dict(self) -> ApplyDocument:
        return {
            "jenkins": self.url,
            "user": self.user,
            "check": self.check,
            "changed": self.changed,
            "jobs": [j.to_dict() for j in self.jobs],
        }


def _load(path: str) -> tuple[jenkinsjobs.JobsConfig, ReleaseConfig]:
    releases, doc = release_config.load_with_document(path)  # the environments' checks first
    return jenkinsjobs.parse(doc, path), releases


def rollback_choices(
    request: ApplyRequest, releases: ReleaseConfig, connect: Callable[[Cluster], KubeClient]
) -> dict[str, list[str]]:
    """Per environment, the tags ``gpuops release rollback --to`` accepts, newest first."""
    out = {}
    for name in sorted(releases.environments):
        target = Target(request.config, name, request.kubeconfig, request.context)
        listed = history(target, 1000, connect).result
        out[name] = [r.tag for r in listed.choices if r.tag][:CHOICES]
    return out


Choices = Callable[[ApplyRequest, ReleaseConfig], dict[str, list[str]]]


def apply(
    request: ApplyRequest,
    choices_for: Choices | None = None,
    jenkins: Callable[[ApplyRequest], JenkinsClient] | None = None,
) -> Outcome[ApplyResult]:
    jobs_config, releases = _load(request.config)
    client = (jenkins or _connect)(request)  # checks the token's presence; no request yet
    if choices_for is None:
        choices = rollback_choices(request, releases, Cluster.connect)
    else:
        choices = choices_for(request, releases)  # every read before any write
    user = client.whoami()
    wanted = [
        (job, jobxml.render(job, jobs_config))
        for job in jenkinsjobs.jobs(jobs_config, releases, choices)
    ]
    changes = []
    for job, xml in wanted:
        current = client.job_config(job.path)
        diff = jobxml.drift(current, xml, job.kind, job.path)  # owned elements only
        change = JobChange(
            job.path,
            job.kind,
            "unchanged",
            environment=job.environment,
            choices=choices.get(job.environment or "", []),
        )
        if diff:
            change.diff = diff
            if request.check:
                change.action = "would-create" if current is None else "would-update"
            elif current is None:
                client.create(job.path, xml)
                change.action = "created"
            else:  # what Jenkins wrote stays; only the owned elements are replaced
                client.update(job.path, jobxml.merged(current, xml, job.kind, job.path))
                change.action = "updated"
        changes.append(change)
    return Outcome(ApplyResult(client.url, user, request.check, changes))  # no user:token@


def _connect(request: ApplyRequest) -> JenkinsClient:
    return JenkinsClient.connect(request.url, request.user, request.token_env)
