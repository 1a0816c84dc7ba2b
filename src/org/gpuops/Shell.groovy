package org.gpuops

import com.cloudbees.groovy.cps.NonCPS

/**
 * Builds the only shell scripts the library ever runs: the CLI path followed by
 * fixed command words, each validated and single-quoted. Parameter values and
 * secrets never reach these scripts; they travel in files and environment variables.
 */
class Shell implements Serializable {

    private static final long serialVersionUID = 1L

    /** A CLI command word: lower case, digits and dashes, e.g. 'headroom', 'check'. */
    static final String WORD_PATTERN = /^[a-z][a-z0-9-]*$/

    /** A CLI location: a command name or a path, no spaces, quotes or shell metacharacters. */
    static final String CLI_PATTERN = /^[A-Za-z0-9_.\/+@-]+$/

    /** An environment variable name the library may set. */
    static final String ENV_NAME_PATTERN = /^[A-Z_][A-Z0-9_]*$/

    /** Wraps a value in single quotes so that the shell takes it literally. */
    @NonCPS
    static String quote(String value) {
        return "'" + value.replace("'", "'\"'\"'") + "'"
    }

    /** Returns the word when it is a valid CLI command word, otherwise throws naming it. */
    @NonCPS
    static String commandWord(Object word) {
        if (!(word instanceof CharSequence) || !(word.toString() ==~ WORD_PATTERN)) {
            throw new IllegalArgumentException(
                "invalid command word ${describe(word)}: words must match ${WORD_PATTERN}")
        }
        return word.toString()
    }

    /** Returns the CLI location when it is safe to name in a script, otherwise throws naming it. */
    @NonCPS
    static String cliPath(Object cli) {
        if (!(cli instanceof CharSequence) || !(cli.toString() ==~ CLI_PATTERN) || cli.toString().startsWith('-')) {
            throw new IllegalArgumentException(
                "invalid CLI location ${describe(cli)}: it must match ${CLI_PATTERN} and not start with '-'")
        }
        return cli.toString()
    }

    /** Returns the name when it is a valid environment variable name, otherwise throws naming it. */
    @NonCPS
    static String envName(Object name) {
        if (!(name instanceof CharSequence) || !(name.toString() ==~ ENV_NAME_PATTERN)) {
            throw new IllegalArgumentException(
                "invalid environment variable name ${describe(name)}: names must match ${ENV_NAME_PATTERN}")
        }
        return name.toString()
    }

    /**
     * The script that runs one CLI command: {@code 'gpuops' 'headroom' 'check'}.
     * Throws IllegalArgumentException for an empty command or an invalid word.
     */
    @NonCPS
    static String commandScript(String cli, List words) {
        if (words == null || words.isEmpty()) {
            throw new IllegalArgumentException("command must list at least one CLI word, e.g. ['headroom', 'check']")
        }
        List<String> parts = [quote(cliPath(cli))]
        for (Object word : words) {
            parts.add(quote(commandWord(word)))
        }
        return parts.join(' ')
    }

    /**
     * The script that asks the CLI for its version and writes it to the file named by
     * env GPUOPS_VERSION_FILE. Exit status 127/126 means the CLI is missing / not executable.
     */
    @NonCPS
    static String versionScript(String cli) {
        return quote(cliPath(cli)) + ' --output json --version > "$GPUOPS_VERSION_FILE"'
    }

    @NonCPS
    static String describe(Object value) {
        if (value == null) {
            return 'null'
        }
        return "'${value}' (${value.getClass().simpleName})"
    }

}
