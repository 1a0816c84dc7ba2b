package org.gpuops

import static org.junit.Assert.assertEquals
import static org.junit.Assert.assertFalse
import static org.junit.Assert.assertNull
import static org.junit.Assert.assertTrue

import groovy.json.JsonOutput
import groovy.json.JsonSlurperClassic
import org.junit.Before
import org.junit.Test

/**
 * promoteTag with a progressive strategy (issue 20): the steps' table after each CLI call, and
 * each `approval` step the release pauses at: an `input` outside any agent and inside the
 * target's lock, submitter = the step's approvers, timeout = its timeout_minutes, four eyes;
 * then `release resume` on an agent (approved), or `release resume --reject` (refused, timed
 * out, four eyes) and the build stops. The CLI's answers are its result documents (gpuops
 * describe: `steps`, `paused` with the step's index from 0; numbered from 1 where shown, as the
 * CLI's own lines do); `release resume --reject` restores (the record ends `failed`, exit 3).
 * Where nobody answered (a timeout, four eyes, no requester) the step sends no --approved-by
 * with --reject, as the design has it (section 5; the CLI takes a rejection from nobody and four
 * eyes never refuses it), and fails saying the release stays paused when the CLI does not
 * reject (REJECT_REFUSED, or the cluster unreachable).
 */
class PromoteTagStepsTest extends GpuOpsPipelineTest {

    static final String LOCK = 'gpuops-release 127.0.0.1:6443/ai/infer'
    static final List<String> WHO = ['requested_by', 'approved_by', 'reject', 'reason']

    Map plan = [state: 'planned', action: 'promote', environment: 'production',
                approval: [required: false, approvers: [], timeout_minutes: 60],
                lock: [resource: LOCK], wanted: [tag: '1.5.0', digest: 'sha256:cd']]
    /** The CLI's answers to the release and to each `release resume`, in order: [result:] or
     *  [exit:, error:, verdict:, result:]. */
    Map promoted
    List<Map> resumed = []
    /** Every CLI call: [command:, params:, node:, lock:, env:]. */
    List<Map> calls = []

    @Before
    void cliAnswersTheRelease() {
        env.remove('WORKSPACE')
        promoted = [result: done('succeeded', [replicas(0, 'passed'), pause(1), analysis(2, 'passed'), all(3)])]
        ['promote', 'resume'].each { String word ->
            onSh(commandScript(['release', word])) { Map call -> answer(word, call) }
        }
    }

    protected int answer(String word, Map call) {
        Map params = (Map) new JsonSlurperClassic().parseText(files.get(call.env.GPUOPS_PARAMS_FILE))
        calls.add([command: word, params: params, node: call.env.NODE_NAME, lock: call.lock, env: call.env])
        Map reply
        if (word == 'promote') {
            reply = params.dry_run ? [result: plan] : promoted
        } else {
            assert resumed: "an unexpected release resume: ${params}"
            reply = resumed.remove(0)
        }
        if (reply.exit) {
            files.put(call.env.GPUOPS_ERROR_FILE, JsonOutput.toJson([ok: false, command: "release ${word}",
                verdict: reply.verdict, error: reply.error + [exit_code: reply.exit], result: reply.result]))
            return reply.exit as int
        }
        files.put(call.env.GPUOPS_RESULT_FILE,
            JsonOutput.toJson([ok: true, command: "release ${word}", verdict: 'ok', result: reply.result]))
        return 0
    }

    // ---- the CLI's documents (design section 5) -------------------------------------------

    static Map replicas(int index, String state) {
        return [index: index, kind: 'replicas', state: state, started: "2026-05-04T10:0${index}:00Z",
                finished: "2026-05-04T10:0${index}:30Z", detail: '1 of 4 replicas on the canary infer-canary']
    }

    static Map pause(int index) {
        return [index: index, kind: 'pause', state: 'passed', started: "2026-05-04T10:0${index}:00Z",
                finished: "2026-05-04T10:0${index}:30Z", detail: 'paused 30 s']
    }

