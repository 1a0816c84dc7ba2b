#!/usr/bin/env bash
# Every test and linter, in order of cost. Every step runs even when an earlier one failed;
# each ends with its own "== <step>: ok|FAILED (<s>s) ==" line and the run ends with a summary
# of all of them, so the step that failed is named twice. Exit 1 when any step failed.
#
# On 2 cores, two groups of steps share the machine instead of queuing:
#   - the Groovy chain (groovy lint, then groovy tests: JVM and Node, no lab), and
#   - the Python unit tests (tests/python/unit, lab/tests: no lab), in two pytest-xdist
#     workers: while the JVM runs they share the cores with it, after it they use both.
# Each step of a group writes to its own log; once the whole group has ended the logs are
# printed in the steps' order, each between its "== <step> ==" header and its status line.
# The lab's tests (the rest of pytest.ini's testpaths) run after, alone, as they are
# tuned to (timeouts and waits sized for a machine the suite does not share with itself).
set -uo pipefail
# a skipped test, or an xfail that passes, fails the run (tests/python/strict_outcomes.py, build.gradle)
export GPUOPS_STRICT_TESTS=1
cd "$(dirname "$0")/.."
status=0
summary=()
# pytest.ini's testpaths (tests/python lab/tests) split in two: the unit paths, and the rest of
# tests/python (an initial path cannot be --ignore'd, a folder found below one can)
UNIT_PATHS=(tests/python/unit lab/tests)
LAB_ARGS=(tests/python --ignore=tests/python/unit)
TESTPATHS='testpaths = tests/python lab/tests'
# pytest-xdist for the unit tests only (the lab's tests share session labs: one process)
UNIT_XDIST="-n ${GPUOPS_TEST_WORKERS:-2} --dist worksteal"

header() { printf '\n\033[1m== %s ==\033[0m\n' "$1"; }
# ended NAME RC SECONDS: the step's status line, remembered for the summary
ended() {
  local word=ok
  if [ "$2" -ne 0 ]; then word=FAILED; status=1; fi
  printf '== %s: %s (%ss) ==\n' "$1" "$word" "$3"
  summary+=("$(printf '%-8s %5ss  %s' "$word" "$3" "$1")")
}
# step NAME CMD...: run in the foreground, output as it comes
step() {
  local name=$1; shift
  header "$name"
  local t0=$SECONDS rc=0
  "$@" || rc=$?
  ended "$name" "$rc" $((SECONDS - t0))
}

# A group of steps run beside each other: `lane` starts a chain of steps in the background,
# each step's output in $logs/<n>.log and its "rc seconds" in $logs/<n>.rc; `flush` waits for
# every lane and prints the steps in the order they were declared.
logs=$(mktemp -d "${TMPDIR:-/tmp}/gpuops-test.XXXXXX")
lanes=()
names=()
# a lane's processes stay in this script's process group (a CI that kills the group kills them
# too); stopping one here sends TERM to its process tree by pid, each parent stopped while its
# children are listed (so it starts none unseen), then the children in turn
kill_tree() {
  local child children
  kill -STOP "$1" 2>/dev/null || return 0
  children=$(pgrep -P "$1")
  kill -TERM "$1" 2>/dev/null
  kill -CONT "$1" 2>/dev/null
  for child in $children; do kill_tree "$child"; done
}
stop_lanes() {
  local pid
  for pid in "${lanes[@]}"; do kill_tree "$pid"; done
}
# interrupted (Ctrl-C, a CI timeout) while a group runs: stop it, show what each step wrote
interrupted() {
  stop_lanes
  local n
  for n in "${!names[@]}"; do
    header "${names[$n]} (interrupted)"
    cat -- "$logs/$n.log" 2>/dev/null
  done
  printf '\nmake test: interrupted\n'
  exit "$1"
}
trap 'stop_lanes; rm -rf -- "$logs"' EXIT
trap 'interrupted 130' INT
trap 'interrupted 143' TERM
# lane "NAME|CMD" ...: each argument is one step, a name and a command line (run by eval)
lane() {
  local first=${#names[@]} spec i=0
  for spec in "$@"; do names+=("${spec%%|*}"); done
  (
    for spec in "$@"; do
      n=$((first + i)); i=$((i + 1))
      t0=$SECONDS rc=0
      eval "${spec#*|}" </dev/null >"$logs/$n.log" 2>&1 || rc=$?
      echo "$rc $((SECONDS - t0))" >"$logs/$n.rc"
    done
  ) &
  lanes+=("$!")
}
flush() {
  local pid n rc secs
  printf '\n(running side by side: '
  printf '%s; ' "${names[@]}"
  printf 'their output follows, in this order, once all have ended)\n'
  for pid in "${lanes[@]}"; do wait "$pid"; done
  lanes=()
  for n in "${!names[@]}"; do
    header "${names[$n]}"
    cat -- "$logs/$n.log" 2>/dev/null
    if read -r rc secs <"$logs/$n.rc" 2>/dev/null; then
      ended "${names[$n]}" "$rc" "$secs"
    else  # the lane died before this step ended (or never started it)
      ended "${names[$n]} (did not finish)" 1 0
    fi
  done
  names=()
}

step "python lint (ruff, mypy --strict)" make -s lint-python
step "ansible lint (ansible-lint, production profile)" make -s lint-ansible

lane "groovy lint (npm-groovy-lint / CodeNarc)|make -s lint-groovy" \
     "groovy tests (JenkinsPipelineUnit)|make -s test-groovy"
lane "python unit tests (${UNIT_PATHS[*]}: no lab)|make -s test-python PYTEST_ARGS='$UNIT_XDIST ${UNIT_PATHS[*]}'"
flush

if grep -qx "$TESTPATHS" pytest.ini; then
  step "python lab tests (the rest of tests/python: on the real lab)" \
    make -s test-python PYTEST_ARGS="${LAB_ARGS[*]}"
else  # a test path added or moved: the split above would miss or repeat it
  header "python lab tests"
  printf 'pytest.ini no longer says "%s": update UNIT_PATHS and LAB_ARGS in scripts/test.sh\n' \
    "$TESTPATHS"
  ended "python lab tests (testpaths changed)" 1 0
fi

printf '\n\033[1m== summary ==\033[0m\n'
printf '%s\n' "${summary[@]}"
if [ "$status" -ne 0 ]; then printf 'make test: FAILED (see the steps marked FAILED above)\n'; fi
exit $status
