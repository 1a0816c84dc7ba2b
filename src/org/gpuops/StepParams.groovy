package org.gpuops

import com.cloudbees.groovy.cps.NonCPS

/**
 * One declaration per parameter: a step's CLI parameters are the options of its gpuops
 * command, as the CLI describes them (`gpuops describe`, shipped as the library resource
 * org/gpuops/cli-options.json). A step declares only what is Jenkins' own (credential ids,
 * what to do on a refusal); every other key of its config is an option of the command in
 * camelCase (gpusPerPod -> gpus_per_pod), sent to the CLI only when the user set it. Types,
 * ranges and defaults are the CLI's: it checks the values and names the key when one is wrong.
 */
class StepParams implements Serializable {

    private static final long serialVersionUID = 1L

    /** Where the library keeps the CLI's description of its commands. */
    static final String RESOURCE = 'org/gpuops/cli-options.json'

    /** A CLI option name as a step parameter: gpus_per_pod -> gpusPerPod. */
    @NonCPS
    static String stepName(String cliName) {
        List<String> parts = cliName.split('_') as List
        return parts.head() + parts.tail().collect { it.capitalize() }.join('')
    }

    /** A step parameter as a CLI option name: gpusPerPod -> gpus_per_pod. */
    @NonCPS
    static String cliName(String stepName) {
        return stepName.replaceAll(/([A-Z])/) { List<String> m -> '_' + m[1].toLowerCase() }
    }

    /** The options of `gpuops <command>` from the CLI's description (the JSON text of RESOURCE). */
    @NonCPS
    static List<Map> options(String description, List command) {
        Map doc = CliContract.document(description, "the library resource ${RESOURCE}")
        String path = command.join(' ')
        Object found = (doc.commands instanceof Map) ? doc.commands.get(path) : null
        if (!(found instanceof Map) || !(found.options instanceof List)) {
            throw new IllegalStateException("${RESOURCE} does not describe 'gpuops ${path}': " +
                'regenerate it with scripts/step-docs.py --write')
        }
        return (List<Map>) found.options
    }

    /**
     * A step's parameters, ready to send: its config split (below) against the options of its
     * command, and the build's URL as the CLI's `link` where the command takes one and the user
     * gave none. A bad parameter fails the build: `[step] <what is wrong> (invalid-input)`.
     * The step is the script of a vars/ file with its @Field STEP_NAME, COMMAND, DEFAULTS and
     * TYPES. Returns [step: <the step's own parameters>, cli: <snake_case CLI parameters>].
     */
    static Map prepare(Object step, Map config) {
        List<Map> known = options(step.libraryResource(RESOURCE) as String, step.COMMAND as List)
        Map params = [:]
        try {
            params = split(step.DEFAULTS as Map, step.TYPES as Map, known, config)
        } catch (IllegalArgumentException e) {
            step.error("[${step.STEP_NAME}] ${e.message} (invalid-input)")
        }
        String url = step.env.BUILD_URL
        if (url && takesLink(known) && !params.cli.containsKey('link')) {
            params.cli.link = url
        }
        return params
    }

    /** Whether the command has a `link` option (@NonCPS: a closure given to any() must not be CPS). */
    @NonCPS
    static boolean takesLink(List<Map> known) {
        return known.any { it.name == 'link' }
    }

    /**
     * Ends a step whose CLI call was refused or failed in a way the step allows: the build
     * becomes UNSTABLE (`mode` 'unstable') or fails with the CLI's message and hint.
     */
    static void settle(Object script, String stepName, Map outcome, String mode) {
        if (outcome.ok) {
            return
        }
        String text = CliContract.errorText(stepName, outcome.error as Map, outcome.verdict as String)
        if (mode == 'unstable') {
            script.unstable(text)
        } else {
            script.error(text)
        }
    }

    /**
     * Splits a step's config into its own Jenkins parameters (resolved against `defaults`
     * and `types` by StepConfig) and the CLI parameters the user set (snake_case keys, plain
     * JSON values). An option's old names (its `aliases` in the description: check for dry_run)
     * are taken too and sent under its name. Throws IllegalArgumentException naming the
     * parameter for an unknown key, a missing required option, an option given under two of
     * its names or a value JSON cannot carry.
     */
    @NonCPS
    static Map split(Map defaults, Map types, List<Map> options, Map config) {
        Map given = config ?: [:]
        Map<String, Map> byStepName = [:]
        Map<String, String> oldNames = [:]  // an old step parameter name -> its option's name now
        options.each { Map option ->
            String name = stepName(option.name.toString())
            byStepName.put(name, option)
            (option.aliases ?: []).each { oldNames.put(stepName(it.toString()), name) }
        }
        List unknown = given.keySet().findAll {
            !defaults.containsKey(it) && !byStepName.containsKey(it) && !oldNames.containsKey(it)
        }.collect { it.toString() }
        if (unknown) {
            List known = (defaults.keySet() + byStepName.keySet()).collect { it.toString() }.sort()
            throw new IllegalArgumentException(
                "unknown parameter(s) ${unknown.join(', ')}; known parameters: ${known.join(', ')}")
        }
        Map own = given.findAll { defaults.containsKey(it.key) }
        Map cli = [:]
        byStepName.each { String name, Map option ->
            Object value = given.get(name)
            String key = name
            oldNames.findAll { it.value == name && given.get(it.key) != null }.each { String old, String now ->
                if (value != null) {
                    throw new IllegalArgumentException(
                        "parameters '${old}' and '${now}' are the same option: set only '${now}'")
                }
                value = given.get(old)
                key = old
            }
            if (value == null) {
                if (option.required) {
                    throw new IllegalArgumentException("parameter '${name}' is required")
                }
                return
            }
            cli.put(option.name.toString(), CliContract.jsonValue(key, value, false))
        }
        return [step: StepConfig.resolve(defaults, types, [], own), cli: cli]
    }

}
