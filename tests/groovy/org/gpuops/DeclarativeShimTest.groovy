package org.gpuops

import static org.junit.Assert.assertEquals
import static org.junit.Assert.assertTrue

import java.util.concurrent.TimeUnit
import org.junit.Before
import org.junit.Test

/**
 * The Declarative shim's semantics: a sample pipeline (tests/groovy/pipelines/declarative-sample.jenkins)
 * and, for each rule it enforces, a Jenkinsfile snippet that breaks it and must fail.
 */
class DeclarativeShimTest extends GpuOpsPipelineTest {

    static final String POD = '''
apiVersion: v1
kind: Pod
spec:
  containers:
    - name: gpuops
      image: registry.internal/gpu-ops/agent:1
    - name: builder
      image: registry.internal/gpu-ops/builder:1
'''

    List<String> console = []
    List<String> echoes = []
    List<String> printed = []
    Declarative shim

    @Before
    void installShim() {
        env.remove('WORKSPACE')
        helper.registerAllowedMethod('echo', [String]) { String text ->
            shim.log(text)
            echoes.add(text)
        }
        shim = installDeclarative(console)
        shim.groups.alice = ['release-managers']
    }

    Object runSample(Map params) {
        binding.setVariable('params', params)
        return runScript('tests/groovy/pipelines/declarative-sample.jenkins')
    }

    /** Runs a Jenkinsfile given as text (written under build/shim-snippets/; one name per text,
     *  as JenkinsPipelineUnit keeps a script it loaded by its name). */
    Object runSnippet(String name, String text, Map params = [:]) {
        String path = "build/shim-snippets/${name}-${Integer.toHexString(text.hashCode())}.jenkins"
        File file = new File(REPO_ROOT, path)
        file.parentFile.mkdirs()
        file.text = text
        binding.setVariable('params', params)
        return runScript(path)
    }

    /** Runs a snippet that must fail; returns its failure's message. */
    String failureOf(String name, String text, Map params = [:]) {
        try {
            runSnippet(name, text, params)
        } catch (PipelineFailure failure) {
            return failure.message
        }
        throw new AssertionError((Object) "${name} should have failed")
    }

    String result() {
        return binding.getVariable('currentBuild').result ?: 'SUCCESS'
    }

    static String oneStage(String options, String steps, String post = '') {
        return """
pipeline {
    agent none
    stages {
        stage('Wait') {
            ${options}
            steps {
                ${steps}
            }
            ${post}
        }
    }
}
"""
    }

    // ---- the sample -------------------------------------------------------------------

    @Test
    void runsWhatItsWhenAllowsOnTheRightAgentsAndPostsBySuccess() {
        runSample([JOB: 'build'])

        assertEquals([[stage: 'Skipped before any agent', status: 'skipped (when)'],
                      [stage: 'Skipped on its agent', status: 'skipped (when)'],
                      [stage: 'One', status: 'SUCCESS'], [stage: 'Two', status: 'SUCCESS'],
                      [stage: 'Build', status: 'SUCCESS'], [stage: 'After', status: 'SUCCESS']], shim.stageLog)
        assertEquals('beforeAgent skips without an agent; otherwise the agent is taken first',
            ['looked', 'builder'], agents*.label)
        assertEquals(['looked-1', 'builder-2'], checkouts)
        assertEquals(['one on builder-2', 'two for infer', 'after on no agent', 'stage post', 'pipeline always',
                      'pipeline success'], echoes)
        assertEquals([[timeout: [time: 5, unit: 'MINUTES']]], shim.pipeline.options)
        assertTrue(console.containsAll(['[Pipeline] { (Build)',
                                        'Running on builder-2 in /agents/builder-2/workspace/job',
                                        'Stage "Skipped on its agent" skipped due to when conditional']))
        assertJobStatusSuccess()
    }

