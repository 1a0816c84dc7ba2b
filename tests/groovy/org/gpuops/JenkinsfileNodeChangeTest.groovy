package org.gpuops

import static org.junit.Assert.assertEquals
import static org.junit.Assert.assertFalse
import static org.junit.Assert.assertTrue

import org.junit.Test

/**
 * Jenkinsfile.example's release job with the node change of its version (S-24): the real
 * library and the Declarative shim, the CLI's side played by recorded answers
 * (RecordedJenkinsfileTest; the lab story, JenkinsfileExampleTest, runs the releases
 * themselves for real; a node change there would need the SSH fleet and minutes per driver
 * install). What this shows is the pipeline's order and wiring: production's approval before
 * any node is touched, outside any agent; the node change before the release's gates, on the
 * environment's own inventory with the SSH key bound; a failed node change stops the build
 * before anything is released.
 */
class JenkinsfileNodeChangeTest extends RecordedJenkinsfileTest {

    @Test
    void productionApprovesThenChangesTheNodesThenReleasesOntoThem() {
        Map build = release(APP_ENV: 'production', APP_NODE_CHANGE: 'driver', APP_NODE_LIMIT: 'gpu_h800')

        assertEquals(build.error, 'SUCCESS', build.result)
        assertEquals(['nodes update', 'headroom check', 'release promote', 'release promote'], calls*.command)
        Map nodes = calls[0]
        assertEquals([inventory: 'deploy/inventory/production', limit: 'gpu_h800', change: 'driver'],
            nodes.params.findAll { it.key in ['inventory', 'limit', 'change'] })
        assertTrue('the SSH key is bound for the node change (S-25)', nodes.ssh)
        assertFalse('and for nothing else', calls.tail().any { it.ssh })
        // two approvals in production: the node change (before any node is touched), the release
        assertEquals(2, inputs.size())
        assertEquals(1, nodes.inputsBefore)
        assertEquals('release-managers', inputs[0].submitter)
        assertTrue(inputs[0].message.toString(),
            inputs[0].message.toString().startsWith('Change driver on gpu_h800 of production for 44?'))
        assertEquals('no executor held while a person approves', [false, false], inputs*.agentHeld)
        assertEquals(['gpuops-fleet:inventory:deploy/inventory/production', LOCK], lockedResources)
        assertTrue(echoed.contains('node change for 44: changed 2, unchanged 0'))
        assertNoCallCarries('ssh-private-key-value')
        assertNoCallCarries('registry-secret-value')
    }

    @Test
    void aFailedNodeChangeReleasesNothing() {
        nodesFail = [exit: 1, error: [category: 'failed', message: '1 host(s) failed: gpu-h800-01',
                                      hint: 'failed hosts stay cordoned; fix them and run again']]

        Map build = release(APP_ENV: 'staging', APP_NODE_CHANGE: 'all', APP_NODE_LIMIT: 'gpu_h800')

        assertEquals('FAILURE', build.result)
        assertTrue(build.error, build.error.startsWith('[updateGpuNodes] 1 host(s) failed: gpu-h800-01 (failed)'))
        assertEquals(['nodes update'], calls*.command)
        assertTrue('staging asks nobody', inputs.isEmpty())
        assertEquals('deploy/inventory/staging', calls[0].params.inventory)
        List<String> stages = ['Update GPU nodes', 'Node change', 'GPU headroom', 'Release']
        List<Map> logged = shim.stageLog.findAll { it.stage in stages }
        assertEquals(stages, logged*.stage)
        assertEquals(['FAILURE', 'FAILURE', 'skipped (earlier failure)', 'skipped (earlier failure)'], logged*.status)
    }

    @Test
    void withoutANodeChangeNoNodeIsTouched() {
        ['none', null].each { String change ->
            calls.clear()
            Map build = release(APP_ENV: 'staging', APP_NODE_CHANGE: change)
            assertEquals(build.error, 'SUCCESS', build.result)
            assertEquals(['headroom check', 'release promote', 'release promote'], calls*.command)
        }
    }

}
