package org.gpuops

import static org.junit.Assert.assertEquals
import static org.junit.Assert.assertFalse
import static org.junit.Assert.assertTrue

import groovy.json.JsonSlurperClassic
import java.nio.file.Files
import java.nio.file.StandardCopyOption
import java.util.concurrent.TimeUnit
import org.junit.Before
import org.junit.Test

/**
 * Jenkinsfile.example end to end on the lab: the real library, the Declarative shim
 * (Declarative.groovy, its limits written there), real agents (a workspace directory each,
 * `checkout scm` copying the application's repository, `sh` as a real /bin/sh) running the real
 * gpuops CLI against the lab's registry, Podman builder and Kubernetes.
 *
 * The story: build 41, 42 and 43; release 41 to staging; release 41 and then 42 to production
 * (approved by alice); release 43 to production while a data-prep job holds the H800 nodes'
 * memory: it cannot be scheduled, gpuops rolls it back by itself and the build fails saying
 * why; the data-prep job ends; the production rollback job goes back to the previous release.
 *
 * It needs the lab prepared by scripts/release_story.py: the system property gpuops.story names
 * its story.json. tests/python/integration/test_jenkinsfile_example_lab.py and `make demo` run
 * it (gradle labTest); the plain `gradle test` leaves it out. The console, as Jenkins' classic
 * console log shows it (the shim's lines, each step's output), is written as it happens to
 * <story_dir>/console.log: `make demo` follows that file (-Dgpuops.console=true prints it too).
 */
class JenkinsfileExampleTest extends GpuOpsPipelineTest {

    Map story
    File agentsRoot
    List<String> console = []
    Declarative shim
    boolean echoConsole = System.getProperty('gpuops.console') == 'true'
    long startedAt = System.nanoTime()

    @Before
    void labAgents() {
        String path = System.getProperty('gpuops.story')
        assertTrue('run through gradle labTest with -Dgpuops.story=<story.json> (scripts/release_story.py)',
            path != null && new File(path).isFile())
        story = (Map) new JsonSlurperClassic().parseText(new File(path).text)
        agentsRoot = new File(story.story_dir as String, 'agents')
        agentsRoot.mkdirs()
        env.remove('WORKSPACE')
        env.GPUOPS_CLI = story.cli
        env.JENKINS_URL = 'https://jenkins.example.invalid/'
        // what the controller (global properties) and the agent pod template give the lab
        env.GPUOPS_REGISTRY_HOST = story.registry
        env.GPUOPS_REGISTRY_PLAIN_HTTP = 'true'
        // the build pod's images (org.gpuops.AgentPod; the lab runs no pods, the names only fill it)
        env.GPUOPS_JNLP_IMAGE = "${story.registry}/lab/inbound-agent:lab".toString()
        env.GPUOPS_AGENT_IMAGE = "${story.registry}/lab/gpuops-agent:lab".toString()
        env.GPUOPS_BUILDER_IMAGE = "${story.registry}/lab/gpuops-builder:lab".toString()
        env.DOCKER_HOST = story.builder
        env.DOCKER_API_VERSION = '1.41'
        String kubeconfig = new File(story.kubeconfig as String).text
        credentialStore['kubeconfig-staging'] = [content: kubeconfig]
        credentialStore['kubeconfig-production'] = [content: kubeconfig]
        credentialStore['registry-release'] = [username: 'robot-release', password: 'not-used-by-the-lab-registry']
        helper.registerAllowedMethod('echo', [String]) { String text -> say(text) }
        helper.registerAllowedMethod('archiveArtifacts', [Map]) { Map args -> say('Archiving artifacts') }
        // `checkout scm` inside a step (promoteTag on its agents) copies the repository too
        helper.registerAllowedMethod('checkout', [Map]) { Map scm ->
            checkouts.add(env.NODE_NAME)
            copyRepository()
            return [:]
        }
        // `sh 'script'` on a real agent: the real /bin/sh, failing the build on a non-zero exit
        helper.registerAllowedMethod('sh', [String]) { String script ->
            Map call = [script: script, returnStatus: false, env: new LinkedHashMap(env)]
            shCalls.add(call)
            if (runShell(call) != 0) {
                throw new PipelineFailure("script returned exit code ${call.status}")
            }
            return null
        }
        shim = installDeclarative(console, { -> copyRepository() })
        approver = 'alice'
        shim.groups.alice = ['release-managers']  // Jenkins' users: alice is a release manager
        startedBy('bob')  // bob starts every build, alice approves: four eyes needs a requester
        startedAt = System.nanoTime()  // the shim's clock starts now (keepTime)
        // the console as Jenkins shows it, written as it happens: `make demo` follows this file
        File live = new File(story.story_dir as String, 'console.log')
        live.text = ''
        shim.out = { String line ->
            live.append(line + '\n')
            if (echoConsole) {
                println(line)
            }
        }
    }

