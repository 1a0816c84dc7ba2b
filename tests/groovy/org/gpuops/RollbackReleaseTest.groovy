package org.gpuops

import static org.junit.Assert.assertEquals
import static org.junit.Assert.assertFalse
import static org.junit.Assert.assertTrue

import groovy.json.JsonOutput
import groovy.json.JsonSlurperClassic
import org.junit.Before
import org.junit.Test

/** rollbackRelease: the same flow as promoteTag around `gpuops release rollback`. */
class RollbackReleaseTest extends GpuOpsPipelineTest {

    static final List<String> WORDS = ['release', 'rollback']
    List<Map> calls = []
    Map plan = [state: 'planned', action: 'rollback', environment: 'production',
                approval: [required: true, approvers: ['release-managers'], timeout_minutes: 30],
                lock: [resource: 'gpuops-release 127.0.0.1:6443/ai/infer'], wanted: [tag: '1.3.0']]

    @Before
    void cliAnswers() {
        env.remove('WORKSPACE')
        onSh(commandScript(WORDS)) { Map call ->
            Map params = (Map) new JsonSlurperClassic().parseText(files.get(call.env.GPUOPS_PARAMS_FILE))
            calls.add(params + [node: call.env.NODE_NAME])
            Map result = params.dry_run ? plan : [state: 'succeeded', release: [number: 9, tag: '1.3.0']]
            files.put(call.env.GPUOPS_RESULT_FILE, JsonOutput.toJson([ok: true, command: 'release rollback',
                                                                       result: result]))
            return 0
        }
    }

    @Test
    void rollsBackToWhatTheJobChoseAfterTheApproval() {
        Object result = runStep('rollbackRelease', [environment: 'production', to: '1.3.0', reason: 'p99 latency'])

        assertEquals(9, result.release.number)
        assertEquals([[environment: 'production', to: '1.3.0', reason: 'p99 latency', dry_run: true],
                      [environment: 'production', to: '1.3.0', reason: 'p99 latency', approved_by: 'release-manager']],
            calls.collect { it.findAll { it.key in ['environment', 'to', 'reason', 'dry_run', 'approved_by'] } })
        assertEquals(1, inputs.size())
        assertFalse(inputs[0].agentHeld)
        assertTrue(inputs[0].message.toString(), inputs[0].message.startsWith('rollback 1.3.0 to production?'))
        assertEquals('release-managers', inputs[0].submitter)
        assertEquals(1, locks.size())
    }

    static final String FLEET = 'gpuops-fleet:inventory:deploy/inventory/production'
    static final String KEY = '-----BEGIN OPENSSH PRIVATE KEY-----\nsecretKEYmaterial\n-----END OPENSSH PRIVATE KEY-----\n'

    @Test
    void withNodesTakesTheFleetsLockWithTheTargetsAndBindsTheSshKeyAsEnvironmentOnly() {
        credentialStore.'ansible-key' = [privateKey: KEY, username: 'ops']
        credentialStore.'gpu-known-hosts' = [content: 'gpu-h800-01 ssh-ed25519 AAAAC3Nza\n']
        plan.nodes = [record: 'gpu-prod-7', state: 'planned']

        runStep('rollbackRelease', [environment: 'production', to: '1.3.0', withNodes: true,
                                    inventory: 'deploy/inventory/production', sshCredentialsId: 'ansible-key',
                                    knownHostsCredentialsId: 'gpu-known-hosts'])

        assertEquals([[with_nodes: true, inventory: 'deploy/inventory/production', dry_run: true],
                      [with_nodes: true, inventory: 'deploy/inventory/production']],
            calls.collect { it.findAll { it.key in ['with_nodes', 'inventory', 'dry_run'] } })
        assertEquals('both locks in one lock step, after the approval',
            [[resource: plan.lock.resource, extra: [[resource: FLEET]]]], locks)
        assertTrue(inputs[0].message.toString(), inputs[0].message.startsWith(
            'rollback 1.3.0 to production with its nodes? Every gate passed. The nodes go back to node record ' +
                'gpu-prod-7 first.'))
        assertEquals([['GPUOPS_SSH_KEY_FILE', 'GPUOPS_SSH_USER', 'GPUOPS_KNOWN_HOSTS']] * 2, boundVariables)
        commandCalls().each { Map call ->
            String params = files.get(call.env.GPUOPS_PARAMS_FILE)
            assertFalse(params, params.contains('secretKEYmaterial') || params.contains('ansible-key'))
            assertFalse(call.script.contains('secretKEYmaterial'))
        }
        assertJobStatusSuccess()
    }

    @Test
    void withNodesInABuildThatHoldsTheFleetTakesOnlyTheTargetsLock() {
        env.GPUOPS_FLEET_LOCK = FLEET

        runStep('rollbackRelease', [environment: 'production', to: '1.3.0', withNodes: true,
                                    inventory: './deploy/inventory/production/'])

        assertEquals([[resource: plan.lock.resource]], locks)
    }

    @Test
    void withNodesInABuildThatHoldsAnotherFleetFailsBeforeAnythingRuns() {
        env.GPUOPS_FLEET_LOCK = 'gpuops-fleet:inventory:deploy/inventory/staging'

        String message = runStepExpectingError('rollbackRelease', [environment: 'production', to: '1.3.0',
                                                                   withNodes: true, inventory: 'deploy/inventory/production'])

        assertTrue(message, message.startsWith('[rollbackRelease] this build holds gpuops-fleet:inventory:deploy/' +
            'inventory/staging, but the inventory is ' + FLEET))
        assertTrue('not even the dry run', calls.isEmpty())
        assertTrue(locks.isEmpty())
    }

    @Test
    void withoutWithNodesNoFleetIsLockedAndNoNodeParameterIsSent() {
        runStep('rollbackRelease', [environment: 'production', to: '1.3.0'])

        assertEquals([[resource: plan.lock.resource]], locks)
        assertFalse(calls.any { it.containsKey('with_nodes') || it.containsKey('inventory') })
        assertEquals('rollback 1.3.0 to production? Every gate passed. Requested by developer, who cannot approve it.',
            inputs[0].message.toString())
    }

    @Test
    void previousIsPassedOnAsTheCliSaysIt() {
        runStep('rollbackRelease', [environment: 'production', to: 'previous'])

        assertEquals(['previous', 'previous'], calls*.to)
    }

}
