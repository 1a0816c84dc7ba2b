package org.gpuops

import com.cloudbees.groovy.cps.NonCPS
import groovy.json.JsonException
import groovy.json.JsonOutput
import groovy.json.JsonSlurperClassic

/**
 * The Groovy half of the gpuops CLI contract: parameter JSON out, result/error JSON in,
 * and the build error text `[stepName] message (category)`.
 * Exit codes and categories are owned by the CLI (gpuops.errors); they are listed here
 * only to explain an exit status when the CLI wrote no error document.
 */
class CliContract implements Serializable {

    private static final long serialVersionUID = 1L

    static final Map<Integer, String> CATEGORIES = [
        0: 'ok',
        1: 'failed',
        2: 'invalid-input',
        3: 'gate-refused',
        4: 'unreachable',
        5: 'internal',
        6: 'host-broken',
    ].asImmutable()

    /** The verdicts of an error document (gpuops.contract.ERROR_VERDICTS); a result document's is 'ok'. */
    static final List<String> ERROR_VERDICTS = ['refused', 'failed', 'partial'].asImmutable()

    /** Category of the errors gpuopsExec raises itself when the agent's CLI is missing or of another version. */
    static final String SETUP_CATEGORY = 'cli-setup'

    /** A step name as it appears in errors and file names: a Groovy identifier such as 'checkGpuHeadroom'. */
    @NonCPS
    static String checkStepName(String stepName) {
        if (!(stepName ==~ /^[a-z][A-Za-z0-9]*$/)) {
            throw new IllegalArgumentException("stepName must be a step's name such as 'checkGpuHeadroom', " +
                "got ${Shell.describe(stepName)}")
        }
        return stepName
    }

    /** Checks that every entry is a CLI error category. */
    @NonCPS
    static List checkCategories(List categories) {
        List known = CATEGORIES.values().findAll { it != 'ok' }
        List unknown = categories.findAll { !known.contains(it) }
        if (unknown) {
            throw new IllegalArgumentException(
                "allowCategories has unknown categories ${unknown}; known: ${known.join(', ')}")
        }
        return categories
    }

    /**
     * How to get the right CLI onto an agent. Never a package name for pip: a different project
     * named gpuops is on the public package index (this one's distribution is gpu-ops-cli), and
     * every install path the library offers is hash-checked from a wheelhouse or internal index.
     */
    @NonCPS
    static String installHint(String version) {
        return "install gpuops ${version} on the agent: use the gpu-ops agent image " +
            "(libraryResource 'org/gpuops/agent/Containerfile', Kubernetes pod template " +
            "'org/gpuops/agent/pod.yaml'), or run the bootstrap script " +
            "(libraryResource 'org/gpuops/agent/bootstrap-gpuops.sh' with GPUOPS_VERSION=${version} and " +
            'GPUOPS_WHEELHOUSE, a wheelhouse built by scripts/wheelhouse.sh: it installs with ' +
            "--no-index --require-hashes); if it is installed elsewhere, set env GPUOPS_CLI to its path."
    }

    /** Paths of the files of one CLI call: <dir>/<stepName>-<random>.{params,result,error,version}.json */
    @NonCPS
    static Map<String, String> callFiles(String dir, String stepName) {
        String base = "${dir}/${stepName}-${UUID.randomUUID().toString().substring(0, 8)}"
        return [
            params : "${base}.params.json".toString(),
            result : "${base}.result.json".toString(),
            error  : "${base}.error.json".toString(),
            version: "${base}.version.json".toString(),
        ]
    }

    /** Parameters as the JSON object the CLI reads from GPUOPS_PARAMS_FILE. */
    @NonCPS
    static String paramsJson(Map params) {
        return JsonOutput.prettyPrint(JsonOutput.toJson(jsonValue('params', params ?: [:])))
    }

    /** Parses a JSON document into plain (serializable) maps and lists; throws naming what was parsed. */
    @NonCPS
    static Object parseJson(String text, String what) {
        if (text == null || text.trim().isEmpty()) {
            throw new IllegalArgumentException("${what} is empty")
        }
        try {
            return new JsonSlurperClassic().parseText(text)
        } catch (JsonException e) {
            throw new IllegalArgumentException("${what} is not valid JSON (${e.message?.readLines()?.first()})", e)
        }
    }