    /** The lab runs in real time: the shim's clock (timeouts, timestamps) follows the wall clock
     *  while a real process runs (a lab run takes minutes; each stage's timeout is far longer). */
    void keepTime() {
        long behind = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - startedAt) - shim.clock.now
        if (behind > 0) {
            shim.clock.elapse(behind)
        }
    }

    /** A console line (kept in `console`, and shown live: the shim's `out`). */
    void say(String line) {
        shim.log(line)
    }

    /** One build of one job: its parameters, the build number; returns [result:, error:]. */
    Map build(String job, int number, Map params) {
        say('')
        say("======== ai/${job} #${number}: ${params.collect { k, v -> "${k}=${v}" }.join(', ')} ========")
        buildCauses.findAll { it.shortDescription }.each { Map cause -> say(cause.shortDescription as String) }
        binding.setVariable('params', params)
        binding.getVariable('currentBuild').result = null
        env.BUILD_NUMBER = number.toString()
        env.JOB_NAME = "ai/${job}".toString()
        env.BUILD_URL = "${env.JENKINS_URL}job/ai/job/${job}/${number}/".toString()
        String error = null
        try {
            runScript('Jenkinsfile.example')
        } catch (PipelineFailure failure) {
            error = failure.message
        }
        String result = binding.getVariable('currentBuild').result ?: 'SUCCESS'
        if (error != null) {
            say("ERROR: ${error}")
        }
        say("Finished: ${result}")
        return [result: result, error: error]
    }

    void storyStep(String... argv) {
        List<String> command = (["${story.python_bin}/python", "${story.repo_root}/scripts/release_story.py"] +
            (argv as List) + ['--kubeconfig', story.kubeconfig])*.toString()
        Process p = new ProcessBuilder(command).redirectErrorStream(true).start()
        String out = p.inputStream.text
        assertTrue('release_story.py did not finish', p.waitFor(180, TimeUnit.SECONDS))
        assertEquals(out, 0, p.exitValue())
        say("(the lab) ${out.trim()}")
    }

    @Test
    void theWholeReleaseStory() {
        [41, 42, 43].each { int number ->
            Map built = build('infer-build', number, [APP_JOB: 'build'])
            assertEquals(built.error, 'SUCCESS', built.result)
        }
        // a build job's run: its stages, then the others skipped by their `when`
        assertEquals(['Unit tests', 'Image', 'Build', 'Node change', 'GPU headroom', 'Release', 'Rollback',
                      'Clean agents', 'Inspect GPU nodes'],
            shim.stageLog.takeRight(9)*.stage)

        Map staging = build('infer-release', 51, [APP_JOB: 'release', APP_ENV: 'staging', APP_IMAGE_TAG: '41'])
        assertEquals(staging.error, 'SUCCESS', staging.result)
        assertTrue('staging needs no approval', inputs.isEmpty())

        Map production = build('infer-release', 52, [APP_JOB: 'release', APP_ENV: 'production', APP_IMAGE_TAG: '41'])
        assertEquals(production.error, 'SUCCESS', production.result)
        assertEquals(1, inputs.size())
        assertEquals('release-managers', inputs[0].submitter)
        assertFalse('the approval held no executor', inputs[0].agentHeld)

        Map next = build('infer-release', 53, [APP_JOB: 'release', APP_ENV: 'production', APP_IMAGE_TAG: '42'])
        assertEquals(next.error, 'SUCCESS', next.result)

        storyStep('fill-memory')
        Map stuck = build('infer-release', 54, [APP_JOB: 'release', APP_ENV: 'production', APP_IMAGE_TAG: '43'])
        assertEquals('FAILURE', stuck.result)
        assertTrue(stuck.error, stuck.error.startsWith('[promoteTag] release #3 (43 (sha256:'))
        assertTrue(stuck.error, stuck.error.contains('cannot be scheduled'))
        assertTrue(stuck.error, stuck.error.contains('rolled back to #2 42'))
        assertTrue('the console showed what the rollout waited for',
            console.any { it.contains('pod(s) to be scheduled') })
        storyStep('free-memory')

        Map rollback = build('infer-rollback-production', 61,
            [APP_JOB: 'rollback', APP_ENV: 'production', ROLLBACK_TO: 'previous', ROLLBACK_REASON: '42 leaks memory'])
        assertEquals(rollback.error, 'SUCCESS', rollback.result)
        assertTrue(console.any { it == 'rollback of production to 41: succeeded' })
        assertEquals('every approval was asked outside any agent', [false] * 4, inputs*.agentHeld)
        // one lock(<target>) per release: staging 41; production 41, 42, 43 (rolled back), rollback
        assertEquals(5, locks.size())
        assertEquals(1, locks.count { it.resource.toString().contains('/ai-staging/') })
        assertEquals(4, locks.count { it.resource.toString().contains('/ai-production/') })
    }

    // ---- real agents ------------------------------------------------------------------

    @Override
    protected String agentWorkspace(String node) {
        File dir = new File(agentsRoot, "${node}-${System.nanoTime()}/workspace")
        dir.mkdirs()
        return dir.absolutePath
    }

    /** `checkout scm`: the application's repository into the agent's workspace (modes kept). */
    void copyRepository() {
        File from = new File(story.app as String)
        File to = new File(env.WORKSPACE as String)
        from.eachFileRecurse { File f ->
            File target = new File(to, from.toPath().relativize(f.toPath()).toString())
            if (f.isDirectory()) {
                target.mkdirs()
            } else {
                target.parentFile.mkdirs()
                Files.copy(f.toPath(), target.toPath(),
                    StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.COPY_ATTRIBUTES)
            }
        }
    }

    @Override
    protected void writeWorkspaceFile(String path, String text) {
        File file = new File(path)
        file.parentFile.mkdirs()
        file.text = text
    }

    @Override
    protected String readWorkspaceFile(String path) {
        File file = new File(path)
        if (!file.isFile()) {
            throw new FileNotFoundException(path)
        }
        return file.text
    }

    @Override
    protected boolean workspaceFileExists(String path) {
        return new File(path).exists()
    }

    @Override
    protected int runShell(Map call) {
        ProcessBuilder builder = new ProcessBuilder(['/bin/sh', '-c', call.script])
            .directory(new File(call.env.WORKSPACE ?: agentsRoot.absolutePath))
            .redirectErrorStream(true)
        Map<String, String> environment = builder.environment()
        environment.keySet().removeAll { it.startsWith('GPUOPS_') || it == 'KUBECONFIG' }
        environment.putAll(call.env)
        environment.PATH = "${story.python_bin}:${environment.PATH}".toString()
        Process process = builder.start()
        try {
            process.inputStream.eachLine { String line ->
                keepTime()
                say(line)
            }
            assertTrue("sh did not finish: ${call.script}", process.waitFor(600, TimeUnit.SECONDS))
        } finally {
            process.destroy()  // a timeout interrupted it (Jenkins stops the process too)
        }
        call.status = process.exitValue()
        keepTime()
        return call.status
    }

}
