package org.gpuops

import static org.junit.Assert.assertEquals
import static org.junit.Assert.assertFalse
import static org.junit.Assert.assertTrue

import org.junit.Test

/**
 * updateGpuNodes: the call inside the fleet's lock (one per inventory, however spelled; none nested
 * in the stage's), the SSH key as environment only, reports published.
 */
class UpdateGpuNodesTest extends GpuOpsPipelineTest {

    static final List<String> WORDS = ['nodes', 'update']
    static final String KEY = '-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAAsecretKEYmaterial\n' +
        '-----END OPENSSH PRIVATE KEY-----\n'
    static final Map DONE = [changed: ['gpu-h800-01', 'gpu-h800-02'], failed: [], not_started: []]
    static final Map FAILED_RESULT = [changed: [], failed: ['gpu-h800-01'], not_started: ['gpu-h800-02']]
    static final Map FAILURE = [
        message : '1 host(s) failed: gpu-h800-01; 1 never started (1 host(s) failed, over the failure budget of 0)',
        category: 'failed',
        hint    : 'failed hosts stay cordoned; fix them and run again: it resumes',
    ]

    @Test
    void runsTheCliInsideTheFleetsLockAndPublishesTheReports() {
        cliSucceeds(WORDS, DONE)
        env.BUILD_NUMBER = '42'

        Object result = runStep('updateGpuNodes', [inventory: 'ansible/inventory/production', limit: 'gpu_h800',
                                                   canary: 1, batchSize: '25%'])

        assertEquals(DONE, result)
        assertEquals([FLEET], lockedResources)
        Map call = commandCalls().first()
        assertEquals("'gpuops' 'nodes' 'update'", call.script)
        assertEquals(FLEET, call.lock)
        assertTrue('no stage lock: the step says it locks on its agent',
            echoed.any { it.startsWith("[updateGpuNodes] took ${FLEET} here, on the agent") })
        assertEquals([inventory: 'ansible/inventory/production', limit: 'gpu_h800', canary: 1, batch_size: '25%',
                      artifacts_dir: 'gpuops-artifacts/updateGpuNodes-42'], paramsOfLastCall())
        assertEquals([[artifacts: 'gpuops-artifacts/updateGpuNodes-42/**', allowEmptyArchive: true]], archived)
        assertEquals([[testResults: 'gpuops-artifacts/updateGpuNodes-42/*-junit.xml', allowEmptyResults: true]],
            junitReports)
        assertJobStatusSuccess()
    }

    static final String FLEET = 'gpuops-fleet:inventory:ansible/inventory/production'

    @Test
    void theNodeHistoryRecordOfTheRunIsLeftForALaterPromoteTag() {
        cliSucceeds(WORDS, DONE + [record: 'gpu-prod-12'])

        runStep('updateGpuNodes', [inventory: 'ansible/inventory/production'])

        assertEquals('gpu-prod-12', env.GPUOPS_NODE_CHANGE)
        assertTrue(echoed.toString(), echoed.contains(
            '[updateGpuNodes] node change record gpu-prod-12: a later promoteTag in this build records it (S-24)'))
    }

    @Test
    void aRunWithoutARecordOrWithAnIdOfAnotherShapeLeavesTheVariableAsItWas() {
        env.GPUOPS_NODE_CHANGE = 'gpu-prod-11'
        [DONE + [record: null], DONE, DONE + [record: 'x; rm -rf /'], DONE + [record: 12]].each { Map result ->
            cliSucceeds(WORDS, result)
            runStep('updateGpuNodes', [inventory: 'ansible/inventory/production'])
            assertEquals(result.toString(), 'gpu-prod-11', env.GPUOPS_NODE_CHANGE)
        }
    }

    @Test
    void everySpellingOfOneInventoryIsOneLock() {
        cliSucceeds(WORDS, DONE)
        ['ansible/inventory/production', './ansible/inventory/production/', 'ansible//inventory/./production',
         'ansible/inventory/staging/../production'].each { String spelling ->
            runStep('updateGpuNodes', [inventory: spelling])
        }
        assertEquals([FLEET] * 4, lockedResources)
        assertEquals('the CLI still gets the inventory as given', './ansible/inventory/production/',
            (new groovy.json.JsonSlurperClassic().parseText(files.get(commandCalls()[1].env.GPUOPS_PARAMS_FILE)) as Map)
                .inventory)

        runStep('updateGpuNodes', [inventory: 'ansible/inventory/production', fleet: 'gpu-prod'])
        assertEquals('gpuops-fleet:gpu-prod', lockedResources.last())
    }

