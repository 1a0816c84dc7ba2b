"""Plain agents: resources/org/gpuops/agent/bootstrap-gpuops.sh, run for real.

It installs exactly the library's version (resources/org/gpuops/VERSION) of the distribution
gpu-ops-cli into a virtualenv from a wheelhouse with no index reachable (as root: inside an
empty network namespace, so not even loopback answers), or from an internal PEP 503 index on
127.0.0.1, each wheel checked against the sha256 in the wheelhouse's requirements.txt (a
swapped wheel is refused); a second run installs nothing; wrong or missing settings fail with
a message that names them.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from integration.conftest_agent import AGENT, LIBRARY_VERSION, SimpleIndex, normalize, offline_env

SCRIPT = AGENT / "bootstrap-gpuops.sh"
#: The interpreter behind the test venv: what an agent's python3 would be.
PYTHON = str(Path(sys.base_prefix) / "bin" / "python3")
#: Without a network at all when we may make an empty network namespace (root).
NO_NETWORK = ["unshare", "--net", "--"] if os.geteuid() == 0 and shutil.which("unshare") else []


@dataclass
class Run:
    rc: int
    out: str
    err: str


def bootstrap(*, offline: bool = True, **settings: str) -> Run:
    """Run the script with these GPUOPS_* settings (and nothing else of the caller's)."""
    env = offline_env(GPUOPS_PYTHON=PYTHON, **settings)
    argv = ["sh", str(SCRIPT)]
    done = subprocess.run(
        [*NO_NETWORK, *argv] if offline else argv,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    return Run(done.returncode, done.stdout, done.stderr)


def cli_version(cli: Path) -> str:
    out = subprocess.run(
        [str(cli), "--output", "json", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    return str(json.loads(out)["version"])


def installed_dists(venv: Path) -> dict[str, str]:
    """name -> version of every distribution in the venv, asked of the venv's own Python."""
    code = (
        "import importlib.metadata as m, json;"
        "print(json.dumps({d.metadata['Name']: d.version for d in m.distributions()}))"
    )
    out = subprocess.run(
        [str(venv / "bin" / "python"), "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    return {normalize(name): version for name, version in json.loads(out).items()}


def test_library_version_matches_the_package() -> None:
    """The bootstrap installs gpu-ops-cli==VERSION: the wheel built from python/ must be it."""
    import gpuops

    assert gpuops.__version__ == LIBRARY_VERSION


@pytest.fixture(scope="module")
def installed(wheelhouse: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Run]:
    venv = tmp_path_factory.mktemp("agent") / "gpuops-venv"
    run = bootstrap(
        GPUOPS_VERSION=LIBRARY_VERSION, GPUOPS_WHEELHOUSE=str(wheelhouse), GPUOPS_VENV=str(venv)
    )
    assert run.rc == 0, f"bootstrap failed ({run.rc}):\n{run.out}\n{run.err}"
    return venv, run


def test_wheelhouse_bootstrap_installs_exactly_the_library_version(
    installed: tuple[Path, Run], wheelhouse: Path
) -> None:
    venv, run = installed
    cli = venv / "bin" / "gpuops"
    assert run.out.splitlines() == [f"gpuops {LIBRARY_VERSION}", f"GPUOPS_CLI={cli}"]
    assert cli_version(cli) == LIBRARY_VERSION
    dists = installed_dists(venv)
    assert dists["gpu-ops-cli"] == LIBRARY_VERSION
    assert "gpuops" not in dists  # the public index's project of that name is another one
    # the CLI's runtime came from the wheelhouse: every locked dependency, at its version;
    # except pip, which `python -m venv` seeds itself (the lock does not pin it)
    locked = dict(
        line.split("==", 1)
        for line in (wheelhouse / "requirements.lock").read_text().splitlines()
        if "==" in line and not line.startswith((" ", "#"))
    )
    locked.pop("pip", None)
    assert len(locked) > 30
    for name, pin in locked.items():
        version = pin.split()[0].rstrip("\\").strip()
        assert dists.get(normalize(name)) == version, f"{name}: {dists.get(normalize(name))}"


def test_second_run_installs_nothing(installed: tuple[Path, Run], wheelhouse: Path) -> None:
    venv, first = installed
    marker = venv / "not-reinstalled"
    marker.write_text("a reinstall (rm -rf + venv) would remove this file\n")
    dist_info = next((venv / "lib").glob("python3*/site-packages/gpu_ops_cli-*.dist-info"))
    before = {p: (p.stat().st_ino, p.stat().st_mtime_ns) for p in (venv / "pyvenv.cfg", dist_info)}

    again = bootstrap(
        GPUOPS_VERSION=LIBRARY_VERSION, GPUOPS_WHEELHOUSE=str(wheelhouse), GPUOPS_VENV=str(venv)
    )

    assert again.rc == 0, again.err
    assert again.out == first.out
    assert marker.exists()
    assert {p: (p.stat().st_ino, p.stat().st_mtime_ns) for p in before} == before
    assert not Path(f"{venv}.lock").exists()


def swapped_wheelhouse(wheelhouse: Path, dest: Path) -> Path:
    """A copy of the wheelhouse whose gpuops wheel is another, installable wheel of the same
    name and version (one module more): what a tampered share or cache would serve."""
    shutil.copytree(wheelhouse, dest, copy_function=os.link)
    (original,) = dest.glob("gpu_ops_cli-*.whl")
    planted = b"PLANTED = True\n"
    digest = base64.urlsafe_b64encode(hashlib.sha256(planted).digest()).rstrip(b"=").decode()
    with zipfile.ZipFile(original) as zin:
        entries = [(info, zin.read(info)) for info in zin.infolist()]
    original.unlink()  # a link to the fixture's file: replace it, never write through it
    with zipfile.ZipFile(original, "w", zipfile.ZIP_DEFLATED) as zout:
        for info, data in entries:
            record = f"gpuops/_planted.py,sha256={digest},{len(planted)}\n".encode()
            zout.writestr(info, data + record if info.filename.endswith("/RECORD") else data)
        zout.writestr("gpuops/_planted.py", planted)
    return dest


def test_a_swapped_gpuops_wheel_is_refused(wheelhouse: Path, tmp_path: Path) -> None:
    tampered = swapped_wheelhouse(wheelhouse, tmp_path / "wheelhouse")
    venv = tmp_path / "venv"
    run = bootstrap(
        GPUOPS_VERSION=LIBRARY_VERSION, GPUOPS_WHEELHOUSE=str(tampered), GPUOPS_VENV=str(venv)
    )
    assert run.rc == 1, f"the swapped wheel was installed ({run.rc}):\n{run.out}\n{run.err}"
    assert "do not match the hashes" in run.err.lower(), run.err
    assert f"from the wheelhouse {tampered}" in run.err
    assert "GPUOPS_CLI=" not in run.out
    assert not (venv / "bin" / "gpuops").exists()
    assert not list(venv.glob("lib/python3*/site-packages/gpuops/_planted.py"))


def test_index_bootstrap_installs_from_the_internal_index(
    simple_index: SimpleIndex, wheelhouse: Path, tmp_path: Path
) -> None:
    venv = tmp_path / "venv"
    run = bootstrap(
        offline=False,  # the index is on loopback; the default index is still unreachable
        GPUOPS_VERSION=LIBRARY_VERSION,
        GPUOPS_INDEX_URL=simple_index.url,
        GPUOPS_REQUIREMENTS=str(wheelhouse / "requirements.txt"),
        GPUOPS_VENV=str(venv),
    )
    assert run.rc == 0, f"bootstrap failed ({run.rc}):\n{run.out}\n{run.err}"
    assert cli_version(venv / "bin" / "gpuops") == LIBRARY_VERSION
    requested = simple_index.requested()
    assert "/simple/gpu-ops-cli/" in requested
    assert "/simple/gpuops/" not in requested
    assert f"/files/gpu_ops_cli-{LIBRARY_VERSION}-py3-none-any.whl" in requested


def test_wheelhouse_without_that_version_fails_clearly(wheelhouse: Path, tmp_path: Path) -> None:
    run = bootstrap(
        GPUOPS_VERSION="99.0.0", GPUOPS_WHEELHOUSE=str(wheelhouse), GPUOPS_VENV=str(tmp_path / "v")
    )
    assert run.rc == 1
    assert f"could not install gpu-ops-cli==99.0.0 from the wheelhouse {wheelhouse}: " in run.err
    assert f"'{wheelhouse}/requirements.txt' does not pin it" in run.err
    assert "GPUOPS_CLI=" not in run.out
    assert not (tmp_path / "v").exists(), "nothing is created for a version it cannot install"


def test_unreachable_index_fails_clearly(wheelhouse: Path, tmp_path: Path) -> None:
    run = bootstrap(
        GPUOPS_VERSION=LIBRARY_VERSION,
        GPUOPS_INDEX_URL="http://127.0.0.1:9/simple/",
        GPUOPS_REQUIREMENTS=str(wheelhouse / "requirements.txt"),
        GPUOPS_VENV=str(tmp_path / "v"),
        PIP_RETRIES="0",  # fail at the first refused connection
    )
    assert run.rc == 1
    want = f"could not install gpu-ops-cli=={LIBRARY_VERSION} from the index http://127.0.0.1:9/"
    assert want in run.err


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"GPUOPS_WHEELHOUSE": "{wh}"}, "set GPUOPS_VERSION"),
        ({"GPUOPS_VERSION": ""}, "set GPUOPS_VERSION"),
        (
            {"GPUOPS_VERSION": "{v}"},
            "set GPUOPS_WHEELHOUSE (a directory of wheels) or GPUOPS_INDEX_URL",
        ),
        (
            {
                "GPUOPS_VERSION": "{v}",
                "GPUOPS_WHEELHOUSE": "{wh}",
                "GPUOPS_INDEX_URL": "http://127.0.0.1:9/",
            },
            "set only one of GPUOPS_WHEELHOUSE and GPUOPS_INDEX_URL",
        ),
        (
            {"GPUOPS_VERSION": "{v}", "GPUOPS_WHEELHOUSE": "{tmp}/nowhere"},
            "GPUOPS_WHEELHOUSE '{tmp}/nowhere' is not a directory",
        ),
        (
            {"GPUOPS_VERSION": "0.1.0; touch {tmp}/pwned", "GPUOPS_WHEELHOUSE": "{wh}"},
            "is not a version such as 0.1.0",
        ),
        (
            {"GPUOPS_VERSION": "{v}", "GPUOPS_INDEX_URL": "http://127.0.0.1:9/simple/"},
            "set GPUOPS_REQUIREMENTS to the hashed requirements file of this version",
        ),
        (
            {
                "GPUOPS_VERSION": "{v}",
                "GPUOPS_WHEELHOUSE": "{wh}",
                "GPUOPS_REQUIREMENTS": "{tmp}",
            },
            "could not install gpu-ops-cli=={v} from the wheelhouse {wh}: '{tmp}' is not a file",
        ),
        (
            {
                "GPUOPS_VERSION": "{v}",
                "GPUOPS_WHEELHOUSE": "{wh}",
                "GPUOPS_REQUIREMENTS": "{wh}/requirements.lock",
            },
            "from the wheelhouse {wh}: '{wh}/requirements.lock' does not pin it",
        ),
    ],
    ids=[
        "no-version",
        "empty-version",
        "no-source",
        "two-sources",
        "no-such-dir",
        "bad-version",
        "index-without-hashes",
        "requirements-not-a-file",
        "requirements-without-gpu-ops-cli",
    ],
)
def test_missing_or_wrong_settings_fail_clearly(
    settings: dict[str, str], message: str, wheelhouse: Path, tmp_path: Path
) -> None:
    def fill(text: str) -> str:
        return text.format(wh=wheelhouse, v=LIBRARY_VERSION, tmp=tmp_path)

    venv = tmp_path / "venv"
    run = bootstrap(GPUOPS_VENV=str(venv), **{k: fill(v) for k, v in settings.items()})
    assert run.rc != 0
    assert fill(message) in run.err
    assert run.err.startswith("bootstrap-gpuops: ")
    assert not venv.exists(), "nothing is installed when the settings are wrong"
    assert not (tmp_path / "pwned").exists()
