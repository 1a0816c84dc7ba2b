package org.gpuops

import com.lesfurets.jenkins.unit.MethodSignature
import com.lesfurets.jenkins.unit.PipelineTestHelper
import java.text.SimpleDateFormat
import java.util.concurrent.TimeUnit
import org.yaml.snakeyaml.Yaml

/**
 * The smallest Declarative Pipeline runner that runs Jenkinsfile.example honestly, on top of
 * JenkinsPipelineUnit 1.1 (which has no Declarative support). It reads the pipeline the way
 * pipeline-model-definition does and runs it in Jenkins' order, writing a classic console log
 * ("[Pipeline] stage", "[Pipeline] { (Build)", ...) to `console` and to `out` when set.
 *
 * ENFORCED (each has a negative test in DeclarativeShimTest):
 * - stages in order, nested stages; a failing stage fails the build, later stages are skipped;
 * - a stage's order: `when { beforeOptions }`, options (timeout, lock), `input`,
 *   `when { beforeInput }`, `when { beforeAgent }`, the agent (+ default checkout), the plain
 *   `when`, environment, steps, post (on the stage's agent); `events` records that order;
 * - timeouts (`options { timeout }` of the pipeline or a stage, and the `timeout` step) on a
 *   simulated clock (Clock): steps that wait advance it (`sleep`, an `input` waiting for its
 *   answer, a test's `shim.clock.elapse`); a wait past a deadline is interrupted there with
 *   Interrupted ('Timeout has been exceeded') and the build is ABORTED, as Jenkins does;
 * - `input`: only a user named in `submitter`, in one of its groups (`groups`) or an
 *   administrator (`admins`) can approve or abort (InputRejected: "Rejected by <user>", the
 *   build ABORTED); anyone else's answer is refused and the input waits on (to its timeout:
 *   ABORTED); it returns the approver only with `submitterParameter`;
 * - `input` outside any agent: an `input` inside `node` (a stage's agent, a step's node block)
 *   fails. Jenkins allows it; this is the house rule (an approval holds no executor or pod while
 *   a person decides: docs/JENKINS-AGENT.md), checked wherever the shim runs a pipeline;
 * - `agent { kubernetes { yaml ...; defaultContainer 'x' } }`: the YAML is parsed; a
 *   `defaultContainer` or `container('x')` the pod lacks fails (the plugin adds `jnlp`);
 *   `container()` outside a Kubernetes agent fails;
 * - steps that need a workspace (sh, junit, archiveArtifacts, ...) outside any agent fail,
 *   as Jenkins' "Required context class hudson.FilePath is missing";
 * - options: only known names, buildDiscarder at pipeline level only; `lock` runs the lock step;
 * - post: always, success, failure, unstable, aborted, unsuccessful, cleanup, in Jenkins'
 *   order, by the stage's or build's result; a failing post block fails the build.
 *
 * RECORDED, NOT ENFORCED:
 * - buildDiscarder and disableConcurrentBuilds (job properties: they act between builds);
 * - timestamps: prefixes the printed console (`out`) only, from the simulated clock;
 * - the pod's images, resources and securityContext (the lab runs no pods: the real API
 *   server checks them in tests/python/integration/test_agent_pod*.py); kubernetes agents
 *   run on this host;
 * - `lock` is the test's lock step: one build at a time, no other build to wait for;
 * - real `sh` processes take no simulated time; user ids are compared exactly (Jenkins'
 *   default id strategy is case-insensitive);
 * - CPS: JenkinsPipelineUnit runs the script without it (tests/groovy/org/gpuops/cps/ does).
 * Not supported (fails loudly rather than pretend): parallel, matrix, `parameters` (jobs as
 * code owns them), `tools`, `triggers`, post changed/fixed/regression, restarts from a stage.
 */
class Declarative {

    /** A stage or the pipeline: what its closure declared. */
    static class Section {
        String name
        Map agent
        Closure when
        boolean beforeAgent
        boolean beforeInput
        boolean beforeOptions
        Map input
        Closure steps
        List<Section> stages
        Map<String, Closure> post = [:]
        Map environment = [:]
        List<Map> options = []
    }

