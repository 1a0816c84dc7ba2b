package org.gpuops

import static org.junit.Assert.assertEquals
import static org.junit.Assert.assertFalse
import static org.junit.Assert.assertTrue

import groovy.json.JsonOutput
import groovy.json.JsonSlurperClassic
import org.junit.Before
import org.junit.Test

/**
 * promoteTag: a dry run on an agent, the approval outside any agent (no executor held), the
 * release on an agent inside lock(<target>), credentials as environment only.
 */
class PromoteTagTest extends GpuOpsPipelineTest {

    static final List<String> WORDS = ['release', 'promote']
    static final String LOCK = 'gpuops-release 127.0.0.1:6443/ai/infer'

    /** What the CLI's dry run and release say, and the params of every call. */
    Map plan = [state: 'planned', action: 'promote', environment: 'production',
                approval: [required: true, approvers: ['release-managers', 'alice'], timeout_minutes: 45],
                lock: [resource: LOCK], wanted: [tag: '1.4.0', digest: 'sha256:ab']]
    Map released = [state: 'succeeded', release: [number: 7, tag: '1.4.0']]
    List<Map> calls = []

    @Before
    void cliAnswersDryRunAndRelease() {
        env.remove('WORKSPACE')  // outside node { } there is no workspace
        onSh(commandScript(WORDS)) { Map call -> answer(call) }
    }

    protected int answer(Map call) {
        Map params = (Map) new JsonSlurperClassic().parseText(files.get(call.env.GPUOPS_PARAMS_FILE))
        calls.add(params + [node: call.env.NODE_NAME, workspace: call.env.WORKSPACE])
        Map result = params.dry_run ? plan : released
        files.put(call.env.GPUOPS_RESULT_FILE,
            JsonOutput.toJson([ok: true, command: 'release promote', result: result]))
        return 0
    }

    @Test
    void plansThenAsksOutsideAnyAgentThenReleasesUnderTheLock() {
        Object result = runStep('promoteTag', [environment: 'production', tag: '1.4.0', reason: 'weekly'])

        assertEquals(released, result)
        assertEquals(2, calls.size())
        assertEquals([environment: 'production', tag: '1.4.0', reason: 'weekly', dry_run: true],
            calls[0].findAll { it.key in ['environment', 'tag', 'reason', 'dry_run', 'approved_by'] })
        assertEquals([environment: 'production', tag: '1.4.0', reason: 'weekly', approved_by: 'release-manager'],
            calls[1].findAll { it.key in ['environment', 'tag', 'reason', 'dry_run', 'approved_by'] })
        assertEquals(['gpuops-1', 'gpuops-2'], calls*.node)
        assertEquals('two agents, each with its own workspace', 2, calls*.workspace.unique().size())
        assertEquals(1, inputs.size())
        assertFalse('no executor is held while a person approves', inputs[0].agentHeld)
        assertEquals('release-managers,alice', inputs[0].submitter)
        assertEquals('GPUOPS_APPROVER', inputs[0].submitterParameter)
        assertTrue(inputs[0].message.toString(), inputs[0].message.startsWith('promote 1.4.0 to production?'))
        assertEquals([[time: 45, unit: 'MINUTES']], timeouts)
        assertEquals([[resource: LOCK]], locks)
        assertEquals(['gpuops-1', 'gpuops-2'], checkouts)
        assertJobStatusSuccess()
    }

    @Test
    void withoutAnApprovalRequirementNobodyIsAsked() {
        plan.approval = [required: false, approvers: [], timeout_minutes: 60]

        runStep('promoteTag', [environment: 'staging', tag: '1.4.0', agentLabel: 'gpu-release', checkout: false])

        assertTrue(inputs.isEmpty())
        assertEquals(['gpu-release-1', 'gpu-release-2'], calls*.node)
        assertFalse(calls[1].containsKey('approved_by'))
        assertTrue(checkouts.isEmpty())
        assertEquals([[resource: LOCK]], locks)
    }

    static final List<String> WHO = ['requested_by', 'approved_by', 'dry_run']

    @Test
    void theNodeChangeUpdateGpuNodesLeftInTheBuildGoesOnTheRecord() {
        env.GPUOPS_NODE_CHANGE = 'gpu-prod-7'

        runStep('promoteTag', [environment: 'production', tag: '1.4.0'])

        assertEquals('the dry run and the release', ['gpu-prod-7', 'gpu-prod-7'], calls*.node_change)
    }

