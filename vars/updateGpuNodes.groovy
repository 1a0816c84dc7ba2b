import groovy.transform.Field
import org.gpuops.Credentials
import org.gpuops.NodeSteps
import org.gpuops.StepParams

// updateGpuNodes: roll a change over GPU nodes (node initialisation, NVIDIA driver): canary,
// batches, failure budget, drain and verify (`gpuops nodes update`). Runs under the fleet's lock
// (org.gpuops.FleetLock: the normalised inventory path, or `fleet`), best taken by the stage
// before its agent (options { lock(..., variable: 'GPUOPS_FLEET_LOCK') }: then no second one);
// binds the SSH key into environment variables only (S-25), archives the artifacts folder and
// publishes the JUnit report (one test case per host). Returns the CLI's result.
// The CLI's options are parameters too (camelCase), checked by the CLI: validationLevel (1-3,
// dcgmi diag -r N for every group), rollback (false: --no-rollback), afterRollback
// ('keep-cordoned', the default, or 'uncordon'), window ('Sat 22:00-Sun 06:00 Europe/Berlin': a
// batch that would not fit before it closes is held, exit 3, gate-refused), batchEstimate ('40m'),
// resume (true: continue the latest held or aborted run of the same inventory, limit and change;
// the result's `resume` names the hosts left). A host left broken (its rollback failed too:
// exit 6, host-broken) fails the build even with onFailure 'unstable', after the reports.
@Field final String STEP_NAME = 'updateGpuNodes'
@Field final List COMMAND = ['nodes', 'update']

@Field final Map DEFAULTS = [
    sshCredentialsId       : null,   // sshUserPrivateKey credential -> env GPUOPS_SSH_KEY_FILE, GPUOPS_SSH_USER
    knownHostsCredentialsId: null,   // file credential with the nodes' known_hosts -> env GPUOPS_KNOWN_HOSTS
    kubeconfigCredentialsId: null,   // file credential with a kubeconfig -> env KUBECONFIG
    alertsCredentialsId    : null,   // string credential, Alertmanager's token (alertsUrl) -> env GPUOPS_ALERTS_TOKEN
    onFailure              : 'fail', // failed hosts or a refused batch: 'fail' the build, or 'unstable'
    fleet                  : null,   // the fleet's name for its lock; unset: the inventory's normalised path
]

@Field final Map TYPES = [
    sshCredentialsId: 'string', knownHostsCredentialsId: 'string', kubeconfigCredentialsId: 'string',
    alertsCredentialsId: 'string', onFailure: ['fail', 'unstable'], fleet: 'string',
]

Map call(Map config = [:]) {
    Map params = StepParams.prepare(this, config)
    Map step = params.step
    List credentials = Credentials.bindings(ssh: step.sshCredentialsId, knownHosts: step.knownHostsCredentialsId,
                                            kubeconfig: step.kubeconfigCredentialsId, alerts: step.alertsCredentialsId)
    Map result = NodeSteps.run(this, params.cli,
        [folder: 'artifacts_dir', page: 'node-update.html', title: 'GPU node update', credentials: credentials,
         allow: ['failed', 'gate-refused', 'host-broken'], alwaysFail: ['host-broken'],
         mode: step.onFailure, fleet: step.fleet])
    NodeSteps.rememberNodeChange(this, STEP_NAME, result)  // S-24: a later promoteTag records it
    return result
}
