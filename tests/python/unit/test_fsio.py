"""The one writer (gpuops/fsio.py): no planted link redirects a write, a folder swapped for a
link after its check changes nothing, nothing is made before the input is valid, secrets are
redacted inside the writer, user files are regular files read with a counted cap; and a
convention test keeps every other write out of python/src."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from result_documents import load_document

from gpuops import fsio
from gpuops.errors import InvalidInput, OperationFailed

ROOT = Path(__file__).resolve().parents[3]
SRC = ROOT / "python" / "src" / "gpuops"
GPUOPS = str(Path(sys.executable).parent / "gpuops")
SECRET = 'pa$$"w<o>rd\\1234'


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    """A file gpuops does not own (think /etc/shadow), and its content."""
    path = tmp_path / "victim"
    path.write_text("root:precious\n")
    return path


def _untouched(victim: Path) -> None:
    assert victim.read_text() == "root:precious\n"
    assert not victim.is_symlink()


# -- writes never follow a link ---------------------------------------------------------------


@pytest.mark.parametrize("name", ["update.json", "update-junit.xml", "fleet.html"])
def test_a_link_planted_at_a_document_is_replaced_not_followed(
    tmp_path: Path, victim: Path, name: str
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / name).symlink_to(victim)
    (out / f"{name}.tmp").symlink_to(victim)  # where the old writer put its temporary file
    written = fsio.OutDir(out, option="artifacts_dir").save_text(name, "ours\n")
    _untouched(victim)
    assert written == out / name and not written.is_symlink() and written.read_text() == "ours\n"


def test_a_link_planted_at_a_log_is_refused(tmp_path: Path, victim: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "progress.log").symlink_to(victim)
    folder = fsio.OutDir(out, option="artifacts_dir")
    with pytest.raises(OperationFailed, match=r"progress\.log"), folder.append("progress.log"):
        pass
    _untouched(victim)


def test_a_hard_link_or_fifo_planted_at_a_log_is_refused(tmp_path: Path, victim: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    os.link(victim, out / "progress.log")
    os.mkfifo(out / "other.log")  # opening it for writing would block with no reader
    folder = fsio.OutDir(out, option="artifacts_dir")
    for name in ("progress.log", "other.log"):
        with (
            pytest.raises(OperationFailed, match=f"{name}.*not a plain file"),
            folder.append(name) as log,
        ):
            log.write("x\n")
    _untouched(victim)


def test_a_log_is_appended_line_by_line(tmp_path: Path) -> None:
    folder = fsio.OutDir(tmp_path / "out", option="artifacts_dir")
    for line in ("one\n", "two\n"):
        with folder.append("progress.log") as log:
            log.write(line)
    assert (tmp_path / "out" / "progress.log").read_text() == "one\ntwo\n"


@pytest.mark.parametrize("kind", ["link to a folder", "file", "dangling link"])
def test_an_output_folder_that_is_a_link_or_no_folder_is_an_input_error_naming_the_option(
    tmp_path: Path, kind: str
) -> None:
    other = tmp_path / "elsewhere"
    other.mkdir()
    given = tmp_path / "out"
    if kind == "file":
        given.write_text("")
    else:
        given.symlink_to(other if kind == "link to a folder" else tmp_path / "missing")
    with pytest.raises(InvalidInput) as raised:
        fsio.OutDir(given, option="report_dir")
    assert raised.value.field == "report_dir" and "--report-dir" in raised.value.message
    assert list(other.iterdir()) == []


def test_the_users_own_path_may_pass_through_a_link_above_the_folder(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "via").symlink_to(real)
    fsio.OutDir(tmp_path / "via" / "out" / "deep", option="out").save_text("a.txt", "x")
    assert (real / "out" / "deep" / "a.txt").read_text() == "x"


def test_a_folder_swapped_for_a_link_after_its_check_is_not_written_through(
    tmp_path: Path,
) -> None:
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    out.mkdir()
    elsewhere.mkdir()
    folder = fsio.OutDir(out, option="artifacts_dir")  # checked: a real folder
    out.rename(tmp_path / "moved")
    out.symlink_to(elsewhere)  # swapped before the first write
    with pytest.raises(InvalidInput, match="symbolic link"):
        folder.save_text("update.json", "{}")
    assert list(elsewhere.iterdir()) == []


def test_a_folder_swapped_for_a_link_while_open_keeps_the_writes_in_the_folder_checked(
    tmp_path: Path,
) -> None:
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    elsewhere.mkdir()
    folder = fsio.OutDir(out, option="artifacts_dir")
    folder.save_text("first.txt", "1")
    sub = folder.subdir("ansible")
    out.rename(tmp_path / "moved")
    out.symlink_to(elsewhere)  # swapped between two writes
    folder.save_text("second.txt", "2")
    with folder.append("progress.log") as log:
        log.write("line\n")
    sub.save_text("inside.txt", "3")
    assert list(elsewhere.iterdir()) == []
    moved = tmp_path / "moved"
    assert sorted(p.name for p in moved.iterdir()) == [
        "ansible",
        "first.txt",
        "progress.log",
        "second.txt",
    ]
    assert (moved / "ansible" / "inside.txt").read_text() == "3"


def test_a_link_planted_where_a_subfolder_goes_is_refused(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    folder = fsio.OutDir(tmp_path / "out", option="artifacts_dir")
    folder.save_text("a.txt", "a")
    (tmp_path / "out" / "ansible").symlink_to(elsewhere)
    with pytest.raises(OperationFailed, match="ansible"):
        folder.subdir("ansible")
    assert list(elsewhere.iterdir()) == []


def test_nothing_is_created_before_the_first_write(tmp_path: Path) -> None:
    fsio.OutDir(tmp_path / "new" / "a" / "b", option="artifacts_dir")
    assert not (tmp_path / "new").exists()


def test_documents_are_not_left_half_written_and_keep_their_mode(tmp_path: Path) -> None:
    os.umask(0o077)
    try:
        path = fsio.OutDir(tmp_path, option="out").save_json("r.json", {"b": 1, "a": [2]})
    finally:
        os.umask(0o022)
    assert json.loads(path.read_text()) == {"a": [2], "b": 1}
    assert path.stat().st_mode & 0o777 == fsio.PUBLIC
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]  # no temporary file left


def test_a_single_document_replaces_a_link_at_its_path(tmp_path: Path, victim: Path) -> None:
    target = tmp_path / "result.json"
    target.symlink_to(victim)
    fsio.write_json_file(target, {"ok": True}, option="result_file")
    _untouched(victim)
    assert json.loads(target.read_text()) == {"ok": True}


# -- redaction inside the writer --------------------------------------------------------------


def test_every_write_is_redacted_in_every_form_a_secret_takes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GPUOPS_REGISTRY_PASSWORD", SECRET)
    folder = fsio.OutDir(tmp_path, option="out")
    folder.save_json("doc.json", {"message": f"login with {SECRET}", SECRET: [SECRET]})
    folder.save_text("page.html", f"<p>{SECRET}</p><p>{json.dumps(SECRET)}</p>")
    import xml.etree.ElementTree as ET

    import jinja2

    page = jinja2.Environment(autoescape=True).from_string('<p title="{{ s }}">{{ s }}</p>')
    folder.save_text("escaped.html", page.render(s=SECRET))  # Jinja2's (markupsafe's) escaping
    node = ET.Element("failure", message=SECRET)
    node.text = SECRET
    folder.save_text("escaped.xml", ET.tostring(node, encoding="unicode"))  # ElementTree's
    folder.save_bytes("raw.txt", SECRET.encode())
    folder.save_bytes("latin1.log", b"\xff\xfe caf\xe9 " + SECRET.encode() + b"\n")  # not UTF-8
    with folder.append("progress.log") as log:
        log.write(f"[host] {SECRET}\n")
    fsio.write_file(tmp_path / "single.txt", SECRET, option="result_file")
    for path in tmp_path.iterdir():
        data = path.read_bytes()
        assert b"pa$$" not in data and b"****" in data, (path.name, data)
    assert (tmp_path / "latin1.log").read_bytes() == b"\xff\xfe caf\xe9 ****\n"


def test_secret_material_is_written_only_into_a_private_folder(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="private"):
        fsio.OutDir(tmp_path, option="out").save_secret("client.key", b"KEY")
    with fsio.private_tempdir("gpuops-test-") as tmp:
        path = tmp.save_secret("client.key", b"KEY")
        assert path.read_bytes() == b"KEY" and path.stat().st_mode & 0o777 == 0o600
        assert tmp.path.stat().st_mode & 0o777 == 0o700
    assert not path.exists()


# -- files read from the user -----------------------------------------------------------------


def test_a_device_is_refused_before_it_is_read() -> None:
    with pytest.raises(InvalidInput, match="not a regular file"):
        fsio.read_bytes("/dev/zero", cap=1024, what="parameters file")


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    errors: list[BaseException] = []

    def read() -> None:
        try:
            fsio.read_text(fifo, cap=1024, what="environments file")
        except InvalidInput as exc:
            errors.append(exc)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(10)
    assert not reader.is_alive(), "reading a FIFO blocked"
    assert errors and "not a regular file" in str(errors[0])


def test_the_cap_is_counted_while_reading(tmp_path: Path) -> None:
    big = tmp_path / "big.json"
    big.write_bytes(b"x" * 1025)
    with pytest.raises(InvalidInput, match="larger than 1,024 bytes"):
        fsio.read_bytes(big, cap=1024, what="input")
    assert fsio.read_bytes(big, cap=1025, what="input") == b"x" * 1025


def test_a_folder_and_bad_text_are_input_errors(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="not a regular file"):
        fsio.read_text(tmp_path, cap=10, what="input")
    (tmp_path / "latin1").write_bytes(b"caf\xe9")
    with pytest.raises(InvalidInput, match="not UTF-8"):
        fsio.read_text(tmp_path / "latin1", cap=10, what="input")


# -- through the installed command, as Jenkins runs it ----------------------------------------


def _gpuops(tmp: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, dict]:
    full = {k: v for k, v in os.environ.items() if not k.startswith(("GPUOPS_", "KUBECONFIG"))}
    full |= {"KUBECONFIG": str(tmp / "no-kubeconfig"), "GPUOPS_ERROR_FILE": str(tmp / "e.json")}
    full |= env or {}
    done = subprocess.run(
        [GPUOPS, *args], capture_output=True, text=True, env=full, timeout=120, check=False, cwd=tmp
    )
    doc = load_document(tmp / "e.json") if (tmp / "e.json").exists() else {}
    return done.returncode, doc


def test_a_refused_input_creates_no_artifacts_folder(tmp_path: Path) -> None:
    rc, doc = _gpuops(tmp_path, "nodes", "update", "-i", "/missing", "--artifacts-dir", "new/a/b")
    assert rc == 2 and doc["error"]["field"] == "inventory", doc
    assert not (tmp_path / "new").exists()


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["nodes", "update", "-i", "/missing", "--artifacts-dir", "LINK"], "artifacts_dir"),
        (["nodes", "inspect", "-i", "/missing", "--report-dir", "LINK"], "report_dir"),
        (["headroom", "check", "--pods", "1", "--report-dir", "LINK"], "report_dir"),
        (["report", "fleet", "--input", "in.json", "--out", "LINK"], "out"),
    ],
)
def test_an_output_folder_that_is_a_link_is_exit_2_naming_the_option(
    tmp_path: Path, args: list[str], field: str
) -> None:
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "LINK").symlink_to(tmp_path / "elsewhere")
    (tmp_path / "in.json").write_text(json.dumps({"hosts": [], "groups": {}}))
    rc, doc = _gpuops(tmp_path, *args)
    assert rc == 2 and doc["error"]["field"] == field, doc
    assert list((tmp_path / "elsewhere").iterdir()) == []


@pytest.mark.parametrize("special", ["/dev/zero", "fifo"])
def test_a_params_or_environments_file_that_is_no_regular_file_is_exit_2(
    tmp_path: Path, special: str
) -> None:
    path = special
    if special == "fifo":
        os.mkfifo(tmp_path / "fifo")
        path = str(tmp_path / "fifo")
    rc, doc = _gpuops(tmp_path, "nodes", "inspect", env={"GPUOPS_PARAMS_FILE": path})
    assert rc == 2 and "not a regular file" in doc["error"]["message"], doc
    rc, doc = _gpuops(tmp_path, "release", "status", "-e", "staging", "--config", path)
    assert rc == 2 and "not a regular file" in doc["error"]["message"], doc


# -- the convention: nothing outside the writer writes a file ---------------------------------

#: Module functions that create, write, move, change or remove files or folders.
_MODULE_CALLS = {
    "os": {
        "open", "fdopen", "mkdir", "makedirs", "replace", "rename", "renames", "symlink",
        "link", "truncate", "chmod", "chown", "mkfifo", "mknod", "unlink", "remove", "rmdir",
    },
    "shutil": {"copy", "copy2", "copyfile", "copytree", "copymode", "move", "rmtree"},
    "tempfile": {
        "mkstemp", "mkdtemp", "NamedTemporaryFile", "TemporaryDirectory", "TemporaryFile",
        "SpooledTemporaryFile",
    },
}  # fmt: skip
#: Methods only paths have (pathlib) that create, write, move, change or remove.
_PATH_METHODS = {
    "write_text", "write_bytes", "mkdir", "symlink_to", "hardlink_to", "touch", "unlink",
    "rmdir", "chmod", "rename", "lchmod",
}  # fmt: skip


def _mode(call: ast.Call, method: bool) -> ast.expr | None:
    """The mode argument of ``open(path, mode)`` or ``path.open(mode)``."""
    positional = call.args[0:1] if method else call.args[1:2]
    keyword = [k.value for k in call.keywords if k.arg == "mode"]
    found = [*positional, *keyword]
    return found[0] if found else None


def _writes(mode: ast.expr | None, *, unknown_writes: bool) -> str | None:
    if mode is None:
        return None  # open(path): reading
    if isinstance(mode, ast.Constant) and isinstance(mode.value, str):
        return f"open({mode.value!r})" if set(mode.value) & set("wax+") else None
    return "open(<mode not a constant>)" if unknown_writes else None


def writes_outside_the_writer(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name):  # open(path, mode), the builtin
            what = _writes(_mode(node, False), unknown_writes=True) if func.id == "open" else None
        elif isinstance(func, ast.Attribute):
            owner = func.value.id if isinstance(func.value, ast.Name) else None
            if owner in _MODULE_CALLS:
                what = f"{owner}.{func.attr}" if func.attr in _MODULE_CALLS[owner] else None
            elif func.attr in _PATH_METHODS:
                what = func.attr
            elif func.attr == "replace" and _is_path_call(func.value):
                what = "Path(...).replace"
            elif func.attr == "open":  # path.open(mode); other objects' open(host) are not files
                mode = _mode(node, True)
                const = isinstance(mode, ast.Constant) and isinstance(mode.value, str)
                what = _writes(mode, unknown_writes=False) if const else None
            else:
                what = None
        else:
            what = None
        if what:
            found.append((node.lineno, what))
    return found


def _is_path_call(value: ast.expr) -> bool:
    return (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Name)
        and value.func.id in ("Path", "PurePath")
    )


def test_nothing_outside_the_writer_opens_a_file_for_writing_or_makes_a_folder() -> None:
    offenders = []
    for path in sorted(SRC.rglob("*.py")):
        if path == SRC / "fsio.py":
            continue
        for line, call in writes_outside_the_writer(ast.parse(path.read_text())):
            offenders.append(f"{path.relative_to(SRC)}:{line}: {call}")
    assert offenders == [], "write through gpuops.fsio:\n" + "\n".join(offenders)


@pytest.mark.parametrize(
    "code",
    [
        "Path(p).write_text('x')",
        "p.with_name('a.tmp').write_bytes(b'')",
        "open(p, 'w')",
        "open(p, mode='a')",
        "os.open(p, os.O_WRONLY | os.O_CREAT)",
        "os.open(p, os.O_RDONLY)",
        "target.mkdir(parents=True)",
        "tempfile.mkstemp(dir=d)",
        "os.makedirs(d)",
        "shutil.copy(a, b)",
        "Path(p).open('w')",
        "p.open(mode='a')",
        "open(p, mode)",
        "os.replace(a, b)",
        "os.rename(a, b)",
        "shutil.move(a, b)",
        "os.symlink(a, b)",
        "os.link(a, b)",
        "os.truncate(p, 0)",
        "os.chmod(p, 0o777)",
        "tempfile.TemporaryFile()",
        "Path(p).replace(q)",
        "os.unlink(p)",
        "shutil.rmtree(d)",
    ],
)
def test_the_convention_test_sees_each_kind_of_write(code: str) -> None:
    """Planted offenders: each must be found (the convention test cannot pass by blindness)."""
    assert writes_outside_the_writer(ast.parse(code)) != []


def test_the_convention_test_lets_reads_through() -> None:
    reads = (
        "open(p).read(); Path(p).read_text(); Path(p).open(); open(p, 'rb'); 'a'.replace('a', 'b')"
    )
    assert writes_outside_the_writer(ast.parse(reads)) == []


@pytest.mark.parametrize("where", ["/dev/zero", "fifo", "fifo in group_vars"])
def test_an_inventory_holding_no_regular_file_is_exit_2_not_a_hang(
    tmp_path: Path, where: str
) -> None:
    """Ansible reads the inventory itself: a device or FIFO there hung it for ever."""
    inv = where
    if where == "fifo":
        os.mkfifo(tmp_path / "fifo")
        inv = str(tmp_path / "fifo")
    elif where == "fifo in group_vars":
        (tmp_path / "inv" / "group_vars").mkdir(parents=True)
        (tmp_path / "inv" / "hosts.yml").write_text("all: {}\n")
        os.mkfifo(tmp_path / "inv" / "group_vars" / "all.yml")
        inv = str(tmp_path / "inv")
    rc, doc = _gpuops(tmp_path, "nodes", "inspect", "-i", inv)
    assert rc == 2 and doc["error"]["field"] == "inventory", doc
    assert "not a regular file" in doc["error"]["message"]


@pytest.mark.parametrize("field", ["tokenFile", "client-key", "certificate-authority"])
@pytest.mark.parametrize("special", ["/dev/zero", "fifo"])
def test_a_file_a_kubeconfig_names_that_is_no_regular_file_is_exit_2_not_a_hang(
    tmp_path: Path, field: str, special: str
) -> None:
    """The Kubernetes client reads a kubeconfig's files whole: /dev/zero there never ended."""
    target = special
    if special == "fifo":
        os.mkfifo(tmp_path / "fifo")
        target = str(tmp_path / "fifo")
    part = "cluster" if field == "certificate-authority" else "user"
    entries = {"cluster": {"server": "https://127.0.0.1:1"}, "user": {"token": "abcd1234"}}
    entries[part][field] = target
    kubeconfig = tmp_path / "kc"
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": entries["cluster"]}],
                "users": [{"name": "u", "user": entries["user"]}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    rc, doc = _gpuops(
        tmp_path, "headroom", "check", "--pods", "1", "--gpus-per-pod", "1",
        env={"KUBECONFIG": str(kubeconfig)},
    )  # fmt: skip
    assert rc == 2 and doc["error"]["field"] == "kubeconfig", doc
    assert f"kubeconfig {field}" in doc["error"]["message"]
    assert "not a regular file" in doc["error"]["message"]


DEEP_JSON = "[" * 100_000 + "]" * 100_000
DEEP_YAML = "a: " + "[" * 100_000 + "]" * 100_000 + "\n"


@pytest.mark.parametrize(
    ("args", "env", "field"),
    [
        (["nodes", "inspect"], {"GPUOPS_PARAMS_FILE": "deep.json"}, "params_file"),
        (["release", "status", "-e", "staging", "--config", "deep.yaml"], {}, "config"),
        (["headroom", "check", "--pods", "1", "--gpus-per-pod", "1"], {"KUBECONFIG": "deep.yaml"},
         None),
        (["headroom", "check", "--pods", "1", "--gpus-per-pod", "1", "--node-selector",
          "[" * 3000], {}, "node_selector"),
    ],
)  # fmt: skip
def test_a_document_nested_without_end_is_exit_2_not_a_crash(
    tmp_path: Path, args: list[str], env: dict[str, str], field: str | None
) -> None:
    """Python's json and PyYAML recurse per level: a deep document was RecursionError, exit 5."""
    (tmp_path / "deep.json").write_text(DEEP_JSON)
    (tmp_path / "deep.yaml").write_text(DEEP_YAML)
    rc, doc = _gpuops(tmp_path, *args, env=env)
    assert rc == 2, doc
    assert "nested too deeply" in doc["error"]["message"] or doc["error"].get("field") == field
    if field is not None:
        assert doc["error"].get("field") == field, doc


def test_a_log_someone_else_planted_and_owns_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "progress.log").write_text("theirs\n")
    os.chown(out / "progress.log", 4242, 4242)  # a file of another user (gpuops runs as root)
    with (
        pytest.raises(OperationFailed, match="not a plain file"),
        fsio.OutDir(out, option="artifacts_dir").append("progress.log") as log,
    ):
        log.write("ours\n")
    assert (out / "progress.log").read_text() == "theirs\n"


