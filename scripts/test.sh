#!/usr/bin/env bash
# Every test and linter, in order of cost; stops at the first failure but always says which.
set -uo pipefail
# a skipped test, or an xfail that passes, fails the run (tests/python/strict_outcomes.py, build.gradle)
export GPUOPS_STRICT_TESTS=1
cd "$(dirname "$0")/.."
status=0
step() {
  local name=$1; shift
  printf '\n\033[1m== %s ==\033[0m\n' "$name"
  local t0=$SECONDS
  if "$@"; then
    printf '== %s: ok (%ss) ==\n' "$name" $((SECONDS - t0))
  else
    printf '== %s: FAILED (%ss) ==\n' "$name" $((SECONDS - t0))
    status=1
  fi
}
step "python lint (ruff, mypy --strict)" make -s lint-python
step "ansible lint (ansible-lint, production profile)" make -s lint-ansible
step "groovy lint (npm-groovy-lint / CodeNarc)" make -s lint-groovy
step "groovy tests (JenkinsPipelineUnit)" make -s test-groovy
step "python tests (unit + integration on the real lab)" make -s test-python
exit $status
