"""ansible-runner's artifacts are copied out of its private folder into the artifacts folder
through the one writer: regular files only, links inside never followed (issue 16 review)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from gpuops import fsio
from gpuops.adapters import ansible


def test_artifacts_are_copied_without_following_links(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("private key\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "x.json").write_text("{}")
    with fsio.private_tempdir("gpuops-test-") as private:
        run = private.path / "artifacts" / "plan"
        (run / "job_events").mkdir(parents=True)
        (run / "stdout").write_text("PLAY RECAP ok=3\n")
        (run / "job_events" / "1-abc.json").write_text('{"event": "runner_on_ok"}')
        (run / "command").write_text(
            json.dumps({"command": ["ansible-playbook"], "cwd": "/x", "env": {"TOKEN": "t"}})
        )
        (run / "leak").symlink_to(secret)
        (run / "linked_dir").symlink_to(outside, target_is_directory=True)
        os.mkfifo(run / "fifo")
        ansible._scrub(private, "plan")
        copied = ansible._copy_artifacts(private, fsio.OutDir(tmp_path / "art", option="x"), "plan")
    assert copied == tmp_path / "art" / "artifacts" / "plan"
    assert (copied / "stdout").read_text() == "PLAY RECAP ok=3\n"
    assert (copied / "job_events" / "1-abc.json").read_text() == '{"event": "runner_on_ok"}'
    assert json.loads((copied / "command").read_text()) == {
        "command": ["ansible-playbook"],
        "cwd": "/x",
    }
    assert sorted(p.name for p in copied.iterdir()) == ["command", "job_events", "stdout"]