    static Map analysis(int index, String verdict) {
        List<Map> measurements = (1..3).collect { int i ->
            [at: "2026-05-04T10:0${index}:${i}0Z", verdict: verdict == 'failed' && i > 1 ? 'failed' : 'passed',
             value: verdict == 'failed' && i > 1 ? 0.3 : 0.01, detail: 'namespace="ai"']
        }
        return [index: index, kind: 'analysis', state: verdict, started: "2026-05-04T10:0${index}:00Z",
                finished: "2026-05-04T10:0${index}:30Z",
                detail: verdict == 'failed' ? 'error rate 0.3 > max 0.05' : null,
                name: 'error-rate', provider: 'prometheus', measurements: measurements,
                failures: measurements.count { it.verdict == 'failed' }, verdict: verdict]
    }

    static Map approval(int index, String state) {
        return [index: index, kind: 'approval', state: state, started: "2026-05-04T10:0${index}:00Z",
                finished: state == 'paused' ? null : "2026-05-04T10:0${index}:40Z", detail: null]
    }

    static Map all(int index) {
        return [index: index, kind: 'all', state: 'passed', started: "2026-05-04T10:0${index}:00Z",
                finished: "2026-05-04T10:0${index}:50Z", detail: '4 of 4 replicas ready; canary removed']
    }

    /** A document as the step reads it back: plain JSON values (Strings, not GStrings). */
    static Map plain(Map document) {
        return (Map) new JsonSlurperClassic().parseText(JsonOutput.toJson(document))
    }

    static Map done(String state, List<Map> steps) {
        return plain([state: state, action: 'promote', environment: 'production', lock: [resource: LOCK],
                wanted: [tag: '1.5.0', digest: 'sha256:cd', image: '127.0.0.1:5000/ai/infer', model: null],
                release: [number: 8, tag: '1.5.0'], steps: steps])
    }

    static Map paused(int step, List<String> approvers, int minutes, List<Map> steps) {
        return done('paused', steps) + plain([paused: [step: step, approvers: approvers, timeout_minutes: minutes,
                                                        record: 8]])
    }

    /** `release resume --reject`'s answer: the previous release restored (the record ends
     *  `failed`), exit 3, verdict refused; `step` its index. */
    static Map restored(int step, List<Map> steps, String by = null) {
        String detail = by ? "rejected by ${by}" : 'rejected'
        return [exit: 3, verdict: 'refused', result: done('failed', steps),
                error: [category: 'gate-refused', hint: 'release again when it may go on',
                        message: "release #8 (1.5.0) to production failed at step ${step + 1} (approval): " +
                            "${detail}; rolled back to #7 1.4.0".toString()]]
    }

    /** What `release resume --reject` gets from the CLI when the environments file lost the
     *  strategy meanwhile (exit 2, before any cluster is read: the release stays paused). */
    static final Map REJECT_REFUSED = [exit: 2, verdict: 'failed', result: null,
        error: [category: 'invalid-input', field: 'environment',
                message: 'gpuops-release.yaml: environment production has no strategy: none of its releases ' +
                    'waits on an approval step',
                hint: "see 'gpuops release resume --help'"]].asImmutable()

    List<Map> resumes() {
        return calls.findAll { it.command == 'resume' }
    }

    static Map whoOf(Map call) {
        return call.params.findAll { it.key in WHO }
    }

    /** Runs promoteTag expecting it to stop; returns what it threw. */
    Throwable stopped(Map config) {
        try {
            runStep('promoteTag', config)
        } catch (PipelineFailure failure) {
            return failure
        }
        throw new AssertionError((Object) 'promoteTag was expected to stop, but it succeeded')
    }

    static final Map CONFIG = [environment: 'production', tag: '1.5.0', kubeconfigCredentialsId: 'kube',
                               registryCredentialsId: 'harbor'].asImmutable()

