package org.gpuops

import static com.lesfurets.jenkins.unit.global.lib.LibraryConfiguration.library

import com.lesfurets.jenkins.unit.BasePipelineTest
import groovy.json.JsonOutput
import groovy.json.JsonSlurperClassic
import org.junit.Before

/**
 * Base of the step tests: loads the gpu-ops library from this repository (as Jenkins
 * would load it, library name 'gpu-ops') and stands in for the agent around it:
 * a workspace of files (readFile/writeFile/fileExists), a credentials store bound by
 * withCredentials into environment variables only, withEnv, and `sh` answered per
 * script by handlers that play the CLI's side of the contract (result/error files).
 */
abstract class GpuOpsPipelineTest extends BasePipelineTest {

    public static final String REPO_ROOT = new File(System.getProperty('gpuops.repoRoot') ?: '.').canonicalPath
    public static final String WORKSPACE = '/agent/workspace/job'
    public static final String LIBRARY_VERSION = new File(REPO_ROOT, 'resources/org/gpuops/VERSION').text.trim()
    public static final String VERSION_SCRIPT = versionScript('gpuops')

    /** The agent's files: path -> text. */
    Map<String, String> files = [:]
    /** The environment the steps see (env.X) and `sh` runs with. */
    Map<String, String> env = [:]
    /** Jenkins credentials: id -> [username:, password:] / [secret:] / [content:] / [privateKey:, username:]. */
    Map<String, Map> credentialStore = [:]
    /** Every `sh` call: [script:, returnStatus:, env: (a copy of the environment at that moment)]. */
    List<Map> shCalls = []
    /** Environment variable names bound by each withCredentials call. */
    List<List<String>> boundVariables = []
    /** Messages given to the `unstable` step. */
    List<String> unstableMessages = []
    /** Resources taken with the `lock` step, in order. */
    List<String> lockedResources = []
    /** Agents taken by `node` blocks, in order: [label:, node:, lock: (the lock held when it was taken)]. */
    List<Map> agents = []
    /** `input` steps: their arguments plus agentHeld (whether inside a node block) and lock
     *  (the lock held while it waits). */
    List<Map> inputs = []
    /** `lock` (also in lockedResources) and `timeout` steps: their arguments; `checkout`: the
     *  agent it ran on. */
    List<Map> locks = []
    List<Map> timeouts = []
    List<String> checkouts = []
    /** Who answers `input` (the approver); null: nobody does before the timeout (abort). */
    String approver = 'release-manager'
    /** Answers to successive `input`s, taken in order before `approver` answers: a user id
     *  approves, null lets the input time out, [abortedBy: id] presses Abort (InputRejected). */
    List<Object> answers = []
    /** The build's causes as currentBuild.getBuildCauses() gives them ([_class:, userId:] for a
     *  user). By default a user, `developer`, started it (four eyes refuses an approval with no
     *  requester); {@link #startedBy} sets another, `buildCauses = [...]` a timer or token. */
    List<Map> buildCauses = [userCause('developer')]
    /** currentBuild.upstreamBuilds: each upstream build's causes (none by default). */
    List<List<Map>> upstreamCauses = []
    /** Arguments of every archiveArtifacts / publishHTML / junit call, and every echo. */
    List<Map> archived = []
    List<Map> published = []
    List<Map> junitReports = []
    List<String> echoed = []
    /** false: the HTML Publisher plugin is not installed (publishHTML is no DSL method). */
    boolean htmlPublisher = true
    /** The lock held now (null outside any `lock` block). */
    protected String heldLock = null

    protected final Map<String, Closure> shHandlers = [:]
    protected Script pipeline

    @Before
    @Override
    void setUp() throws Exception {
        scriptRoots = [REPO_ROOT] as String[]
        baseScriptRoot = REPO_ROOT
        super.setUp()
        helper.registerSharedLibrary(library().name('gpu-ops')
            .defaultVersion('main')
            .allowOverride(false)
            .implicit(true)
            .targetPath(REPO_ROOT)
            .retriever(new RepositorySource(REPO_ROOT))
            .build())
        env.WORKSPACE = WORKSPACE
        binding.setVariable('env', env)
        registerBuildCauses(binding.getVariable('currentBuild') as Map)
        registerWorkspace()
        registerSteps()
        registerAgentSteps()
        registerCredentials()
        cliVersion(LIBRARY_VERSION)
        pipeline = loadScript('tests/groovy/pipelines/Jenkinsfile.jenkins')
    }

