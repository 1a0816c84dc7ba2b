import groovy.transform.Field
import org.gpuops.CliContract
import org.gpuops.EnvBindings
import org.gpuops.Reports
import org.gpuops.Shell
import org.gpuops.StepConfig

// gpuopsExec: the one way every gpu-ops step runs the gpuops CLI (see gpuopsExec.txt).
// Parameters travel as a JSON file, secrets only as environment variables; the shell
// script holds nothing but the CLI location and the command words.
@Field final Map DEFAULTS = [
    stepName       : null,  // required: the calling step, used in every error: '[stepName] ...'
    command        : null,  // required: CLI words, e.g. ['headroom', 'check']
    params         : [:],   // JSON object for GPUOPS_PARAMS_FILE, keys as the CLI's option names
    credentials    : [],    // credential bindings, e.g. [type: 'string', id: 'x', variable: 'X']
    environment    : [:],   // plain, non-secret environment variables, e.g. [GPUOPS_OUTPUT: 'json']
    cli            : null,  // CLI location; unset: env GPUOPS_CLI, else 'gpuops' on PATH
    allowCategories: [],    // error categories returned as [ok: false, ...] instead of failing the build
    report         : [:],   // HTML report to archive and publish: [dir:, page:, title:] (empty: none)
]

@Field final Map TYPES = [
    stepName: 'string', command: 'list<string>', params: 'map', credentials: 'list<map>',
    environment: 'map', cli: 'string', allowCategories: 'list<string>', report: 'map',
]

@Field final List REQUIRED = ['stepName', 'command']

Map call(Map config = [:]) {
    String stepName = config?.stepName ?: 'gpuopsExec'
    Map cfg
    String script
    List credentials
    List environment
    try {
        cfg = StepConfig.resolve(DEFAULTS, TYPES, REQUIRED, config)
        CliContract.checkStepName(cfg.stepName)
        CliContract.checkCategories(cfg.allowCategories)
        cfg.cli = cfg.cli ?: (env.GPUOPS_CLI ?: 'gpuops')
        script = Shell.commandScript(cfg.cli, cfg.command)
        credentials = EnvBindings.credentials(cfg.credentials)
        environment = EnvBindings.environment(cfg.environment)
        cfg.report = Reports.resolve(cfg.report, cfg.params)
    } catch (IllegalArgumentException e) {
        error("[${stepName}] gpuopsExec: ${e.message} (invalid-input)")
    }
    if (!env.WORKSPACE) {
        error("[${stepName}] must run on an agent, inside node { ... } (env.WORKSPACE is not set)")
    }
    Map files = CliContract.callFiles("${env.WORKSPACE}/.gpuops", stepName)
    // writeFile also creates ${WORKSPACE}/.gpuops/, where the version check writes.
    writeFile(file: files.params, text: CliContract.paramsJson(cfg.params))
    verifyCli(stepName, cfg.cli, files.version)
    int status = 0
    List callEnv = ["GPUOPS_PARAMS_FILE=${files.params}", "GPUOPS_RESULT_FILE=${files.result}",
                    "GPUOPS_ERROR_FILE=${files.error}"] + environment
    withEnv(callEnv) {
        withCredentialBindings(credentials) {
            status = sh(script: script, returnStatus: true)
        }
    }
    if (cfg.report) {
        keepReport(stepName, cfg.report)
    }
    return outcome(stepName, cfg.allowCategories, status, files)
}

// Archives the command's HTML report folder and publishes the page (Reports.publish, where
// the HTML Publisher plugin is installed); the report is there also when the command said no.
void keepReport(String stepName, Map report) {
    if (!fileExists("${report.dir}/${report.page}")) {
        return
    }
    archiveArtifacts(artifacts: "${report.dir}/**".toString(), allowEmptyArchive: true, fingerprint: false)
    Reports.publish(this, stepName, report)
}

// Fails unless the CLI is there and reports exactly this library's version.
void verifyCli(String stepName, String cli, String versionFile) {
    String wanted = libraryResource('org/gpuops/VERSION').trim()
    int status = 0
    withEnv(["GPUOPS_VERSION_FILE=${versionFile}"]) {
        status = sh(script: Shell.versionScript(cli), returnStatus: true)
    }
    String found = null
    String problem = null
    if (status == 126 || status == 127) {
        problem = "the gpuops CLI was not found at '${cli}' (exit ${status})"
    } else if (status != 0) {
        problem = "the gpuops CLI at '${cli}' failed to report its version (exit ${status})"
    } else {
        try {
            found = CliContract.versionOf(readFile(versionFile))
        } catch (IllegalArgumentException e) {
            problem = "the gpuops CLI at '${cli}' did not report a usable version: ${e.message}"
        }
    }
    if (problem == null && found != wanted) {
        problem = "the gpuops CLI at '${cli}' is version ${found}, but this library needs exactly ${wanted}"
    }
    if (problem != null) {
        error(CliContract.errorText(stepName,
            [message: problem, category: CliContract.SETUP_CATEGORY, hint: CliContract.installHint(wanted)]))
    }
}

// Runs body with the credentials bound to environment variables (withCredentials).
void withCredentialBindings(List credentials, Closure body) {
    if (credentials.isEmpty()) {
        body()
        return
    }
    List bindings = []
    // an index, not for-in: groovy-cps 1.12 keeps the list's (not Serializable) iterator across
    // these DSL calls (workflow-cps's IteratorHack makes it serializable; docs/JENKINS-CPS.md)
    for (int i = 0; i < credentials.size(); i++) {
        bindings.add(credentialBinding((Map) credentials[i]))
    }
    withCredentials(bindings) {
        body()
    }
}

Object credentialBinding(Map spec) {
    Map args = EnvBindings.bindingArguments(spec)
    switch (spec.type) {
        case 'usernamePassword':
            return usernamePassword(args)
        case 'string':
            return string(args)
        case 'file':
            return file(args)
        default:
            return sshUserPrivateKey(args)
    }
}

// Reads the result (status 0) or the error document and turns it into the step's outcome:
// always [ok: Boolean, verdict: String, result: Map, error: Map or null]; verdict is the
// document's (ok, refused, failed, partial), derived for an older CLI that wrote none. A failure
// whose category the caller allows returns ok: false with the CLI's "result" (e.g. a refused
// gate's numbers); any other failure fails the build.
Map outcome(String stepName, List allowCategories, int status, Map files) {
    if (status == 0) {
        Map done = readDocument(stepName, files.result, 'result', true)
        Map result = done?.result ?: [:]
        return [ok: true, verdict: CliContract.verdictOf(done, null), result: result, error: null]
    }
    Map document = readDocument(stepName, files.error, 'error', false)
    Map failure = CliContract.errorOf(document, status)
    String verdict = CliContract.verdictOf(document, failure)
    if (allowCategories.contains(failure.category)) {
        Map result = document?.result instanceof Map ? (Map) document.result : [:]
        return [ok: false, verdict: verdict, result: result, error: failure]
    }
    error(CliContract.errorText(stepName, failure, verdict))
}

// The parsed document at path; null when the file is absent and not required.
@SuppressWarnings('ReturnsNullInsteadOfEmptyCollection')
Map readDocument(String stepName, String path, String what, boolean required) {
    if (!fileExists(path)) {
        if (required) {
            error("[${stepName}] gpuops exited 0 but wrote no ${what} file ${path} (internal)")
        }
        return null
    }
    try {
        return CliContract.document(readFile(path), "the gpuops ${what} file ${path}")
    } catch (IllegalArgumentException e) {
        error("[${stepName}] ${e.message} (internal)")
    }
}
