import groovy.transform.Field
import org.gpuops.Credentials
import org.gpuops.StepParams

// checkGpuHeadroom: does a workload shape fit on the cluster's free GPUs right now?
// Runs `gpuops headroom check`; on shortage fails the build or marks it unstable.
// Returns the CLI's result map (per node class: allocatable, requested, free, nodes usable).
// The CLI's options are this step's parameters in camelCase (checkGpuHeadroom.txt lists them);
// only the Jenkins parameters below are declared here.
@Field final String STEP_NAME = 'checkGpuHeadroom'
@Field final List COMMAND = ['headroom', 'check']

@Field final Map DEFAULTS = [
    kubeconfigCredentialsId: null,   // file credential with a kubeconfig -> env KUBECONFIG
    webhookCredentialsId   : null,   // string credential with the webhook URL -> env GPUOPS_WEBHOOK_URL
    onShortage             : 'fail', // 'fail' the build, or mark it 'unstable' and go on
    report                 : true,   // archive (and publish) the GPU capacity page
]

@Field final Map TYPES = [
    kubeconfigCredentialsId: 'string', webhookCredentialsId: 'string', onShortage: ['fail', 'unstable'],
    report: 'boolean',
]

Map call(Map config = [:]) {
    Map params = StepParams.prepare(this, config)
    Map step = params.step
    Map cli = params.cli
    List credentials = Credentials.bindings(kubeconfig: step.kubeconfigCredentialsId,
                                            webhook: step.webhookCredentialsId, webhookVariable: cli.webhook_url_env)
    Map report = step.report ? [dir: "gpuops-reports/${STEP_NAME}", page: 'capacity.html', title: 'GPU capacity'] : [:]
    Map outcome = gpuopsExec(stepName: STEP_NAME, command: COMMAND, params: cli, credentials: credentials,
                             allowCategories: ['gate-refused'], report: report)
    StepParams.settle(this, STEP_NAME, outcome, step.onShortage)
    return outcome.result
}