    /** currentBuild.getBuildCauses(className): the causes of that class (workflow-support's RunWrapper). */
    protected void registerBuildCauses(Map currentBuild) {
        currentBuild.getBuildCauses = { String className -> buildCauses.findAll { it._class == className } }
        currentBuild.getUpstreamBuilds = { -> upstreamBuilds() }
    }

    /** The upstream builds as RunWrapper objects: each answers getBuildCauses(className). */
    protected List upstreamBuilds() {
        return upstreamCauses.collect { List<Map> causes ->
            [getBuildCauses: { String className -> causes.findAll { it._class == className } }]
        }
    }

    /** The build was started by this Jenkins user (Build with Parameters): its user cause. */
    void startedBy(String userId) {
        buildCauses = [userCause(userId)]
    }

    /** A user cause as Jenkins records it for "Build with Parameters". */
    static Map userCause(String userId) {
        return [_class: 'hudson.model.Cause$UserIdCause', userId: userId, userName: userId.capitalize(),
                shortDescription: "Started by user ${userId.capitalize()}".toString()]
    }

    /** Calls a library step as a Jenkinsfile would: stepName(config). */
    Object runStep(String stepName, Map config) {
        return pipeline.invokeMethod(stepName, [config] as Object[])
    }

    /** Runs a step that must fail and returns the message of its `error`. */
    String runStepExpectingError(String stepName, Map config) {
        try {
            runStep(stepName, config)
        } catch (PipelineFailure failure) {
            return failure.message
        }
        throw new AssertionError((Object) "${stepName} was expected to fail, but it succeeded")
    }

    // ---- the CLI's side: `sh` answers ------------------------------------------------

    /** Answers `sh` calls whose script is exactly `script`; the handler gets the call map and returns the status. */
    void onSh(String script, Closure<Integer> handler) {
        shHandlers.put(script, handler)
    }

    /** The script the runner must use to ask the CLI for its version. */
    static String versionScript(String cli) {
        return "'${cli}' --output json --version > \"\$GPUOPS_VERSION_FILE\""
    }

    /** The installed CLI reports this version. */
    void cliVersion(String version, String cli = 'gpuops') {
        onSh(versionScript(cli)) { Map call ->
            files.put(call.env.GPUOPS_VERSION_FILE, JsonOutput.toJson([version: version]))
            return 0
        }
    }

    /** No CLI on the agent: the shell says 'not found' (127). */
    void cliMissing() {
        onSh(VERSION_SCRIPT) { Map call ->
            files.put(call.env.GPUOPS_VERSION_FILE, '')
            return 127
        }
    }

    /** The command succeeds and writes this result document. */
    void cliSucceeds(List<String> words, Map result, String cli = 'gpuops') {
        onSh(commandScript(words, cli)) { Map call ->
            files.put(call.env.GPUOPS_RESULT_FILE,
                JsonOutput.toJson([ok: true, command: words.join(' '), result: result]))
            return 0
        }
    }

    /** The command fails with this exit code and error document (extra: more keys of the document). */
    void cliFails(List<String> words, int exitCode, Map error, Map extra = [:]) {
        onSh(commandScript(words)) { Map call ->
            Map document = [ok: false, command: words.join(' '), error: error + [exit_code: exitCode]] + extra
            files.put(call.env.GPUOPS_ERROR_FILE, JsonOutput.toJson(document))
            return exitCode
        }
    }

    /** The script the runner must use for these words. */
    static String commandScript(List<String> words, String cli = 'gpuops') {
        return ([cli] + words).collect { "'${it}'" }.join(' ')
    }

    /** The `sh` calls that ran a CLI command (not the version check). */
    List<Map> commandCalls() {
        return shCalls.findAll { !it.script.contains('--version') }
    }

    /** The parameters JSON the last command call was given. */
    Map paramsOfLastCall() {
        List<Map> calls = commandCalls()
        assert calls: 'no CLI command ran'
        String path = calls.last().env.GPUOPS_PARAMS_FILE
        assert path && files.containsKey(path): "no params file at ${path}"
        return (Map) new JsonSlurperClassic().parseText(files.get(path))
    }

    // ---- the agent ----------------------------------------------------------------

    protected void registerWorkspace() {
        helper.registerAllowedMethod('writeFile', [Map]) { Map args ->
            writeWorkspaceFile(args.file.toString(), args.text.toString())
        }
        helper.registerAllowedMethod('readFile', [String]) { String path -> readWorkspaceFile(path) }
        helper.registerAllowedMethod('readFile', [Map]) { Map args -> readWorkspaceFile(args.file.toString()) }
        helper.registerAllowedMethod('fileExists', [String]) { String path -> workspaceFileExists(path) }
    }

