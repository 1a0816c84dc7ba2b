import com.cloudbees.groovy.cps.NonCPS
import groovy.transform.Field
import org.gpuops.Credentials
import org.gpuops.StepParams

// buildImage: build, tag, push and record a container image (S-19 .. S-21, S-36).
// Runs `gpuops image build` with the build number, git revision and build URL of this build
// unless given; returns the build record (image, tags, digest, CUDA version, ...) as a Map,
// sets the build description and archives the record file. The CLI's options are this step's
// parameters in camelCase (buildImage.txt lists them); only the Jenkins parameters are here.
// With cleanup: true the build removes what it made (`image build --cleanup`), and then, also
// when it failed, `gpuops image clean` prunes what earlier gpuops builds left on the same daemon
// (older than an hour, the newest cleanKeepLast builds of each repository and their bases kept,
// another tenant's images never); a clean that fails makes the build UNSTABLE, not failed.
@Field final String STEP_NAME = 'buildImage'
@Field final List COMMAND = ['image', 'build']
@Field final List CLEAN_COMMAND = ['image', 'clean']
@Field final String RECORD_FILE = 'gpuops-image-record.json'

@Field final Map DEFAULTS = [
    registryCredentialsId: null,  // usernamePassword credential -> env GPUOPS_REGISTRY_USERNAME/_PASSWORD
    archiveRecord        : true,  // archive the record file (recordFile, relative to the workspace)
    setDescription       : true,  // currentBuild.description = first tag, digest, CUDA version
    cleanKeepLast        : null,  // with cleanup: image clean's --keep-last (unset: the CLI's default, 1)
]

@Field final Map TYPES = [registryCredentialsId: 'string', archiveRecord: 'boolean', setDescription: 'boolean',
                          cleanKeepLast: 'int']

Map call(Map config = [:]) {
    Map params = StepParams.prepare(this, config)
    Map step = params.step
    Map cli = withValues([build_number: env.BUILD_NUMBER, git_revision: env.GIT_COMMIT,
                          record_file: RECORD_FILE]) + params.cli
    if (step.archiveRecord && cli.record_file.startsWith('/')) {
        error("[${STEP_NAME}] recordFile: '${cli.record_file}' must be relative to the workspace " +
            'to be archived (or set archiveRecord: false) (invalid-input)')
    }
    List credentials = Credentials.bindings(registry: step.registryCredentialsId,
                                            registryUsernameVariable: cli.registry_username_env,
                                            registryPasswordVariable: cli.registry_password_env)
    Map record = [:]
    try {
        record = gpuopsExec(stepName: STEP_NAME, command: COMMAND, params: cli, credentials: credentials).result
    } finally {
        if (cli.cleanup) {
            cleanAgent(cli, step.cleanKeepLast)
        }
    }
    if (step.archiveRecord) {
        archiveArtifacts(artifacts: cli.record_file, fingerprint: true)
    }
    if (step.setDescription && record.summary) {
        currentBuild.description = record.summary
    }
    return record
}

// `gpuops image clean` on the daemon this build used: what earlier gpuops builds left there.
void cleanAgent(Map cli, Object keepLast) {
    Map params = withValues([docker_host: cli.docker_host, docker_api_version: cli.docker_api_version])
    if (keepLast != null) {
        params.keep_last = keepLast
    }
    Map cleaned = gpuopsExec(stepName: STEP_NAME, command: CLEAN_COMMAND, params: params,
                             allowCategories: ['failed', 'unreachable'])
    if (cleaned.ok) {
        Map clean = cleaned.result
        echo("[${STEP_NAME}] agent cleanup: ${clean.message}")
    }
    StepParams.settle(this, STEP_NAME, cleaned, 'unstable')
}

// The entries that have a value (@NonCPS: a closure given to findAll must not be CPS code).
@NonCPS
Map withValues(Map entries) {
    return entries.findAll { it.value }
}
