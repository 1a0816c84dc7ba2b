import groovy.transform.Field
import org.gpuops.CliContract
import org.gpuops.NodeSteps
import org.gpuops.StepParams

// inspectGpuNodes: the health of every GPU node (`gpuops nodes inspect`, S-16): per GPU
// temperature, ECC, remapped rows, NVLink, Xid events; nvidia-smi's own failures; NICs and
// disks. Takes a lock per inventory, binds the SSH key into environment variables only (S-25),
// archives and publishes the JSON and JUnit reports; a critical finding fails the build or
// marks it unstable. Returns the CLI's result.
@Field final String STEP_NAME = 'inspectGpuNodes'
@Field final List COMMAND = ['nodes', 'inspect']

@Field final Map DEFAULTS = [
    sshCredentialsId    : null,   // sshUserPrivateKey credential -> env GPUOPS_SSH_KEY_FILE, GPUOPS_SSH_USER
    webhookCredentialsId: null,   // string credential with the alert webhook URL -> env GPUOPS_WEBHOOK_URL
    onCritical          : 'fail', // critical findings or hosts not inspected: 'fail', or 'unstable'
]

@Field final Map TYPES = [
    sshCredentialsId: 'string', webhookCredentialsId: 'string', onCritical: ['fail', 'unstable'],
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
    cli.report_dir = NodeSteps.reportDir(cli.report_dir, STEP_NAME, env.BUILD_NUMBER)
    if (env.BUILD_URL && !cli.containsKey('link')) {
        cli.link = env.BUILD_URL
    }
    List credentials = NodeSteps.credentials(step.sshCredentialsId, null)
    if (step.webhookCredentialsId) {
        credentials.add([type: 'string', id: step.webhookCredentialsId,
                         variable: cli.webhook_url_env ?: 'GPUOPS_WEBHOOK_URL'])
    }
    Map outcome = [:]
    lock(resource: NodeSteps.lockName(cli.inventory)) {
        outcome = gpuopsExec(stepName: STEP_NAME, command: COMMAND, params: cli, credentials: credentials,
                             allowCategories: ['gate-refused', 'unreachable'])
    }
    archiveArtifacts(artifacts: "${cli.report_dir}/**", allowEmptyArchive: true)
    junit(testResults: "${cli.report_dir}/*-junit.xml", allowEmptyResults: true)
    publishPage(cli.report_dir.toString(), 'fleet.html', 'GPU fleet health')
    if (!outcome.ok) {
        String text = CliContract.errorText(STEP_NAME, outcome.error)
        if (step.onCritical == 'unstable') {
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
