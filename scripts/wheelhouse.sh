#!/usr/bin/env bash
# Build an offline wheelhouse of gpuops and its locked runtime dependencies (S-5, S-10).
#   scripts/wheelhouse.sh [OUT_DIR]            (default: ./wheelhouse)
# Wheels are built for the interpreter that runs this script (PYTHON, default .venv/bin/python):
# run it with the same Python version and architecture as the agents that will install it.
# The distribution is gpu-ops-cli (command and import package: gpuops; a different project
# named "gpuops" is on the public index). OUT_DIR/requirements.txt pins it and every locked
# dependency with the sha256 of its wheel here. Install on the air-gapped side, hash-checked:
#   python3 -m venv /opt/gpuops && /opt/gpuops/bin/pip install --no-index --find-links OUT_DIR \
#       --require-hashes --only-binary :all: -r OUT_DIR/requirements.txt
# (resources/org/gpuops/agent/bootstrap-gpuops.sh does exactly that.)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=$(realpath -m "${1:-wheelhouse}")
PY=${PYTHON:-.venv/bin/python}
[[ -x $PY ]] || PY=python3
mkdir -p "$OUT"
# Hash-checked: every file must match python/requirements.lock. Dependencies published only as
# sources (multi-key-dict) are built into wheels here, so the offline side needs no compiler.
"$PY" -m pip wheel -q --disable-pip-version-check --require-hashes -r python/requirements.lock -w "$OUT"
# setuptools builds in python/build (its own cache, in this checkout) and never removes what
# has left the tree since (a renamed inventory would ship twice): build from an empty one.
rm -rf -- python/build
"$PY" -m pip wheel -q --disable-pip-version-check --no-deps --no-build-isolation -w "$OUT" ./python
cp python/requirements.lock "$OUT/requirements.lock"
# The install file: the product's wheel and each locked dependency's wheel, by sha256. A wheel
# downloaded above matches one of its hashes in the lock (checked again here); one built here
# from a locked (hash-checked) sdist, and the product's own wheel, get the hash of what was built.
"$PY" - "$OUT" <<'PYTHON'
import hashlib
import re
import sys
import tomllib
from pathlib import Path

out = Path(sys.argv[1])
project = tomllib.loads(Path("python/pyproject.toml").read_text())["project"]


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


locked: dict[tuple[str, str], set[str]] = {}
entry: set[str] = set()
for line in Path("python/requirements.lock").read_text().splitlines():
    if line and not line.startswith((" ", "#")):
        name, version = line.split("\\")[0].strip().split("==")
        entry = locked.setdefault((norm(name), version.strip()), set())
    elif m := re.search(r"--hash=sha256:([0-9a-f]{64})", line):
        entry.add(m.group(1))
wheels: dict[tuple[str, str], list[str]] = {}
for wheel in sorted(out.glob("*.whl")):
    name, version = wheel.name.split("-")[:2]
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    wheels.setdefault((norm(name), version), []).append(digest)
product = (norm(project["name"]), project["version"])
want = [product, *sorted(locked)]
missing = [f"{n}=={v}" for n, v in want if (n, v) not in wheels]
if missing:
    sys.exit(f"wheelhouse.sh: no wheel for {', '.join(missing)} in {out}")
lines = [
    f"# Written by scripts/wheelhouse.sh: {product[0]} {product[1]} and its locked runtime",
    "# dependencies, each with the sha256 of its wheel in this folder. Install (no index):",
    "#   pip install --no-index --find-links DIR --require-hashes --only-binary :all:"
    " -r DIR/requirements.txt",
]
built = []
for key in want:
    digests = wheels[key]
    if key in locked and set(digests) & locked[key]:
        digests = sorted(set(digests) & locked[key])
        note = "from python/requirements.lock"
    else:
        note = "built here from python/" if key == product else "built here from its locked sdist"
        if key != product:
            built.append(f"{key[0]}=={key[1]}")
        if len(digests) != 1:
            sys.exit(f"wheelhouse.sh: {len(digests)} wheels of {key[0]}=={key[1]} in {out}")
    hashes = " \\\n".join(f"    --hash=sha256:{d}" for d in digests)
    lines.append(f"{key[0]}=={key[1]} \\\n{hashes}\n    # {note}")
(out / "requirements.txt").write_text("\n".join(lines) + "\n")
if built:
    print(f"wheelhouse: built from locked sdists: {', '.join(built)}", file=sys.stderr)
PYTHON
version=$("$PY" -c 'import tomllib;print(tomllib.load(open("python/pyproject.toml","rb"))["project"]["version"])')
echo "$version" >"$OUT/GPUOPS_VERSION"
echo "wheelhouse: $OUT ($(find "$OUT" -name '*.whl' | wc -l) wheels, gpu-ops-cli $version, requirements.txt)"
