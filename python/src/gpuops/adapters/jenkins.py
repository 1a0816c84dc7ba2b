"""The Jenkins REST API through python-jenkins: who am I, a job's config.xml, create, update.

Imported only by ``gpuops jenkins``. Every python-jenkins / requests exception becomes a
:mod:`gpuops.errors` exception in our own words (their texts can carry response bodies).
The API token is read from an environment variable, never taken as an argument.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import Any, TypeVar

from gpuops.core.urls import remember_userinfo, without_userinfo
from gpuops.errors import InvalidInput, OperationFailed, Unreachable
from gpuops.logs import remember_secret

T = TypeVar("T")
TOKEN_ENV = "GPUOPS_JENKINS_TOKEN"  # noqa: S105 - the variable's name, not a secret
_STATUS = re.compile(r"\[(\d{3})\]")


class JenkinsClient:
    """One Jenkins controller, authenticated with a user and an API token. ``url`` is the
    controller's address as messages name it: without a ``user:token@`` it may carry."""

    def __init__(self, url: str, server: Any) -> None:
        self.url = without_userinfo(url)
        self._server = server

    @classmethod
    def connect(
        cls, url: str, user: str | None, token_env: str = TOKEN_ENV, timeout: float = 30.0
    ) -> JenkinsClient:
        import jenkins  # noqa: PLC0415 - only for gpuops jenkins

        token = os.environ.get(token_env) or None
        remember_secret(token)  # whatever the variable's name, its value is never shown
        remember_userinfo(url)
        if user and not token:
            raise InvalidInput(
                f"a Jenkins user is given but ${token_env} holds no API token",
                hint=f"export {token_env} (a Jenkins API token; never pass it as an argument)",
                field="user",
            )
        return cls(url, jenkins.Jenkins(url, username=user, password=token, timeout=timeout))

    def _call(self, what: str, fn: Callable[[], T]) -> T:
        import jenkins  # noqa: PLC0415
        import requests  # noqa: PLC0415

        try:
            return fn()
        except (
            jenkins.TimeoutException,
            requests.exceptions.ConnectionError,
            requests.exceptions.Timeout,
        ):
            raise Unreachable(
                f"cannot reach Jenkins at {self.url} ({what})", hint="check --url and the network"
            ) from None
        except jenkins.NotFoundException:
            raise OperationFailed(f"Jenkins at {self.url}: {what}: not found") from None
        except (jenkins.JenkinsException, requests.exceptions.RequestException) as exc:
            found = _STATUS.search(str(exc))
            status = f"HTTP {found.group(1)}" if found else type(exc).__name__
            raise OperationFailed(
                f"Jenkins at {self.url} refused {what} ({status})",
                hint="check the user, its API token and its Job/Create and Job/Configure rights",
            ) from None

    def whoami(self) -> str:
        me = self._call("who am I", self._server.get_whoami)
        return str(me.get("id") or me.get("fullName") or "anonymous")

    def job_config(self, path: str) -> str | None:
        """The job's config.xml, or None when there is no such job."""
        if not self._call(f"look up job {path}", lambda: self._server.job_exists(path)):
            return None
        return str(self._call(f"read job {path}", lambda: self._server.get_job_config(path)))

    def create(self, path: str, config_xml: str) -> None:
        self._call(f"create job {path}", lambda: self._server.create_job(path, config_xml))

    def update(self, path: str, config_xml: str) -> None:
        self._call(f"update job {path}", lambda: self._server.reconfig_job(path, config_xml))
