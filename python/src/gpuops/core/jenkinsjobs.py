"""Jobs as code: which Jenkins jobs an application has, and their parameters, pure.

The ``jenkins`` section of the application's release environments file names the jobs'
folder and prefix and where the Jenkinsfile is (its Git repository, branch, checkout
credentials, path). From it and the environments come three kinds of Pipeline job, all running
the same Jenkinsfile, told apart by their ``APP_JOB`` parameter:

* ``<name>-build``: builds and pushes the image (no parameters of its own);
* ``<name>-release``: ``APP_IMAGE_TAG``, ``APP_ENV`` (the environments), ``APP_MODEL_VERSION``,
  ``APP_NODE_CHANGE`` and ``APP_NODE_LIMIT`` (the node change of the version, S-24);
* ``<name>-rollback-<environment>``, one per environment: ``ROLLBACK_TO``, whose choices are
  ``previous`` and the tags of that environment's real release history, newest first,
  ``ROLLBACK_REASON`` and ``WITH_NODES`` (a boolean, off: the nodes go back to the release's
  node change record first, S-24);
* ``<name>-clean-agents``: scheduled (``CLEAN_SCHEDULE``, a Jenkins timer), runs
  ``gpuops image clean`` on a build agent (issue 22): what gpuops' builds left on its daemon;
* ``<name>-inspect-<environment>``, one per environment when ``jenkins.inspect_schedule`` (a
  Jenkins cron spec) is set: the scheduled GPU node inspection with quarantine and metrics
  (``APP_ENV`` its environment), started by a timer trigger, the only jobs with a trigger.

Jenkins offers a choice's first choice as its default, so no default deploys to production:
APP_ENV always starts with ``(choose)`` (the Jenkinsfile's stage Job refuses it), and a
production-like environment's rollback job starts ROLLBACK_TO with ``(choose)``, which the
CLI refuses.

The Jenkinsfile declares no ``parameters {}``: the jobs own them (a Jenkinsfile's
``parameters`` would replace the history's choices on its first run).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpuops.core.releaseconfig import ReleaseConfig
from gpuops.core.urls import password_of
from gpuops.core.values import key_shown, shown
from gpuops.errors import InvalidInput

_JOB = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
_KEYS = ("folder", "name", "repository", "branch", "credentials", "jenkinsfile", "inspect_schedule")
#: A Jenkins cron spec: five fields of digits, H, *, ranges, steps, lists (``H/30 * * * *``)
#: or one of Jenkins' aliases.
_CRON_FIELD = re.compile(r"^(H|\*|[0-9]+)(\([0-9]+-[0-9]+\))?(-[0-9]+)?(/[0-9]+)?(,.+)?$")
_CRON_ALIASES = ("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly")


@dataclass(frozen=True)
class JobsConfig:
    name: str
    repository: str
    branch: str = "main"
    credentials: str | None = None
    jenkinsfile: str = "Jenkinsfile"
    folder: str | None = None
    #: cron spec of the scheduled inspection jobs (``<name>-inspect-<environment>``); None:
    #: no inspection jobs
    inspect_schedule: str | None = None

    def path(self, job: str) -> str:
        return f"{self.folder}/{job}" if self.folder else job


@dataclass(frozen=True)
class Parameter:
    kind: str  # string | choice | boolean (default "true" or "false")
    name: str
    description: str
    choices: tuple[str, ...] = ()
    default: str = ""


@dataclass(frozen=True)
class Job:
    path: str  # folder/name
    kind: str  # build | release | rollback | clean | inspect
    description: str
    parameters: tuple[Parameter, ...] = ()
    environment: str | None = None
    notes: tuple[str, ...] = field(default=())
    #: a Jenkins timer (cron) spec: the job runs on its own (clean, inspect)
    schedule: str | None = None


#: When the agent clean job runs: daily, at a minute of 03:00-03:59 Jenkins spreads by job name
#: (``H``), when builds are rare.
CLEAN_SCHEDULE = "H 3 * * *"


def parse(doc: Any, source: str) -> JobsConfig:
    """The ``jenkins`` section of the environments file (``doc`` is the whole file)."""

    def fail(key: str, problem: str) -> InvalidInput:
        return InvalidInput(
            f"{source}: jenkins.{key}: {problem}",
            hint=f"fix jenkins.{key} in {source}",
            field="config",
        )

    section = doc.get("jenkins") if isinstance(doc, Mapping) else None
    if not isinstance(section, Mapping):
        raise InvalidInput(
            f"{source} has no jenkins section (folder, name, repository, branch, credentials, "
            "jenkinsfile): gpuops jenkins apply needs it",
            field="config",
        )
    unknown = sorted(str(k) for k in section if k not in _KEYS)
    if unknown:
        raise fail(key_shown(unknown[0]), f"is not a known key (known: {', '.join(_KEYS)})")
    values: dict[str, str] = {}
    for key in _KEYS:
        value = section.get(key)
        if value is None:
            continue
        if not isinstance(value, str) or not value.strip() or any(ord(c) < 32 for c in value):
            raise fail(key, "must be a non-empty string on one line")
        values[key] = value
    for key in ("name", "repository"):
        if key not in values:
            raise fail(key, "is required")
    if not _JOB.fullmatch(values["name"]):
        raise fail(
            "name", f"{shown(values['name'])} is not a job name (letters, digits, '.', '_', '-')"
        )
    folder = values.get("folder")
    if folder and not all(_JOB.fullmatch(p) for p in folder.split("/")):
        raise fail("folder", f"{shown(folder)} is not a folder path (names separated by '/')")
    if not re.match(r"^(https?|ssh|git)://|^[\w.-]+@[\w.-]+:", values["repository"]):
        raise fail("repository", f"{shown(values['repository'])} is not a Git URL")
    if password_of(values["repository"]):
        raise fail(
            "repository",
            f"{shown(values['repository'])} carries a password (user:password@): it would be "
            "written into the job's configuration; give the Jenkins credentials id in "
            "jenkins.credentials instead",
        )
    schedule = values.get("inspect_schedule")
    if schedule is not None and not valid_cron(schedule):
        raise fail(
            "inspect_schedule",
            f"{shown(schedule)} is not a Jenkins cron spec (five fields, e.g. 'H/30 * * * *', "
            "or @hourly, @daily...)",
        )
    return JobsConfig(
        inspect_schedule=schedule,
        name=values["name"],
        repository=values["repository"],
        branch=values.get("branch", "main"),
        credentials=values.get("credentials"),
        jenkinsfile=values.get("jenkinsfile", "Jenkinsfile"),
        folder=folder,
    )


def valid_cron(spec: str) -> bool:
    """A Jenkins timer spec of one line: five fields or an alias (Jenkins checks the rest)."""
    text = spec.strip()
    if text in _CRON_ALIASES:
        return True
    fields = text.split()
    return len(fields) == 5 and all(_CRON_FIELD.match(f) for f in fields)


#: APP_NODE_CHANGE's choices: none, then ``gpuops nodes update --change``'s.
NODE_CHANGES = ("none", "driver", "node-init", "all")

#: A first choice that deploys nothing: Jenkins offers a choice parameter's first choice as its
#: default, and the CLI refuses this one (environment names are DNS labels; it is no tag).
CHOOSE = "(choose)"
_PRODUCTION = re.compile(r"^prod(uction)?([-_.].*)?$")


def production_like(name: str, releases: ReleaseConfig) -> bool:
    """Named production (``production``, ``prod``, ``prod-eu``, ...) or its releases need a
    person's approval."""
    return bool(_PRODUCTION.match(name)) or releases.environments[name].approval.required