    @Before
    void credentials() {
        credentialStore.kube = [content: 'apiVersion: v1\nusers: [{user: {token: kube-secret-token}}]']
        credentialStore.harbor = [username: 'robot$release', password: 'harbor-secret-pw']
    }

    // ---- no approval step ----------------------------------------------------------------

    @Test
    void aStrategyWithoutApprovalShowsItsStepsAfterTheRelease() {
        Object result = runStep('promoteTag', CONFIG)

        assertEquals(promoted.result, result)
        assertEquals(['promote', 'promote'], calls*.command)
        assertTrue('no approval: nobody is asked', inputs.isEmpty())
        assertEquals([
            '[promoteTag] release #8: succeeded',
            '  #    STEP      STATE   STARTED               FINISHED              DETAIL',
            '  1    replicas  passed  2026-05-04T10:00:00Z  2026-05-04T10:00:30Z  1 of 4 replicas on the canary ' +
                'infer-canary',
            '  2    pause     passed  2026-05-04T10:01:00Z  2026-05-04T10:01:30Z  paused 30 s',
            '  3    analysis  passed  2026-05-04T10:02:00Z  2026-05-04T10:02:30Z  error-rate (prometheus): 0 of 3 ' +
                'measurements failed; verdict passed',
            '  all  all       passed  2026-05-04T10:03:00Z  2026-05-04T10:03:50Z  4 of 4 replicas ready; canary ' +
                'removed',
        ].join('\n'), echoed.last())
        assertEquals(1, echoed.size())
        assertJobStatusSuccess()
    }

    @Test
    void aReleaseWithoutStepsShowsNoTable() {
        promoted = [result: [state: 'succeeded', release: [number: 8, tag: '1.5.0']]]
        runStep('promoteTag', CONFIG)
        assertTrue(echoed.toString(), echoed.isEmpty())
    }

    @Test
    void aFailedStepIsShownThenTheBuildFailsWithTheCliMessage() {
        promoted = [exit: 1, verdict: 'failed', result: done('failed', [replicas(0, 'passed'), analysis(1, 'failed')]),
                    error: [category: 'failed', message: 'release #8 (1.5.0) to production failed at step 1 ' +
                        '(analysis error-rate: 2 of 3 measurements failed); restored #7 1.4.0']]

        Throwable failure = stopped(CONFIG)

        assertEquals('[promoteTag] release #8 (1.5.0) to production failed at step 1 (analysis error-rate: 2 of 3 ' +
            'measurements failed); restored #7 1.4.0 (failed)', failure.message)
        String table = echoed.last()
        assertTrue(table, table.startsWith('[promoteTag] release #8: failed\n'))
        assertTrue(table, table.contains('  2  analysis  failed  2026-05-04T10:01:00Z  2026-05-04T10:01:30Z  ' +
            'error-rate ' +
            '(prometheus): 2 of 3 measurements failed; verdict failed; error rate 0.3 > max 0.05'))
        assertJobStatusFailure()
    }

    // ---- one approval step -----------------------------------------------------------------

