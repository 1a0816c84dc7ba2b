package org.gpuops

import static org.junit.Assert.assertEquals
import static org.junit.Assert.assertFalse
import static org.junit.Assert.assertNotNull
import static org.junit.Assert.assertNull
import static org.junit.Assert.assertTrue

import groovy.json.JsonSlurperClassic
import java.util.concurrent.TimeUnit
import org.junit.Test
import org.yaml.snakeyaml.Yaml

/**
 * Jenkinsfile.example's stages as a Kubernetes Jenkins runs them (issue 18), on the
 * Declarative shim's simulated clock with recorded CLI answers (RecordedJenkinsfileTest):
 * timeouts per stage, each at least what it waits for, none cutting an approval; a job not
 * made by `gpuops jenkins apply` fails saying how to make it; the headroom stage takes its
 * settings from gpuops-release.yaml; reports and JUnit are kept when a stage fails or is cut.
 */
class JenkinsfileStagesTest extends RecordedJenkinsfileTest {

    public static final long MINUTE = TimeUnit.MINUTES.toMillis(1)

    // ---- a job not made by `gpuops jenkins apply` ----------------------------------------

    @Test
    void aJobWithoutAppJobFailsSayingHowToCreateTheJobs() {
        [[:], [APP_JOB: ''], [APP_JOB: 'Build'], [APP_JOB: 'deploy']].each { Map params ->
            calls.clear()
            shim.stageLog.clear()
            binding.getVariable('currentBuild').result = null
            Map built = build(params)
            assertEquals("${params}", 'FAILURE', built.result)
            assertTrue(built.error, built.error.contains('gpuops jenkins apply --config gpuops-release.yaml'))
            assertTrue(built.error, built.error.startsWith('This job has no APP_JOB parameter'))
            assertEquals('nothing ran', [], calls)
            assertEquals([stage: 'Job', status: 'FAILURE'], shim.stageLog[0])
            assertTrue(shim.stageLog.tail().every { it.status == 'skipped (earlier failure)' })
        }
        assertTrue('no agent was taken', agents.isEmpty())
    }

    @Test
    void aReleaseWithTheEnvironmentNotChosenFailsInTheJobStage() {
        // APP_ENV's first choice, Jenkins' default, is '(choose)': a default run deploys nothing
        [[APP_JOB: 'release', APP_IMAGE_TAG: '44', APP_ENV: '(choose)'],
         [APP_JOB: 'rollback', APP_ENV: '(choose)', ROLLBACK_TO: 'previous']].each { Map params ->
            calls.clear()
            shim.stageLog.clear()
            binding.getVariable('currentBuild').result = null
            Map built = build(params)
            assertEquals("${params}", 'FAILURE', built.result)
            assertTrue(built.error, built.error.startsWith('choose the environment to release to'))
            assertEquals('nothing ran', [], calls)
            assertEquals([stage: 'Job', status: 'FAILURE'], shim.stageLog[0])
            assertTrue(shim.stageLog.tail().every { it.status == 'skipped (earlier failure)' })
        }
        assertTrue('no agent was taken', agents.isEmpty())
    }

    @Test
    void theJobsOfGpuopsJenkinsApplyPassTheJobStage() {
        Map built = release(APP_ENV: 'staging')
        assertEquals(built.error, 'SUCCESS', built.result)
        assertEquals([stage: 'Job', status: 'skipped (when)'], shim.stageLog[0])
    }

    @Test
    void theCleanJobCleansTheAgentAndNothingElse() {
        answer(['image', 'clean']) { Map params -> [result: [message: 'removed 4 image(s), freed 123 bytes']] }
        Map built = build([APP_JOB: 'clean'])
        assertEquals(built.error, 'SUCCESS', built.result)
        assertEquals(['SUCCESS'], shim.stageLog.findAll { it.stage == 'Clean agents' }*.status)
        assertEquals([[command: 'image clean', params: [:]]],
            calls.collect { [command: it.command, params: it.params] })
        assertEquals(['skipped (when)'], shim.stageLog.findAll { it.stage == 'Build' }*.status)
        assertEquals(['skipped (when)'], shim.stageLog.findAll { it.stage == 'Release' }*.status)
        assertNotNull('the clean stage takes an agent: its own timeout', timeoutMinutes(stage('Clean agents')))
    }

    @Test
    void theScheduledInspectionQuarantinesWithTheEnvironmentsKubeconfigAndRunsNothingElse() {
        env.GPUOPS_PUSHGATEWAY_URL = 'http://pushgateway.example.invalid:9091'
        answer(['nodes', 'inspect']) { Map params ->
            [exit: 3, error: [message: 'critical findings on 1 host(s): gpu-h800-02 (quarantined: gpu-h800-02)',
                              category: 'gate-refused'],
             result: [status: 'critical', critical_hosts: ['gpu-h800-02']]]
        }
        Map built = build(APP_JOB: 'inspect', APP_ENV: 'production')

        assertEquals(built.error, 'UNSTABLE', built.result)  // a critical node: unstable, not red
        assertEquals(['nodes inspect'], calls*.command)
        Map params = calls[0].params
        assertEquals('deploy/inventory/production', params.inventory)
        assertEquals(true, params.quarantine)
        assertEquals('http://pushgateway.example.invalid:9091', params.pushgateway)
        assertTrue('the SSH key is bound', calls[0].ssh)
        assertEquals([stage: 'Job', status: 'skipped (when)'], shim.stageLog[0])
        assertEquals(['skipped (when)'], shim.stageLog.findAll { it.stage == 'Release' }*.status)
        assertNotNull('its own timeout', timeoutMinutes(stage('Inspect GPU nodes')))
    }