def release_environments(releases: ReleaseConfig) -> tuple[str, ...]:
    """APP_ENV's choices: always ``CHOOSE`` first, so that the default (the first) deploys
    nowhere (production need not be named so: ``live``, ``prd``); then the environments, the
    production-like ones last. The Jenkinsfile's stage Job refuses ``CHOOSE``."""
    envs = sorted(releases.environments, key=lambda n: (production_like(n, releases), n))
    return (CHOOSE, *envs)


def _kind(kind: str) -> Parameter:
    return Parameter(
        "choice",
        "APP_JOB",
        "Which part of the Jenkinsfile this job runs (set by gpuops jenkins apply).",
        (kind,),
    )


def jobs(
    config: JobsConfig, releases: ReleaseConfig, history: Mapping[str, Sequence[str]]
) -> list[Job]:
    """Every job, in a stable order. ``history``: per environment, the tags one may roll back
    to, newest first (``gpuops release history``)."""
    envs = sorted(releases.environments)
    out = [
        Job(
            config.path(f"{config.name}-build"),
            "build",
            f"Build, test and push the {config.name} image (gpu-ops).",
            (_kind("build"),),
        ),
        Job(
            config.path(f"{config.name}-release"),
            "release",
            f"Release a {config.name} image tag (and/or a model version) to an environment "
            "(gpu-ops).",
            (
                _kind("release"),
                Parameter("string", "APP_IMAGE_TAG", "Image tag made by the build job."),
                Parameter(
                    "choice",
                    "APP_ENV",
                    f"Target environment ({CHOOSE}: none, pick one).",
                    release_environments(releases),
                ),
                Parameter(
                    "string",
                    "APP_MODEL_VERSION",
                    "Model version to release with it (S-22); empty: unchanged.",
                ),
                Parameter(
                    "choice",
                    "APP_NODE_CHANGE",
                    "The node change that goes with this version, in this build (S-24): none, "
                    "the NVIDIA driver, node initialisation, or all (gpuops nodes update).",
                    NODE_CHANGES,
                ),
                Parameter(
                    "string",
                    "APP_NODE_LIMIT",
                    "Hosts of the node change: an inventory group or pattern (e.g. gpu_h800); "
                    "empty: every GPU node of the environment's inventory.",
                ),
            ),
        ),
    ]
    out.append(
        Job(
            config.path(f"{config.name}-clean-agents"),
            "clean",
            f"Scheduled: prune the images and build cache the {config.name} builds left on a "
            "build agent's daemon (gpuops image clean; gpu-ops). Another tenant's images stay.",
            (_kind("clean"),),
            schedule=CLEAN_SCHEDULE,
        )
    )
    for env in envs:
        tags = tuple(history.get(env, ()))
        # production's rollback job asks which release: a default run rolls nothing back
        first = (CHOOSE,) if production_like(env, releases) else ()
        out.append(
            Job(
                config.path(f"{config.name}-rollback-{env}"),
                "rollback",
                f"Roll {config.name} in {env} back to an earlier release from its history "
                "(gpu-ops). The choices are refreshed by gpuops jenkins apply.",
                (
                    _kind("rollback"),
                    Parameter("choice", "APP_ENV", "The environment of this rollback job.", (env,)),
                    Parameter(
                        "choice",
                        "ROLLBACK_TO",
                        "'previous', or a tag from the release history, newest first"
                        + (f" ({CHOOSE}: none, pick one)." if first else "."),
                        (*first, "previous", *tags),
                    ),
                    Parameter("string", "ROLLBACK_REASON", "Why (recorded in the history)."),
                    Parameter(
                        "boolean",
                        "WITH_NODES",
                        "Put the GPU nodes back first to the node change record that release "
                        "ran with (S-24: canary, batches, validation), then the image; a "
                        "release without one is refused. Off: the image only.",
                        default="false",
                    ),
                ),
                environment=env,
            )
        )
    if config.inspect_schedule:
        for env in envs:
            out.append(
                Job(
                    config.path(f"{config.name}-inspect-{env}"),
                    "inspect",
                    f"Inspect the GPU nodes of {env} on a schedule ({config.inspect_schedule}): "
                    "health, quarantine of critical nodes, metrics (gpu-ops).",
                    (
                        _kind("inspect"),
                        Parameter("choice", "APP_ENV", "The environment inspected.", (env,)),
                    ),
                    environment=env,
                    schedule=config.inspect_schedule,
                )
            )
    return out
