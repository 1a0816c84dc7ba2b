package org.gpuops

import static org.junit.Assert.assertEquals
import static org.junit.Assert.assertFalse
import static org.junit.Assert.assertTrue

import groovy.json.JsonOutput
import groovy.json.JsonSlurperClassic
import org.junit.Before
import org.junit.Test

/**
 * Jenkinsfile.example's release job with the node change of its version (S-24): the real
 * library and the Declarative shim, the CLI's side played by recorded answers (the lab story,
 * JenkinsfileExampleTest, runs the releases themselves for real; a node change there would
 * need the SSH fleet and minutes per driver install). What this shows is the pipeline's order
 * and wiring: production's approval before any node is touched, outside any agent; the node
 * change before the release's gates, on the environment's own inventory with the SSH key
 * bound; a failed node change stops the build before anything is released.
 */
class JenkinsfileNodeChangeTest extends GpuOpsPipelineTest {

    static final String LOCK = 'gpuops-release 127.0.0.1:6443/ai-production/infer'

    List<Map> calls = []
    Declarative shim
    List<String> console = []
    /** The exit code and error document of `nodes update`; null: it succeeds. */
    Map nodesFail = null

    @Before
    void pipelineAndCli() {
        env.remove('WORKSPACE')
        env.BUILD_NUMBER = '70'
        env.BUILD_URL = 'https://jenkins.example.invalid/job/ai/job/infer-release/70/'
        credentialStore['kubeconfig-production'] = [content: 'apiVersion: v1\nkind: Config\n']
        credentialStore['kubeconfig-staging'] = [content: 'apiVersion: v1\nkind: Config\n']
        credentialStore['registry-release'] = [username: 'robot', password: 'registry-secret-value']
        credentialStore['ansible-key'] = [privateKey: 'ssh-private-key-value', username: 'ops']
        credentialStore['gpu-nodes-known-hosts'] = [content: 'gpu-h800-01 ssh-ed25519 AAAAC3Nza\n']
        shim = installDeclarative(console)
        answer(['nodes', 'update']) { Map params ->
            nodesFail ?: [result: [changed: ['gpu-h800-01', 'gpu-h800-02'], unchanged: [], failed: []]]
        }
        answer(['headroom', 'check']) { Map params -> [result: [fits: true, message: '2 pods fit']] }
        answer(['release', 'promote']) { Map params ->
            params.dry_run ? [result: [state: 'planned', action: 'promote', environment: params.environment,
                                       approval: [required: params.environment == 'production',
                                                  approvers: ['release-managers'], timeout_minutes: 30],
                                       lock: [resource: LOCK], wanted: [tag: params.tag]]]
                : [result: [state: 'succeeded', release: [number: 4, tag: params.tag]]]
        }
    }

    /** The CLI's answer to `gpuops <words>`: [result:] or [exit:, error:]; each call recorded. */
    void answer(List<String> words, Closure<Map> respond) {
        onSh(commandScript(words)) { Map call ->
            Map params = (Map) new JsonSlurperClassic().parseText(files.get(call.env.GPUOPS_PARAMS_FILE))
            calls.add([command: words.join(' '), params: params, node: call.env.NODE_NAME,
                       ssh: call.env.GPUOPS_SSH_KEY_FILE != null, inputsBefore: inputs.size()])
            Map reply = respond(params)
            if (reply.error) {
                files.put(call.env.GPUOPS_ERROR_FILE, JsonOutput.toJson(
                    [ok: false, command: words.join(' '), error: reply.error + [exit_code: reply.exit]]))
                return reply.exit as int
            }
            files.put(call.env.GPUOPS_RESULT_FILE,
                JsonOutput.toJson([ok: true, command: words.join(' '), result: reply.result]))
            return 0
        }
    }

    Map release(Map params) {
        binding.setVariable('params', [APP_JOB: 'release', APP_IMAGE_TAG: '44'] + params)
        String error = null
        try {
            runScript('Jenkinsfile.example')
        } catch (PipelineFailure failure) {
            error = failure.message
        }
        return [result: binding.getVariable('currentBuild').result ?: 'SUCCESS', error: error]
    }

    @Test
    void productionApprovesThenChangesTheNodesThenReleasesOntoThem() {
        Map build = release(APP_ENV: 'production', APP_NODE_CHANGE: 'driver', APP_NODE_LIMIT: 'gpu_h800')

        assertEquals(build.error, 'SUCCESS', build.result)
        assertEquals(['nodes update', 'headroom check', 'release promote', 'release promote'], calls*.command)
        Map nodes = calls[0]
        assertEquals([inventory: 'deploy/inventory/production', limit: 'gpu_h800', change: 'driver'],
            nodes.params.findAll { it.key in ['inventory', 'limit', 'change'] })
        assertTrue('the SSH key is bound for the node change (S-25)', nodes.ssh)
        assertFalse('and for nothing else', calls.tail().any { it.ssh })
        // two approvals in production: the node change (before any node is touched), the release
        assertEquals(2, inputs.size())
        assertEquals(1, nodes.inputsBefore)
        assertEquals('release-managers', inputs[0].submitter)
        assertTrue(inputs[0].message.toString(),
            inputs[0].message.toString().startsWith('Change driver on gpu_h800 of production for 44?'))
        assertEquals('no executor held while a person approves', [false, false], inputs*.agentHeld)
        assertEquals(['gpuops-inventory:deploy/inventory/production', LOCK], lockedResources)
        assertTrue(echoed.contains('node change for 44: changed 2, unchanged 0'))
        assertNoCallCarries('ssh-private-key-value')
        assertNoCallCarries('registry-secret-value')
    }

    @Test
    void aFailedNodeChangeReleasesNothing() {
        nodesFail = [exit: 1, error: [category: 'failed', message: '1 host(s) failed: gpu-h800-01',
                                      hint: 'failed hosts stay cordoned; fix them and run again']]

        Map build = release(APP_ENV: 'staging', APP_NODE_CHANGE: 'all', APP_NODE_LIMIT: 'gpu_h800')

        assertEquals('FAILURE', build.result)
        assertTrue(build.error, build.error.startsWith('[updateGpuNodes] 1 host(s) failed: gpu-h800-01 (failed)'))
        assertEquals(['nodes update'], calls*.command)
        assertTrue('staging asks nobody', inputs.isEmpty())
        assertEquals('deploy/inventory/staging', calls[0].params.inventory)
        List<String> stages = ['Update GPU nodes', 'Node change', 'GPU headroom', 'Release']
        List<Map> logged = shim.stageLog.findAll { it.stage in stages }
        assertEquals(stages, logged*.stage)
        assertEquals(['FAILURE', 'FAILURE', 'skipped (earlier failure)', 'skipped (earlier failure)'], logged*.status)
    }

    @Test
    void withoutANodeChangeNoNodeIsTouched() {
        ['none', null].each { String change ->
            calls.clear()
            Map build = release(APP_ENV: 'staging', APP_NODE_CHANGE: change)
            assertEquals(build.error, 'SUCCESS', build.result)
            assertEquals(['headroom check', 'release promote', 'release promote'], calls*.command)
        }
    }

}
