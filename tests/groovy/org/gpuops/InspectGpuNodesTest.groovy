package org.gpuops

import static org.junit.Assert.assertEquals
import static org.junit.Assert.assertFalse
import static org.junit.Assert.assertTrue

import org.junit.Test

/** inspectGpuNodes: no lock, SSH key and webhook as environment only, reports, critical as failure or unstable. */
class InspectGpuNodesTest extends GpuOpsPipelineTest {

    static final List<String> WORDS = ['nodes', 'inspect']
    static final String KEY = '-----BEGIN OPENSSH PRIVATE KEY-----\nAAAAinspectSECRETkey\n' +
        '-----END OPENSSH PRIVATE KEY-----\n'
    static final Map HEALTHY = [status: 'ok', critical_hosts: [], summary: [ok: 6]]
    static final Map SICK = [status: 'critical', critical_hosts: ['gpu-a100-03'], summary: [ok: 5, critical: 1]]
    static final Map CRITICAL = [message: 'critical findings on 1 host(s): gpu-a100-03', category: 'gate-refused',
                                 hint: 'drain and repair them (see the findings)']

    @Test
    void inspectsWithoutAnyLockAndPublishesTheReports() {
        cliSucceeds(WORDS, HEALTHY)
        env.BUILD_NUMBER = '7'
        env.BUILD_URL = 'https://jenkins.example.invalid/job/inspect/7/'

        Object result = runStep('inspectGpuNodes', [inventory: 'ansible/inventory/production'])

        assertEquals(HEALTHY, result)
        assertEquals('an inspection never waits behind an update of the fleet', [], lockedResources)
        assertEquals(null, commandCalls().first().lock)
        assertEquals([inventory: 'ansible/inventory/production', report_dir: 'gpuops-artifacts/inspectGpuNodes-7',
                      link: 'https://jenkins.example.invalid/job/inspect/7/'], paramsOfLastCall())
        assertEquals([[artifacts: 'gpuops-artifacts/inspectGpuNodes-7/**', allowEmptyArchive: true]], archived)
        assertEquals([[testResults: 'gpuops-artifacts/inspectGpuNodes-7/*-junit.xml', allowEmptyResults: true]],
            junitReports)
    }

    @Test
    void theFleetHealthPageIsPublishedAlsoWhenFindingsAreCritical() {
        env.BUILD_NUMBER = '8'
        onSh(commandScript(WORDS)) { Map call ->
            files.put('gpuops-artifacts/inspectGpuNodes-8/fleet.html', '<!doctype html>')
            files.put(call.env.GPUOPS_ERROR_FILE, groovy.json.JsonOutput.toJson(
                [ok: false, command: 'nodes inspect', error: CRITICAL + [exit_code: 3], result: SICK]))
            return 3
        }

        runStep('inspectGpuNodes', [inventory: 'inv', onCritical: 'unstable'])

        assertEquals([[reportDir: 'gpuops-artifacts/inspectGpuNodes-8', reportFiles: 'fleet.html',
                       reportName: 'GPU fleet health', keepAll: true, alwaysLinkToLastBuild: false,
                       allowMissing: true]], published)
        assertEquals('the folder is archived once', 1, archived.size())
        assertJobStatusUnstable()
    }

    @Test
    void noPageNoPublishing() {
        cliSucceeds(WORDS, HEALTHY)

        runStep('inspectGpuNodes', [inventory: 'inv'])

        assertTrue(published.isEmpty())
        assertJobStatusSuccess()
    }

    @Test
    void criticalFindingsFailTheBuildByDefault() {
        cliFails(WORDS, 3, CRITICAL, [result: SICK])

        String message = runStepExpectingError('inspectGpuNodes', [inventory: 'inv'])

        assertEquals('[inspectGpuNodes] critical findings on 1 host(s): gpu-a100-03 (gate-refused)\n' +
            'Hint: drain and repair them (see the findings)', message)
        assertEquals(1, junitReports.size())
        assertJobStatusFailure()
    }

    @Test
    void criticalFindingsMarkTheBuildUnstableWhenAsked() {
        cliFails(WORDS, 3, CRITICAL, [result: SICK])

        Object result = runStep('inspectGpuNodes', [inventory: 'inv', onCritical: 'unstable'])

        assertEquals(SICK, result)
        assertEquals(1, unstableMessages.size())
        assertJobStatusUnstable()
    }