    // ---- timeouts -------------------------------------------------------------------------

    @Test
    void noPipelineWideTimeoutAndEveryAgentStageHasItsOwn() {
        release(APP_ENV: 'staging')
        assertFalse('a pipeline-wide timeout cuts the longest wait of any stage',
            shim.pipeline.options.any { it.timeout })
        ['Build', 'Update GPU nodes', 'GPU headroom', 'Inspect GPU nodes'].each { String name ->
            assertNotNull("stage ${name} takes an agent: its own timeout", timeoutMinutes(stage(name)))
        }
        // their waits are bounded by the steps themselves, from gpuops-release.yaml
        ['Release', 'Rollback', 'Node change', 'Approve the node change'].each { String name ->
            assertNull("stage ${name}: no stage timeout to cut its approval", timeoutMinutes(stage(name)))
        }
    }

    @Test
    void noTimeoutAroundAnApprovalIsShorterThanTheApprovalsOwn() {
        approvalMinutes = 60  // the environment's approval.timeout_minutes
        shim.approvalDelay = 59 * MINUTE  // each approver answers after 59 minutes
        Map built = release(APP_ENV: 'production', APP_NODE_CHANGE: 'driver', APP_NODE_LIMIT: 'gpu_h800')

        assertEquals(built.error, 'SUCCESS', built.result)
        assertEquals(2, timeoutsAtInput.size())
        // the node change's approval: its own 60 minutes, nothing shorter around it
        assertEquals(60L, timeoutsAtInput[0].last())
        assertEquals(timeoutsAtInput[0].toString(), timeoutsAtInput[0].last(), timeoutsAtInput[0].min())
        // the release's: the environment's approval.timeout_minutes
        assertEquals(60L, timeoutsAtInput[1].last())
        assertEquals(timeoutsAtInput[1].toString(), timeoutsAtInput[1].last(), timeoutsAtInput[1].min())
        assertEquals(['SUCCESS'], shim.stageLog.findAll { it.stage == 'Release' }*.status)
    }

    @Test
    void aLongApprovalInTheReleaseStageIsNotCut() {
        // the environment asks its approvers for up to 8 hours: the approval's own, nothing else
        approvalMinutes = 480
        shim.approvalDelay = 7 * 60 * MINUTE
        Map built = release(APP_ENV: 'production')
        assertEquals(built.error, 'SUCCESS', built.result)
        assertEquals([[480L]], timeoutsAtInput)
    }

    @Test
    void theNodeUpdatesTimeoutOutlastsTheRollingUpdateItWaitsFor() {
        Map built = release(APP_ENV: 'staging', APP_NODE_CHANGE: 'all')
        assertEquals(built.error, 'SUCCESS', built.result)
        Map sent = calls.find { it.command == 'nodes update' }.params
        Map defaults = cliDefaults('nodes update')
        Closure<Long> option = { String name ->
            ((sent.containsKey(name) ? sent[name] : defaults[name]) as Number).longValue()
        }
        String size = sent.batch_size ?: defaults.batch_size
        assertTrue("a share of the hosts per batch bounds the number of batches: ${size}", size.endsWith('%'))
        long batches = option('canary') + (long) Math.ceil(100.0d / (size - '%').toInteger())
        File roleDefaults = new File(REPO_ROOT, 'python/src/gpuops/ansible/roles/nvidia_driver/defaults/main.yml')
        Map role = (Map) new Yaml().load(roleDefaults.text)
        long reboot = (role.nvidia_driver_reboot_timeout as Number).longValue()
        long install = TimeUnit.MINUTES.toSeconds(20)  // a driver .run install: an allowance, unverified here
        // per batch (its hosts change together): GPU pods finish, drain, install, nouveau's
        // reboot and the driver's, the node Ready again
        long perBatch = option('gpu_pods_timeout') + option('drain_timeout') + install + 2 * reboot +
            option('ready_timeout')
        long needed = TimeUnit.SECONDS.toMinutes(batches * perBatch)
        long stageTimeout = timeoutMinutes(stage('Update GPU nodes'))
        assertTrue("Update GPU nodes: ${stageTimeout} min < ${batches} batches x ${perBatch} s = ${needed} min",
            stageTimeout >= needed)
    }

    @Test
    void aRollingUpdateLongerThanHalfAnHourIsNotAborted() {
        nodesRun = { -> shim.clock.elapse(TimeUnit.HOURS.toMillis(9)) }
        Map built = release(APP_ENV: 'staging', APP_NODE_CHANGE: 'driver')
        assertEquals(built.error, 'SUCCESS', built.result)
        assertEquals(['nodes update', 'headroom check', 'release promote', 'release promote'], calls*.command)
    }