    /** Parses a result or error document, which must be a JSON object. */
    @NonCPS
    static Map document(String text, String what) {
        Object doc = parseJson(text, what)
        if (!(doc instanceof Map)) {
            throw new IllegalArgumentException("${what} is not a JSON object")
        }
        return (Map) doc
    }

    /** The version string from the output of `gpuops --output json --version`. */
    @NonCPS
    static String versionOf(String text) {
        Object doc = parseJson(text, 'the output of `gpuops --output json --version`')
        if (!(doc instanceof Map) || !(doc.version instanceof String) || !doc.version) {
            throw new IllegalArgumentException(
                "the output of `gpuops --output json --version` has no \"version\" string: ${text.trim()}")
        }
        return doc.version
    }

    /**
     * The error map (message, category, hint, exitCode, field) from an error document,
     * filling gaps from the exit status.
     */
    @NonCPS
    static Map errorOf(Object doc, int status) {
        Map error = (doc instanceof Map && doc.error instanceof Map) ? (Map) doc.error : [:]
        String category = error.category ?: CATEGORIES.get(status, 'internal')
        String message = error.message ?: (doc == null
            ? "gpuops exited with status ${status} and wrote no error file"
            : "gpuops exited with status ${status}; its error file has no message")
        Map result = [
            message : message.toString(),
            category: category.toString(),
            hint    : error.hint ? error.hint.toString() : null,
            exitCode: (error.exit_code instanceof Number) ? ((Number) error.exit_code).intValue() : status,
            field   : error.field ? error.field.toString() : null,
        ]
        return result
    }

    /**
     * The verdict of a result (`error` null) or error document: the document's own `verdict`,
     * else derived as the CLI does (an older CLI wrote none): 'ok' for a result, 'refused' for
     * category gate-refused, else 'failed'.
     */
    @NonCPS
    static String verdictOf(Object doc, Map error) {
        if (error == null) {
            return 'ok'
        }
        Object given = (doc instanceof Map) ? doc.verdict : null
        if (given instanceof String && ERROR_VERDICTS.contains(given)) {
            return given
        }
        return error.category == 'gate-refused' ? 'refused' : 'failed'
    }

    /**
     * The text of the build error for a failed CLI call: `[step] message (category)`, then the
     * hint; `(category, partial)` where the verdict is partial (part of the operation succeeded).
     */
    @NonCPS
    static String errorText(String stepName, Map error, String verdict = null) {
        String field = error.field ? "${StepParams.stepName(error.field.toString())}: " : ''
        String partial = verdict == 'partial' ? ', partial' : ''
        String text = "[${stepName}] ${field}${error.message} (${error.category}${partial})"
        if (error.hint) {
            text += "\nHint: ${error.hint}"
        }
        return text
    }

    /**
     * The value of parameter `name` as plain JSON: Maps (String keys), Lists, Strings (GStrings
     * become Strings), numbers, booleans and, where `nulls` (a step's own Map parameters), null.
     * Throws IllegalArgumentException naming the parameter for what JSON cannot carry (NaN,
     * Infinity, any other object) and, unless `nulls`, for a null (a CLI parameter's value).
     */
    @NonCPS
    static Object jsonValue(String name, Object value, boolean nulls = true) {
        if (value == null && nulls) {
            return null
        }
        if (value instanceof Map) {
            Map copy = [:]
            value.each { k, v -> copy.put(k.toString(), jsonValue(name, v, nulls)) }
            return copy
        }
        if (value instanceof Collection || value instanceof Object[]) {
            return value.collect { jsonValue(name, it, nulls) }
        }
        if (value instanceof CharSequence) {
            return value.toString()
        }
        if (value instanceof Boolean || value instanceof Integer || value instanceof Long ||
            value instanceof BigInteger || value instanceof Short || value instanceof Byte) {
            return value
        }
        if ((value instanceof Double || value instanceof Float) && (value.isNaN() || value.isInfinite())) {
            throw new IllegalArgumentException("parameter '${name}' is ${value}, which JSON cannot carry")
        }
        if (value instanceof Number) {
            return value  // decimals travel as they are; the CLI refuses them where it wants integers
        }
        throw new IllegalArgumentException(
            "parameter '${name}' cannot be passed to the CLI: ${Shell.describe(value)} is not a " +
                'String, number, boolean, List or Map')
    }

}