    @Test
    void anApprovalStepIsAskedOutsideAnyAgentInsideTheLockThenResumedOnAnAgent() {
        startedBy('alice')
        approver = 'bob'
        List<Map> before = [replicas(0, 'passed'), analysis(1, 'passed'), approval(2, 'paused')]
        promoted = [result: paused(2, ['release-managers', 'carol'], 45, before)]
        Map finished = done('succeeded', before.take(2) + [approval(2, 'passed'), all(3)])
        resumed = [[result: finished]]

        Object result = runStep('promoteTag', CONFIG + [reason: 'weekly', context: 'prod'])

        assertEquals(finished, result)
        assertEquals(['promote', 'promote', 'resume'], calls*.command)
        assertEquals(1, inputs.size())
        Map asked = inputs[0]
        assertFalse('no agent is held while a person decides', asked.agentHeld)
        assertEquals('a paused release still holds its target', LOCK, asked.lock)
        assertEquals('release-managers,carol', asked.submitter)
        assertEquals('GPUOPS_APPROVER', asked.submitterParameter)
        assertEquals('Continue', asked.ok)
        assertEquals('Release #8 (1.5.0 to production) is paused at step 3 (approval): continue with its remaining ' +
            'steps? Requested by alice, who cannot approve it. Abort, or no answer within 45 minutes, restores the ' +
            'previous release.', asked.message)
        assertEquals([[time: 45, unit: 'MINUTES']], timeouts)
        // resume: the release's environment and cluster options, who asked and who approved; nothing else
        assertEquals([environment: 'production', context: 'prod', requested_by: ['alice'], approved_by: 'bob'],
            resumes()[0].params)
        assertEquals('on an agent again, with the release lock', LOCK, resumes()[0].lock)
        assertEquals(['gpuops-1', 'gpuops-2', 'gpuops-3'], calls*.node)
        assertEquals(['gpuops-1', 'gpuops-2', 'gpuops-3'], checkouts)
        assertEquals([[resource: LOCK]], locks)
        // the table at the pause (for whoever approves) and after the release
        assertEquals(2, echoed.size())
        assertTrue(echoed[0], echoed[0].startsWith('[promoteTag] release #8: paused\n'))
        assertTrue(echoed[0], echoed[0].endsWith('  3  approval  paused  2026-05-04T10:02:00Z  ' +
            '-                     -'))
        assertTrue(echoed[1], echoed[1].contains('  3    approval  passed  2026-05-04T10:02:00Z  ' +
            '2026-05-04T10:02:40Z  -'))
        assertJobStatusSuccess()
    }

    @Test
    void theProductionApprovalOfTodayComesFirstAndTheStepsApprovalAfter() {
        plan.approval = [required: true, approvers: ['release-managers'], timeout_minutes: 30]
        promoted = [result: paused(2, ['sre-leads'], 20, [replicas(0, 'passed'), pause(1), approval(2, 'paused')])]
        resumed = [[result: done('succeeded', [])]]
        answers = ['bob', 'carol']

        runStep('promoteTag', CONFIG)

        assertEquals(['release-managers', 'sre-leads'], inputs*.submitter)
        assertEquals('the first before the lock (nothing changed yet), the second inside it',
            [null, LOCK], inputs*.lock)
        assertEquals([false, false], inputs*.agentHeld)
        assertEquals([[time: 30, unit: 'MINUTES'], [time: 20, unit: 'MINUTES']], timeouts)
        assertEquals('bob', calls[1].params.approved_by)
        assertEquals([requested_by: ['developer'], approved_by: 'carol'], whoOf(resumes()[0]))
    }

    @Test
    void aRefusedApprovalRejectsTheReleaseWhichRestoresThePreviousAndTheBuildIsAborted() {
        List<Map> before = [replicas(0, 'passed'), approval(1, 'paused')]
        promoted = [result: paused(1, ['release-managers'], 30, before)]
        resumed = [restored(1, before.take(1) + [approval(1, 'failed')], 'carol')]
        answers = [[abortedBy: 'carol']]

        Throwable failure = stopped(CONFIG)

        assertTrue('the input\'s own interruption: ABORTED as Jenkins makes it', failure instanceof InputRejected)
        assertEquals('who pressed Abort answered the step', [[requested_by: ['developer'], approved_by: 'carol',
            reject: true, reason: 'approval step 2 in Jenkins: not approved: Rejected by carol']],
            resumes().collect { whoOf(it) })
        assertEquals('production', resumes()[0].params.environment)
        assertEquals('the reject runs on an agent, under the lock',
            ['gpuops-3', LOCK], [resumes()[0].node, resumes()[0].lock])
        assertEquals('[promoteTag] not approved: Rejected by carol: release #8 (1.5.0) to production failed at ' +
            'step 2 (approval): rejected by carol; rolled back to #7 1.4.0 (gate-refused)', echoed.last())
        assertTrue(echoed[1], echoed[1].startsWith('[promoteTag] release #8: failed\n'))
        assertTrue(echoed[1], echoed[1].contains('  2  approval  failed'))
    }

