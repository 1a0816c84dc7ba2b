package org.gpuops

import static org.junit.Assert.assertEquals

import org.junit.Test

/**
 * The credential bindings every step hands gpuopsExec come from one place (Credentials): the
 * variables the CLI reads, one order, nothing bound for an absent ID; and no step or library
 * class writes a binding of its own.
 */
class CredentialsTest {

    @Test
    void eachKindIsBoundToTheVariableTheCliReads() {
        assertEquals([
            [type: 'sshUserPrivateKey', id: 'key', keyFileVariable: 'GPUOPS_SSH_KEY_FILE',
             usernameVariable: 'GPUOPS_SSH_USER'],
            [type: 'file', id: 'kc', variable: 'KUBECONFIG'],
            [type: 'usernamePassword', id: 'harbor', usernameVariable: 'GPUOPS_REGISTRY_USERNAME',
             passwordVariable: 'GPUOPS_REGISTRY_PASSWORD'],
            [type: 'string', id: 'hook', variable: 'GPUOPS_WEBHOOK_URL'],
        ], Credentials.bindings(webhook: 'hook', registry: 'harbor', kubeconfig: 'kc', ssh: 'key'))
    }

    @Test
    void theKnownHostsFileIsBoundAfterTheKeyToTheVariableTheCliReads() {
        assertEquals([
            [type: 'sshUserPrivateKey', id: 'key', keyFileVariable: 'GPUOPS_SSH_KEY_FILE',
             usernameVariable: 'GPUOPS_SSH_USER'],
            [type: 'file', id: 'hosts', variable: 'GPUOPS_KNOWN_HOSTS'],
            [type: 'file', id: 'kc', variable: 'KUBECONFIG'],
        ], Credentials.bindings(kubeconfig: 'kc', knownHosts: 'hosts', ssh: 'key'))
        assertEquals([], Credentials.bindings(knownHosts: null))
    }

    @Test
    void alertmanagersTokenAndThePushgatewaysAuthAreBoundLastToTheVariablesTheCliReads() {
        assertEquals([
            [type: 'file', id: 'kc', variable: 'KUBECONFIG'],
            [type: 'string', id: 'am', variable: 'GPUOPS_ALERTS_TOKEN'],
            [type: 'usernamePassword', id: 'pg', usernameVariable: 'GPUOPS_PUSHGATEWAY_USERNAME',
             passwordVariable: 'GPUOPS_PUSHGATEWAY_PASSWORD'],
        ], Credentials.bindings(pushgateway: 'pg', alerts: 'am', kubeconfig: 'kc'))
        assertEquals([], Credentials.bindings(alerts: null, pushgateway: ''))
    }

    @Test
    void anAbsentIdBindsNothingAndOtherVariablesAreHonoured() {
        assertEquals([], Credentials.bindings(ssh: null, kubeconfig: '', registry: null, webhook: null))
        assertEquals([
            [type: 'usernamePassword', id: 'harbor', usernameVariable: 'REG_USER', passwordVariable: 'REG_PASS'],
            [type: 'string', id: 'hook', variable: 'MY_HOOK'],
        ], Credentials.bindings(registry: 'harbor', registryUsernameVariable: 'REG_USER',
                                registryPasswordVariable: 'REG_PASS', webhook: 'hook', webhookVariable: 'MY_HOOK'))
    }

    @Test
    void noOtherStepOrClassWritesABindingOfItsOwn() {
        File root = new File(GpuOpsPipelineTest.REPO_ROOT)
        List<File> sources = ['vars', 'src'].collectMany { String dir ->
            List<File> found = []
            new File(root, dir).eachFileRecurse { if (it.name.endsWith('.groovy')) { found.add(it) } }
            found
        }
        List<String> own = sources.findAll { it.name != 'Credentials.groovy' }.collectMany { File f ->
            f.readLines().findAll { String line ->
                String code = line.trim().startsWith('*') ? '' : line.replaceFirst('//.*', '')  // not comments
                code =~ /type\s*:\s*'(file|string|usernamePassword|sshUserPrivateKey)'/
            }.collect { "${f.name}: ${it.trim()}".toString() }
        }
        assertEquals('credential bindings are built by org.gpuops.Credentials only', [], own)
    }

}
