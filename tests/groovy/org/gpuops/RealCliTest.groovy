package org.gpuops

import static org.junit.Assert.assertEquals
import static org.junit.Assert.assertFalse
import static org.junit.Assert.assertTrue

import java.util.concurrent.TimeUnit
import org.junit.Before
import org.junit.Rule
import org.junit.Test
import org.junit.rules.TemporaryFolder

/**
 * The steps against the real gpuops CLI of this repository: a real workspace directory and `sh`
 * as a real /bin/sh process with the step's environment. Shows that both halves agree on the
 * contract: the version check, parameter names, error documents, exit codes, credentials as
 * environment. Needs the CLI: system property gpuops.cli (build.gradle: env GPUOPS_CLI, else
 * .venv/bin/gpuops); without it these tests fail: a skipped test is not a passed one.
 */
class RealCliTest extends GpuOpsPipelineTest {

    static final String UNREACHABLE_KUBECONFIG = '''\
apiVersion: v1
kind: Config
clusters: [{name: lab, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: ci, user: {token: not-a-real-token}}]
contexts: [{name: lab, context: {cluster: lab, user: ci}}]
current-context: lab
'''

    protected final TemporaryFolder workspace = new TemporaryFolder()

    @Rule
    TemporaryFolder getWorkspaceRule() {
        return workspace
    }

    @Before
    void useRealAgent() {
        String cli = System.getProperty('gpuops.cli')
        assertTrue("no gpuops CLI at '${cli}': run the README's set-up (make test installs it)",
                   cli && new File(cli).canExecute())
        env.WORKSPACE = workspace.root.absolutePath
        env.GPUOPS_CLI = cli
    }

    @Test
    void anUnreachableClusterFailsTheStepWithTheCliMessage() {
        credentialStore.kube = [content: UNREACHABLE_KUBECONFIG]

        String message = runStepExpectingError('checkGpuHeadroom', [gpusPerPod: 2, kubeconfigCredentialsId: 'kube'])

        assertTrue(message, message ==~ /(?s)\[checkGpuHeadroom\] [^\n]*127\.0\.0\.1:1[^\n]* \(unreachable\)\nHint: .+/)
        assertEquals([0, 4], shCalls*.status)
        assertNoCallCarries('not-a-real-token')
    }

    @Test
    void theCliRejectsBadValuesAsInvalidInput() {
        credentialStore.kube = [content: UNREACHABLE_KUBECONFIG]

        String message = runStepExpectingError('checkGpuHeadroom', [gpusPerPod: 0, kubeconfigCredentialsId: 'kube'])

        assertTrue(message, message ==~ /(?s)\[checkGpuHeadroom\] [^\n]*gpus-per-pod[^\n]* \(invalid-input\)(\n.*)?/)
        assertEquals([0, 2], shCalls*.status)
    }

    @Test
    void aBadValueIsNamedAsTheStepParameterItCameIn() {
        credentialStore.kube = [content: UNREACHABLE_KUBECONFIG]
        Map<String, Map> cases = [
            gpusPerPod     : [gpusPerPod: true],
            pods           : [gpusPerPod: 2, pods: 4.7],
            namespace      : [gpusPerPod: 2, namespace: 'default\n'],
            resource       : [gpusPerPod: 2, resource: 'a'],
            reservePerClass: [gpusPerPod: 2, reservePerClass: [a100: '4\n']],
            webhookUrlEnv  : [gpusPerPod: 2, webhookUrlEnv: -1],
        ]
        cases.each { String key, Map config ->
            shCalls.clear()

            String message = runStepExpectingError('checkGpuHeadroom', config + [kubeconfigCredentialsId: 'kube'])

            assertTrue(message, message.startsWith("[checkGpuHeadroom] ${key}: parameter "))
            assertTrue(message, message.contains('(invalid-input)'))
            assertEquals(message, [0, 2], shCalls*.status)  // refused before the (unreachable) cluster
        }
    }

