import com.cloudbees.groovy.cps.NonCPS
import groovy.transform.Field
import org.gpuops.Credentials
import org.gpuops.StepParams

// buildImage: build, tag, push and record a container image (S-19 .. S-21, S-36).
// Runs `gpuops image build` with the build number, git revision and build URL of this build
// unless given; returns the build record (image, tags, digest, CUDA version, ...) as a Map,
// sets the build description and archives the record file. The CLI's options are this step's
// parameters in camelCase (buildImage.txt lists them); only the Jenkins parameters are here.
@Field final String STEP_NAME = 'buildImage'
@Field final List COMMAND = ['image', 'build']
@Field final String RECORD_FILE = 'gpuops-image-record.json'

@Field final Map DEFAULTS = [
    registryCredentialsId: null,  // usernamePassword credential -> env GPUOPS_REGISTRY_USERNAME/_PASSWORD
    archiveRecord        : true,  // archive the record file (recordFile, relative to the workspace)
    setDescription       : true,  // currentBuild.description = first tag, digest, CUDA version
]

@Field final Map TYPES = [registryCredentialsId: 'string', archiveRecord: 'boolean', setDescription: 'boolean']

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
    Map record = gpuopsExec(stepName: STEP_NAME, command: COMMAND, params: cli, credentials: credentials).result
    if (step.archiveRecord) {
        archiveArtifacts(artifacts: cli.record_file, fingerprint: true)
    }
    if (step.setDescription && record.summary) {
        currentBuild.description = record.summary
    }
    return record
}

// The entries that have a value (@NonCPS: a closure given to findAll must not be CPS code).
@NonCPS
Map withValues(Map entries) {
    return entries.findAll { it.value }
}