    @Test
    void anApprovalNobodyGivesInItsTimeIsRejectedWithoutAnApprover() {
        // the design's contract (section 5): --reject needs nobody who answered
        promoted = [result: paused(1, ['release-managers'], 15, [replicas(0, 'passed'), approval(1, 'paused')])]
        resumed = [restored(1, [])]
        approver = null

        Throwable failure = stopped(CONFIG + [approvalTimeoutMinutes: 600])

        assertEquals('Timeout has been exceeded', failure.message)
        assertEquals('the step\'s own timeout_minutes', [[time: 15, unit: 'MINUTES']], timeouts)
        assertEquals('nobody answered: no approver is made up', [requested_by: ['developer'], reject: true,
            reason: 'approval step 2 in Jenkins: not approved: Timeout has been exceeded'], whoOf(resumes()[0]))
        assertEquals('[promoteTag] not approved: Timeout has been exceeded: release #8 (1.5.0) to production ' +
            'failed at step 2 (approval): rejected; rolled back to #7 1.4.0 (gate-refused)', echoed.last())
    }

    @Test
    void whereTheCliRefusesTheRejectTheBuildFailsSayingTheReleaseStaysPaused() {
        promoted = [result: paused(1, ['release-managers'], 15, [replicas(0, 'passed'), approval(1, 'paused')])]
        resumed = [REJECT_REFUSED]
        approver = null

        Throwable failure = stopped(CONFIG)

        assertEquals('[promoteTag] not approved: Timeout has been exceeded; release #8 could not be rejected: ' +
            'environment: gpuops-release.yaml: environment production has no strategy: none of its releases ' +
            "waits on an approval step (invalid-input)\nHint: see 'gpuops release resume " +
            "--help'\nIt stays paused, its canary running, until `gpuops release resume --reject` or the next " +
            '`release promote` of the environment restores the previous release.', failure.message)
        assertJobStatusFailure()
    }

    // ---- several approval steps --------------------------------------------------------------

    @Test
    void twoApprovalStepsInARowAreEachAskedAndResumed() {
        startedBy('alice')
        List<Map> first = [replicas(0, 'passed'), approval(1, 'paused')]
        List<Map> second = [replicas(0, 'passed'), approval(1, 'passed'), replicas(2, 'passed'), approval(3, 'paused')]
        promoted = [result: paused(1, ['release-managers'], 30, first)]
        Map finished = done('succeeded', second.take(3) + [approval(3, 'passed'), all(4)])
        resumed = [[result: paused(3, ['sre-leads', 'dave'], 90, second)], [result: finished]]
        answers = ['bob', 'dave']

        Object result = runStep('promoteTag', CONFIG)

        assertEquals(finished, result)
        assertEquals(['promote', 'promote', 'resume', 'resume'], calls*.command)
        assertEquals(['release-managers', 'sre-leads,dave'], inputs*.submitter)
        assertTrue(inputs[0].message,
            inputs[0].message.startsWith('Release #8 (1.5.0 to production) is paused at step 2 (approval)'))
        assertTrue(inputs[1].message,
            inputs[1].message.startsWith('Release #8 (1.5.0 to production) is paused at step 4 (approval)'))
        assertEquals([[time: 30, unit: 'MINUTES'], [time: 90, unit: 'MINUTES']], timeouts)
        assertEquals([false, false], inputs*.agentHeld)
        assertEquals([LOCK, LOCK], inputs*.lock)
        assertEquals([[requested_by: ['alice'], approved_by: 'bob'], [requested_by: ['alice'], approved_by: 'dave']],
            resumes().collect { whoOf(it) })
        assertEquals('one lock around the release and both approvals', 1, locks.size())
        assertEquals('an agent per CLI call, none kept', ['gpuops-1', 'gpuops-2', 'gpuops-3', 'gpuops-4'], calls*.node)
        assertEquals(3, echoed.size())
        assertJobStatusSuccess()
    }

