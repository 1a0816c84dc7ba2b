import groovy.transform.Field
import org.gpuops.ReleaseFlow

// promoteTag: release an image tag (or a model version, S-22) to an environment (S-20, S-27).
// Runs `gpuops release promote`: a dry run on an agent (gates: the tag resolves to a digest, the
// image suits the node class, GPU headroom for the surge pods), the approval when the environment
// needs one (input outside any agent), then the release inside lock(<target>) on an agent: set
// by digest, watched, rolled back by itself when the rollout fails, recorded in the history.
// A progressive strategy's steps show as a table; each approval step it pauses at is another
// input outside any agent, then `release resume` (or --reject) on an agent (ReleaseSteps).
// Every other parameter is an option of the CLI command in camelCase (promoteTag.txt).
@Field final String STEP_NAME = 'promoteTag'
@Field final List COMMAND = ['release', 'promote']

@Field final Map DEFAULTS = ReleaseFlow.DEFAULTS  // credential ids, agentLabel, checkout, approvalTimeoutMinutes
@Field final Map TYPES = ReleaseFlow.TYPES

Map call(Map config = [:]) {
    return ReleaseFlow.step(this, config)
}
