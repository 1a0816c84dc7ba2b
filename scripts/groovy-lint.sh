#!/bin/sh
# Groovy lint of the Jenkins shared library: npm-groovy-lint (CodeNarc, with its Jenkins
# rules) over vars/, src/ and tests/groovy/, configured by .groovylintrc.json.
# Fails (exit 1) on any error-level finding. Installs npm-groovy-lint into node_modules/
# from package-lock.json when missing; after that it runs offline.
set -eu
cd "$(dirname "$0")/.."

if [ ! -x node_modules/.bin/npm-groovy-lint ]; then
    npm ci --no-audit --no-fund
fi

# CodeNarc resolves the code it checks (needed by CpsCallFromNonCpsMethod and other
# Jenkins rules): give it @NonCPS and the compiled src/ classes on the boot class path
# (npm-groovy-lint starts CodeNarc with `java -jar`, which has no other class path hook).
gradle -q groovyLintClasspath
classpath=$(cat build/groovy-lint.classpath)

exec node_modules/.bin/npm-groovy-lint \
    --config .groovylintrc.json \
    --failon error \
    --noserver \
    --no-parse \
    --loglevel warning \
    "--javaoptions=-Xms256m,-Xmx1024m,-Xbootclasspath/a:${classpath}" \
    vars src tests/groovy