    @Test
    void aFailingStageSkipsTheRestAndRunsThePostFailure() {
        try {
            runSample([JOB: 'build', FAIL: true])
            throw new AssertionError((Object) 'the pipeline should have failed')
        } catch (PipelineFailure failure) {
            assertEquals('boom', failure.message)
        }

        assertEquals([[stage: 'Two', status: 'FAILURE'], [stage: 'Build', status: 'FAILURE'],
                      [stage: 'After', status: 'skipped (earlier failure)']], shim.stageLog.drop(3))
        assertTrue(console.contains('pipeline failure'))
        assertTrue(!console.contains('pipeline success') && !console.contains('stage post'))
        assertJobStatusFailure()
    }

    @Test
    void whatItDoesNotSupportFailsLoudly() {
        binding.setVariable('params', [:])
        try {
            runScript('tests/groovy/pipelines/declarative-parallel.jenkins')
            throw new AssertionError((Object) 'parallel should be refused')
        } catch (UnsupportedOperationException e) {
            assertEquals("the Declarative shim does not support 'parallel'", e.message)
        }
    }

    // ---- timeout ------------------------------------------------------------------------

    @Test
    void aStageOverItsTimeoutIsInterruptedThereAndTheBuildAborted() {
        String post = "post { failure { echo 'failure' }\n aborted { echo 'aborted' }\n always { echo 'always' } }"
        String message = failureOf('stage-timeout', oneStage("options { timeout(time: 1, unit: 'MINUTES') }",
            "sleep(time: 2, unit: 'MINUTES')\n echo 'after the wait'", post))

        assertEquals('Timeout has been exceeded', message)
        assertEquals('ABORTED', result())
        assertEquals('interrupted at its deadline', TimeUnit.MINUTES.toMillis(1), shim.clock.now)
        assertEquals('the body stopped at the wait; post by the aborted result', ['always', 'aborted'], echoes)
        assertEquals([[stage: 'Wait', status: 'ABORTED']], shim.stageLog)
        assertEquals([[time: 1, unit: 'MINUTES']], timeouts)
        assertTrue(console.contains('Timeout set to expire in 1 min'))
    }

    @Test
    void aStageWithinItsTimeoutSucceeds() {
        runSnippet('stage-in-time', oneStage("options { timeout(time: 1, unit: 'MINUTES') }",
            "sleep(time: 50, unit: 'SECONDS')\n echo 'after the wait'"))

        assertEquals(['after the wait'], echoes)
        assertEquals('SUCCESS', result())
    }

    @Test
    void theTimeoutStepInterruptsItsBody() {
        String message = failureOf('step-timeout', oneStage('',
            "timeout(time: 30, unit: 'SECONDS') { sleep(time: 31, unit: 'SECONDS') }\n echo 'after'"))

        assertEquals('Timeout has been exceeded', message)
        assertEquals(TimeUnit.SECONDS.toMillis(30), shim.clock.now)
        assertTrue(echoes.isEmpty())
    }

    @Test
    void thePipelineTimeoutCoversEveryStage() {
        String message = failureOf('pipeline-timeout', """
pipeline {
    agent none
    options { timeout(time: 5, unit: 'MINUTES') }
    stages {
        stage('One') { steps { sleep(time: 3, unit: 'MINUTES') } }
        stage('Two') { steps { sleep(time: 3, unit: 'MINUTES')\n echo 'two done' } }
        stage('Three') { steps { echo 'three' } }
    }
}
""")

        assertEquals('Timeout has been exceeded', message)
        assertEquals(['SUCCESS', 'ABORTED', 'skipped (earlier failure)'], shim.stageLog*.status)
        assertTrue(echoes.isEmpty())
    }

    // ---- input's submitter ---------------------------------------------------------------

    static String approval(String submitter) {
        return oneStage('', "timeout(time: 60, unit: 'MINUTES') {\n" +
            "def who = input(message: 'Release?', ok: 'Release', submitter: '${submitter}', " +
            "submitterParameter: 'WHO')\n" +
            "echo \"approved by \${who}\" }")
    }

