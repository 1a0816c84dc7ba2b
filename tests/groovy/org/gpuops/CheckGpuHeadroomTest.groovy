package org.gpuops

import static org.junit.Assert.assertEquals
import static org.junit.Assert.assertFalse
import static org.junit.Assert.assertTrue

import org.junit.Test

/** checkGpuHeadroom: the CLI call it makes, its parameters, and shortage as failure or unstable. */
class CheckGpuHeadroomTest extends GpuOpsPipelineTest {

    static final List<String> WORDS = ['headroom', 'check']
    static final Map FITS = [
        fits   : true,
        classes: ['nvidia-h800': [allocatable: 16, requested: 10, free: 6, nodes_usable: 2]],
    ]
    static final Map SHORT = [
        fits   : false,
        classes: ['nvidia-h800': [allocatable: 16, requested: 15, free: 1, nodes_usable: 2]],
    ]
    static final Map SHORTAGE_ERROR = [
        message : 'not enough nvidia.com/gpu for 2 pod(s) x 4: class nvidia-h800 has 1 free (most on one node: 1)',
        category: 'gate-refused',
        hint    : 'free GPUs on nvidia-h800 or relax nodeSelector',
    ]
    static final String SHORTAGE_TEXT = '[checkGpuHeadroom] not enough nvidia.com/gpu for 2 pod(s) x 4: ' +
        'class nvidia-h800 has 1 free (most on one node: 1) (gate-refused)\n' +
        'Hint: free GPUs on nvidia-h800 or relax nodeSelector'

    @Test
    void runsHeadroomCheckWithDefaultsAndReturnsTheNumbers() {
        cliSucceeds(WORDS, FITS)

        Object result = runStep('checkGpuHeadroom', [gpusPerPod: 4])

        assertEquals(FITS, result)
        assertEquals([VERSION_SCRIPT, "'gpuops' 'headroom' 'check'"], shCalls*.script)
        assertEquals([gpus_per_pod: 4, pods: 1, node_selector: [:], tolerations: [], namespace: 'default',
                      resource: 'nvidia.com/gpu', reserve: 0, reserve_per_class: [:], group_by: 'accelerator'],
            paramsOfLastCall())
        assertTrue('no credentials without credential ids', boundVariables.isEmpty())
        assertJobStatusSuccess()
    }

    @Test
    void passesEveryParameterAsJson() {
        cliSucceeds(WORDS, FITS)
        List tolerations = [[key: 'dedicated', operator: 'Equal', value: 'training', effect: 'NoSchedule']]

        runStep('checkGpuHeadroom', [
            gpusPerPod: '2', pods: 3, nodeSelector: [accelerator: 'nvidia-h800', zone: 'b'], tolerations: tolerations,
            namespace: 'training', resource: 'nvidia.com/mig-1g.10gb', reserve: 2,
            reservePerClass: ['nvidia-l40s': 4], groupBy: 'nvidia.com/gpu.product',
        ])

        assertEquals([gpus_per_pod: 2, pods: 3, node_selector: [accelerator: 'nvidia-h800', zone: 'b'],
                      tolerations: tolerations, namespace: 'training', resource: 'nvidia.com/mig-1g.10gb',
                      reserve: 2, reserve_per_class: ['nvidia-l40s': 4], group_by: 'nvidia.com/gpu.product'],
            paramsOfLastCall())
    }

    @Test
    void aSelectorStringIsPassedAsIs() {
        cliSucceeds(WORDS, FITS)

        runStep('checkGpuHeadroom', [gpusPerPod: 1, nodeSelector: 'accelerator=nvidia-a100,zone=a'])

        assertEquals('accelerator=nvidia-a100,zone=a', paramsOfLastCall().node_selector)
        assertEquals("'gpuops' 'headroom' 'check'", commandCalls().first().script)
    }

    @Test
    void shortageFailsTheBuildByDefault() {
        cliFails(WORDS, 3, SHORTAGE_ERROR + [details: SHORT])

        assertEquals(SHORTAGE_TEXT, runStepExpectingError('checkGpuHeadroom', [gpusPerPod: 4, pods: 2]))
        assertJobStatusFailure()
        assertTrue(unstableMessages.isEmpty())
    }

    @Test
    void shortageMarksTheBuildUnstableWhenAskedAndReturnsTheNumbers() {
        cliFails(WORDS, 3, SHORTAGE_ERROR + [details: SHORT])

        Object result = runStep('checkGpuHeadroom', [gpusPerPod: 4, pods: 2, onShortage: 'unstable'])

        assertEquals(SHORT, result)
        assertEquals([SHORTAGE_TEXT], unstableMessages)
        assertJobStatusUnstable()
    }

