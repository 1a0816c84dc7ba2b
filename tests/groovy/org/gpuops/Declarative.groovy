package org.gpuops

import com.lesfurets.jenkins.unit.PipelineTestHelper

/**
 * The smallest Declarative Pipeline runner that runs Jenkinsfile.example honestly, on top of
 * JenkinsPipelineUnit 1.1 (which has no Declarative support). It reads the pipeline the way
 * pipeline-model-definition does and runs it with these semantics:
 *
 * - stages run in order; `stages` may nest (sequential stages); a failing stage marks the
 *   build FAILURE, later stages are skipped, and the error ends the run after `post`;
 * - `when { expression {...} }`, evaluated after the stage's agent is taken unless
 *   `beforeAgent true` (as Declarative does);
 * - `agent none` / `agent any` / `agent { label 'x' }` / `agent { kubernetes { ... } }`:
 *   a stage with an agent runs inside `node(label)` (the test's node step: a real workspace),
 *   with the default `checkout scm` first, like Declarative's default checkout;
 * - `post { always / success / failure / unstable }` of the pipeline and of each stage, by the
 *   build result; `options { timeout(...) }` and `environment { X = '...' }` (set in env).
 *
 * Not supported (it fails loudly rather than pretend): parallel, matrix, the stage-level
 * `input` and `options` directives, `parameters` (jobs as code owns them), `tools`, `triggers`,
 * restarts from a stage. `timeout` is recorded, not enforced; `kubernetes` agents run on this
 * host (their pod YAML is recorded); JenkinsPipelineUnit runs the script without CPS, so what
 * CPS would refuse at run time (non-serializable locals across steps) is not caught here (the
 * library's own code is checked by CodeNarc's CPS rules).
 */
class Declarative {

    /** A stage or the pipeline: what its closure declared. */
    static class Section {
        String name
        Map agent
        Closure when
        boolean beforeAgent
        Closure steps
        List<Section> stages
        Map<String, Closure> post = [:]
        Map environment = [:]
        List<Map> options = []
    }

    final PipelineTestHelper helper
    final Map env
    final Closure node
    final Closure checkout
    final Closure<String> result
    final Closure setResult
    final List<String> console
    /** What ran: [stage: name, status: SUCCESS / FAILURE / skipped (when) / skipped (earlier failure)]. */
    final List<Map> stageLog = []
    Section pipeline
    private final List<Section> collecting = []

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
            withDelegate(body, new AgentSpec(spec))
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
            withDelegate(body, new WhenSpec(stage))
        }
        helper.registerAllowedMethod('steps', [Closure]) { Closure body -> current().steps = body }
        helper.registerAllowedMethod('post', [Closure]) { Closure body ->
            withDelegate(body, new PostSpec(current().post))
        }
        helper.registerAllowedMethod('options', [Closure]) { Closure body ->
            withDelegate(body, new OptionsSpec(current().options))
        }
        helper.registerAllowedMethod('environment', [Closure]) { Closure body ->
            withDelegate(body, new EnvironmentSpec(current().environment))
        }
        helper.registerAllowedMethod('script', [Closure]) { Closure body -> body() }
        ['parameters', 'parallel', 'matrix', 'tools', 'triggers', 'input'].each { String unsupported ->
            helper.registerAllowedMethod(unsupported, [Closure]) { Closure body ->
                throw new UnsupportedOperationException("the Declarative shim does not support '${unsupported}'")
            }
        }
    }

    private Section current() {
        if (collecting.isEmpty()) {
            throw new IllegalStateException('a Declarative directive outside pipeline { }')
        }
        return collecting.last()
    }

    private static void withDelegate(Closure body, Object delegate) {
        Closure copy = (Closure) body.clone()
        copy.delegate = delegate
        copy.resolveStrategy = Closure.DELEGATE_FIRST
        copy()
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
        Throwable failure = null
        try {
            onAgent(pipeline) { runStages(pipeline.stages) }
        } catch (Throwable t) {
            failure = t
            setResult('FAILURE')
        }
        runPost(pipeline)
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
                console.add("Stage \"${stage.name}\" skipped due to earlier failure(s)".toString())
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

    @SuppressWarnings('CatchThrowable')  // a failed step may be an Error (assert): Jenkins fails the stage too
    private void runStage(Section stage) {
        console.add("[Pipeline] { (${stage.name})".toString())
        if (stage.when != null && stage.beforeAgent && !stage.when()) {
            skipped(stage)
            return
        }
        Throwable failure = null
        boolean ran = true
        try {
            onAgent(stage) {
                if (stage.when != null && !stage.beforeAgent && !stage.when()) {
                    ran = false
                    return
                }
                if (stage.stages != null) {
                    runStages(stage.stages)
                } else if (stage.steps != null) {
                    stage.steps()
                }
            }
        } catch (Throwable t) {
            failure = t
            setResult('FAILURE')
        }
        if (!ran) {
            skipped(stage)
            return
        }
        stageLog.add([stage: stage.name, status: failure == null ? 'SUCCESS' : 'FAILURE'])
        runPost(stage)
        console.add('[Pipeline] }')
        if (failure != null) {
            throw failure
        }
    }

    private void skipped(Section stage) {
        stageLog.add([stage: stage.name, status: 'skipped (when)'])
        console.add("Stage \"${stage.name}\" skipped due to when conditional".toString())
    }

    private void onAgent(Section section, Closure body) {
        Map agent = section.agent
        if (agent == null || agent.kind == 'none') {
            body()
            return
        }
        String label = agent.kind == 'kubernetes' ? 'kubernetes-pod' : (agent.label ?: 'any')
        node(label) {
            checkout()
            body()
        }
    }

    private void runPost(Section section) {
        String status = result() ?: 'SUCCESS'
        List<String> conditions = ['always', status.toLowerCase()]
        conditions.each { String condition ->
            Closure body = section.post.get(condition)
            if (body != null) {
                body()
            }
        }
    }

    // ---- directive bodies -------------------------------------------------------------

    static class AgentSpec {
        final Map spec

        AgentSpec(Map spec) {
            this.spec = spec
        }

        void label(String value) {
            spec.kind = 'label'
            spec.label = value
        }

        void kubernetes(Closure body) {
            spec.kind = 'kubernetes'
            Map pod = [:]
            withDelegate(body, new KubernetesSpec(pod))
            spec.pod = pod
        }
    }

    static class KubernetesSpec {
        final Map pod

        KubernetesSpec(Map pod) {
            this.pod = pod
        }

        void yaml(String text) {
            pod.yaml = text
        }

        void defaultContainer(String name) {
            pod.defaultContainer = name
        }
    }

    static class WhenSpec {
        final Section stage

        WhenSpec(Section stage) {
            this.stage = stage
        }

        void expression(Closure condition) {
            stage.when = condition
        }

        void beforeAgent(boolean value) {
            stage.beforeAgent = value
        }
    }

    static class PostSpec {
        final Map<String, Closure> post

        PostSpec(Map<String, Closure> post) {
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
    }

    static class OptionsSpec {
        final List<Map> options

        OptionsSpec(List<Map> options) {
            this.options = options
        }

        void timeout(Map args) {
            options.add([timeout: args])
        }

        @SuppressWarnings('BuilderMethodWithSideEffects')  // the Declarative option's own name
        void buildDiscarder(Object value) {
            options.add([buildDiscarder: value])
        }

        Object logRotator(Map args) {
            return [logRotator: args]
        }
    }

    static class EnvironmentSpec {
        final Map values

        EnvironmentSpec(Map values) {
            this.values = values
        }

        void setProperty(String name, Object value) {
            values.put(name, value.toString())
        }
    }

}
