import groovy.transform.Field
import org.gpuops.ReleaseFlow

// rollbackRelease: go back to an earlier release of an environment, from its history (S-20):
// `to: 'previous'` or a tag; the recorded digest and model version, no rebuild. The same flow as
// promoteTag: a dry run on an agent, the approval outside any agent, the rollback inside
// lock(<target>). Runs `gpuops release rollback`; its options are this step's parameters.
// withNodes: true (S-24) puts the nodes back to the release's node change record first, over
// SSH (sshCredentialsId, knownHostsCredentialsId), under the fleet's lock (fleet/inventory).
@Field final String STEP_NAME = 'rollbackRelease'
@Field final List COMMAND = ['release', 'rollback']

// credential ids, agentLabel, checkout, approvalTimeoutMinutes; the nodes' ssh, known hosts, fleet
@Field final Map DEFAULTS = ReleaseFlow.DEFAULTS + ReleaseFlow.NODE_DEFAULTS
@Field final Map TYPES = ReleaseFlow.TYPES + ReleaseFlow.NODE_TYPES

Map call(Map config = [:]) {
    return ReleaseFlow.step(this, config)
}
