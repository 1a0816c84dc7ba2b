package org.gpuops

import static org.junit.Assert.assertEquals
import static org.junit.Assert.assertFalse
import static org.junit.Assert.assertTrue

import org.junit.Test

/** pruneImages: the CLI call it makes, its parameters, credentials as environment only, a refusal. */
class PruneImagesTest extends GpuOpsPipelineTest {

    static final List<String> WORDS = ['image', 'prune']
    static final Map PLAN = [dry_run: true, state: 'planned', deleted: 0, kept: 12,
                             repositories: [[repository: 'harbor.example.com/ai/infer', deleted: []]]]
    static final Map REFUSED = [
        message : 'production (ai/infer) is being released by jenkins/pid-7 since 03:00:01: lock ai/gpuops-release-infer; nothing deleted',
        category: 'gate-refused',
        hint    : 'wait for it to finish',
    ]

    @Test
    void sendsOnlyWhatTheUserSetAsTheCliNamesIt() {
        cliSucceeds(WORDS, PLAN)

        Object result = runStep('pruneImages', [dryRun: true, keepLast: 20, keepTags: ['release-*'],
                                                repositories: ['harbor.example.com/ai/infer']])

        assertEquals(PLAN, result)
        assertEquals("'gpuops' 'image' 'prune'", commandCalls().first().script)
        assertEquals([dry_run: true, keep_last: 20, keep_tags: ['release-*'],
                      repositories: ['harbor.example.com/ai/infer']], paramsOfLastCall())
        assertTrue('no credentials without credential ids', boundVariables.isEmpty())
        assertJobStatusSuccess()
    }

    @Test
    void kubeconfigAndRegistryCredentialsReachTheCliOnlyAsEnvironment() {
        cliSucceeds(WORDS, PLAN)
        credentialStore.'prod-kubeconfig' = [content: 'apiVersion: v1\nusers: [{user: {token: kube-secret-token}}]']
        credentialStore.'harbor-pruner' = [username: 'robot$pruner', password: 'harbor-secret-pw']

        runStep('pruneImages', [kubeconfigCredentialsId: 'prod-kubeconfig', registryCredentialsId: 'harbor-pruner'])

        assertEquals([['KUBECONFIG', 'GPUOPS_REGISTRY_USERNAME', 'GPUOPS_REGISTRY_PASSWORD']], boundVariables)
        String params = files.get(commandCalls().first().env.GPUOPS_PARAMS_FILE)
        assertFalse(params, params.contains('kube-secret-token') || params.contains('harbor-secret-pw'))
        assertFalse(commandCalls().first().script.contains('harbor-secret-pw'))
    }

    @Test
    void aRefusalFailsTheBuildOrMarksItUnstable() {
        cliFails(WORDS, 3, REFUSED, [result: PLAN])

        assertTrue(runStepExpectingError('pruneImages', [:]).startsWith('[pruneImages] production (ai/infer) is ' +
            'being released by'))
        assertTrue(unstableMessages.isEmpty())

        cliFails(WORDS, 3, REFUSED, [result: PLAN])
        assertEquals(PLAN, runStep('pruneImages', [onRefused: 'unstable']))
        assertEquals(1, unstableMessages.size())
        assertJobStatusUnstable()
    }

    @Test
    void anUnknownParameterFailsBeforeTheCliRuns() {
        String message = runStepExpectingError('pruneImages', [keepLastt: 3])

        assertTrue(message, message.contains('keepLastt'))
        assertTrue(commandCalls().isEmpty())
    }
}