    /** Jenkins' FlowInterruptedException: a timeout (or an abort) interrupted the build. */
    static class Interrupted extends PipelineFailure {
        final String result

        Interrupted(String message, String result) {
            super(message)
            this.result = result
        }
    }

    /** Simulated time in milliseconds; `deadlines` are those of the timeouts running now. */
    static class Clock {
        long now = 0
        final List<Long> deadlines = []

        /** Time passes for a waiting step: interrupted at the first deadline it passes. */
        void elapse(long millis) {
            long target = millis >= Long.MAX_VALUE - now ? Long.MAX_VALUE : now + millis
            Long first = deadlines.findAll { Long at -> at < target }.min()
            if (first != null) {
                now = first
                throw new Interrupted('Timeout has been exceeded', 'ABORTED')
            }
            now = target
        }
    }

    static final List<String> RESULTS = ['SUCCESS', 'UNSTABLE', 'FAILURE', 'NOT_BUILT', 'ABORTED']
    static final List<String> POST_ORDER = ['always', 'aborted', 'failure', 'success', 'unstable',
                                            'unsuccessful', 'cleanup']
    static final List<String> STAGE_OPTIONS = ['timeout', 'lock', 'timestamps', 'skipDefaultCheckout']
    /** Steps that act on the agent's workspace: Jenkins refuses them outside any node. */
    static final List<List> WORKSPACE_STEPS = [
        ['sh', [String]], ['sh', [Map]], ['junit', [Map]], ['archiveArtifacts', [Map]], ['publishHTML', [Map]],
        ['readFile', [String]], ['readFile', [Map]], ['writeFile', [Map]], ['fileExists', [String]],
        ['checkout', [Map]],
    ]

    final PipelineTestHelper helper
    final Map env
    final Closure node
    final Closure checkout
    final Closure<String> result
    final Closure setResult
    final List<String> console
    /** Each console line also goes here when set (e.g. println for `make demo`). */
    Closure out = null
    final Clock clock = new Clock()
    /** Jenkins' security realm for `input`: user -> groups; administrators approve anything. */
    final Map<String, List<String>> groups = [:]
    final Set<String> admins = [] as Set
    /** How long an approver takes to answer an `input` (simulated milliseconds). */
    long approvalDelay = 0
    /** Answers refused because the user may not approve: [user:, submitter:]. */
    final List<Map> refusedApprovals = []
    /** What ran: [stage: name, status: SUCCESS / FAILURE / ABORTED / skipped (when) / skipped (earlier failure)]. */
    final List<Map> stageLog = []
    /** The order things happened in: 'options X', 'input X', 'when X', 'agent X', 'steps X', 'post X'. */
    final List<String> events = []
    Section pipeline
    private final List<Section> collecting = []
    /** The Kubernetes agent's pod now: [name:, containers:, container:]; null on other agents. */
    private Map pod = null
    private int timestamps = 0
    private final long startedAt = System.currentTimeMillis()

    Declarative(PipelineTestHelper helper, Map env, Map hooks) {
        this.helper = helper
        this.env = env
        this.node = hooks.node
        this.checkout = hooks.checkout
        this.result = hooks.result
        this.setResult = hooks.setResult
        this.console = hooks.console
    }