    @Test
    void theBuildsTimeoutOutlastsTheImageBuild() {
        Map built = build([APP_JOB: 'build'])
        assertEquals(built.error, 'SUCCESS', built.result)
        Map sent = calls.find { it.command == 'image build' }.params
        long imageBuild = TimeUnit.SECONDS.toMinutes((sent.timeout as Number).longValue())
        // the pod's start and the unit tests come first: at least 10 minutes more
        assertTrue("${timeoutMinutes(stage('Build'))} min", timeoutMinutes(stage('Build')) >= imageBuild + 10)
        assertEquals(['python3 -m pytest tests/ -x --tb=short --junitxml=reports/unit-tests.xml'], scripts)
    }

    // ---- reports and JUnit on failure too -------------------------------------------------

    @Test
    void aNodeUpdateCutShortByItsTimeoutStillKeepsItsReports() {
        nodesRun = { -> shim.clock.elapse(TimeUnit.HOURS.toMillis(13)) }
        Map built = release(APP_ENV: 'staging', APP_NODE_CHANGE: 'driver')

        assertEquals('ABORTED', built.result)
        assertEquals('Timeout has been exceeded', built.error)
        assertEquals(['gpuops-artifacts/**'], archived*.artifacts)
        assertEquals([[testResults: 'gpuops-artifacts/**/*-junit.xml', allowEmptyResults: true]], junitReports)
        assertEquals(['nodes update'], calls*.command)
        assertEquals(['ABORTED', 'skipped (earlier failure)'],
            shim.stageLog.findAll { it.stage in ['Update GPU nodes', 'Release'] }*.status)
    }

    @Test
    void aFailedNodeUpdatePublishesItsJUnitOnce() {
        nodesFail = [exit: 1, error: [category: 'failed', message: '1 host(s) failed: gpu-h800-01',
                                      hint: 'failed hosts stay cordoned; fix them and run again']]
        Map built = release(APP_ENV: 'staging', APP_NODE_CHANGE: 'driver')

        assertEquals('FAILURE', built.result)
        assertEquals('the step published it; a second junit would report every host twice',
            1, junitReports.size())
        String published = junitReports[0].testResults
        assertTrue(published, published.endsWith('-junit.xml'))
        assertEquals(1, archived.count { it.artifacts.toString().startsWith('gpuops-artifacts/') })
    }

    @Test
    void failingUnitTestsStillPublishTheirReport() {
        scriptStatus = 1
        Map built = build([APP_JOB: 'build'])

        assertEquals('FAILURE', built.result)
        assertEquals([[testResults: 'reports/unit-tests.xml', allowEmptyResults: true]], junitReports)
        assertEquals('no image from failed tests', [], calls)
        assertEquals(['Unit tests', 'Image'], shim.stageLog.findAll { it.stage in ['Unit tests', 'Image'] }*.stage)
        assertEquals('skipped (earlier failure)', shim.stageLog.find { it.stage == 'Image' }.status)
    }

    @Test
    void oldBuildsAreDiscardedAndTheConsoleIsTimestamped() {
        release(APP_ENV: 'staging')
        Map rotator = shim.pipeline.options.find { it.buildDiscarder }?.buildDiscarder?.logRotator as Map
        assertNotNull('buildDiscarder(logRotator(...))', rotator)
        assertTrue(rotator.toString(), rotator.numToKeepStr.toString().toInteger() > 0)
        assertTrue(rotator.toString(), rotator.artifactNumToKeepStr.toString().toInteger() > 0)
        assertTrue('timestamps()', shim.pipeline.options.any { it.timestamps })
    }

    // ---- settings written once -----------------------------------------------------------

    @Test
    void theHeadroomStageTakesItsSettingsFromTheReleaseFile() {
        Map built = release(APP_ENV: 'production')
        assertEquals(built.error, 'SUCCESS', built.result)
        Map sent = calls.find { it.command == 'headroom check' }.params
        assertEquals('production', sent.environment)
        ['namespace', 'node_selector', 'reserve', 'reserve_per_class', 'group_by', 'release_config'].each {
            assertFalse("${it} is gpuops-release.yaml's, not the Jenkinsfile's: ${sent}", sent.containsKey(it))
        }
        String jenkinsfile = new File(REPO_ROOT, 'Jenkinsfile.example').text
        int at = jenkinsfile.indexOf('checkGpuHeadroom(')
        String call = jenkinsfile.substring(at, jenkinsfile.indexOf('echo "GPU headroom', at))
        ['namespace', 'nodeSelector', 'reserve', 'groupBy', 'nvidia-h800', 'ai-'].each {
            assertFalse("the headroom stage repeats ${it}: ${call}", call.contains(it))
        }
    }

    /** The defaults of a CLI command's options, as the library ships them (cli-options.json). */
    static Map cliDefaults(String command) {
        Map doc = (Map) new JsonSlurperClassic().parseText(
            new File(REPO_ROOT, 'resources/org/gpuops/cli-options.json').text)
        return doc.commands[command].options.collectEntries { Map o -> [(o.name): o.default] }
    }

}