    @Test
    void inventoriesOutsideTheRepositoryAndBadFleetNamesAreRefused() {
        cliSucceeds(WORDS, DONE)
        Map<Map, String> cases = [
            ([inventory: '/etc/ansible/hosts'])       : 'inventory must be a relative path inside the repository',
            ([inventory: '~/inv'])                    : 'inventory must be a relative path inside the repository',
            ([inventory: '../ops/production'])        : "inventory ../ops/production leaves the repository ('..')",
            ([inventory: 'deploy/../../x'])           : "inventory deploy/../../x leaves the repository ('..')",
            ([inventory: './'])                       : 'names the repository itself, not an inventory',
            ([inventory: 'inv', fleet: 'Prod Fleet']) : 'fleet must be a name (lower-case letters',
            ([inventory: 'x,gpuops-fleet:inventory:deploy/inventory/production']):
                "inventory 'x\\u002cgpuops-fleet\\u003ainventory\\u003adeploy/inventory/production' must be a path " +
                "of letters, digits, '.', '_' and '-', parts separated by '/' (no spaces, no ',', no ':')",
            ([inventory: 'deploy/inventory/production ']): "inventory 'deploy/inventory/production\\u0020' must be",
            ([inventory: 'deploy/my inventory'])       : "inventory 'deploy/my\\u0020inventory' must be",
        ]
        cases.each { Map config, String expected ->
            String message = runStepExpectingError('updateGpuNodes', config)
            assertTrue("${config}: ${message}", message.startsWith('[updateGpuNodes] ') && message.contains(expected) &&
                message.endsWith('(invalid-input)'))
        }
        assertTrue('nothing ran, nothing was locked', commandCalls().isEmpty() && lockedResources.isEmpty())
    }

    @Test
    void underTheStagesLockTheStepTakesNoSecondOne() {
        cliSucceeds(WORDS, DONE)
        String name = FleetLock.name(inventory: './ansible/inventory/production')
        assertEquals(FLEET, name)

        pipeline.invokeMethod('lock', [[resource: name, variable: 'GPUOPS_FLEET_LOCK'], {
            runStep('updateGpuNodes', [inventory: 'ansible/inventory/production/'])
        }] as Object[])

        assertEquals('one lock, the stage\'s', [FLEET], lockedResources)
        assertEquals(FLEET, commandCalls().first().lock)
        assertFalse(echoed.any { it.contains('on the agent') })
    }

    @Test
    void underAnotherFleetsLockTheStepFails() {
        cliSucceeds(WORDS, DONE)
        String message = null
        pipeline.invokeMethod('lock', [[resource: 'gpuops-fleet:inventory:deploy/inventory/staging',
                                        variable: 'GPUOPS_FLEET_LOCK'], {
            message = runStepExpectingError('updateGpuNodes', [inventory: 'deploy/inventory/production'])
        }] as Object[])

        assertEquals('[updateGpuNodes] this build holds gpuops-fleet:inventory:deploy/inventory/staging, but the ' +
            'inventory is gpuops-fleet:inventory:deploy/inventory/production: lock the fleet the step changes ' +
            '(org.gpuops.FleetLock.name with the same inventory or fleet) (invalid-input)', message)
        assertTrue(commandCalls().isEmpty())
    }

    @Test
    void aResourceNameWithACommaIsNotTakenForTheFleetsLock() {
        cliSucceeds(WORDS, DONE)
        String spoof = 'x,gpuops-fleet:inventory:deploy/inventory/production'
        String message = null
        pipeline.invokeMethod('lock', [[resource: spoof, variable: 'GPUOPS_FLEET_LOCK'], {
            message = runStepExpectingError('updateGpuNodes', [inventory: 'deploy/inventory/production'])
        }] as Object[])

        assertEquals("[updateGpuNodes] this build holds ${spoof}, but the inventory is ".toString() +
            'gpuops-fleet:inventory:deploy/inventory/production: lock the fleet the step changes ' +
            '(org.gpuops.FleetLock.name with the same inventory or fleet) (invalid-input)', message)
        assertTrue('nothing ran, no second lock', commandCalls().isEmpty() && lockedResources == [spoof])
    }