    @Test
    void otherFailuresFailEvenWhenShortageIsOnlyUnstable() {
        cliFails(WORDS, 4, [message: 'cannot reach the Kubernetes API at https://127.0.0.1:6443: connection refused',
                            category: 'unreachable'])

        assertEquals('[checkGpuHeadroom] cannot reach the Kubernetes API at https://127.0.0.1:6443: ' +
            'connection refused (unreachable)',
            runStepExpectingError('checkGpuHeadroom', [gpusPerPod: 4, onShortage: 'unstable']))
        assertTrue(unstableMessages.isEmpty())
    }

    @Test
    void invalidInputFromTheCliFails() {
        cliFails(WORDS, 2, [message: "gpus_per_pod must be at least 1, got 0", category: 'invalid-input'])

        assertEquals('[checkGpuHeadroom] gpus_per_pod must be at least 1, got 0 (invalid-input)',
            runStepExpectingError('checkGpuHeadroom', [gpusPerPod: 0, onShortage: 'unstable']))
    }

    @Test
    void kubeconfigAndWebhookCredentialsReachTheCliOnlyAsEnvironment() {
        String webhook = 'https://hooks.example.invalid/T000/B000/XXXXsecretXXXX'
        credentialStore.kube = [content: 'apiVersion: v1\nusers: [{user: {token: kube-secret-token}}]']
        credentialStore.hook = [secret: webhook]
        cliFails(WORDS, 3, SHORTAGE_ERROR + [details: SHORT])

        runStep('checkGpuHeadroom', [gpusPerPod: 4, kubeconfigCredentialsId: 'kube', webhookCredentialsId: 'hook',
                                     onShortage: 'unstable'])

        Map call = commandCalls().first()
        assertEquals(webhook, call.env.GPUOPS_WEBHOOK_URL)
        assertTrue(files.get(call.env.KUBECONFIG).contains('kube-secret-token'))
        assertEquals([['KUBECONFIG', 'GPUOPS_WEBHOOK_URL']], boundVariables)
        assertNoCallCarries(webhook)
        assertNoCallCarries('kube-secret-token')
        assertFalse(files.get(call.env.GPUOPS_PARAMS_FILE).contains('XXXXsecretXXXX'))
    }

    @Test
    void aPlainWebhookUrlIsPassedAsEnvironment() {
        cliSucceeds(WORDS, FITS)

        runStep('checkGpuHeadroom', [gpusPerPod: 1, webhookUrl: 'http://127.0.0.1:8099/notify'])

        assertEquals('http://127.0.0.1:8099/notify', commandCalls().first().env.GPUOPS_WEBHOOK_URL)
        assertFalse(paramsOfLastCall().containsKey('webhook_url'))
        assertTrue(boundVariables.isEmpty())
    }

    @Test
    void badParametersAreRejectedBeforeTheCliRuns() {
        Map<Map, String> cases = [
            ([:])                                  : "parameter 'gpusPerPod' is required",
            ([gpusPerPod: 'two'])                   : "parameter 'gpusPerPod' must be an integer, got 'two' (String)",
            ([gpusPerPod: 1.5])                     :
                "parameter 'gpusPerPod' must be an integer, got '1.5' (BigDecimal)",
            ([gpusPerPod: 1, pods: [2]])            : "parameter 'pods' must be an integer",
            ([gpusPerPod: 1, onShortage: 'ignore']) :
                "parameter 'onShortage' must be one of 'fail', 'unstable', got 'ignore'",
            ([gpusPerPod: 1, nodeSelector: 5])      : "parameter 'nodeSelector' must be a Map or a String",
            ([gpusPerPod: 1, tolerations: ['gpu:NoSchedule']]):
                "parameter 'tolerations' must be a List of Maps, item 0 is 'gpu:NoSchedule' (String)",
            ([gpusPerPod: 1, tolerations: [key: 'gpu']]): "parameter 'tolerations' must be a List of Maps",
            ([gpusPerPod: 1, reservePerClass: 2])   : "parameter 'reservePerClass' must be a Map",
            ([gpusPerPod: 1, gpuPerPod: 2])         :
                'unknown parameter(s) gpuPerPod; known parameters: gpusPerPod, pods',
            ([gpusPerPod: 1, webhookUrl: 'http://127.0.0.1:1/', webhookCredentialsId: 'hook']):
                "parameters 'webhookUrl' and 'webhookCredentialsId' exclude each other",
        ]
        cases.each { Map config, String expected ->
            String message = runStepExpectingError('checkGpuHeadroom', config)
            assertTrue("${config}: ${message}", message.startsWith("[checkGpuHeadroom] ${expected}"))
            assertTrue("${config}: ${message}", message.endsWith(' (invalid-input)'))
        }
        assertTrue('nothing may run for bad parameters', shCalls.isEmpty())
    }

}