    void install(Binding binding) {
        binding.setVariable('none', [kind: 'none'])
        binding.setVariable('any', [kind: 'any'])
        helper.registerAllowedMethod('pipeline', [Closure]) { Closure body -> runPipeline(body) }
        helper.registerAllowedMethod('agent', [Map]) { Map kind -> current().agent = kind }
        helper.registerAllowedMethod('agent', [Closure]) { Closure body ->
            Map spec = [kind: 'label']
            withDelegate(body, new DeclarativeAgentSpec(spec))
            current().agent = spec
        }
        helper.registerAllowedMethod('stages', [Closure]) { Closure body ->
            Section owner = current()
            owner.stages = []
            body()
        }
        helper.registerAllowedMethod('stage', [String, Closure]) { String name, Closure body ->
            Section stage = new Section(name: name)
            current().stages.add(stage)
            collecting.add(stage)
            try {
                body()
            } finally {
                collecting.remove(collecting.size() - 1)
            }
        }
        helper.registerAllowedMethod('when', [Closure]) { Closure body ->
            Section stage = current()
            withDelegate(body, new DeclarativeWhenSpec(stage))
        }
        helper.registerAllowedMethod('steps', [Closure]) { Closure body -> current().steps = body }
        helper.registerAllowedMethod('post', [Closure]) { Closure body ->
            withDelegate(body, new DeclarativePostSpec(current().post))
        }
        helper.registerAllowedMethod('options', [Closure]) { Closure body ->
            Section section = current()
            withDelegate(body, new DeclarativeOptionsSpec(section.options, section.is(pipeline)))
        }
        helper.registerAllowedMethod('environment', [Closure]) { Closure body ->
            withDelegate(body, new DeclarativeEnvironmentSpec(current().environment))
        }
        helper.registerAllowedMethod('input', [Closure]) { Closure body ->
            Map args = [:]
            withDelegate(body, new DeclarativeInputSpec(args))
            current().input = args
        }
        helper.registerAllowedMethod('script', [Closure]) { Closure body -> body() }
        ['parameters', 'parallel', 'matrix', 'tools', 'triggers'].each { String unsupported ->
            helper.registerAllowedMethod(unsupported, [Closure]) { Closure body ->
                throw new UnsupportedOperationException("the Declarative shim does not support '${unsupported}'")
            }
        }
        installSteps()
    }

    /** The steps the shim wraps (the test's own step runs inside) or adds. */
    private void installSteps() {
        Closure timeoutStep = registered('timeout', [Map, Closure])
        helper.registerAllowedMethod('timeout', [Map, Closure]) { Map args, Closure body ->
            log('[Pipeline] timeout')
            return timeoutStep(args) { -> withTimeout(args, body) }
        }
        Closure inputStep = registered('input', [Map])
        helper.registerAllowedMethod('input', [Map]) { Map args -> input(inputStep, args) }
        Closure lockStep = registered('lock', [Map, Closure])
        helper.registerAllowedMethod('lock', [Map, Closure]) { Map args, Closure body ->
            String what = "[Resource: ${args.resource}]"
            log('[Pipeline] lock')
            log("Trying to acquire lock on ${what}")
            try {
                return lockStep(args) { ->
                    log("Lock acquired on ${what}")
                    try {
                        return block(body)
                    } finally {
                        log("Lock released on resource ${what}")
                    }
                }
            } finally {
                log('[Pipeline] // lock')
            }
        }
        Closure nodeStep = registered('node', [String, Closure])
        helper.registerAllowedMethod('node', [String, Closure]) { String label, Closure body ->
            onNode(nodeStep, label, null, body)
        }
        helper.registerAllowedMethod('container', [String, Closure]) { String name, Closure body ->
            inContainer(name, body)
        }
        helper.registerAllowedMethod('sleep', [Map]) { Map args ->
            log('[Pipeline] sleep')
            clock.elapse(millis(args))
        }
        helper.registerAllowedMethod('sleep', [Integer]) { Integer seconds ->
            log('[Pipeline] sleep')
            clock.elapse(TimeUnit.SECONDS.toMillis(seconds))
        }
        Closure echoStep = registered('echo', [String])
        if (echoStep != null) {
            helper.registerAllowedMethod('echo', [String]) { String text ->
                log('[Pipeline] echo')
                return echoStep(text)
            }
        }
        WORKSPACE_STEPS.each { List entry ->
            String name = entry[0]
            List<Class> types = (List<Class>) entry[1]
            Closure step = registered(name, types)
            if (step != null) {
                helper.registerAllowedMethod(name, types) { Object arg ->
                    log("[Pipeline] ${name}")
                    if (env.NODE_NAME == null) {
                        throw new PipelineFailure("${name}: Required context class hudson.FilePath is missing. " +
                            'Perhaps you forgot to surround the code with a step that provides this, such as: node')
                    }
                    if (name == 'sh') {
                        log("+ ${arg instanceof Map ? arg.script : arg}")
                    }
                    return step(arg)
                }
            }
        }
    }

    /** The callback the test registered for this step (null: none). */
    private Closure registered(String name, List<Class> types) {
        return helper.allowedMethodCallbacks.get(MethodSignature.method(name, types as Class[]))
    }