    @Test
    void hostsThatCouldNotBeInspectedFollowTheSamePolicy() {
        cliFails(WORDS, 4, [message: '1 host(s) could not be inspected: gpu-l40s-01', category: 'unreachable'],
            [result: HEALTHY])

        runStep('inspectGpuNodes', [inventory: 'inv', onCritical: 'unstable'])

        assertEquals(['[inspectGpuNodes] 1 host(s) could not be inspected: gpu-l40s-01 (unreachable)'],
            unstableMessages)
    }

    @Test
    void theKnownHostsCredentialReachesTheCliAsAFileInTheEnvironment() {
        credentialStore.'gpu-known-hosts' = [content: 'gpu-l40s-01 ssh-ed25519 AAAAC3Nza\n']
        cliSucceeds(WORDS, HEALTHY)

        runStep('inspectGpuNodes', [inventory: 'inv', knownHostsCredentialsId: 'gpu-known-hosts'])

        Map call = commandCalls().first()
        assertEquals([['GPUOPS_KNOWN_HOSTS']], boundVariables)
        assertEquals('gpu-l40s-01 ssh-ed25519 AAAAC3Nza\n', files.get(call.env.GPUOPS_KNOWN_HOSTS))
    }

    @Test
    void quarantineGetsTheKubeconfigAsAFileAndItsOptionsThroughTheParamsFile() {
        credentialStore.kube = [content: 'apiVersion: v1\nusers: [{user: {token: kube-secret-token}}]']
        cliSucceeds(WORDS, HEALTHY)

        runStep('inspectGpuNodes', [inventory: 'inv', kubeconfigCredentialsId: 'kube', quarantine: true,
                                    releaseAfter: 2, pushgateway: 'http://pushgateway.example.invalid:9091'])

        Map call = commandCalls().first()
        assertEquals([['KUBECONFIG']], boundVariables)
        assertEquals([inventory: 'inv', quarantine: true, release_after: 2,
                      report_dir: 'gpuops-artifacts/inspectGpuNodes-local',
                      pushgateway: 'http://pushgateway.example.invalid:9091'], paramsOfLastCall())
        assertTrue(files.get(call.env.KUBECONFIG).contains('kube-secret-token'))
        assertNoCallCarries('kube-secret-token')
    }

    @Test
    void thePushgatewaysBasicAuthReachesTheCliOnlyAsEnvironment() {
        credentialStore.pushgw = [username: 'metrics', password: 'pgw-SECRET-password']
        cliSucceeds(WORDS, HEALTHY)

        runStep('inspectGpuNodes', [inventory: 'inv', pushgateway: 'https://pushgateway.example.invalid',
                                    pushgatewayCredentialsId: 'pushgw'])

        Map call = commandCalls().first()
        assertEquals([['GPUOPS_PUSHGATEWAY_USERNAME', 'GPUOPS_PUSHGATEWAY_PASSWORD']], boundVariables)
        assertEquals('metrics', call.env.GPUOPS_PUSHGATEWAY_USERNAME)
        assertEquals('pgw-SECRET-password', call.env.GPUOPS_PUSHGATEWAY_PASSWORD)
        assertEquals('https://pushgateway.example.invalid', paramsOfLastCall().pushgateway)
        assertNoCallCarries('pgw-SECRET')
        assertFalse(files.get(call.env.GPUOPS_PARAMS_FILE).contains('SECRET'))
    }

    @Test
    void theKeyAndTheWebhookReachTheCliOnlyAsEnvironment() {
        String webhook = 'https://hooks.example.invalid/T000/B000/XXXXsecretXXXX'
        credentialStore.'ansible-key' = [privateKey: KEY, username: 'ops']
        credentialStore.hook = [secret: webhook]
        cliSucceeds(WORDS, HEALTHY)

        runStep('inspectGpuNodes', [inventory: 'inv', sshCredentialsId: 'ansible-key', webhookCredentialsId: 'hook'])

        Map call = commandCalls().first()
        assertEquals([['GPUOPS_SSH_KEY_FILE', 'GPUOPS_SSH_USER', 'GPUOPS_WEBHOOK_URL']], boundVariables)
        assertEquals(webhook, call.env.GPUOPS_WEBHOOK_URL)
        assertEquals(KEY, files.get(call.env.GPUOPS_SSH_KEY_FILE))
        assertNoCallCarries('inspectSECRETkey')
        assertNoCallCarries('XXXXsecretXXXX')
        assertFalse(files.get(call.env.GPUOPS_PARAMS_FILE).contains('secret'))
        assertTrue(shCalls.every { !it.script.contains('OPENSSH') })
    }

}