    @Test
    void theNodeUpdatePageIsPublishedOnTheBuildPageAlsoWhenHostsFailed() {
        env.BUILD_NUMBER = '43'
        onSh(commandScript(WORDS)) { Map call ->
            files.put('gpuops-artifacts/updateGpuNodes-43/node-update.html', '<!doctype html>')
            files.put(call.env.GPUOPS_ERROR_FILE, groovy.json.JsonOutput.toJson(
                [ok: false, command: 'nodes update', error: FAILURE + [exit_code: 1], result: FAILED_RESULT]))
            return 1
        }

        runStep('updateGpuNodes', [inventory: 'inv', onFailure: 'unstable'])

        assertEquals([[reportDir: 'gpuops-artifacts/updateGpuNodes-43', reportFiles: 'node-update.html',
                       reportName: 'GPU node update', keepAll: true, alwaysLinkToLastBuild: false,
                       allowMissing: true]], published)
        assertEquals('the folder is archived once', 1, archived.size())
        assertJobStatusUnstable()
    }

    @Test
    void theValidationAndRollbackOptionsReachTheCliAsGiven() {
        cliSucceeds(WORDS, DONE)

        runStep('updateGpuNodes', [inventory: 'inv', validationLevel: 2, rollback: false,
                                   afterRollback: 'uncordon'])

        assertEquals([inventory: 'inv', validation_level: 2, rollback: false, after_rollback: 'uncordon',
                      artifacts_dir: 'gpuops-artifacts/updateGpuNodes-local'], paramsOfLastCall())
        assertJobStatusSuccess()
    }

    @Test
    void theDisruptionBudgetOptionsReachTheCliAsGiven() {
        cliSucceeds(WORDS, DONE)

        runStep('updateGpuNodes', [inventory: 'inv', budgetMaxUnavailable: ['1', 'NVIDIA-H800=25%'],
                                   budgetWait: 600, budgetLease: 30, kuredDaemonset: 'kured/kured'])

        assertEquals([inventory: 'inv', budget_max_unavailable: ['1', 'NVIDIA-H800=25%'], budget_wait: 600,
                      budget_lease: 30, kured_daemonset: 'kured/kured',
                      artifacts_dir: 'gpuops-artifacts/updateGpuNodes-local'], paramsOfLastCall())
        assertJobStatusSuccess()
    }

    @Test
    void aBudgetHoldIsAFailureByPolicyWithTheHoldersInTheConsoleLine() {
        String held = 'rollout held: disruption budget spent: class NVIDIA-H800: 1 node(s) unavailable, ' +
            '1 more would make 2 > max_unavailable 1; holders: agent-3/pid-7-a1b2c3 (nodes update inv-b) holds n1'
        cliFails(WORDS, 3, [message: held, category: 'gate-refused'], [result: FAILED_RESULT])

        Object result = runStep('updateGpuNodes',
            [inventory: 'inv', onFailure: 'unstable', budgetMaxUnavailable: ['1']])

        assertEquals(FAILED_RESULT, result)
        assertEquals(["[updateGpuNodes] ${held} (gate-refused)".toString()], unstableMessages)
    }

    @Test
    void theWindowAndResumeOptionsReachTheCliAsGiven() {
        cliSucceeds(WORDS, DONE)

        runStep('updateGpuNodes', [inventory: 'inv', window: 'Sat 22:00-Sun 06:00 Europe/Berlin',
                                   batchEstimate: '40m', resume: true])

        assertEquals([inventory: 'inv', window: 'Sat 22:00-Sun 06:00 Europe/Berlin', batch_estimate: '40m',
                      resume: true, artifacts_dir: 'gpuops-artifacts/updateGpuNodes-local'], paramsOfLastCall())
        assertJobStatusSuccess()
    }

    static final Map WINDOW_HELD = [
        message : 'rollout held: held by the window: batch 1 needs about 50m (the mean of this run\'s 1 batch(es)); ' +
            'the window Sat 22:00-Sun 06:00 Europe/Berlin closes in 40m, at 2026-03-29T06:00+02:00',
        category: 'gate-refused',
        hint    : 'run it again in the next maintenance window: it resumes',
    ]

    @Test
    void aRunHeldByTheWindowMakesTheBuildUnstableWithItsReports() {
        env.BUILD_NUMBER = '46'
        onSh(commandScript(WORDS)) { Map call ->
            files.put(call.env.GPUOPS_ERROR_FILE, groovy.json.JsonOutput.toJson(
                [ok: false, command: 'nodes update', error: WINDOW_HELD + [exit_code: 3],
                 result: [changed: ['gpu-h800-01'], failed: [], not_started: ['gpu-h800-02'],
                          resume: [reason: 'held', done: ['gpu-h800-01'], left: ['gpu-h800-02'], failed: []]]]))
            return 3
        }

        Object result = runStep('updateGpuNodes', [inventory: 'inv', window: 'Sat 22:00-Sun 06:00 Europe/Berlin',
                                                   onFailure: 'unstable'])

        assertEquals(['gpu-h800-02'], result.resume.left)
        assertEquals([[artifacts: 'gpuops-artifacts/updateGpuNodes-46/**', allowEmptyArchive: true]], archived)
        assertJobStatusUnstable()
    }

