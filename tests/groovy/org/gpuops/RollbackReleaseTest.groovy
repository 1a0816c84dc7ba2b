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

    @Test
    void previousIsPassedOnAsTheCliSaysIt() {
        runStep('rollbackRelease', [environment: 'production', to: 'previous'])

        assertEquals(['previous', 'previous'], calls*.to)
    }

}