    private Section current() {
        if (collecting.isEmpty()) {
            throw new IllegalStateException('a Declarative directive outside pipeline { }')
        }
        return collecting.last()
    }

    /** Runs a directive's body with `delegate` first (the directive body classes below). */
    static void withDelegate(Closure body, Object delegate) {
        Closure copy = (Closure) body.clone()
        copy.delegate = delegate
        copy.resolveStrategy = Closure.DELEGATE_FIRST
        copy()
    }

    // ---- the console ------------------------------------------------------------------

    /** One console line: kept in `console`, printed to `out` (with a timestamp under timestamps()). */
    void log(Object text) {
        String line = "${text}"
        console.add(line)
        if (out != null) {
            out(timestamps > 0 ? "[${stamp()}] ${line}".toString() : line)
        }
    }

    private String stamp() {
        SimpleDateFormat format = new SimpleDateFormat("yyyy-MM-dd'T'HH:mm:ss.SSS'Z'", Locale.ROOT)
        format.timeZone = TimeZone.getTimeZone('UTC')
        return format.format(new Date(startedAt + clock.now))
    }

    /** A block step's body between "[Pipeline] {" and "[Pipeline] }". */
    private Object block(Closure body) {
        log('[Pipeline] {')
        try {
            return body()
        } finally {
            log('[Pipeline] }')
        }
    }

    private void worsen(String status) {
        String now = result() ?: 'SUCCESS'
        if (RESULTS.indexOf(status) > RESULTS.indexOf(now)) {
            setResult(status)
        }
    }

    private static String resultOf(Throwable failure) {
        if (failure instanceof InputRejected) {
            return ((InputRejected) failure).result
        }
        return failure instanceof Interrupted ? ((Interrupted) failure).result : 'FAILURE'
    }

    // ---- running --------------------------------------------------------------------

    @SuppressWarnings('CatchThrowable')  // a failed step may be an Error (assert): Jenkins fails the build too
    private void runPipeline(Closure body) {
        pipeline = new Section(name: 'pipeline')
        collecting.add(pipeline)
        try {
            body()
        } finally {
            collecting.clear()
        }
        env.putAll(pipeline.environment)
        log('[Pipeline] Start of Pipeline')
        Throwable failure = null
        try {
            onAgent(pipeline) {
                try {
                    withOptions(pipeline) { runStages(pipeline.stages) }
                } catch (Throwable t) {
                    failure = t
                    worsen(resultOf(t))
                }
                if (!pipeline.post.isEmpty()) {
                    log('[Pipeline] stage')
                    log('[Pipeline] { (Declarative: Post Actions)')
                    runPost(pipeline, failure)
                    log('[Pipeline] }')
                    log('[Pipeline] // stage')
                }
            }
        } catch (Throwable t) {
            failure = failure ?: t
            worsen(resultOf(t))
        }
        log('[Pipeline] End of Pipeline')
        if (failure != null) {
            throw failure
        }
    }

    @SuppressWarnings('CatchThrowable')  // a failed step may be an Error (assert): Jenkins fails the stage too
    private void runStages(List<Section> stages) {
        Throwable failure = null
        for (Section stage : stages) {
            if (failure != null) {
                stageLog.add([stage: stage.name, status: 'skipped (earlier failure)'])
                log('[Pipeline] stage')
                log("[Pipeline] { (${stage.name})")
                log("Stage \"${stage.name}\" skipped due to earlier failure(s)")
                log('[Pipeline] }')
                log('[Pipeline] // stage')
                continue
            }
            try {
                runStage(stage)
            } catch (Throwable t) {
                failure = t
            }
        }
        if (failure != null) {
            throw failure
        }
    }