def test_a_new_log_gets_its_mode_not_the_umasks(tmp_path: Path) -> None:
    old = os.umask(0o077)
    try:
        with fsio.OutDir(tmp_path, option="out").append("progress.log") as log:
            log.write("x\n")
    finally:
        os.umask(old)
    assert (tmp_path / "progress.log").stat().st_mode & 0o777 == fsio.PUBLIC


def test_an_inventory_folder_is_checked_through_linked_folders_and_loops(tmp_path: Path) -> None:
    """Ansible follows a linked group_vars: a FIFO there hung it; a link back up must not
    make the check walk for ever."""
    inv, elsewhere = tmp_path / "inv", tmp_path / "elsewhere"
    inv.mkdir()
    elsewhere.mkdir()
    (inv / "hosts.yml").write_text("all: {}\n")
    (inv / "group_vars").symlink_to(elsewhere)
    (elsewhere / "loop").symlink_to(inv)
    fsio.check_readable_tree(inv, cap=1 << 20, what="inventory")  # fine, and it ends
    os.mkfifo(elsewhere / "all.yml")
    with pytest.raises(InvalidInput, match="not a regular file"):
        fsio.check_readable_tree(inv, cap=1 << 20, what="inventory")


def test_remove_takes_a_link_away_without_following_it(tmp_path: Path, victim: Path) -> None:
    (tmp_path / "command").symlink_to(victim)
    folder = fsio.OutDir(tmp_path, option="out")
    folder.remove("command")
    folder.remove("command")  # gone already: nothing to do
    _untouched(victim)
    assert not os.path.lexists(tmp_path / "command")