    @Test
    void aMisspelledRollbackParameterIsRefusedBeforeTheCliRuns() {
        cliSucceeds(WORDS, DONE)

        String message = runStepExpectingError('updateGpuNodes', [inventory: 'inv', noRollback: true])

        assertTrue(message, message.startsWith('[updateGpuNodes] unknown parameter(s) noRollback; known parameters: ') &&
            message.contains('afterRollback') && message.contains('rollback, ') && message.contains('validationLevel') &&
            message.endsWith('(invalid-input)'))
        assertTrue('nothing ran', commandCalls().isEmpty())
    }

    static final Map BROKEN = [
        message : '1 rollback(s) failed, left broken: gpu-h800-01; 1 never started (1 host(s) failed, over the ' +
            'failure budget of 0)',
        category: 'host-broken',
        hint    : 'a host left broken stays cordoned and tainted (gpuops.io/gpu-unhealthy): repair it by hand ' +
            'before it takes work; failed hosts stay cordoned; fix them and run again: it resumes',
    ]

    @Test
    void aHostLeftBrokenFailsTheBuildEvenWhenFailuresMakeItUnstableAfterTheReports() {
        env.BUILD_NUMBER = '45'
        onSh(commandScript(WORDS)) { Map call ->
            files.put('gpuops-artifacts/updateGpuNodes-45/node-update.html', '<!doctype html>')
            files.put(call.env.GPUOPS_ERROR_FILE, groovy.json.JsonOutput.toJson(
                [ok: false, command: 'nodes update', error: BROKEN + [exit_code: 6],
                 result: [changed: [], failed: [], rollback_failed: ['gpu-h800-01'], not_started: ['gpu-h800-02']]]))
            return 6
        }

        String message = runStepExpectingError('updateGpuNodes', [inventory: 'inv', onFailure: 'unstable'])

        assertTrue(message, message.startsWith("[updateGpuNodes] ${BROKEN.message} (host-broken)".toString()))
        assertEquals('the reports are published first', 1, published.size())
        assertEquals([[artifacts: 'gpuops-artifacts/updateGpuNodes-45/**', allowEmptyArchive: true]], archived)
        assertEquals([[testResults: 'gpuops-artifacts/updateGpuNodes-45/*-junit.xml', allowEmptyResults: true]],
            junitReports)
    }

    @Test
    void withoutTheHtmlPublisherPluginTheNodeUpdatePageIsStillArchived() {
        htmlPublisher = false
        env.BUILD_NUMBER = '44'
        onSh(commandScript(WORDS)) { Map call ->
            files.put('gpuops-artifacts/updateGpuNodes-44/node-update.html', '<!doctype html>')
            files.put(call.env.GPUOPS_RESULT_FILE, groovy.json.JsonOutput.toJson([ok: true, result: DONE]))
            return 0
        }

        runStep('updateGpuNodes', [inventory: 'inv'])

        assertTrue(published.isEmpty())
        assertEquals([[artifacts: 'gpuops-artifacts/updateGpuNodes-44/**', allowEmptyArchive: true]], archived)
        String page = 'gpuops-artifacts/updateGpuNodes-44/node-update.html'
        assertTrue(echoed.toString(), echoed.any { it.contains("archived as ${page}") })
        assertJobStatusSuccess()
    }

    @Test
    void theKnownHostsCredentialReachesTheCliAsAFileInTheEnvironment() {
        credentialStore.'ansible-key' = [privateKey: KEY, username: 'ops']
        credentialStore.'gpu-known-hosts' = [content: 'gpu-h800-01,192.0.2.21 ssh-ed25519 AAAAC3Nza\n']
        cliSucceeds(WORDS, DONE)

        runStep('updateGpuNodes', [inventory: 'inv', sshCredentialsId: 'ansible-key',
                                   knownHostsCredentialsId: 'gpu-known-hosts'])

        Map call = commandCalls().first()
        assertEquals([['GPUOPS_SSH_KEY_FILE', 'GPUOPS_SSH_USER', 'GPUOPS_KNOWN_HOSTS']], boundVariables)
        assertEquals('gpu-h800-01,192.0.2.21 ssh-ed25519 AAAAC3Nza\n', files.get(call.env.GPUOPS_KNOWN_HOSTS))
        assertFalse(files.get(call.env.GPUOPS_PARAMS_FILE).contains('knownHosts'))  // a step parameter, not the CLI's
    }

