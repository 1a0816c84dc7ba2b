package org.gpuops

import static org.junit.Assert.assertEquals
import static org.junit.Assert.assertFalse
import static org.junit.Assert.assertTrue

import org.junit.Test

/** checkGpuHeadroom: the CLI call it makes, its parameters, and shortage as failure or unstable. */
class CheckGpuHeadroomTest extends GpuOpsPipelineTest {

    static final List<String> WORDS = ['headroom', 'check']
    static final String REPORT_DIR = 'gpuops-reports/checkGpuHeadroom'
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
    void sendsOnlyWhatTheUserSetAndReturnsTheNumbers() {
        cliSucceeds(WORDS, FITS)

        Object result = runStep('checkGpuHeadroom', [gpusPerPod: 4])

        assertEquals(FITS, result)
        assertEquals([VERSION_SCRIPT, "'gpuops' 'headroom' 'check'"], shCalls*.script)
        assertEquals('the CLI supplies every default', [gpus_per_pod: 4, report_dir: REPORT_DIR], paramsOfLastCall())
        assertTrue('no credentials without credential ids', boundVariables.isEmpty())
        assertJobStatusSuccess()
    }

    @Test
    void theBuildUrlBecomesTheNotificationLink() {
        cliSucceeds(WORDS, FITS)
        env.BUILD_URL = 'https://jenkins.example.invalid/job/release/42/'

        runStep('checkGpuHeadroom', [gpusPerPod: 4])

        assertEquals([gpus_per_pod: 4, link: 'https://jenkins.example.invalid/job/release/42/', report_dir: REPORT_DIR],
            paramsOfLastCall())
    }

