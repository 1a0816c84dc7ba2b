import groovy.transform.Field
import org.gpuops.CliContract
import org.gpuops.NodeSteps
import org.gpuops.StepParams

// updateGpuNodes: roll a change over GPU nodes (node initialisation, NVIDIA driver): canary,
// batches, failure budget, drain and verify (`gpuops nodes update`). Takes a lock per
// inventory, binds the SSH key into environment variables only (S-25), archives the artifacts
// folder and publishes the JUnit report (one test case per host). Returns the CLI's result.
@Field final String STEP_NAME = 'updateGpuNodes'
@Field final List COMMAND = ['nodes', 'update']

@Field final Map DEFAULTS = [
    sshCredentialsId       : null,   // sshUserPrivateKey credential -> env GPUOPS_SSH_KEY_FILE, GPUOPS_SSH_USER
    kubeconfigCredentialsId: null,   // file credential with a kubeconfig -> env KUBECONFIG
    onFailure              : 'fail', // failed hosts or a refused batch: 'fail' the build, or 'unstable'
]

@Field final Map TYPES = [
    sshCredentialsId: 'string', kubeconfigCredentialsId: 'string', onFailure: ['fail', 'unstable'],
]

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
    cli.artifacts_dir = NodeSteps.reportDir(cli.artifacts_dir, STEP_NAME, env.BUILD_NUMBER)
    List credentials = NodeSteps.credentials(step.sshCredentialsId, step.kubeconfigCredentialsId)
    Map outcome = [:]
    lock(resource: NodeSteps.lockName(cli.inventory)) {
        outcome = gpuopsExec(stepName: STEP_NAME, command: COMMAND, params: cli, credentials: credentials,
                             allowCategories: ['failed', 'gate-refused'])
    }
    archiveArtifacts(artifacts: "${cli.artifacts_dir}/**", allowEmptyArchive: true)
    junit(testResults: "${cli.artifacts_dir}/*-junit.xml", allowEmptyResults: true)
    publishPage(cli.artifacts_dir.toString(), 'node-update.html', 'GPU node update')
    if (!outcome.ok) {
        String text = CliContract.errorText(STEP_NAME, outcome.error)
        if (step.onFailure == 'unstable') {
            unstable(text)
        } else {
            error(text)
        }
    }
    return outcome.result
}

// Shows the HTML page on the build page where the HTML Publisher plugin is installed (the
// folder is archived above either way).
void publishPage(String dir, String page, String title) {
    if (!fileExists("${dir}/${page}")) {
        return
    }
    try {
        publishHTML(target: [reportDir: dir, reportFiles: page, reportName: title,
                             keepAll: true, alwaysLinkToLastBuild: false, allowMissing: true])
    } catch (NoSuchMethodError e) {
        echo("[${STEP_NAME}] ${title}: archived as ${dir}/${page} " +
             '(install the HTML Publisher plugin to see it on the build page)')
    }
}