    @Test
    void theSshKeyReachesTheCliOnlyAsEnvironment() {
        credentialStore.'ansible-key' = [privateKey: KEY, username: 'ops']
        credentialStore.kube = [content: 'apiVersion: v1\nusers: [{user: {token: kube-secret-token}}]']
        cliSucceeds(WORDS, DONE)

        runStep('updateGpuNodes', [inventory: 'inv', sshCredentialsId: 'ansible-key', kubeconfigCredentialsId: 'kube'])

        Map call = commandCalls().first()
        assertEquals([['GPUOPS_SSH_KEY_FILE', 'GPUOPS_SSH_USER', 'KUBECONFIG']], boundVariables)
        assertEquals(KEY, files.get(call.env.GPUOPS_SSH_KEY_FILE))
        assertEquals('ops', call.env.GPUOPS_SSH_USER)
        assertNoCallCarries('secretKEYmaterial')
        assertNoCallCarries('kube-secret-token')
        files.findAll { path, text -> path != call.env.GPUOPS_SSH_KEY_FILE }.each { path, text ->
            assertFalse("${path} carries the key", text.contains('secretKEYmaterial'))
        }
        shCalls.each { Map sh -> assertFalse(sh.script.contains('BEGIN OPENSSH')) }
    }

    @Test
    void failedHostsFailTheBuildAfterTheReportsArePublished() {
        cliFails(WORDS, 1, FAILURE, [result: FAILED_RESULT])

        String message = runStepExpectingError('updateGpuNodes', [inventory: 'inv'])

        assertTrue(message, message.startsWith('[updateGpuNodes] 1 host(s) failed: gpu-h800-01; 1 never started'))
        assertTrue(message, message.endsWith('Hint: failed hosts stay cordoned; fix them and run again: it resumes'))
        assertEquals(1, archived.size())
        assertEquals(1, junitReports.size())
        assertJobStatusFailure()
    }

    @Test
    void failedHostsMarkTheBuildUnstableWhenAskedAndReturnTheResult() {
        cliFails(WORDS, 1, FAILURE, [result: FAILED_RESULT])

        Object result = runStep('updateGpuNodes', [inventory: 'inv', onFailure: 'unstable', artifactsDir: 'out/u'])

        assertEquals(FAILED_RESULT, result)
        assertEquals(1, unstableMessages.size())
        assertEquals([[testResults: 'out/u/*-junit.xml', allowEmptyResults: true]], junitReports)
        assertJobStatusUnstable()
    }

    @Test
    void someHostsChangedAndOthersFailedSaysPartialInTheConsoleLine() {
        Map partly = [changed: ['gpu-h800-02'], failed: ['gpu-h800-01'], not_started: []]
        cliFails(WORDS, 1, FAILURE, [verdict: 'partial', result: partly])

        Object result = runStep('updateGpuNodes', [inventory: 'inv', onFailure: 'unstable'])

        assertEquals(partly, result)
        assertEquals(["[updateGpuNodes] ${FAILURE.message} (failed, partial)\nHint: ${FAILURE.hint}".toString()],
            unstableMessages)
        assertJobStatusUnstable()
    }

    @Test
    void aRefusedBatchIsAFailureByPolicyToo() {
        cliFails(WORDS, 3, [message: 'rollout stopped: headroom gate refused batch 0', category: 'gate-refused'],
            [result: FAILED_RESULT])

        Object result = runStep('updateGpuNodes', [inventory: 'inv', onFailure: 'unstable'])

        assertEquals(FAILED_RESULT, result)
        assertEquals(['[updateGpuNodes] rollout stopped: headroom gate refused batch 0 (gate-refused)'],
            unstableMessages)
    }

    static final String HELD = "rollout held: alerts held batch 1: 1 alert(s) matching severity=\"critical\" still " +
        "fire after 120 s: 'GpuXid'{instance='gpu-h800-02', severity='critical'}"