    @Test
    void anApprovalBySomeoneNotInSubmitterIsRefusedAndTheInputTimesOut() {
        approver = 'mallory'
        String message = failureOf('input-refused', approval('release-managers'))

        assertEquals('Timeout has been exceeded', message)
        assertEquals('ABORTED', result())
        assertEquals([[user: 'mallory', submitter: 'release-managers']], shim.refusedApprovals)
        assertEquals('the input waited to its timeout', TimeUnit.MINUTES.toMillis(60), shim.clock.now)
        assertTrue(echoes.isEmpty())
    }

    @Test
    void aMemberOfASubmitterGroupAUserNamedThereOrAnAdministratorApproves() {
        [['alice', 'release-managers'], ['bob', 'carol,bob'], ['root', 'release-managers']].each { List pair ->
            echoes.clear()
            approver = pair[0]
            shim.admins.add('root')
            runSnippet('input-approved', approval(pair[1] as String))
            assertEquals(["approved by ${pair[0]}".toString()], echoes)
        }
        assertTrue(shim.refusedApprovals.isEmpty())
        assertTrue(console.contains('Approved by alice'))
    }

    @Test
    void anInputNobodyAnswersWithoutATimeoutFails() {
        approver = null
        String message = failureOf('input-forever', oneStage('', "input(message: 'Go?', submitter: 'alice')"))

        assertEquals("input 'Go?' has no answer and no timeout around it: Jenkins would wait forever", message)
    }

    @Test
    void theStageInputDirectiveComesBeforeTheAgentAndChecksItsSubmitter() {
        String text = """
pipeline {
    agent none
    stages {
        stage('Approve') {
            options { timeout(time: 10, unit: 'MINUTES') }
            input {
                message 'Go?'
                submitter 'release-managers'
                submitterParameter 'APPROVER'
            }
            agent { label 'gpuops' }
            steps { echo "approved by \${env.APPROVER} on \${env.NODE_NAME}" }
        }
    }
}
"""
        approver = 'alice'
        runSnippet('stage-input', text)
        assertEquals(['approved by alice on gpuops-1'], echoes)
        assertEquals(['options Approve', 'input Approve', 'agent Approve', 'steps Approve'], shim.events)
        assertEquals([false], inputs*.agentHeld)

        approver = 'mallory'
        assertEquals('Timeout has been exceeded', failureOf('stage-input', text))
        assertEquals('no agent was taken for a refused approval', 1, agents.size())
    }

    @Test
    void anAbortByAnApproverEndsTheInputAndTheBuildIsAborted() {
        answers = [[abortedBy: 'alice']]
        String message = failureOf('input-aborted', approval('release-managers'))

        assertEquals(null, message)
        assertEquals('ABORTED', result())
        assertTrue(console.contains('Rejected by alice'))
        assertEquals('at once, not at the timeout', 0L, shim.clock.now)
        assertTrue(echoes.isEmpty())
    }

    @Test
    void anAbortBySomeoneNotInSubmitterIsRefusedAndTheInputWaitsOn() {
        answers = [[abortedBy: 'mallory']]
        String message = failureOf('input-abort-refused', approval('release-managers'))

        assertEquals('Timeout has been exceeded', message)
        assertEquals([[user: 'mallory', submitter: 'release-managers']], shim.refusedApprovals)
        assertEquals(TimeUnit.MINUTES.toMillis(60), shim.clock.now)
    }

    // ---- input outside any agent (the house rule) -----------------------------------------

    @Test
    void anInputInAStageWithAnAgentFails() {
        String message = failureOf('input-on-stage-agent', """
pipeline {
    agent none
    stages {
        stage('Approve') {
            agent { label 'gpuops' }
            steps {
                timeout(time: 10, unit: 'MINUTES') { input(message: 'Go?', submitter: 'release-managers') }
                echo 'approved'
            }
        }
    }
}
""")
        assertEquals("input 'Go?' on agent gpuops-1: an approval must not hold an agent while a person decides " +
            '(house rule: ask outside any node, e.g. a stage with agent none)', message)
        assertTrue('nobody was asked', inputs.isEmpty())
        assertTrue(echoes.isEmpty())
        assertEquals([[stage: 'Approve', status: 'FAILURE']], shim.stageLog)
    }

