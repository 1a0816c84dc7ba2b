package org.gpuops

import groovy.json.JsonOutput
import groovy.json.JsonSlurperClassic
import org.junit.Before

/**
 * Base of the tests that run Jenkinsfile.example with the real library and the Declarative
 * shim, the CLI's side played by recorded answers (JenkinsfileNodeChangeTest,
 * JenkinsfileStagesTest). The lab story, JenkinsfileExampleTest, runs the real CLI instead.
 * Each CLI call is recorded in `calls`; `sh 'script'` (the unit tests) in `scripts`.
 */
@SuppressWarnings('AbstractClassWithoutAbstractMethod')  // a base: JUnit runs its subclasses only
abstract class RecordedJenkinsfileTest extends GpuOpsPipelineTest {

    public static final String LOCK = 'gpuops-release 127.0.0.1:6443/ai-production/infer'

    List<Map> calls = []
    List<String> scripts = []
    Declarative shim
    List<String> console = []
    /** The exit code and error document of `nodes update`; null: it succeeds. */
    Map nodesFail = null
    /** What `nodes update` does before it answers (e.g. time passes: shim.clock.elapse). */
    Closure nodesRun = { -> }
    /** The exit status of `sh 'script'` (the unit tests). */
    int scriptStatus = 0
    /** The approval timeout of the environment in the promotion's plan (approval.timeout_minutes). */
    int approvalMinutes = 30
    /** At each `input`: the remaining minutes of every timeout running then, innermost last. */
    List<List<Long>> timeoutsAtInput = []

    @Before
    void pipelineAndCli() {
        env.remove('WORKSPACE')
        env.BUILD_NUMBER = '70'
        env.BUILD_URL = 'https://jenkins.example.invalid/job/ai/job/infer-release/70/'
        // the build pod's images: the controller's global properties (org.gpuops.AgentPod)
        env.GPUOPS_JNLP_IMAGE = 'registry.example.invalid/jenkins/inbound-agent:3283.v92c105e0f819-1'
        env.GPUOPS_AGENT_IMAGE = "registry.example.invalid/gpu-ops/agent:${LIBRARY_VERSION}".toString()
        env.GPUOPS_BUILDER_IMAGE = "registry.example.invalid/gpu-ops/builder:${LIBRARY_VERSION}".toString()
        credentialStore['kubeconfig-production'] = [content: 'apiVersion: v1\nkind: Config\n']
        credentialStore['kubeconfig-staging'] = [content: 'apiVersion: v1\nkind: Config\n']
        credentialStore['registry-release'] = [username: 'robot', password: 'registry-secret-value']
        credentialStore['ansible-key'] = [privateKey: 'ssh-private-key-value', username: 'ops']
        credentialStore['gpu-nodes-known-hosts'] = [content: 'gpu-h800-01 ssh-ed25519 AAAAC3Nza\n']
        helper.registerAllowedMethod('sh', [String]) { String script ->
            scripts.add(script)
            if (scriptStatus != 0) {
                throw new PipelineFailure("script returned exit code ${scriptStatus}")
            }
        }
        Closure input = helper.allowedMethodCallbacks.get(
            com.lesfurets.jenkins.unit.MethodSignature.method('input', Map))
        helper.registerAllowedMethod('input', [Map]) { Map args ->
            timeoutsAtInput.add(shim.clock.deadlines.collect { Long at -> (at - shim.clock.now).intdiv(60000L) })
            return input(args)
        }
        shim = installDeclarative(console)
        shim.groups.put(approver, ['release-managers'])  // the approver is one of the release managers
        answer(['image', 'build']) { Map params ->
            [result: [reference: "${params.image}:${params.build_number}@sha256:${'a' * 64}".toString(),
                      cuda_version: '12.4', summary: "${params.build_number} CUDA 12.4".toString()]]
        }
        answer(['nodes', 'update']) { Map params ->
            nodesRun()
            nodesFail ?: [result: [changed: ['gpu-h800-01', 'gpu-h800-02'], unchanged: [], failed: []]]
        }
        answer(['headroom', 'check']) { Map params -> [result: [fits: true, message: '2 pods fit']] }
        answer(['release', 'promote']) { Map params ->
            params.dry_run ? [result: [state: 'planned', action: 'promote', environment: params.environment,
                                       approval: [required: params.environment == 'production',
                                                  approvers: ['release-managers'], timeout_minutes: approvalMinutes],
                                       lock: [resource: LOCK], wanted: [tag: params.tag]]]
                : [result: [state: 'succeeded', release: [number: 4, tag: params.tag]]]
        }
    }

    /** The CLI's answer to `gpuops <words>`: [result:] or [exit:, error:, result: (optional)];
     *  each call recorded. */
    void answer(List<String> words, Closure<Map> respond) {
        onSh(commandScript(words)) { Map call ->
            Map params = (Map) new JsonSlurperClassic().parseText(files.get(call.env.GPUOPS_PARAMS_FILE))
            calls.add([command: words.join(' '), params: params, node: call.env.NODE_NAME,
                       ssh: call.env.GPUOPS_SSH_KEY_FILE != null, inputsBefore: inputs.size()])
            Map reply = respond(params)
            if (reply.error) {
                Map document = [ok: false, command: words.join(' '), error: reply.error + [exit_code: reply.exit]]
                if (reply.result != null) {  // what the command did before it failed (e.g. a release's steps)
                    document.result = reply.result
                }
                files.put(call.env.GPUOPS_ERROR_FILE, JsonOutput.toJson(document))
                return reply.exit as int
            }
            files.put(call.env.GPUOPS_RESULT_FILE,
                JsonOutput.toJson([ok: true, command: words.join(' '), result: reply.result]))
            return 0
        }
    }

    /** One build of Jenkinsfile.example with these parameters: [result:, error:]. */
    Map build(Map params) {
        binding.setVariable('params', params)
        String error = null
        try {
            runScript('Jenkinsfile.example')
        } catch (PipelineFailure failure) {
            error = failure.message
        }
        return [result: binding.getVariable('currentBuild').result ?: 'SUCCESS', error: error]
    }

    /** A build of the release job (tag 44) with these parameters. */
    Map release(Map params) {
        return build([APP_JOB: 'release', APP_IMAGE_TAG: '44'] + params)
    }

    /** The stage of this name, wherever it is nested in the pipeline the shim read. */
    Declarative.Section stage(String name) {
        List<Declarative.Section> todo = new ArrayList<Declarative.Section>(shim.pipeline.stages)
        while (!todo.isEmpty()) {
            Declarative.Section section = todo.remove(0)
            if (section.name == name) {
                return section
            }
            todo.addAll(section.stages ?: [])
        }
        throw new AssertionError((Object) "no stage '${name}' in Jenkinsfile.example")
    }

    /** A section's `options { timeout }` in minutes; null: it has none. */
    static Long timeoutMinutes(Declarative.Section section) {
        Map args = section.options.find { it.timeout }?.timeout as Map
        if (args == null) {
            return null
        }
        return java.util.concurrent.TimeUnit.valueOf((args.unit ?: 'MINUTES') as String)
            .toMinutes((args.time as Number).longValue())
    }

}
