import groovy.transform.Field
import org.gpuops.Credentials
import org.gpuops.StepParams

// pruneImages: registry retention for the repositories of the application's environments file.
// Runs `gpuops image prune` (the CLI's options are this step's parameters, pruneImages.txt);
// a refusal (a release in flight, a registry without deletes, a history it cannot read; nothing
// was deleted) fails the build or, onRefused: 'unstable', marks it unstable. Meant for a
// scheduled job: dryRun: true first (the plan in the console and the result), then the prune.
@Field final String STEP_NAME = 'pruneImages'
@Field final List COMMAND = ['image', 'prune']

@Field final Map DEFAULTS = [
    kubeconfigCredentialsId: null,   // file credential with a kubeconfig -> env KUBECONFIG
    registryCredentialsId  : null,   // username/password credential -> env GPUOPS_REGISTRY_USERNAME/_PASSWORD
    onRefused              : 'fail', // 'fail' the build, or mark it 'unstable' and go on
]

@Field final Map TYPES = [
    kubeconfigCredentialsId: 'string', registryCredentialsId: 'string', onRefused: ['fail', 'unstable'],
]

Map call(Map config = [:]) {
    Map params = StepParams.prepare(this, config)
    Map step = params.step
    List credentials = Credentials.bindings(kubeconfig: step.kubeconfigCredentialsId,
                                            registry: step.registryCredentialsId)
    Map outcome = gpuopsExec(stepName: STEP_NAME, command: COMMAND, params: params.cli, credentials: credentials,
                             allowCategories: ['gate-refused'])
    StepParams.settle(this, STEP_NAME, outcome, step.onRefused)
    return outcome.result
}