    /** A stage in Declarative's order (see the top of this file). */
    @SuppressWarnings('CatchThrowable')  // a failed step may be an Error (assert): Jenkins fails the stage too
    private void runStage(Section stage) {
        log('[Pipeline] stage')
        log("[Pipeline] { (${stage.name})")
        Throwable failure = null
        boolean ran = false
        try {
            if (stage.beforeOptions && !when(stage)) {
                return
            }
            withOptions(stage) {
                askInput(stage)
                if (stage.beforeInput && !stage.beforeOptions && !when(stage)) {
                    return
                }
                if (stage.beforeAgent && !stage.beforeInput && !stage.beforeOptions && !when(stage)) {
                    return
                }
                onAgent(stage) {
                    if (!stage.beforeAgent && !stage.beforeInput && !stage.beforeOptions && !when(stage)) {
                        return
                    }
                    ran = true
                    try {
                        withEnvironment(stage.environment) {
                            events.add("steps ${stage.name}".toString())
                            if (stage.stages != null) {
                                runStages(stage.stages)
                            } else if (stage.steps != null) {
                                stage.steps()
                            }
                        }
                    } catch (Throwable t) {
                        failure = t
                        worsen(resultOf(t))
                    }
                    stageLog.add([stage: stage.name, status: failure == null ? 'SUCCESS' : resultOf(failure)])
                    runPost(stage, failure)
                }
            }
        } catch (Throwable t) {
            // an option, the input or the agent failed (a timeout while waiting, say)
            failure = failure ?: t
            worsen(resultOf(t))
            if (!ran) {
                stageLog.add([stage: stage.name, status: resultOf(t)])
            }
        } finally {
            log('[Pipeline] }')
            log('[Pipeline] // stage')
        }
        if (failure != null) {
            throw failure
        }
    }

    /** The stage's `when`: false skips the stage (logged as Jenkins does). */
    private boolean when(Section stage) {
        if (stage.when == null) {
            return true
        }
        events.add("when ${stage.name}".toString())
        if (stage.when()) {
            return true
        }
        stageLog.add([stage: stage.name, status: 'skipped (when)'])
        log("Stage \"${stage.name}\" skipped due to when conditional")
        return false
    }

    /** The section's options that wrap it: timeout and lock (by calling those steps), timestamps. */
    private void withOptions(Section section, Closure body) {
        if (!section.options.isEmpty()) {
            events.add("options ${section.name}".toString())
        }
        Closure wrapped = body
        section.options.reverse().each { Map option ->
            Closure inner = wrapped
            if (option.timeout) {
                wrapped = { -> runStep('timeout', [Map, Closure], option.timeout, inner) }
            } else if (option.lock) {
                wrapped = { -> runStep('lock', [Map, Closure], option.lock, inner) }
            } else if (option.timestamps) {
                wrapped = { ->
                    timestamps++
                    try {
                        inner()
                    } finally {
                        timestamps--
                    }
                }
            }
        }
        wrapped()
    }

    /** Runs a step as the script would: through the callback registered now. */
    private Object runStep(String name, List<Class> types, Object... args) {
        Closure step = registered(name, types)
        return step(*args)
    }

    private void askInput(Section stage) {
        if (stage.input != null) {
            events.add("input ${stage.name}".toString())
            Object answer = runStep('input', [Map], stage.input)
            if (stage.input.submitterParameter) {
                env.put(stage.input.submitterParameter, answer?.toString())
            }
        }
    }

    private void withEnvironment(Map values, Closure body) {
        if (values.isEmpty()) {
            body()
            return
        }
        Map saved = new LinkedHashMap(env)
        env.putAll(values)
        try {
            body()
        } finally {
            env.clear()
            env.putAll(saved)
        }
    }

    private void onAgent(Section section, Closure body) {
        Map agent = section.agent
        if (agent == null || agent.kind == 'none') {
            body()
            return
        }
        events.add("agent ${section.name}".toString())
        String label = agent.kind == 'kubernetes' ? 'kubernetes-pod' : (agent.label ?: 'any')
        Map podSpec = agent.kind == 'kubernetes' ? podOf(agent.pod as Map) : null
        onNode(node, label, podSpec) {
            if (!section.options.any { it.skipDefaultCheckout } && !pipeline.options.any { it.skipDefaultCheckout }) {
                checkout()
            }
            body()
        }
    }

    /** node(label) through the test's agent; on a Kubernetes agent, `pod` is its pod now. */
    private Object onNode(Closure nodeStep, String label, Map podSpec, Closure body) {
        log('[Pipeline] node')
        Map saved = pod
        try {
            return nodeStep(label) { ->
                pod = podSpec == null ? null : podSpec + [name: env.NODE_NAME]
                log("Running on ${env.NODE_NAME} in ${env.WORKSPACE}")
                block {
                    if (pod != null && pod.container != null) {
                        requireContainer(pod.container as String)
                    }
                    body()
                }
            }
        } finally {
            pod = saved
            log('[Pipeline] // node')
        }
    }