    @Test
    void theSecondApprovalRefusedAfterTheFirstWasGiven() {
        promoted = [result: paused(1, ['release-managers'], 30, [])]
        resumed = [[result: paused(3, ['release-managers'], 30, [])], restored(3, [], 'carol')]
        answers = ['bob', [abortedBy: 'carol']]

        Throwable failure = stopped(CONFIG)

        assertTrue(failure instanceof InputRejected)
        assertEquals([[requested_by: ['developer'], approved_by: 'bob'],
                      [requested_by: ['developer'], approved_by: 'carol', reject: true,
                       reason: 'approval step 4 in Jenkins: not approved: Rejected by carol']],
            resumes().collect { whoOf(it) })
    }

    // ---- four eyes -------------------------------------------------------------------------------

    @Test
    void theRequesterTryingToApproveRejectsTheRelease() {
        startedBy('alice')
        promoted = [result: paused(2, ['release-managers'], 30, [])]
        resumed = [restored(2, [])]
        answers = ['Alice']

        Throwable failure = stopped(CONFIG)

        String refusal = 'Alice cannot approve what alice requested (four eyes: the requester never approves; ' +
            'someone else among the approvers must)'
        assertEquals(("[promoteTag] ${refusal}: release #8 (1.5.0) to production failed at step 3 (approval): " +
            'rejected; rolled back to #7 1.4.0 (gate-refused)').toString(), failure.message)
        assertEquals('the requester is not sent as who answered', [[requested_by: ['alice'], reject: true,
            reason: "approval step 3 in Jenkins: ${refusal}".toString()]], resumes().collect { whoOf(it) })
        assertEquals(1, inputs.size())
        assertJobStatusFailure()
    }

    @Test
    void withNoRequesterNobodyIsAskedAndTheReleaseIsRejected() {
        buildCauses = [[_class: 'hudson.triggers.TimerTrigger$TimerTriggerCause', shortDescription: 'Started by timer']]
        promoted = [result: paused(2, ['release-managers'], 30, [])]
        resumed = [restored(2, [])]

        Throwable failure = stopped(CONFIG)

        assertTrue(failure.message, failure.message.startsWith('[promoteTag] four eyes needs to know who asked for ' +
            'this release: start it as a user'))
        assertTrue(failure.message, failure.message.endsWith('rejected; rolled back to #7 1.4.0 (gate-refused)'))
        assertTrue('nobody to compare with: no input', inputs.isEmpty())
        assertEquals([[reject: true, reason: 'approval step 3 in Jenkins: ' + FourEyes.NO_REQUESTER]],
            resumes().collect { whoOf(it) })
    }

    // ---- what the CLI says after an approval ----------------------------------------------------

    @Test
    void aStepFailingAfterTheApprovalFailsTheBuildWithTheCliMessage() {
        promoted = [result: paused(1, ['release-managers'], 30, [])]
        resumed = [[exit: 1, verdict: 'failed', result: done('failed', [approval(1, 'passed'), analysis(2, 'failed')]),
                    error: [category: 'failed', message: 'release #8 failed at step 3; rolled back to #7 1.4.0']]]

        Throwable failure = stopped(CONFIG)

        assertEquals('[promoteTag] release #8 failed at step 3; rolled back to #7 1.4.0 (failed)', failure.message)
        assertTrue(echoed.last(), echoed.last().contains('  3  analysis  failed'))
        assertEquals(1, resumes().size())
    }