    @Test
    void noKubeconfigSecretReachesTheBuildErrorOrTheLog() {
        String canary = "canary${UUID.randomUUID().toString().replace('-', '')}"
        credentialStore.kube = [content: """\
apiVersion: v1
kind: Config
clusters: [{name: lab, cluster: {server: "https://127.0.0.1:1"}}]
users:
- name: ci
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1beta1
      command: /bin/sh
      args: ["-c", "echo 'refresh-token ${canary} rejected' >&2; exit 1"]
      interactiveMode: Never
contexts: [{name: lab, context: {cluster: lab, user: ci}}]
current-context: lab
"""]

        String message = runStepExpectingError('checkGpuHeadroom', [gpusPerPod: 1, kubeconfigCredentialsId: 'kube'])

        // the client logs the plugin's failure (with its stderr) and goes on without a token
        assertTrue(message, message ==~ /(?s)\[checkGpuHeadroom\] [^\n]*127\.0\.0\.1:1[^\n]* \(unreachable\)\n.*/)
        assertNoCallCarries(canary)
        shCalls.each { Map call -> assertFalse(call.output.toString(), call.output.toString().contains(canary)) }
    }

    @Test
    void theCliRejectsParameterNamesItDoesNotKnow() {
        String message = runStepExpectingError('gpuopsExec', [
            stepName: 'checkGpuHeadroom', command: ['headroom', 'check'], params: [gpus_per_pod: 1, gpu_count: 1]])

        assertTrue(message, message.startsWith('[checkGpuHeadroom] unknown parameter(s) gpu_count'))
        assertTrue(message, message.contains('(invalid-input)'))
    }

    @Test
    void aMissingCliIsReportedWithHowToInstallIt() {
        env.GPUOPS_CLI = "${workspace.root}/no-such-dir/gpuops".toString()

        String message = runStepExpectingError('checkGpuHeadroom', [gpusPerPod: 1])

        assertTrue(message,
            message.startsWith("[checkGpuHeadroom] the gpuops CLI was not found at '${env.GPUOPS_CLI}'"))
        assertTrue(message, message.contains("bootstrap-gpuops.sh' with GPUOPS_VERSION=${LIBRARY_VERSION}"))
        assertFalse(message, message.contains('pip install'))
    }

    @Test
    void theImageStepNamesAMissingContextByItsStepParameter() {
        String message = runStepExpectingError('buildImage',
            [image: '127.0.0.1:5000/team/app', context: 'no-such-dir', buildNumber: '1'])

        assertTrue(message, message.startsWith('[buildImage] context: build context no-such-dir is not a directory'))
        assertTrue(message, message.contains('(invalid-input)'))
        assertEquals([0, 2], shCalls*.status)
    }

    @Test
    void theImageStepKeepsTheRegistryPasswordOutOfScriptsOutputAndMessages() {
        String secret = 'real-cli-registry-s3cret'
        credentialStore.harbor = [username: 'ci', password: secret]
        new File(workspace.root, 'Dockerfile').text = 'FROM 127.0.0.1:5000/lab/base:1\n'
        env.DOCKER_HOST = "unix://${workspace.root}/no-daemon.sock".toString()

        String message = runStepExpectingError('buildImage', [image: '127.0.0.1:5000/team/app', buildNumber: '1',
            registryCredentialsId: 'harbor', dockerApiVersion: '1.41'])

        assertTrue(message, message.startsWith("[buildImage] cannot reach the image builder at ${env.DOCKER_HOST}"))
        assertTrue(message, message.contains('(unreachable)'))
        assertEquals([0, 4], shCalls*.status)
        assertNoCallCarries(secret)
        assertTrue(shCalls.every { !it.output.contains(secret) })
        assertFalse(message.contains(secret))
    }

    // ---- a real agent ---------------------------------------------------------------

    @Override
    protected void writeWorkspaceFile(String path, String text) {
        File file = new File(path)
        file.parentFile.mkdirs()
        file.text = text
    }

    @Override
    protected String readWorkspaceFile(String path) {
        File file = new File(path)
        if (!file.isFile()) {
            throw new FileNotFoundException(path)
        }
        return file.text
    }

    @Override
    protected boolean workspaceFileExists(String path) {
        return new File(path).exists()
    }

    @Override
    protected int runShell(Map call) {
        ProcessBuilder builder = new ProcessBuilder(['/bin/sh', '-c', call.script])
            .directory(workspace.root)
            .redirectErrorStream(true)
        Map<String, String> environment = builder.environment()
        environment.keySet().removeAll { it.startsWith('GPUOPS_') || it == 'KUBECONFIG' }
        environment.putAll(call.env)
        Process process = builder.start()
        call.output = process.inputStream.text
        assertTrue("sh did not finish: ${call.script}", process.waitFor(120, TimeUnit.SECONDS))
        call.status = process.exitValue()
        return call.status
    }

}
