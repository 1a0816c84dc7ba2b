package org.gpuops

import com.cloudbees.groovy.cps.NonCPS

/**
 * Validates what gpuopsExec puts into the CLI's environment: credential bindings
 * (bound by withCredentials, so secrets exist only as environment variables) and
 * plain, non-secret variables (bound by withEnv).
 */
class EnvBindings implements Serializable {

    private static final long serialVersionUID = 1L

    /**
     * Variables nothing may bind: those gpuopsExec sets itself, and those that change which code
     * the shell, the dynamic loader or Python runs (a binding named by a step parameter must not
     * become a way to run something else).
     */
    static final List<String> RESERVED = [
        'GPUOPS_PARAMS_FILE', 'GPUOPS_RESULT_FILE', 'GPUOPS_ERROR_FILE', 'GPUOPS_VERSION_FILE',
        'GPUOPS_CLI', 'PATH', 'HOME', 'WORKSPACE',
        'BASH_ENV', 'ENV', 'IFS', 'SHELL', 'SHELLOPTS', 'BASHOPTS', 'PS4', 'CDPATH',
    ].asImmutable()

    /** Prefixes of reserved variables: the dynamic loader's, Python's, exported bash functions. */
    static final List<String> RESERVED_PREFIXES = ['LD_', 'PYTHON', 'BASH_FUNC_'].asImmutable()

    private static final Map ONE_VARIABLE = [required: ['variable'], optional: []].asImmutable()

    /** Per credential type: variable keys that must be set, and those that may be. */
    static final Map<String, Map> CREDENTIAL_TYPES = [
        usernamePassword : [required: ['usernameVariable', 'passwordVariable'], optional: []],
        string           : ONE_VARIABLE,
        file             : ONE_VARIABLE,
        sshUserPrivateKey: [required: ['keyFileVariable'], optional: ['usernameVariable', 'passphraseVariable']],
    ].asImmutable()

    /**
     * Checks credential binding specs such as
     * [type: 'string', id: 'webhook', variable: 'GPUOPS_WEBHOOK_URL'] and returns plain copies.
     */
    @NonCPS
    static List<Map> credentials(List specs) {
        List<Map> checked = []
        Set<String> seen = [] as Set
        (specs ?: []).eachWithIndex { Object spec, int index ->
            String where = "credentials[${index}]"
            if (!(spec instanceof Map)) {
                throw new IllegalArgumentException("${where} must be a Map, got ${Shell.describe(spec)}")
            }
            Map kind = CREDENTIAL_TYPES.get(spec.type)
            if (kind == null) {
                throw new IllegalArgumentException("${where}.type must be one of " +
                    "${CREDENTIAL_TYPES.keySet().join(', ')}, got ${Shell.describe(spec.type)}")
            }
            if (!(spec.id instanceof CharSequence) || !spec.id.toString().trim()) {
                throw new IllegalArgumentException("${where}.id must be a non-empty credentials ID")
            }
            List allowed = ['type', 'id'] + kind.required + kind.optional
            List unknown = spec.keySet().findAll { !allowed.contains(it) }.collect { it.toString() }
            if (unknown) {
                throw new IllegalArgumentException("${where} has unknown key(s) ${unknown.join(', ')} " +
                    "for type ${spec.type}; allowed: ${allowed.join(', ')}")
            }
            Map copy = [type: spec.type.toString(), id: spec.id.toString()]
            (kind.required + kind.optional).each { String key ->
                if (spec.get(key) == null) {
                    if (kind.required.contains(key)) {
                        throw new IllegalArgumentException("${where}.${key} is required for type ${spec.type}")
                    }
                    return
                }
                copy.put(key, variable("${where}.${key}", spec.get(key), seen))
            }
            checked.add(copy)
        }
        return checked
    }

    /** The arguments of a withCredentials binding (usernamePassword(...), string(...), ...) for a checked spec. */
    @NonCPS
    static Map bindingArguments(Map spec) {
        Map args = [credentialsId: spec.id]
        spec.each { key, value ->
            if (key != 'type' && key != 'id') {
                args.put(key, value)
            }
        }
        return args
    }

    /** Checks plain environment variables and returns them as withEnv entries 'NAME=value'. */
    @NonCPS
    static List<String> environment(Map variables) {
        List<String> entries = []
        Set<String> seen = [] as Set
        (variables ?: [:]).each { Object name, Object value ->
            String checked = variable("environment key", name, seen)
            if (!(value instanceof CharSequence)) {
                throw new IllegalArgumentException(
                    "environment ${checked} must be a String, got ${Shell.describe(value)}")
            }
            entries.add("${checked}=${value}".toString())
        }
        return entries
    }

    @NonCPS
    private static String variable(String where, Object name, Set<String> seen) {
        String checked
        try {
            checked = Shell.envName(name)
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException("${where}: ${e.message}", e)
        }
        if (RESERVED.contains(checked) || RESERVED_PREFIXES.any { String p -> checked.startsWith(p) }) {
            throw new IllegalArgumentException("${where}: ${checked} is reserved by gpuopsExec")
        }
        if (!seen.add(checked)) {
            throw new IllegalArgumentException("${where}: ${checked} is bound twice")
        }
        return checked
    }

}