    protected static String dirOf(String path) {
        return path.substring(0, path.lastIndexOf('/') + 1)
    }

    protected void writeWorkspaceFile(String path, String text) {
        files.put(path, text)
    }

    protected String readWorkspaceFile(String path) {
        if (!files.containsKey(path)) {
            throw new FileNotFoundException(path)
        }
        return files.get(path)
    }

    protected boolean workspaceFileExists(String path) {
        return files.containsKey(path)
    }

    /** Runs an `sh` call: here the handler registered for its script answers (127 when none is). */
    protected int runShell(Map call) {
        String target = call.env.GPUOPS_VERSION_FILE
        if (call.script.contains('> "$GPUOPS_VERSION_FILE"') && !files.keySet().any { it.startsWith(dirOf(target)) }) {
            return 2 // the shell cannot create a file in a directory that no writeFile has created
        }
        Closure handler = shHandlers.get(call.script)
        return handler == null ? 127 : handler(call) as int
    }

    protected void registerSteps() {
        helper.registerAllowedMethod('sh', [Map]) { Map args ->
            Map call = [script: args.script, returnStatus: args.returnStatus, env: new LinkedHashMap(env),
                        lock: heldLock]
            shCalls.add(call)
            int status = runShell(call)
            if (args.returnStatus) {
                return status
            }
            if (status != 0) {
                throw new PipelineFailure("script returned exit code ${status}")
            }
            return null
        }
        helper.registerAllowedMethod('sh', [String]) { String script ->
            throw new AssertionError((Object) "sh without returnStatus: ${script}")
        }
        helper.registerAllowedMethod('withEnv', [List, Closure]) { List entries, Closure body ->
            Map saved = new LinkedHashMap(env)
            entries.each { Object entry ->
                String text = "${entry}"
                int at = text.indexOf('=')
                assert at > 0: "withEnv entry without '=': ${text}"
                env.put(text.substring(0, at), text.substring(at + 1))
            }
            try {
                return body()
            } finally {
                env.clear()
                env.putAll(saved)
            }
        }
        helper.registerAllowedMethod('error', [String]) { String message ->
            updateBuildStatus('FAILURE')
            throw new PipelineFailure(message)
        }
        helper.registerAllowedMethod('unstable', [String]) { String message ->
            unstableMessages.add(message)
            updateBuildStatus('UNSTABLE')
        }
        helper.registerAllowedMethod('echo', [String]) { String message -> echoed.add(message) }
        registerPluginSteps()
    }

    /** The Lockable Resources `lock` step, `archiveArtifacts`, HTML Publisher's `publishHTML`
     *  and the JUnit plugin's `junit`. */
    protected void registerPluginSteps() {
        helper.registerAllowedMethod('lock', [Map, Closure]) { Map args, Closure body ->
            assert args.resource: "lock without a resource: ${args}"
            assert heldLock == null: "nested lock ${args.resource} inside ${heldLock}"
            lockedResources.add(args.resource.toString())
            locks.add(args)
            heldLock = args.resource.toString()
            Map saved = new LinkedHashMap(env)
            if (args.variable) {  // lockable-resources: the locked names, while the body runs
                env.put(args.variable.toString(), heldLock)
            }
            try {
                return body()
            } finally {
                heldLock = null
                env.clear()
                env.putAll(saved)
            }
        }
        helper.registerAllowedMethod('archiveArtifacts', [Map]) { Map args -> archived.add(plainMap(args)) }
        helper.registerAllowedMethod('publishHTML', [Map]) { Map args ->
            if (!htmlPublisher) {
                throw new NoSuchMethodError("No such DSL method 'publishHTML' found among steps")
            }
            published.add(plainMap(args.target as Map))
        }
        helper.registerAllowedMethod('junit', [Map]) { Map args -> junitReports.add(plainMap(args)) }
    }

    protected static Map plainMap(Map args) {
        return args.collectEntries { k, v -> [(k): v instanceof GString ? v.toString() : v] }
    }

    // ---- agents, approval, locks -------------------------------------------------