    @Test
    void passesEveryParameterAsJson() {
        cliSucceeds(WORDS, FITS)
        List tolerations = [[key: 'dedicated', operator: 'Equal', value: 'training', effect: 'NoSchedule']]

        runStep('checkGpuHeadroom', [
            gpusPerPod: '2', pods: 3, nodeSelector: [accelerator: 'nvidia-h800', zone: 'b'], tolerations: tolerations,
            namespace: "train${'ing'}", resource: 'nvidia.com/mig-1g.10gb', reserve: 2,
            reservePerClass: ['nvidia-l40s': 4], groupBy: 'nvidia.com/gpu.product', showNodes: true,
        ])

        assertEquals([gpus_per_pod: '2', pods: 3, node_selector: [accelerator: 'nvidia-h800', zone: 'b'],
                      tolerations: tolerations, namespace: 'training', resource: 'nvidia.com/mig-1g.10gb',
                      reserve: 2, reserve_per_class: ['nvidia-l40s': 4], group_by: 'nvidia.com/gpu.product',
                      show_nodes: true, report_dir: REPORT_DIR],
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
        cliFails(WORDS, 3, SHORTAGE_ERROR, [result: SHORT])

        assertEquals(SHORTAGE_TEXT, runStepExpectingError('checkGpuHeadroom', [gpusPerPod: 4, pods: 2]))
        assertJobStatusFailure()
        assertTrue(unstableMessages.isEmpty())
    }

    @Test
    void shortageMarksTheBuildUnstableWhenAskedAndReturnsTheNumbers() {
        cliFails(WORDS, 3, SHORTAGE_ERROR, [result: SHORT])

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
    void invalidInputFromTheCliFailsNamingTheStepParameter() {
        cliFails(WORDS, 2, [message: 'parameter gpus_per_pod (--gpus-per-pod): 0 is below the minimum of 1',
                            category: 'invalid-input', field: 'gpus_per_pod'])

        assertEquals('[checkGpuHeadroom] gpusPerPod: parameter gpus_per_pod (--gpus-per-pod): 0 is below the ' +
            'minimum of 1 (invalid-input)',
            runStepExpectingError('checkGpuHeadroom', [gpusPerPod: 0, onShortage: 'unstable']))
    }

    @Test
    void kubeconfigAndWebhookCredentialsReachTheCliOnlyAsEnvironment() {
        String webhook = 'https://hooks.example.invalid/T000/B000/XXXXsecretXXXX'
        credentialStore.kube = [content: 'apiVersion: v1\nusers: [{user: {token: kube-secret-token}}]']
        credentialStore.hook = [secret: webhook]
        cliFails(WORDS, 3, SHORTAGE_ERROR, [result: SHORT])

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
    void aWebhookUrlIsAcceptedOnlyAsACredential() {
        String message = runStepExpectingError('checkGpuHeadroom',
            [gpusPerPod: 1, webhookUrl: 'http://127.0.0.1:8099/notify'])

        assertTrue(message, message.startsWith('[checkGpuHeadroom] unknown parameter(s) webhookUrl'))
        assertFalse('the URL is not echoed', message.contains('8099'))
        assertTrue(shCalls.isEmpty())
    }

    @Test
    void theWebhookCredentialIsBoundToTheVariableTheCliReads() {
        credentialStore.hook = [secret: 'https://hooks.example.invalid/T/B/secret']
        cliSucceeds(WORDS, FITS)

        runStep('checkGpuHeadroom', [gpusPerPod: 1, webhookCredentialsId: 'hook', webhookUrlEnv: 'ONCALL_HOOK'])

        assertEquals('https://hooks.example.invalid/T/B/secret', commandCalls().first().env.ONCALL_HOOK)
        assertEquals([['ONCALL_HOOK']], boundVariables)
        assertEquals('ONCALL_HOOK', paramsOfLastCall().webhook_url_env)
    }

    @Test
    void badParametersAreRejectedBeforeTheCliRuns() {
        Map<Map, String> cases = [
            ([:])                                  : "parameter 'gpusPerPod' is required",
            ([gpusPerPod: 1, onShortage: 'ignore']) :
                "parameter 'onShortage' must be one of 'fail', 'unstable', got 'ignore'",
            ([gpusPerPod: 1, kubeconfigCredentialsId: 7]): "parameter 'kubeconfigCredentialsId' must be a String",
            ([gpusPerPod: 1, gpuPerPod: 2])         : 'unknown parameter(s) gpuPerPod; known parameters: context, ',
            ([gpusPerPod: 1, pods: Double.NaN])     : "parameter 'pods' is NaN, which JSON cannot carry",
            ([gpusPerPod: 1, pods: new Object()])   : "parameter 'pods' cannot be passed to the CLI",
            ([gpusPerPod: 1, nodeSelector: [a: null]]): "parameter 'nodeSelector' cannot be passed to the CLI: null",
        ]
        cases.each { Map config, String expected ->
            String message = runStepExpectingError('checkGpuHeadroom', config)
            assertTrue("${config}: ${message}", message.startsWith("[checkGpuHeadroom] ${expected}"))
            assertTrue("${config}: ${message}", message.endsWith(' (invalid-input)'))
        }
        assertTrue('nothing may run for bad parameters', shCalls.isEmpty())
    }

    @Test
    void everyCliOptionIsAStepParameter() {
        List<Map> options = StepParams.options(new File(REPO_ROOT, 'resources/' + StepParams.RESOURCE).text, WORDS)
        assertTrue(options*.name.containsAll(['gpus_per_pod', 'node_selector', 'reserve_per_class']))
        options.each { Map option ->
            assertEquals(option.name, StepParams.cliName(StepParams.stepName(option.name)))
        }
    }

    @Test
    void theCapacityPageIsArchivedAndPublishedAlsoOnShortage() {
        onSh(commandScript(WORDS)) { Map call ->
            files.put("${REPORT_DIR}/capacity.html".toString(), '<!doctype html>')
            files.put(call.env.GPUOPS_ERROR_FILE, groovy.json.JsonOutput.toJson(
                [ok: false, command: 'headroom check', error: SHORTAGE_ERROR + [exit_code: 3], result: SHORT]))
            return 3
        }

        runStep('checkGpuHeadroom', [gpusPerPod: 4, pods: 2, onShortage: 'unstable'])

        assertEquals([[artifacts: "${REPORT_DIR}/**".toString(), allowEmptyArchive: true, fingerprint: false]],
            archived)
        assertEquals([[reportDir: REPORT_DIR, reportFiles: 'capacity.html', reportName: 'GPU capacity',
                       keepAll: true, alwaysLinkToLastBuild: false, allowMissing: true]], published)
    }

    @Test
    void withoutTheHtmlPublisherPluginTheReportIsStillArchived() {
        htmlPublisher = false
        onSh(commandScript(WORDS)) { Map call ->
            files.put("${REPORT_DIR}/capacity.html".toString(), '<!doctype html>')
            files.put(call.env.GPUOPS_RESULT_FILE, groovy.json.JsonOutput.toJson([ok: true, result: FITS]))
            return 0
        }

        runStep('checkGpuHeadroom', [gpusPerPod: 4])

        assertEquals(1, archived.size())
        assertTrue(published.isEmpty())
        assertTrue(echoed.toString(), echoed.any { it.contains("archived as ${REPORT_DIR}/capacity.html") })
        assertJobStatusSuccess()
    }

    @Test
    void noReportWhenTurnedOffOrWhenTheCliWroteNone() {
        cliSucceeds(WORDS, FITS)

        runStep('checkGpuHeadroom', [gpusPerPod: 4, report: false])
        assertFalse(paramsOfLastCall().containsKey('report_dir'))
        runStep('checkGpuHeadroom', [gpusPerPod: 4])
        assertTrue('no page was written: nothing to archive', archived.isEmpty())
    }

    @Test
    void aReportFolderOutsideTheWorkspaceIsRefused() {
        ['../up', '/etc', 'a/../../b', 'x y', 'a/*'].each { String dir ->
            String message = runStepExpectingError('checkGpuHeadroom', [gpusPerPod: 4, reportDir: dir])
            assertTrue(message, message.startsWith('[checkGpuHeadroom] gpuopsExec: report folder'))
        }
        assertTrue(shCalls.isEmpty())
    }

}