    /** The pod a kubernetes agent asks for: its containers, from the YAML (the plugin adds jnlp). */
    private static Map podOf(Map spec) {
        if (!(spec?.yaml instanceof CharSequence)) {
            throw new PipelineFailure('kubernetes agent without a pod YAML (the shim reads only `yaml`)')
        }
        Object document = new Yaml().load(spec.yaml.toString())
        if (!(document instanceof Map) || (document.kind != null && document.kind != 'Pod')) {
            throw new PipelineFailure('the kubernetes agent\'s yaml is not a Pod')
        }
        List<String> names = ((document.spec ?: [:]).containers ?: []).collect { it.name as String }
        if (!names.contains('jnlp')) {
            names.add('jnlp')
        }
        return [containers: names, container: spec.defaultContainer]
    }

    private void requireContainer(String name) {
        if (!pod.containers.contains(name)) {
            throw new PipelineFailure("container [${name}] does not exist in pod [${pod.name}]: " +
                "it has ${pod.containers.join(', ')}")
        }
    }

    private Object inContainer(String name, Closure body) {
        log('[Pipeline] container')
        if (pod == null) {
            throw new PipelineFailure("container('${name}'): Node is not a Kubernetes node: ${env.NODE_NAME}")
        }
        requireContainer(name)
        Map saved = pod
        pod = pod + [container: name]
        try {
            return block(body)
        } finally {
            pod = saved
            log('[Pipeline] // container')
        }
    }

    /** The container the steps run in now (null: not on a Kubernetes agent). */
    String container() {
        return pod?.container ?: (pod == null ? null : 'jnlp')
    }

    // ---- steps with time ---------------------------------------------------------------

    static long millis(Map args) {
        String unit = "${args.unit ?: 'MINUTES'}"
        if (!(args.time instanceof Number) || !(unit in TimeUnit.values()*.name())) {
            throw new PipelineFailure("timeout/sleep needs a number time and a TimeUnit unit: ${args}")
        }
        return TimeUnit.valueOf(unit).toMillis((args.time as Number).longValue())
    }

    private Object withTimeout(Map args, Closure body) {
        long limit = millis(args)
        Long deadline = clock.now + limit
        log("Timeout set to expire in ${TimeUnit.MILLISECONDS.toMinutes(limit)} min")
        clock.deadlines.add(deadline)
        try {
            return block(body)
        } catch (Interrupted interrupted) {
            if (clock.now >= deadline) {
                log('Cancelling nested steps due to timeout')
            }
            throw interrupted
        } finally {
            clock.deadlines.remove(deadline)
            log('[Pipeline] // timeout')
        }
    }

    /**
     * `input`: the test's step records it and says who answers (its PipelineFailure: nobody).
     * Jenkins refuses an answer from someone who may not approve, and the input waits on.
     */
    private Object input(Closure inputStep, Map args) {
        log('[Pipeline] input')
        if (env.NODE_NAME != null) {
            throw new PipelineFailure("input '${args.message}' on agent ${env.NODE_NAME}: an approval must not hold " +
                'an agent while a person decides (house rule: ask outside any node, e.g. a stage with agent none)')
        }
        log(args.message)
        log("${args.ok ?: 'Proceed'} or Abort")
        String answer
        try {
            answer = inputStep(args) as String
        } catch (InputRejected abort) {
            String user = abort.causes[0].userId
            if (maySubmit(user, args.submitter as String)) {
                log(abort.causes[0].shortDescription)
                throw abort
            }
            refusedApprovals.add([user: user, submitter: args.submitter])
            answer = null
        } catch (PipelineFailure nobody) {
            answer = null
        }
        if (answer != null && !maySubmit(answer, args.submitter as String)) {
            refusedApprovals.add([user: answer, submitter: args.submitter])
            answer = null
        }
        if (answer == null) {
            if (clock.deadlines.isEmpty()) {
                throw new PipelineFailure("input '${args.message}' has no answer and no timeout around it: " +
                    'Jenkins would wait forever')
            }
            clock.elapse(Long.MAX_VALUE)
        }
        clock.elapse(approvalDelay)
        log("Approved by ${answer}")
        return args.submitterParameter ? answer : null
    }