    @Test
    void aNodeChangeGivenToTheStepWinsAndNoneIsSentWithoutOne() {
        env.GPUOPS_NODE_CHANGE = 'gpu-prod-7'
        runStep('promoteTag', [environment: 'production', tag: '1.4.0', nodeChange: 'gpu-prod-9'])
        assertEquals(['gpu-prod-9', 'gpu-prod-9'], calls*.node_change)

        calls.clear()
        env.remove('GPUOPS_NODE_CHANGE')
        runStep('promoteTag', [environment: 'production', tag: '1.4.0'])
        assertFalse(calls.any { it.containsKey('node_change') })
    }

    @Test
    void theRequesterAndTheApproverBothReachTheCli() {
        startedBy('alice')

        runStep('promoteTag', [environment: 'production', tag: '1.4.0'])

        assertEquals([requested_by: ['alice'], dry_run: true], calls[0].findAll { it.key in WHO })
        assertEquals([requested_by: ['alice'], approved_by: 'release-manager'], calls[1].findAll { it.key in WHO })
        assertEquals('GPUOPS_APPROVER', inputs[0].submitterParameter)
        String message = inputs[0].message
        assertTrue(message, message.contains('Requested by alice, who cannot approve it.'))
        assertJobStatusSuccess()
    }

    @Test
    void theRequestersOwnApprovalFailsTheStepBeforeTheRelease() {
        ['release-manager', 'Release-Manager'].each { String self ->
            calls.clear()
            locks.clear()
            startedBy('release-manager')
            approver = self

            String message = runStepExpectingError('promoteTag', [environment: 'production', tag: '1.4.0'])

            String expected = "[promoteTag] ${self} cannot approve what release-manager requested (four eyes: the " +
                'requester never approves; someone else among the approvers must): nothing was changed ' +
                '(gate-refused)'
            assertEquals(expected, message)
            assertEquals('only the dry run ran', [true], calls*.dry_run)
            assertTrue(locks.isEmpty())
        }
        assertJobStatusFailure()
    }

    @Test
    void anApproverWhoDiffersOnlyInCaseIsTheRequester() {
        startedBy('alice')
        approver = 'ALICE'

        String message = runStepExpectingError('promoteTag', [environment: 'production', tag: '1.4.0'])

        assertEquals('[promoteTag] ALICE cannot approve what alice requested (four eyes: the requester never ' +
            'approves; someone else among the approvers must): nothing was changed (gate-refused)', message)
        assertEquals('only the dry run ran', [true], calls*.dry_run)
        assertTrue(locks.isEmpty())
    }

    @Test
    void everyUserCauseAndEveryUpstreamBuildsUserIsARequester() {
        // queued identical requests merge into one build with several user causes; a release
        // started by `build job:` carries its upstream build's user
        startedBy('alice')
        buildCauses << [_class: 'hudson.model.Cause$UserIdCause', userId: 'carol']
        upstreamCauses = [[[_class: 'hudson.model.Cause$UserIdCause', userId: 'dave']]]
        ['carol', 'Dave'].each { String self ->
            calls.clear()
            approver = self

            String message = runStepExpectingError('promoteTag', [environment: 'production', tag: '1.4.0'])

            assertTrue(message, message.startsWith("[promoteTag] ${self} cannot approve what ${self.toLowerCase()} " +
                'requested (four eyes'))
            assertEquals([requested_by: ['alice', 'carol', 'dave'], dry_run: true], calls[0].findAll { it.key in WHO })
            assertEquals('only the dry run ran', 1, calls.size())
        }
        assertTrue(locks.isEmpty())
    }

    @Test
    void anUpstreamUserAloneIsTheRequester() {
        buildCauses = [[_class: 'org.jenkinsci.plugins.workflow.support.steps.build.BuildUpstreamCause',
                        shortDescription: 'Started by upstream project ai/nightly']]
        upstreamCauses = [[[_class: 'hudson.model.Cause$UserIdCause', userId: 'alice']]]
        approver = 'alice'

        String message = runStepExpectingError('promoteTag', [environment: 'production', tag: '1.4.0'])

        assertTrue(message, message.startsWith('[promoteTag] alice cannot approve what alice requested'))
        assertTrue(locks.isEmpty())
    }

