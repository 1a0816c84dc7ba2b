package org.gpuops

import static org.junit.Assert.assertEquals
import static org.junit.Assert.assertTrue
import static org.junit.Assert.fail

import org.junit.Test

/**
 * Jenkinsfile.example's node change: the fleet's lock is the stage's option, taken before the
 * stage's agent (a waiting build holds no pod), one lock (the step takes no second one); and
 * the node change's approval is never the requester's (four eyes, S-27).
 */
class JenkinsfileFleetLockTest extends RecordedJenkinsfileTest {

    static final String FLEET = 'gpuops-fleet:inventory:deploy/inventory/production'

    @Test
    void theFleetLockIsTakenBeforeTheAgentAndOnlyOnce() {
        Map build = release(APP_ENV: 'production', APP_NODE_CHANGE: 'driver', APP_NODE_LIMIT: 'gpu_h800')

        assertEquals(build.error, 'SUCCESS', build.result)
        Map nodes = calls.find { it.command == 'nodes update' }
        Map agent = agents.find { it.node == nodes.node }
        assertEquals('the lock is held when the agent is taken', FLEET, agent.lock)
        assertEquals('one fleet lock (the stage\'s), then the release\'s', [FLEET, LOCK], lockedResources)
        assertEquals(FLEET, FleetLock.name(inventory: './deploy/inventory/production/'))
        assertTrue(echoed.every { !it.contains('on the agent') })
    }

    @Test
    void theStagesLockNameCannotBeSpoofedWithACommaOrSpaces() {
        ['x,gpuops-fleet:inventory:deploy/inventory/production', 'deploy/inventory/production ',
         'deploy/inventory/prod uction', 'deploy/inventory/production\t'].each { String inventory ->
            try {
                FleetLock.name(inventory: inventory)
                fail("${inventory}: a lock name")
            } catch (IllegalArgumentException e) {
                assertTrue(e.message, e.message.startsWith('inventory \'') &&
                    e.message.contains("must be a path of letters, digits, '.', '_' and '-'") ||
                    e.message.contains('no control characters'))
            }
        }
        assertEquals('one exact name, never split', [FLEET + ',x'], FleetLock.held(FLEET + ',x'))
    }

    @Test
    void theRequesterCannotApproveTheNodeChange() {
        startedBy(approver)

        Map build = release(APP_ENV: 'production', APP_NODE_CHANGE: 'driver', APP_NODE_LIMIT: 'gpu_h800')

        assertEquals('FAILURE', build.result)
        String expected = "[Approve the node change] ${approver} cannot approve what ${approver} requested " +
            '(four eyes: the requester never approves; someone else among the approvers must): nothing was ' +
            'changed (gate-refused)'
        assertEquals(expected, build.error)
        assertEquals('GPUOPS_APPROVER', inputs[0].submitterParameter)
        assertTrue('no node touched, no lock taken', calls.isEmpty() && lockedResources.isEmpty())
    }

}