    @Test
    void thePlantedOffenderAskingInsideAStepsNodeBlockFails() {
        startedBy('developer')
        binding.setVariable('params', [:])
        try {
            runScript('tests/groovy/pipelines/offender-input-on-agent.jenkins')
            throw new AssertionError((Object) 'the planted offender should have failed')
        } catch (PipelineFailure failure) {
            assertEquals("input 'Continue the release?' on agent gpuops-1: an approval must not hold an agent while " +
                'a person decides (house rule: ask outside any node, e.g. a stage with agent none)', failure.message)
        }
        assertEquals(['release paused at its approval step'], echoes)
        assertTrue('nobody was asked', inputs.isEmpty())
        assertEquals('FAILURE', result())
    }

    // ---- the pod template's containers ---------------------------------------------------

    static String onPod(String defaultContainer, String steps) {
        return """
pipeline {
    agent none
    stages {
        stage('Build') {
            agent {
                kubernetes {
                    yaml '''${POD}'''
                    ${defaultContainer}
                }
            }
            steps {
                ${steps}
            }
        }
    }
}
"""
    }

    @Test
    void aDefaultContainerThePodLacksFails() {
        String message = failureOf('no-such-default', onPod("defaultContainer 'agent'", "echo 'built'"))

        assertEquals('container [agent] does not exist in pod [kubernetes-pod-1]: it has gpuops, builder, jnlp',
            message)
        assertTrue('nothing ran in it, not even the checkout', echoes.isEmpty() && checkouts.isEmpty())
    }

    @Test
    void aContainerStepNamingAContainerThePodLacksFails() {
        String message = failureOf('no-such-container', onPod("defaultContainer 'gpuops'",
            "container('podman') { echo 'built' }"))

        assertEquals('container [podman] does not exist in pod [kubernetes-pod-1]: it has gpuops, builder, jnlp',
            message)
        assertTrue(echoes.isEmpty())
    }

    @Test
    void theContainersThePodHasAndJnlpWork() {
        binding.setVariable('shim', shim)
        runSnippet('containers', onPod("defaultContainer 'gpuops'",
            "script { echo shim.container()\n container('builder') { echo shim.container() }\n" +
            "container('jnlp') { echo shim.container() } }"), [:])

        assertEquals(['gpuops', 'builder', 'jnlp'], echoes)
    }

    @Test
    void aContainerStepOffAKubernetesAgentFails() {
        String message = failureOf('container-off-pod', """
pipeline {
    agent { label 'gpuops' }
    stages { stage('A') { steps { container('gpuops') { echo 'x' } } } }
}
""")
        assertEquals("container('gpuops'): Node is not a Kubernetes node: gpuops-1", message)
    }

    // ---- when: before the options, the input, the agent ------------------------------------

    static String guarded(String before) {
        return """
pipeline {
    agent none
    stages {
        stage('Release') {
            options { lock(resource: 'fleet production') }
            when {
                ${before}
                expression { params.GO }
            }
            agent { label 'gpuops' }
            steps { echo 'released' }
        }
    }
}
"""
    }

    @Test
    void whenBeforeAgentIsEvaluatedBeforeTheAgentIsTaken() {
        runSnippet('before-agent', guarded('beforeAgent true'), [GO: false])

        assertEquals(['options Release', 'when Release'], shim.events)
        assertTrue('no agent for a skipped stage', agents.isEmpty())
        assertEquals('the stage lock is taken before the when (beforeOptions avoids it)',
            ['fleet production'], lockedResources)
    }

    @Test
    void withoutBeforeAgentTheAgentIsTakenFirst() {
        runSnippet('after-agent', guarded(''), [GO: false])

        assertEquals(['options Release', 'agent Release', 'when Release'], shim.events)
        assertEquals(['gpuops'], agents*.label)
    }

    @Test
    void whenBeforeOptionsTakesNoLockForASkippedStage() {
        runSnippet('before-options', guarded('beforeOptions true'), [GO: false])
        assertEquals(['when Release'], shim.events)
        assertTrue(lockedResources.isEmpty())

        runSnippet('before-options', guarded('beforeOptions true'), [GO: true])
        assertEquals(['fleet production'], lockedResources)
        assertEquals(['released'], echoes)
    }