    @Test
    void anApprovalWithNoRequesterIsRefusedBeforeAnyoneIsAsked() {
        ['hudson.triggers.TimerTrigger$TimerTriggerCause', 'hudson.model.Cause$RemoteCause'].each { String cause ->
            calls.clear()
            buildCauses = [[_class: cause, shortDescription: 'Started by a timer or a token']]

            String message = runStepExpectingError('promoteTag', [environment: 'production', tag: '1.4.0'])

            assertTrue(message, message.startsWith('[promoteTag] four eyes needs to know who asked for this ' +
                'release: start it as a user'))
            assertTrue(message, message.endsWith('nothing was changed (gate-refused)'))
            assertEquals('only the dry run ran', [true], calls*.dry_run)
            assertTrue(inputs.isEmpty() && locks.isEmpty())
        }
        assertJobStatusFailure()
    }

    @Test
    void technicalIdsNeitherApproveNorRequest() {
        ['anonymous', 'SYSTEM', 'system', 'Anonymous'].each { String id ->
            calls.clear()
            startedBy('alice')
            approver = id

            String message = runStepExpectingError('promoteTag', [environment: 'production', tag: '1.4.0'])

            String expected = "[promoteTag] ${id} is a technical id, not a person: it cannot approve (four eyes): " +
                'nothing was changed (gate-refused)'
            assertEquals(expected, message)
            assertEquals('only the dry run ran', [true], calls*.dry_run)
        }
        startedBy('SYSTEM')
        approver = 'bob'
        String message = runStepExpectingError('promoteTag', [environment: 'production', tag: '1.4.0'])
        assertTrue(message, message.startsWith('[promoteTag] four eyes needs to know who asked'))
        assertTrue(locks.isEmpty())
    }

    @Test
    void theCliRefusingTheRequestersApprovalFailsTheStep() {
        // the CLI's own check (exit 3 naming both), should a requester's approval reach it
        startedBy('alice')
        onSh(commandScript(WORDS)) { Map call ->
            Map params = (Map) new JsonSlurperClassic().parseText(files.get(call.env.GPUOPS_PARAMS_FILE))
            if (params.dry_run) {
                return answer(call)
            }
            calls.add(params)
            files.put(call.env.GPUOPS_ERROR_FILE, JsonOutput.toJson([ok: false, command: 'release promote',
                error: [message: "production: ${params.approved_by} cannot approve a release that " +
                    "${params.requested_by.join(', ')} requested (four eyes: the requester never approves)",
                        category: 'gate-refused', exit_code: 3], result: [state: 'refused']]))
            return 3
        }
        approver = 'bob'

        String message = runStepExpectingError('promoteTag', [environment: 'production', tag: '1.4.0'])

        assertTrue(message, message.startsWith('[promoteTag] production: bob cannot approve a release that alice ' +
            'requested (four eyes: the requester never approves)'))
        assertEquals([requested_by: ['alice'], approved_by: 'bob'], calls[1].findAll { it.key in WHO })
    }

    @Test
    void withoutAnApprovalOnlyTheRequesterIsSentAndATimerSendsNobody() {
        plan.approval = [required: false, approvers: [], timeout_minutes: 60]
        startedBy('alice')

        runStep('promoteTag', [environment: 'staging', tag: '1.4.0'])
        assertEquals([requested_by: ['alice']], calls[1].findAll { it.key in WHO })

        calls.clear()
        buildCauses = [[_class: 'hudson.triggers.TimerTrigger$TimerTriggerCause', shortDescription: 'Started by timer']]
        runStep('promoteTag', [environment: 'staging', tag: '1.4.0'])
        assertEquals([:], calls[1].findAll { it.key in WHO })
        assertTrue(inputs.isEmpty())
    }

    @Test
    void theTimeoutCanBeSetAndAnUnansweredApprovalStopsBeforeTheRelease() {
        approver = null

        String message = runStepExpectingError('promoteTag',
            [environment: 'production', tag: '1.4.0', approvalTimeoutMinutes: 5])

        assertEquals('Timeout has been exceeded', message)
        assertEquals([[time: 5, unit: 'MINUTES']], timeouts)
        assertEquals('only the dry run ran', 1, calls.size())
        assertTrue(locks.isEmpty())
    }

    @Test
    void aDryRunStopsAfterThePlan() {
        Object result = runStep('promoteTag', [environment: 'production', tag: '1.4.0', dryRun: true])

        assertEquals(plan, result)
        assertEquals(1, calls.size())
        assertTrue(inputs.isEmpty() && locks.isEmpty())
    }

