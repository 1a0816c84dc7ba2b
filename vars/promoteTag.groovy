import groovy.transform.Field
import org.gpuops.ReleaseFlow
import org.gpuops.StepParams

// promoteTag: release an image tag (or a model version, S-22) to an environment (S-20, S-27).
// Runs `gpuops release promote`: a dry run on an agent (gates: the tag resolves to a digest, the
// image suits the node class, GPU headroom for the surge pods), the approval when the environment
// needs one (input outside any agent), then the release inside lock(<target>) on an agent: set
// by digest, watched, rolled back by itself when the rollout fails, recorded in the history.
// Every other parameter is an option of the CLI command in camelCase (promoteTag.txt).
@Field final String STEP_NAME = 'promoteTag'
@Field final List COMMAND = ['release', 'promote']

@Field final Map DEFAULTS = ReleaseFlow.DEFAULTS  // credential ids, agentLabel, checkout, approvalTimeoutMinutes
@Field final Map TYPES = ReleaseFlow.TYPES

Map call(Map config = [:]) {
    Map params
    try {
        params = StepParams.split(DEFAULTS, TYPES,
            StepParams.options(libraryResource(StepParams.RESOURCE), COMMAND), config)
    } catch (IllegalArgumentException e) {
        error("[${STEP_NAME}] ${e.message} (invalid-input)")
    }
    Map step = params.step
    Map cli = params.cli
    if (env.BUILD_URL && !cli.containsKey('link')) {
        cli.link = env.BUILD_URL
    }
    List credentials = ReleaseFlow.credentials(step)
    return ReleaseFlow.run(this, STEP_NAME, step, cli) { Map values ->
        gpuopsExec(stepName: STEP_NAME, command: COMMAND, params: values, credentials: credentials).result
    }
}