    // ---- options -----------------------------------------------------------------------------

    @Test
    void optionsAreCheckedAsDeclarativeChecksThem() {
        Map<String, String> refused = [
            'buildDiscarder is a pipeline option': "options { buildDiscarder(logRotator(numToKeepStr: '5')) }",
            'an unknown option'                   : 'options { retry(3) }',
            'a logRotator key Jenkins lacks'      : "options { buildDiscarder(logRotator(keep: '5')) }",
        ]
        refused.each { String why, String options ->
            String text = why.startsWith('buildDiscarder') ? oneStage(options, "echo 'x'") :
                "pipeline {\n agent none\n ${options}\n stages { stage('A') { steps { echo 'x' } } }\n}"
            try {
                runSnippet('bad-option', text)
                throw new AssertionError((Object) "${why}: should be refused")
            } catch (UnsupportedOperationException e) {
                assertTrue("${why}: ${e.message}", e.message != null)
            }
        }
        assertTrue(echoes.isEmpty())
    }

    @Test
    void pipelineOptionsLockTimestampsAndBuildDiscarderRun() {
        shim.out = { String line -> printed.add(line) }
        runSnippet('pipeline-options', """
pipeline {
    agent none
    options {
        buildDiscarder(logRotator(numToKeepStr: '50'))
        timestamps()
    }
    stages {
        stage('Release') {
            options {
                lock('fleet production')
                timeout(time: 5, unit: 'MINUTES')
            }
            steps { echo "holding \${env.NODE_NAME ?: 'no agent'}" }
        }
    }
}
""")
        assertEquals(['fleet production'], lockedResources)
        assertEquals([[time: 5, unit: 'MINUTES']], timeouts)
        assertEquals([buildDiscarder: [logRotator: [numToKeepStr: '50']]], shim.pipeline.options[0])
        // as in Jenkins, the lines before the options wrap the stages carry no timestamp
        assertEquals(['[Pipeline] Start of Pipeline', '[Pipeline] End of Pipeline'], [printed.first(), printed.last()])
        assertTrue(printed.join('\n'), printed[1..-2].every { it ==~ /^\[\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z\] .*/ })
        assertTrue(printed.join('\n'), printed.any { it.endsWith('] Lock acquired on [Resource: fleet production]') })
        assertTrue(printed.join('\n'), printed.any { it.endsWith('] holding no agent') })
    }

    // ---- post --------------------------------------------------------------------------------

    @Test
    void postConditionsRunInJenkinsOrderByResult() {
        String post = "post { cleanup { echo 'cleanup' }\n unsuccessful { echo 'unsuccessful' }\n" +
            "success { echo 'success' }\n failure { echo 'failure' }\n always { echo 'always' } }"
        failureOf('post-failure', oneStage('', "error('broken')", post))
        assertEquals(['always', 'failure', 'unsuccessful', 'cleanup'], echoes)

        echoes.clear()
        binding.getVariable('currentBuild').result = null
        runSnippet('post-success', oneStage('', "echo 'ok'", post))
        assertEquals(['ok', 'always', 'success', 'cleanup'], echoes)
    }

    @Test
    void aFailingPostBlockFailsTheBuild() {
        String message = failureOf('post-fails',
            oneStage('', "echo 'ok'", "post { always { error('publish failed') } }"))

        assertEquals('publish failed', message)
        assertEquals('FAILURE', result())
    }

    @Test
    void aWorkspaceStepInAPostWithNoAgentFails() {
        String message = failureOf('post-no-agent', """
pipeline {
    agent none
    stages { stage('A') { steps { echo 'a' } } }
    post { always { junit(testResults: 'reports/*.xml') } }
}
""")
        assertTrue(message, message.startsWith('junit: Required context class hudson.FilePath is missing'))
        assertTrue(junitReports.isEmpty())
        assertEquals('FAILURE', result())
    }

}