    /** node { }: an agent with its own workspace; env.NODE_NAME and WORKSPACE hold inside only. */
    protected void registerAgentSteps() {
        binding.setVariable('scm', [$class: 'GitSCM'])
        helper.registerAllowedMethod('node', [String, Closure]) { String label, Closure body ->
            runOnAgent(label, body)
        }
        helper.registerAllowedMethod('checkout', [Map]) { Map scm ->
            checkouts.add(env.NODE_NAME)
            return [:]
        }
        helper.registerAllowedMethod('input', [Map]) { Map args ->
            inputs.add(args + [agentHeld: env.NODE_NAME != null, lock: heldLock])
            Object answer = answers ? answers.remove(0) : approver
            if (answer instanceof Map) {
                throw new InputRejected(answer.abortedBy as String)
            }
            if (answer == null) {
                throw new PipelineFailure('Timeout has been exceeded')
            }
            return answer
        }
        helper.registerAllowedMethod('timeout', [Map, Closure]) { Map args, Closure body ->
            timeouts.add(args)
            return body()
        }
    }

    /**
     * Installs the Declarative shim (Declarative.groovy) on this harness: stages with an agent
     * run in runOnAgent, the stage's default checkout is `checkout`, echo lines go to `console`.
     */
    protected Declarative installDeclarative(List<String> console,
                                             Closure checkout = { -> checkouts.add(env.NODE_NAME) }) {
        Declarative shim = new Declarative(helper, env, [
            node     : { String label, Closure body -> runOnAgent(label, body) },
            checkout : checkout,
            result   : { -> binding.getVariable('currentBuild').result },
            setResult: { String status -> updateBuildStatus(status) },
            console  : console,
        ])
        shim.install(binding)
        return shim
    }

    protected Object runOnAgent(String label, Closure body) {
        Map saved = new LinkedHashMap(env)
        String name = "${label}-${agents.size() + 1}"
        agents.add([label: label, node: name, lock: heldLock])
        env.NODE_NAME = name
        env.WORKSPACE = agentWorkspace(name)
        try {
            return body()
        } finally {
            env.clear()
            env.putAll(saved)
        }
    }

    protected String agentWorkspace(String node) {
        return "/agents/${node}/workspace/job".toString()
    }

    // ---- credentials --------------------------------------------------------------

    protected void registerCredentials() {
        ['usernamePassword', 'string', 'file', 'sshUserPrivateKey'].each { String kind ->
            helper.registerAllowedMethod(kind, [Map]) { Map args -> [kind: kind] + args }
        }
        helper.registerAllowedMethod('withCredentials', [List, Closure]) { List bindings, Closure body ->
            Map saved = new LinkedHashMap(env)
            List<String> names = []
            bindings.each { Map binding -> names.addAll(bind(binding)) }
            boundVariables.add(names)
            try {
                return body()
            } finally {
                env.clear()
                env.putAll(saved)
            }
        }
    }

    protected List<String> bind(Map binding) {
        Map stored = credentialStore.get(binding.credentialsId)
        if (stored == null) {
            throw new PipelineFailure("Could not find credentials entry with ID '${binding.credentialsId}'")
        }
        Map<String, String> values = [:]
        switch (binding.kind) {
            case 'usernamePassword':
                values.put(binding.usernameVariable, stored.username)
                values.put(binding.passwordVariable, stored.password)
                break
            case 'string':
                values.put(binding.variable, stored.secret)
                break
            case 'file':
                values.put(binding.variable, secretFile(binding.credentialsId, stored.content))
                break
            case 'sshUserPrivateKey':
                values.put(binding.keyFileVariable, secretFile(binding.credentialsId, stored.privateKey))
                if (binding.usernameVariable) {
                    values.put(binding.usernameVariable, stored.username)
                }
                if (binding.passphraseVariable) {
                    values.put(binding.passphraseVariable, stored.passphrase)
                }
                break
            default:
                throw new AssertionError((Object) "unknown credential binding ${binding}")
        }
        values.each { String name, String value ->
            assert name ==~ /^[A-Z_][A-Z0-9_]*$/: "bad variable name ${name}"
            env.put(name, value)
        }
        return new ArrayList<String>(values.keySet())
    }

    protected String secretFile(String id, String content) {
        String path = "${env.WORKSPACE}@tmp/secretFiles/${id}"
        writeWorkspaceFile(path, content)
        return path
    }

    // ---- assertions ---------------------------------------------------------------

    /** Asserts that no pipeline call (sh scripts, echo, error, writeFile, ...) carries the text in its arguments. */
    void assertNoCallCarries(String secret) {
        helper.callStack.each { call ->
            assert !call.argsToString().contains(secret): "${call.methodName} call carries a secret: ${call}"
        }
        shCalls.each { Map call -> assert !call.script.contains(secret): "sh script carries a secret" }
    }

}