    /** Jenkins' rule: submitter is a comma-separated list of user ids and group names. */
    boolean maySubmit(String user, String submitter) {
        if (submitter == null || submitter.trim().isEmpty() || admins.contains(user)) {
            return true
        }
        List<String> names = submitter.split(',')*.trim()
        return names.contains(user) || (groups.get(user) ?: []).any { names.contains(it) }
    }

    // ---- post ---------------------------------------------------------------------------

    /** The section's post conditions, in Jenkins' order, by the section's result. */
    @SuppressWarnings('CatchThrowable')  // a failing post block fails the build; the others still run
    private void runPost(Section section, Throwable failure) {
        if (section.post.isEmpty()) {
            return
        }
        events.add("post ${section.name}".toString())
        String build = result() ?: 'SUCCESS'
        int worst = failure == null ? RESULTS.indexOf(build) :
            Math.max(RESULTS.indexOf(build), RESULTS.indexOf(resultOf(failure)))
        String status = RESULTS[worst]
        Throwable postFailure = null
        POST_ORDER.each { String condition ->
            Closure body = section.post.get(condition)
            boolean applies = condition in ['always', 'cleanup'] || condition == status.toLowerCase() ||
                (condition == 'unsuccessful' && status != 'SUCCESS')
            if (body != null && applies) {
                try {
                    body()
                } catch (Throwable t) {
                    log("Error when executing ${condition} post condition: ${t.message}")
                    worsen('FAILURE')
                    postFailure = postFailure ?: t
                }
            }
        }
        if (postFailure != null && failure == null) {
            throw postFailure
        }
    }

}

// ---- directive bodies ---------------------------------------------------------------
// Top-level classes, not nested in Declarative: Groovy gives a nested class a methodMissing that
// forwards unknown names to Declarative's statics, so a block run as CPS (CpsPipelineHelper) would
// not fall back from the delegate to its owner (`echo` inside `post { always { } }`). Their names
// keep the prefix org.gpuops.Declarative: CpsPipelineHelper.MACHINERY marks the shim by it.

class DeclarativeAgentSpec {
    final Map spec

    DeclarativeAgentSpec(Map spec) {
        this.spec = spec
    }

    void label(String value) {
        spec.kind = 'label'
        spec.label = value
    }

    void kubernetes(Closure body) {
        spec.kind = 'kubernetes'
        Map pod = [:]
        Declarative.withDelegate(body, new DeclarativeKubernetesSpec(pod))
        spec.pod = pod
    }
}

class DeclarativeKubernetesSpec {
    final Map pod

    DeclarativeKubernetesSpec(Map pod) {
        this.pod = pod
    }

    void yaml(Object text) {
        pod.yaml = text?.toString()
    }

    void defaultContainer(String name) {
        pod.defaultContainer = name
    }
}

class DeclarativeWhenSpec {
    final Declarative.Section stage

    DeclarativeWhenSpec(Declarative.Section stage) {
        this.stage = stage
    }

    void expression(Closure condition) {
        stage.when = condition
    }

    void beforeAgent(boolean value) {
        stage.beforeAgent = value
    }

    void beforeInput(boolean value) {
        stage.beforeInput = value
    }

    void beforeOptions(boolean value) {
        stage.beforeOptions = value
    }
}

class DeclarativeInputSpec {
    final Map args

    DeclarativeInputSpec(Map args) {
        this.args = args
    }

    void message(Object value) {
        args.message = value.toString()
    }

    void ok(Object value) {
        args.ok = value.toString()
    }

    void submitter(Object value) {
        args.submitter = value.toString()
    }

    void submitterParameter(Object value) {
        args.submitterParameter = value.toString()
    }

    void id(Object value) {
        args.id = value.toString()
    }
}

@SuppressWarnings('UnusedMethodParameter')  // the refused conditions take their body unused
class DeclarativePostSpec {
    final Map<String, Closure> post

    DeclarativePostSpec(Map<String, Closure> post) {
        this.post = post
    }