    @Test
    void theAlertsGateOptionsReachTheCliAsGivenAndAHeldRolloutIsAFailureByPolicy() {
        Map held = FAILED_RESULT + [held: [gate: 'alerts', message: HELD, details: [firing: 1]]]
        cliFails(WORDS, 3, [message: HELD, category: 'gate-refused'], [result: held])

        Object result = runStep('updateGpuNodes', [inventory: 'inv', onFailure: 'unstable',
                                                   alertsUrl: 'https://alertmanager.example:9093',
                                                   alertsSelector: 'severity="critical",team=~"gpu|infra"',
                                                   alertsWait: 120])

        assertEquals([inventory: 'inv', alerts_url: 'https://alertmanager.example:9093',
                      alerts_selector: 'severity="critical",team=~"gpu|infra"', alerts_wait: 120,
                      artifacts_dir: 'gpuops-artifacts/updateGpuNodes-local'], paramsOfLastCall())
        assertEquals("'gpuops' 'nodes' 'update'", commandCalls().first().script)  // the selector in no shell
        assertEquals(held, result)
        assertEquals(["[updateGpuNodes] ${HELD} (gate-refused)".toString()], unstableMessages)
    }

    @Test
    void alertmanagersTokenReachesTheCliOnlyAsEnvironment() {
        String token = 'am-SECRET-bearer-0123456789'
        credentialStore.'alertmanager-token' = [secret: token]
        cliSucceeds(WORDS, DONE)

        runStep('updateGpuNodes', [inventory: 'inv', alertsUrl: 'https://alertmanager.example:9093',
                                   alertsCredentialsId: 'alertmanager-token'])

        Map call = commandCalls().first()
        assertEquals([['GPUOPS_ALERTS_TOKEN']], boundVariables)
        assertEquals(token, call.env.GPUOPS_ALERTS_TOKEN)
        assertEquals([inventory: 'inv', alerts_url: 'https://alertmanager.example:9093',
                      artifacts_dir: 'gpuops-artifacts/updateGpuNodes-local'], paramsOfLastCall())
        assertNoCallCarries('am-SECRET-bearer')
        assertFalse(files.get(call.env.GPUOPS_PARAMS_FILE).contains('SECRET'))
    }

    @Test
    void badInputFailsEvenWhenFailuresAreOnlyUnstable() {
        cliFails(WORDS, 2, [message: 'inventory inv: group gpu_a100 (host gpu-a100-01) has no driver version',
                            category: 'invalid-input', field: 'inventory'])

        String message = runStepExpectingError('updateGpuNodes', [inventory: 'inv', onFailure: 'unstable'])

        assertTrue(message, message.startsWith('[updateGpuNodes] inventory: inventory inv: group gpu_a100'))
        assertTrue(unstableMessages.isEmpty())
    }

    @Test
    void dryRunReachesTheCliAsDryRun() {
        cliSucceeds(WORDS, DONE)

        runStep('updateGpuNodes', [inventory: 'inv', dryRun: true])

        assertEquals(true, paramsOfLastCall().dry_run)
    }

    @Test
    void theOldNameCheckStillWorksAndIsSentAsDryRun() {
        cliSucceeds(WORDS, DONE)

        runStep('updateGpuNodes', [inventory: 'inv', check: true])

        assertEquals(true, paramsOfLastCall().dry_run)
        assertFalse(paramsOfLastCall().containsKey('check'))
    }

    @Test
    void dryRunUnderBothItsNamesIsRejectedBeforeTheCliRuns() {
        String message = runStepExpectingError('updateGpuNodes', [inventory: 'inv', check: true, dryRun: false])

        assertTrue(message, message.startsWith(
            "[updateGpuNodes] parameters 'check' and 'dryRun' are the same option: set only 'dryRun'"))
        assertTrue(shCalls.isEmpty())
    }

    @Test
    void badParametersAreRejectedBeforeTheCliRuns() {
        Map<Map, String> cases = [
            ([:])                                   : "parameter 'inventory' is required",
            ([inventory: 'inv', onFailure: 'ignore']): "parameter 'onFailure' must be one of 'fail', 'unstable'",
            ([inventory: 'inv', sshKey: KEY])        : 'unknown parameter(s) sshKey',
        ]
        cases.each { Map config, String expected ->
            String message = runStepExpectingError('updateGpuNodes', config)
            assertTrue("${config}: ${message}", message.startsWith("[updateGpuNodes] ${expected}"))
        }
        assertTrue(shCalls.isEmpty())
        assertTrue(lockedResources.isEmpty())
        helper.callStack.findAll { it.methodName == 'error' }.each { call ->
            assertFalse('a key given as a plain parameter is not echoed', call.argsToString().contains('secretKEY'))
        }
    }

}
