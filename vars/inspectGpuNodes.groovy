import groovy.transform.Field
import org.gpuops.Credentials
import org.gpuops.NodeSteps
import org.gpuops.StepParams

// inspectGpuNodes: the health of every GPU node (`gpuops nodes inspect`, S-16): per GPU
// temperature, ECC, remapped rows, NVLink, Xid events; nvidia-smi's own failures; NICs and
// disks. Takes no lock (it reads: it never waits for a node update of the fleet; the update's
// drained nodes show as such), binds the SSH key into environment variables only (S-25),
// archives and publishes the JSON and JUnit reports; a critical finding fails the build or
// marks it unstable. With quarantine: true (and a kubeconfig credential) critical nodes are
// tainted and released by the CLI (state in the cluster); metricsFile/pushgateway export the
// findings to Prometheus. Returns the CLI's result.
@Field final String STEP_NAME = 'inspectGpuNodes'
@Field final List COMMAND = ['nodes', 'inspect']

@Field final Map DEFAULTS = [
    sshCredentialsId       : null,   // sshUserPrivateKey credential -> env GPUOPS_SSH_KEY_FILE, GPUOPS_SSH_USER
    knownHostsCredentialsId: null,   // file credential with the nodes' known_hosts -> env GPUOPS_KNOWN_HOSTS
    webhookCredentialsId   : null,   // string credential with the alert webhook URL -> env GPUOPS_WEBHOOK_URL
    kubeconfigCredentialsId: null,   // file credential with a kubeconfig -> env KUBECONFIG (for quarantine: true)
    pushgatewayCredentialsId: null,  // usernamePassword credential: the Pushgateway's basic auth (pushgateway) ->
                                     // env GPUOPS_PUSHGATEWAY_USERNAME, GPUOPS_PUSHGATEWAY_PASSWORD
    onCritical             : 'fail', // critical findings or hosts not inspected: 'fail', or 'unstable'
]

@Field final Map TYPES = [
    sshCredentialsId: 'string', knownHostsCredentialsId: 'string', webhookCredentialsId: 'string',
    kubeconfigCredentialsId: 'string', pushgatewayCredentialsId: 'string',
    onCritical: ['fail', 'unstable'],
]

Map call(Map config = [:]) {
    Map params = StepParams.prepare(this, config)
    Map step = params.step
    Map cli = params.cli
    List credentials = Credentials.bindings(ssh: step.sshCredentialsId, knownHosts: step.knownHostsCredentialsId,
                                            webhook: step.webhookCredentialsId, webhookVariable: cli.webhook_url_env,
                                            kubeconfig: step.kubeconfigCredentialsId,
                                            pushgateway: step.pushgatewayCredentialsId)
    return NodeSteps.run(this, cli,
        [folder: 'report_dir', page: 'fleet.html', title: 'GPU fleet health', credentials: credentials,
         allow: ['gate-refused', 'unreachable'], mode: step.onCritical])
}