    void always(Closure body) {
        post.always = body
    }

    void success(Closure body) {
        post.success = body
    }

    void failure(Closure body) {
        post.failure = body
    }

    void unstable(Closure body) {
        post.unstable = body
    }

    void aborted(Closure body) {
        post.aborted = body
    }

    void unsuccessful(Closure body) {
        post.unsuccessful = body
    }

    void cleanup(Closure body) {
        post.cleanup = body
    }

    void changed(Closure body) {
        throw new UnsupportedOperationException("the Declarative shim does not support post 'changed'")
    }

    void fixed(Closure body) {
        throw new UnsupportedOperationException("the Declarative shim does not support post 'fixed'")
    }

    void regression(Closure body) {
        throw new UnsupportedOperationException("the Declarative shim does not support post 'regression'")
    }
}

@SuppressWarnings('UnusedMethodParameter')  // the refused options take their arguments unused
class DeclarativeOptionsSpec {
    final List<Map> options
    final boolean pipelineLevel

    DeclarativeOptionsSpec(List<Map> options, boolean pipelineLevel) {
        this.options = options
        this.pipelineLevel = pipelineLevel
    }

    void timeout(Map args) {
        Declarative.millis(args)  // checks time and unit
        options.add([timeout: args])
    }

    void lock(Map args) {
        if (!args.resource) {
            throw new UnsupportedOperationException("the Declarative shim's lock option needs a resource: ${args}")
        }
        options.add([lock: args])
    }

    void lock(String resource) {
        lock([resource: resource])
    }

    void timestamps() {
        options.add([timestamps: true])
    }

    void skipDefaultCheckout() {
        options.add([skipDefaultCheckout: true])
    }

    void disableConcurrentBuilds() {
        pipelineOnly('disableConcurrentBuilds')
        options.add([disableConcurrentBuilds: true])
    }

    @SuppressWarnings('BuilderMethodWithSideEffects')  // the Declarative option's own name
    void buildDiscarder(Object value) {
        pipelineOnly('buildDiscarder')
        if (!(value instanceof Map) || !value.logRotator) {
            throw new UnsupportedOperationException("buildDiscarder needs logRotator(...): ${value}")
        }
        options.add([buildDiscarder: value])
    }

    Object logRotator(Map args) {
        List<String> known = ['numToKeepStr', 'daysToKeepStr', 'artifactNumToKeepStr', 'artifactDaysToKeepStr']
        args.each { key, value ->
            if (!(key in known) || !(value instanceof CharSequence) || !(value.toString() ==~ /\d*/)) {
                throw new UnsupportedOperationException(
                    "logRotator: ${key}: ${value} (strings of digits: ${known})")
            }
        }
        return [logRotator: args]
    }

    private void pipelineOnly(String name) {
        if (!pipelineLevel) {
            throw new UnsupportedOperationException("Invalid option type \"${name}\" in a stage: " +
                "a stage allows ${Declarative.STAGE_OPTIONS.join(', ')}")
        }
    }

    // Declarative options the shim does not implement: refused, not ignored.
    void retry(Object... args) {
        unsupported('retry')
    }

    void quietPeriod(Object... args) {
        unsupported('quietPeriod')
    }

    void preserveStashes(Object... args) {
        unsupported('preserveStashes')
    }

    void skipStagesAfterUnstable(Object... args) {
        unsupported('skipStagesAfterUnstable')
    }

    void checkoutToSubdirectory(Object... args) {
        unsupported('checkoutToSubdirectory')
    }

    void parallelsAlwaysFailFast(Object... args) {
        unsupported('parallelsAlwaysFailFast')
    }

    void durabilityHint(Object... args) {
        unsupported('durabilityHint')
    }

    void disableResume(Object... args) {
        unsupported('disableResume')
    }

    void newContainerPerStage(Object... args) {
        unsupported('newContainerPerStage')
    }

    private static void unsupported(String name) {
        throw new UnsupportedOperationException("the Declarative shim does not support the option '${name}'")
    }
}

class DeclarativeEnvironmentSpec {
    final Map values

    DeclarativeEnvironmentSpec(Map values) {
        this.values = values
    }

    void setProperty(String name, Object value) {
        values.put(name, value.toString())
    }
}
