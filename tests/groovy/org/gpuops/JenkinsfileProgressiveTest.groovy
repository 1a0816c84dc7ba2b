package org.gpuops

import static org.junit.Assert.assertEquals
import static org.junit.Assert.assertTrue

import java.util.concurrent.TimeUnit
import org.junit.Before
import org.junit.Test

/**
 * Jenkinsfile.example's release job with a progressive strategy (issue 20), on the Declarative
 * shim (which fails any `input` asked on an agent, and enforces timeouts and submitters) with
 * the CLI's answers recorded as the design's result documents: the Release stage asks each
 * approval step outside any agent, with nothing shorter than the step's own timeout around it,
 * and resumes on an agent; a refused step stops the build ABORTED after the reject.
 */
class JenkinsfileProgressiveTest extends RecordedJenkinsfileTest {

    static final long MINUTE = TimeUnit.MINUTES.toMillis(1)

    /** The answers to `release resume`, in order. */
    List<Map> resumed = []

    /** `release resume --reject`: the previous release restored, the record ended `failed`. */
    static Map restored(String by) {
        return [exit: 3, result: [state: 'failed', release: [number: 4, tag: '44']],
                error: [category: 'gate-refused', message: "release #4 (44) to production failed at step 2 " +
                    "(approval): ${by ? "rejected by ${by}" : 'rejected'}; rolled back to #3 43"]]
    }

    static Map paused(int step, List<String> approvers, int minutes) {
        return [state: 'paused', environment: 'production', release: [number: 4, tag: '44'],
                wanted: [tag: '44', digest: 'sha256:cd', image: 'harbor.example.com/ai/infer', model: null],
                steps: [[index: 0, kind: 'replicas', state: 'passed', started: '2026-05-04T10:00:00Z',
                         finished: '2026-05-04T10:00:30Z', detail: '1 of 4 replicas on the canary'],
                        [index: step, kind: 'approval', state: 'paused', started: '2026-05-04T10:01:00Z',
                         finished: null, detail: null]],
                paused: [step: step, approvers: approvers, timeout_minutes: minutes, record: 4]]
    }

    @Before
    void aProgressiveStrategy() {
        shim.groups.put('carol', ['sre-leads'])
        answer(['release', 'promote']) { Map params ->
            params.dry_run ? [result: [state: 'planned', action: 'promote', environment: params.environment,
                                       approval: [required: false, approvers: [], timeout_minutes: 30],
                                       lock: [resource: LOCK], wanted: [tag: params.tag]]]
                : [result: paused(1, ['sre-leads'], 240)]
        }
        answer(['release', 'resume']) { Map params -> resumed.remove(0) }
    }

    @Test
    void theReleaseStageAsksTheApprovalStepOutsideAnyAgentAndResumesOnOne() {
        approver = 'carol'
        shim.approvalDelay = 239 * MINUTE  // carol answers a minute before the step's timeout
        resumed = [[result: [state: 'succeeded', release: [number: 4, tag: '44'], steps: []]]]

        Map built = release(APP_ENV: 'production')

        assertEquals(built.error, 'SUCCESS', built.result)
        assertEquals(['headroom check', 'release promote', 'release promote', 'release resume'], calls*.command)
        assertEquals([approved_by: 'carol', environment: 'production', link: env.BUILD_URL,
                      requested_by: ['developer']], calls.last().params.sort())
        assertEquals('the step\'s own 240 minutes, nothing shorter around it', [[240L]], timeoutsAtInput)
        assertEquals('an agent for each CLI call', ['gpuops', 'gpuops', 'gpuops', 'gpuops'], agents*.label)
        assertEquals('the resume under the release lock', LOCK, agents.last().lock)
        assertTrue(shim.refusedApprovals.isEmpty())
        assertTrue(echoed.join('\n'), echoed.contains('[promoteTag] release #4: paused\n' +
            '  #  STEP      STATE   STARTED               FINISHED              DETAIL\n' +
            '  1  replicas  passed  2026-05-04T10:00:00Z  2026-05-04T10:00:30Z  1 of 4 replicas on the canary\n' +
            '  2  approval  paused  2026-05-04T10:01:00Z  -                     -'))
        assertTrue(echoed.contains('release #4 of 44 to production: succeeded'))
    }

    @Test
    void anApprovalStepNobodyAllowedGivesEndsTheBuildAbortedAfterTheReject() {
        approver = 'mallory'  // not among the step's approvers: Jenkins refuses the answer
        resumed = [restored(null)]

        Map built = release(APP_ENV: 'production')

        assertEquals('ABORTED', built.result)
        assertEquals('Timeout has been exceeded', built.error)
        assertEquals([[user: 'mallory', submitter: 'sre-leads']], shim.refusedApprovals)
        assertEquals(TimeUnit.MINUTES.toMillis(240), shim.clock.now)
        Map reject = calls.last()
        assertEquals('release resume', reject.command)
        assertEquals([environment: 'production', link: env.BUILD_URL, reason: 'approval step 2 in Jenkins: not ' +
            'approved: Timeout has been exceeded', reject: true, requested_by: ['developer']], reject.params.sort())
        assertTrue(echoed.join('\n'), echoed.contains('[promoteTag] not approved: Timeout has been exceeded: ' +
            'release #4 (44) to production failed at step 2 (approval): rejected; rolled back to #3 43 (gate-refused)'))
        assertEquals(['ABORTED'], shim.stageLog.findAll { it.stage == 'Release' }*.status)
    }

    @Test
    void anAbortByAnApproverRejectsAtOnce() {
        answers = [[abortedBy: 'carol']]
        resumed = [restored('carol')]

        Map built = release(APP_ENV: 'production')

        assertEquals('ABORTED', built.result)
        assertEquals(0L, shim.clock.now)
        assertEquals('approval step 2 in Jenkins: not approved: Rejected by carol', calls.last().params.reason)
        assertEquals('carol', calls.last().params.approved_by)
        assertTrue(console.contains('Rejected by carol'))
    }

}