    @Test
    void aRefusedGateFailsTheBuildBeforeAnyApprovalOrLock() {
        cliFails(WORDS, 3, [message: 'tag 9.9.9 does not exist in 127.0.0.1:5000/ai/infer', category: 'gate-refused',
                            hint: 'build and push it first (buildImage), or check the tag'])

        String message = runStepExpectingError('promoteTag', [environment: 'production', tag: '9.9.9'])

        assertEquals('[promoteTag] tag 9.9.9 does not exist in 127.0.0.1:5000/ai/infer (gate-refused)\n' +
            'Hint: build and push it first (buildImage), or check the tag', message)
        assertTrue(inputs.isEmpty() && locks.isEmpty())
        assertJobStatusFailure()
    }

    @Test
    void aFailedRolloutFailsTheBuildWithTheCliMessage() {
        onSh(commandScript(WORDS)) { Map call ->
            Map params = (Map) new JsonSlurperClassic().parseText(files.get(call.env.GPUOPS_PARAMS_FILE))
            if (params.dry_run) {
                return answer(call)
            }
            files.put(call.env.GPUOPS_ERROR_FILE, JsonOutput.toJson([ok: false, command: 'release promote',
                error: [message: 'release #8 (1.5.0) to production failed: pod infer-x cannot be scheduled; ' +
                    'rolled back to #7 1.4.0', category: 'failed', exit_code: 1], result: [state: 'failed']]))
            return 1
        }

        String message = runStepExpectingError('promoteTag', [environment: 'production', tag: '1.5.0'])

        assertTrue(message, message.startsWith('[promoteTag] release #8 (1.5.0) to production failed'))
        assertTrue(message, message.contains('rolled back to #7 1.4.0 (failed)'))
    }

    @Test
    void credentialsReachTheCliOnlyAsEnvironment() {
        credentialStore.kube = [content: 'apiVersion: v1\nusers: [{user: {token: kube-secret-token}}]']
        credentialStore.harbor = [username: 'robot$release', password: 'harbor-secret-pw']
        List<Map> seen = []
        onSh(commandScript(WORDS)) { Map call ->
            seen.add(call.env)
            return answer(call)
        }

        runStep('promoteTag', [environment: 'production', tag: '1.4.0',
                               kubeconfigCredentialsId: 'kube', registryCredentialsId: 'harbor'])

        seen.each { Map callEnv ->
            assertEquals('harbor-secret-pw', callEnv.GPUOPS_REGISTRY_PASSWORD)
            assertEquals('robot$release', callEnv.GPUOPS_REGISTRY_USERNAME)
            assertTrue(files.get(callEnv.KUBECONFIG).contains('kube-secret-token'))
        }
        assertEquals(2, seen.size())
        assertNoCallCarries('harbor-secret-pw')
        assertNoCallCarries('kube-secret-token')
        files.findAll { it.key.endsWith('.params.json') }.each { String path, String text ->
            assertFalse(path, text.contains('harbor-secret-pw') || text.contains('kube-secret-token'))
        }
    }

    @Test
    void itRefusesToRunInsideANodeOrToBeToldWhoApproved() {
        String inside = null
        runOnAgent('any') {
            inside = runStepExpectingError('promoteTag', [environment: 'production', tag: '1.4.0'])
        }
        assertTrue(inside, inside.startsWith('[promoteTag] call promoteTag outside node { }'))

        String told = runStepExpectingError('promoteTag', [environment: 'production', tag: '1.4.0', approvedBy: 'me'])
        assertTrue(told, told.startsWith('[promoteTag] approvedBy is not a parameter you set'))
        String asked = runStepExpectingError('promoteTag',
            [environment: 'production', tag: '1.4.0', requestedBy: 'bob'])
        assertTrue(asked, asked.startsWith('[promoteTag] requestedBy is not a parameter you set'))
        assertTrue('nothing ran', calls.isEmpty())
    }

    @Test
    void badParametersAreRefusedBeforeAnythingRuns() {
        Map<Map, String> cases = [
            ([tag: '1.4.0'])                                         : "parameter 'environment' is required",
            ([environment: 'prod', tag: '1', checkout: 'yes'])       : "parameter 'checkout' must be a Boolean",
            ([environment: 'prod', tag: '1', agentLabel: 7])         : "parameter 'agentLabel' must be a String",
            ([environment: 'prod', tag: '1', registryPassword: 'x']) : 'unknown parameter(s) registryPassword',
        ]
        cases.each { Map config, String expected ->
            String message = runStepExpectingError('promoteTag', config)
            assertTrue("${config}: ${message}", message.startsWith('[promoteTag] ') && message.contains(expected))
        }
        assertTrue(shCalls.isEmpty())
    }

}
