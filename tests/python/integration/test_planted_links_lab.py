"""Files written as root never go through a planted link (issue 16): the node commands on the
lab fleet, with links to a file gpuops does not own planted where they write their reports,
JUnit, temporary files and logs. The victim stands in for /etc/shadow."""

from __future__ import annotations

from pathlib import Path

import pytest
from integration.conftest_nodes import NodesLab

pytestmark = pytest.mark.timeout(600)

PRECIOUS = "root:$y$j9T$precious:19000:0:99999:7:::\n"


def _plant(folder: Path, victim: Path, names: list[str]) -> None:
    folder.mkdir()
    for name in names:
        (folder / name).symlink_to(victim)


def test_nodes_inspect_never_writes_through_links_planted_in_its_report_folder(
    nodes_lab: NodesLab, tmp_path: Path
) -> None:
    victim = tmp_path / "shadow"
    victim.write_text(PRECIOUS)
    report = tmp_path / "report"
    _plant(
        report,
        victim,
        ["inspect-junit.xml.tmp", "inspect.json.tmp", "inspect-junit.xml", "fleet.html"],
    )
    inv = nodes_lab.fleet.facts["inventory"]
    run = nodes_lab.gpuops(
        "nodes", "inspect", "-i", inv, "-l", "gpu-h800-01", "--report-dir", str(report),
        tmp=tmp_path,
    )  # fmt: skip
    assert run.rc == 0, run.stderr
    assert victim.read_text() == PRECIOUS
    for name in ("inspect.json", "inspect-junit.xml", "fleet.html"):
        assert (report / name).is_file() and not (report / name).is_symlink(), name
    assert "gpu-h800-01" in (report / "inspect-junit.xml").read_text()


def test_nodes_update_refuses_a_log_planted_as_a_link_and_writes_nothing_through_it(
    nodes_lab: NodesLab, tmp_path: Path
) -> None:
    victim = tmp_path / "shadow"
    victim.write_text(PRECIOUS)
    artifacts = tmp_path / "artifacts"
    _plant(artifacts, victim, ["progress.log", "update.json.tmp", "update-junit.xml.tmp"])
    inv = nodes_lab.fleet.facts["inventory"]
    run = nodes_lab.gpuops(
        "nodes", "update", "-i", inv, "-l", "gpu-h800-01", "--check",
        "--artifacts-dir", str(artifacts), tmp=tmp_path,
    )  # fmt: skip
    assert victim.read_text() == PRECIOUS
    assert run.rc == 1, run.stderr
    assert run.doc is not None and "progress.log" in run.doc["error"]["message"]
    assert "not a plain file" in run.doc["error"]["message"]


def test_a_link_given_as_the_artifacts_folder_is_exit_2_and_nothing_lands_behind_it(
    nodes_lab: NodesLab, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "artifacts").symlink_to(elsewhere)
    inv = nodes_lab.fleet.facts["inventory"]
    for args in (
        ["nodes", "update", "-i", inv, "-l", "gpu-h800-01", "--check", "--artifacts-dir"],
        ["nodes", "inspect", "-i", inv, "-l", "gpu-h800-01", "--report-dir"],
    ):
        run = nodes_lab.gpuops(*args, str(tmp_path / "artifacts"), tmp=tmp_path)
        assert run.rc == 2, run.stderr
        assert run.doc is not None
        assert run.doc["error"]["field"] in ("artifacts_dir", "report_dir"), run.doc
        assert list(elsewhere.iterdir()) == []