    @Test
    void aRejectTheCliCannotCarryOutFailsTheBuildSayingTheReleaseStaysPaused() {
        promoted = [result: paused(1, ['release-managers'], 30, [])]
        resumed = [[exit: 4, error: [category: 'unreachable', message: 'https://127.0.0.1:6443: connection refused']]]
        answers = [[abortedBy: 'carol']]

        Throwable failure = stopped(CONFIG)

        assertEquals('[promoteTag] not approved: Rejected by carol; release #8 could not be rejected: ' +
            'https://127.0.0.1:6443: connection refused (unreachable)\nIt stays paused, its canary running, until ' +
            '`gpuops release resume --reject` or the next `release promote` of the environment restores the ' +
            'previous release.', failure.message)
        assertFalse('nothing claims a restore', echoed.any { it.contains('rolled back') })
    }

    @Test
    void aReleaseSomeoneElseChangedWhileItWaitedFailsWithTheCliMessage() {
        promoted = [result: paused(1, ['release-managers'], 30, [])]
        resumed = [[exit: 1, verdict: 'failed', result: done('aborted', []), error: [category: 'failed',
            message: 'release #8 aborted: infer was changed by kubectl-set while the release waited on its approval']]]
        answers = [[abortedBy: 'carol']]

        Throwable failure = stopped(CONFIG)

        assertEquals('[promoteTag] release #8 aborted: infer was changed by kubectl-set while the release waited on ' +
            'its approval (failed)', failure.message)
        assertFalse('no claim of a restore or of a paused release',
            echoed.any { it.contains('rolled back') || it.contains('stays paused') })
    }

    @Test
    void aRejectFourEyesRefusesRestoresNothingAndSaysSo() {
        // the CLI refuses before it reads the release (its result state refused, nothing restored)
        startedBy('alice')
        promoted = [result: paused(1, ['release-managers'], 30, [])]
        resumed = [[exit: 3, verdict: 'refused', result: [state: 'refused'], error: [category: 'gate-refused',
            message: 'production: alice cannot approve a release that alice requested (four eyes: the requester ' +
                'never approves)']]]
        answers = [[abortedBy: 'alice']]

        Throwable failure = stopped(CONFIG)

        assertTrue(failure.message, failure.message.startsWith('[promoteTag] not approved: Rejected by alice; ' +
            'release #8 could not be rejected: production: alice cannot approve'))
        assertTrue(failure.message, failure.message.endsWith('restores the previous release.'))
        assertEquals('alice', resumes()[0].params.approved_by)
    }

    @Test
    void theStepsAreNumberedFromOneAsTheCliSaysThemAndAReasonIsOneLine() {
        assertEquals('2', ReleaseSteps.row([index: 1, kind: 'pause', state: 'passed'])[0])
        assertEquals('all', ReleaseSteps.row([index: 4, kind: 'all', state: 'passed'])[0])
        assertEquals('a b c', ReleaseSteps.clean('a\nb\t\u0007c', 10))
        assertEquals('abcdefg...', ReleaseSteps.clean('abcdefghijkl', 10))
        assertEquals('Rejected by bob', ReleaseSteps.reasonOf(new InputRejected('bob')))
        assertEquals('bob', ReleaseSteps.rejecterOf(new InputRejected('bob')))
        assertNull(ReleaseSteps.rejecterOf(new PipelineFailure('Timeout has been exceeded')))
    }

    @Test
    void theResumeGetsTheReleasesCredentialsAsEnvironmentOnly() {
        promoted = [result: paused(1, ['release-managers'], 30, [])]
        resumed = [[result: done('succeeded', [])]]

        runStep('promoteTag', CONFIG)

        Map resume = resumes()[0]
        assertEquals('harbor-secret-pw', resume.env.GPUOPS_REGISTRY_PASSWORD)
        assertTrue(files.get(resume.env.KUBECONFIG).contains('kube-secret-token'))
        assertNull(resume.params.kubeconfig)
        assertNoCallCarries('harbor-secret-pw')
        assertNoCallCarries('kube-secret-token')
        files.findAll { it.key.endsWith('.params.json') }.each { String path, String text ->
            assertFalse(path, text.contains('harbor-secret-pw') || text.contains('kube-secret-token'))
        }
    }

}
