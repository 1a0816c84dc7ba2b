package org.gpuops

import static org.junit.Assert.assertEquals
import static org.junit.Assert.assertFalse
import static org.junit.Assert.assertTrue

import groovy.json.JsonSlurperClassic
import org.junit.Test

/** The shared runner: quoting, parameters as JSON, secrets only in the environment, errors, version lock. */
class GpuopsExecTest extends GpuOpsPipelineTest {

    static final List<String> WORDS = ['image', 'push']
    static final String SECRET = 's3cr\'et"; $(rm -rf /) `id` ${HOME}'

    protected Map exec(Map extra = [:]) {  // not private: GpuopsExecCpsTest's closures call it
        return [stepName: 'pushImage', command: WORDS, params: [image: 'train:1.2']] + extra
    }

    @Test
    void runsTheCommandWordsQuotedAndReturnsTheResult() {
        cliSucceeds(WORDS, [digest: 'sha256:abc', tags: ['1.2']])

        Object outcome = runStep('gpuopsExec', exec())

        assertEquals([ok: true, verdict: 'ok', result: [digest: 'sha256:abc', tags: ['1.2']], error: null], outcome)
        assertEquals(["'gpuops' --output json --version > \"\$GPUOPS_VERSION_FILE\"", "'gpuops' 'image' 'push'"],
            shCalls*.script)
        assertTrue(shCalls.every { it.returnStatus == true })
    }

    @Test
    void paramsTravelAsJsonInAFileUnderTheWorkspace() {
        cliSucceeds(WORDS, [:])
        Map params = [image: "train:${1 + 1}", count: 3, ratio: 0.5, enabled: true, nothing: null,
                      labels: [accelerator: 'nvidia-h800'], list: [1, 'two', [three: 3]],
                      odd: 'quote \' double " dollar $HOME backtick ` newline \n end']

        runStep('gpuopsExec', exec(params: params))

        Map call = commandCalls().first()
        String paramsFile = call.env.GPUOPS_PARAMS_FILE
        assertTrue(paramsFile, paramsFile.startsWith("${WORKSPACE}/.gpuops/pushImage-"))
        assertTrue(paramsFile.endsWith('.params.json'))
        assertTrue(call.env.GPUOPS_RESULT_FILE.startsWith("${WORKSPACE}/.gpuops/pushImage-"))
        assertTrue(call.env.GPUOPS_ERROR_FILE.startsWith("${WORKSPACE}/.gpuops/pushImage-"))
        assertEquals([image: 'train:2', count: 3, ratio: 0.5, enabled: true, nothing: null,
                      labels: [accelerator: 'nvidia-h800'], list: [1, 'two', [three: 3]],
                      odd: 'quote \' double " dollar $HOME backtick ` newline \n end'],
            new JsonSlurperClassic().parseText(files.get(paramsFile)))
        assertFalse('no parameter value may reach the script', call.script.contains('train'))
    }

    @Test
    void eachCallGetsItsOwnFiles() {
        cliSucceeds(WORDS, [:])

        runStep('gpuopsExec', exec())
        runStep('gpuopsExec', exec())

        List<String> paramsFiles = commandCalls()*.env*.GPUOPS_PARAMS_FILE
        assertEquals(2, paramsFiles.unique(false).size())
    }

    @Test
    void secretsReachTheCliOnlyThroughTheEnvironment() {
        credentialStore.registry = [username: 'robot$gpu', password: SECRET]
        credentialStore.token = [secret: "${SECRET}-token".toString()]
        credentialStore.kubeconfig = [content: "apiVersion: v1\ntoken: ${SECRET}-kube".toString()]
        credentialStore.sshkey = [privateKey: "-----KEY ${SECRET}-----".toString(), username: 'ops']
        cliSucceeds(WORDS, [pushed: true])

        runStep('gpuopsExec', exec(credentials: [
            [type: 'usernamePassword', id: 'registry',
             usernameVariable: 'GPUOPS_REGISTRY_USER', passwordVariable: 'GPUOPS_REGISTRY_PASSWORD'],
            [type: 'string', id: 'token', variable: 'GPUOPS_TOKEN'],
            [type: 'file', id: 'kubeconfig', variable: 'KUBECONFIG'],
            [type: 'sshUserPrivateKey', id: 'sshkey', keyFileVariable: 'GPUOPS_SSH_KEY',
             usernameVariable: 'GPUOPS_SSH_USER'],
        ]))

        Map call = commandCalls().first()
        assertEquals(SECRET, call.env.GPUOPS_REGISTRY_PASSWORD)
        assertEquals('robot$gpu', call.env.GPUOPS_REGISTRY_USER)
        assertEquals("${SECRET}-token".toString(), call.env.GPUOPS_TOKEN)
        assertTrue(files.get(call.env.KUBECONFIG).contains("${SECRET}-kube"))
        assertTrue(files.get(call.env.GPUOPS_SSH_KEY).contains(SECRET))
        assertEquals('ops', call.env.GPUOPS_SSH_USER)
        assertEquals([['GPUOPS_REGISTRY_USER', 'GPUOPS_REGISTRY_PASSWORD', 'GPUOPS_TOKEN', 'KUBECONFIG',
                       'GPUOPS_SSH_KEY', 'GPUOPS_SSH_USER']], boundVariables)
        assertEquals("'gpuops' 'image' 'push'", call.script)
        assertFalse(files.get(call.env.GPUOPS_PARAMS_FILE).contains(SECRET))
        assertNoCallCarries(SECRET)
        assertFalse('secrets are unbound after the call', env.containsKey('GPUOPS_REGISTRY_PASSWORD'))
        assertFalse('the version check runs without secrets', shCalls.first().env.containsKey('GPUOPS_TOKEN'))
    }

    @Test
    void aFailingCliBecomesTheBuildErrorFromItsErrorFile() {
        cliFails(WORDS, 4, [message: "registry 127.0.0.1:5000 unreachable: connection refused",
                            category: 'unreachable', hint: 'start the registry: gpuops lab up'])

        String message = runStepExpectingError('gpuopsExec', exec())

        assertEquals('[pushImage] registry 127.0.0.1:5000 unreachable: connection refused (unreachable)\n' +
            'Hint: start the registry: gpuops lab up', message)
        assertJobStatusFailure()
    }

    @Test
    void aFailureWithoutHintIsOneLine() {
        cliFails(WORDS, 2, [message: "invalid image 'train:'", category: 'invalid-input'])

        assertEquals("[pushImage] invalid image 'train:' (invalid-input)", runStepExpectingError('gpuopsExec', exec()))
    }

    @Test
    void aFailureWithoutErrorFileNamesTheExitCode() {
        onSh(commandScript(WORDS)) { Map call -> 5 }

        assertEquals('[pushImage] gpuops exited with status 5 and wrote no error file (internal)',
            runStepExpectingError('gpuopsExec', exec()))
    }

    @Test
    void aCorruptErrorFileFailsClearly() {
        onSh(commandScript(WORDS)) { Map call ->
            files.put(call.env.GPUOPS_ERROR_FILE, 'Traceback (most recent call last):')
            return 1
        }

        String message = runStepExpectingError('gpuopsExec', exec())

        assertTrue(message, message.startsWith('[pushImage] the gpuops error file '))
        assertTrue(message, message.contains('is not valid JSON'))
    }

    @Test
    void successWithoutResultFileFails() {
        onSh(commandScript(WORDS)) { Map call -> 0 }

        String message = runStepExpectingError('gpuopsExec', exec())

        assertTrue(message,
            message ==~ /(?s)\[pushImage\] gpuops exited 0 but wrote no result file .*\.result\.json \(internal\)/)
    }

    @Test
    void allowedCategoriesAreReturnedInsteadOfFailing() {
        cliFails(WORDS, 3, [message: 'not enough GPUs', category: 'gate-refused'], [result: [free: 1]])

        Object outcome = runStep('gpuopsExec', exec(allowCategories: ['gate-refused']))

        assertEquals([ok: false, verdict: 'refused', result: [free: 1],
                      error: [message: 'not enough GPUs', category: 'gate-refused', hint: null, exitCode: 3,
                              field: null]], outcome)
        assertJobStatusSuccess()
    }

    @Test
    void successHasTheSameShapeWithOrWithoutAllowedCategories() {
        cliSucceeds(WORDS, [free: 8])

        assertEquals([ok: true, verdict: 'ok', result: [free: 8], error: null],
            runStep('gpuopsExec', exec(allowCategories: ['gate-refused'])))
    }

    @Test
    void aPartialErrorDocumentSurfacesItsVerdict() {
        cliFails(WORDS, 1, [message: '1 host(s) failed: gpu-01', category: 'failed'],
            [verdict: 'partial', result: [changed: ['gpu-02'], failed: ['gpu-01']]])

        Object outcome = runStep('gpuopsExec', exec(allowCategories: ['failed']))

        assertEquals([ok: false, verdict: 'partial', result: [changed: ['gpu-02'], failed: ['gpu-01']],
                      error: [message: '1 host(s) failed: gpu-01', category: 'failed', hint: null, exitCode: 1,
                              field: null]], outcome)
        assertJobStatusSuccess()
    }

    @Test
    void aPartialFailureSaysSoInTheBuildError() {
        cliFails(WORDS, 1, [message: '1 host(s) failed: gpu-01', category: 'failed'], [verdict: 'partial'])

        assertEquals('[pushImage] 1 host(s) failed: gpu-01 (failed, partial)',
            runStepExpectingError('gpuopsExec', exec()))
    }

    @Test
    void theDocumentsOwnVerdictIsTakenOverTheDerivedOne() {
        cliFails(WORDS, 1, [message: 'the gate said no', category: 'failed'], [verdict: 'refused'])

        assertEquals('refused', runStep('gpuopsExec', exec(allowCategories: ['failed'])).verdict)
    }

    @Test
    void anOlderCliWithoutVerdictHasItDerived() {
        // Documents without "verdict" (an older CLI): ok, refused for gate-refused, else failed.
        cliFails(WORDS, 4, [message: 'apiserver unreachable', category: 'unreachable'])

        Object failed = runStep('gpuopsExec', exec(allowCategories: ['unreachable']))

        assertEquals('failed', failed.verdict)
        assertEquals('ok', CliContract.verdictOf([ok: true, command: 'image push', result: [:]], null))
        assertEquals('refused', CliContract.verdictOf([ok: false, error: [category: 'gate-refused']],
            CliContract.errorOf([ok: false, error: [category: 'gate-refused']], 3)))
        assertEquals('failed', CliContract.verdictOf(null, CliContract.errorOf(null, 1)))
        assertEquals('failed', CliContract.verdictOf([verdict: 'bogus'], [category: 'failed']))
    }

    @Test
    void otherCategoriesStillFailWhenSomeAreAllowed() {
        cliFails(WORDS, 4, [message: 'apiserver unreachable', category: 'unreachable'])

        assertEquals('[pushImage] apiserver unreachable (unreachable)',
            runStepExpectingError('gpuopsExec', exec(allowCategories: ['gate-refused'])))
    }

    @Test
    void versionMismatchFailsWithHowToFix() {
        cliVersion('0.0.1')
        cliSucceeds(WORDS, [:])

        String message = runStepExpectingError('gpuopsExec', exec())

        assertTrue(message, message.startsWith("[pushImage] the gpuops CLI at 'gpuops' is version 0.0.1, " +
            "but this library needs exactly ${LIBRARY_VERSION} (cli-setup)\nHint: install gpuops ${LIBRARY_VERSION}"))
        assertTrue(message, message.contains("GPUOPS_VERSION=${LIBRARY_VERSION}"))
        assertTrue(message, message.contains('org/gpuops/agent/bootstrap-gpuops.sh'))
        assertTrue(message, message.contains('org/gpuops/agent/Containerfile'))
        assertTrue('the command must not run', commandCalls().isEmpty())
    }

    @Test
    void theInstallHintPointsAtNoPackageIndex() {
        // A project named `gpuops` on the public index is not this one: the hint names only the
        // agent image and the hash-checked, index-free bootstrap, never a `pip install <name>`.
        cliVersion('0.0.1')
        cliSucceeds(WORDS, [:])

        String message = runStepExpectingError('gpuopsExec', exec())
        String hint = CliContract.installHint(LIBRARY_VERSION)

        assertTrue(message, message.contains(hint))
        [message, hint].each { String text ->
            assertFalse(text, text.contains('pip install'))
            assertFalse(text, text ==~ /(?is).*(pypi|index-url|extra-index|https?:|gpuops==).*/)
        }
        assertTrue(hint, hint.contains('GPUOPS_WHEELHOUSE'))
        assertTrue(hint, hint.contains('--require-hashes'))
    }

    @Test
    void missingCliFailsWithHowToFix() {
        cliMissing()

        String message = runStepExpectingError('gpuopsExec', exec())

        assertTrue(message, message.startsWith("[pushImage] the gpuops CLI was not found at 'gpuops' (exit 127) " +
            "(cli-setup)\nHint: install gpuops ${LIBRARY_VERSION} on the agent"))
        assertTrue(commandCalls().isEmpty())
    }

    @Test
    void unreadableVersionFailsClearly() {
        onSh(VERSION_SCRIPT) { Map call ->
            files.put(call.env.GPUOPS_VERSION_FILE, 'gpuops, version 0.1.0')
            return 0
        }

        String message = runStepExpectingError('gpuopsExec', exec())

        assertTrue(message,
            message.startsWith("[pushImage] the gpuops CLI at 'gpuops' did not report a usable version"))
    }

    @Test
    void cliLocationComesFromTheEnvironment() {
        env.GPUOPS_CLI = '/opt/gpuops/bin/gpuops'
        cliVersion(LIBRARY_VERSION, '/opt/gpuops/bin/gpuops')
        cliSucceeds(WORDS, [:], '/opt/gpuops/bin/gpuops')

        runStep('gpuopsExec', exec())

        assertEquals([versionScript('/opt/gpuops/bin/gpuops'), "'/opt/gpuops/bin/gpuops' 'image' 'push'"],
            shCalls*.script)
    }

    @Test
    void cliParameterWinsOverTheEnvironment() {
        env.GPUOPS_CLI = '/opt/gpuops/bin/gpuops'
        cliVersion(LIBRARY_VERSION, '/venv/bin/gpuops')
        cliSucceeds(WORDS, [:], '/venv/bin/gpuops')

        runStep('gpuopsExec', exec(cli: '/venv/bin/gpuops'))

        assertEquals("'/venv/bin/gpuops' 'image' 'push'", commandCalls().first().script)
    }

    @Test
    void badCommandWordsAreRejectedBeforeAnythingRuns() {
        ['image; rm -rf /', 'Image', '--debug', '$(id)', 'a b', ''].each { String word ->
            String message = runStepExpectingError('gpuopsExec', exec(command: ['image', word]))
            assertTrue(message, message.startsWith("[pushImage] gpuopsExec: invalid command word '${word}'"))
            assertTrue(message, message.endsWith('(invalid-input)'))
        }
        assertTrue(shCalls.isEmpty())
    }

    @Test
    void badConfigurationIsRejected() {
        Map<Map, String> cases = [
            ([command: WORDS])                                 : "parameter 'stepName' is required",
            ([stepName: 'pushImage'])                          : "parameter 'command' is required",
            ([stepName: 'pushImage', command: []])             : 'command must list at least one CLI word',
            ([stepName: 'pushImage', command: WORDS, param: [:]]): 'unknown parameter(s) param',
            ([stepName: 'pushImage', command: WORDS, cli: 'gpuops; id']): 'invalid CLI location',
            ([stepName: 'pushImage', command: WORDS, params: 'x=1']): "parameter 'params' must be a Map",
            ([stepName: 'pushImage', command: WORDS, allowCategories: ['shortage']]): 'unknown categories',
            ([stepName: 'push image', command: WORDS])         : 'stepName must be',
            ([stepName: 'pushImage', command: WORDS, credentials: [[type: 'string', id: 'x', variable: 'lower']]]):
                'credentials[0].variable: invalid environment variable name',
            ([stepName: 'pushImage', command: WORDS, credentials: [[type: 'string', id: 'x', variable: 'PATH']]]):
                'PATH is reserved',
            ([stepName: 'pushImage', command: WORDS, credentials: [[type: 'cert', id: 'x']]]):
                'credentials[0].type must be one of',
            ([stepName: 'pushImage', command: WORDS, credentials: [[type: 'string', variable: 'X']]]):
                'credentials[0].id must be',
            ([stepName: 'pushImage', command: WORDS, credentials: [[type: 'usernamePassword', id: 'x',
                                                                   usernameVariable: 'U']]]):
                'credentials[0].passwordVariable is required',
            ([stepName: 'pushImage', command: WORDS, environment: [GPUOPS_PARAMS_FILE: '/tmp/x']]):
                'GPUOPS_PARAMS_FILE is reserved',
            ([stepName: 'pushImage', command: WORDS, environment: [LD_PRELOAD: '/tmp/x.so']]):
                'LD_PRELOAD is reserved',
            ([stepName: 'pushImage', command: WORDS, environment: [PYTHONPATH: '/tmp']]):
                'PYTHONPATH is reserved',
            ([stepName: 'pushImage', command: WORDS, environment: [BASH_ENV: '/tmp/rc']]):
                'BASH_ENV is reserved',
            ([stepName: 'pushImage', command: WORDS, credentials: [[type: 'string', id: 'x', variable: 'IFS']]]):
                'IFS is reserved',
        ]
        cases.each { Map config, String expected ->
            String message = runStepExpectingError('gpuopsExec', config)
            assertTrue("${config}: ${message}", message.contains(expected))
            assertTrue("${config}: ${message}", message.endsWith('(invalid-input)'))
        }
        assertTrue(shCalls.isEmpty())
    }

    @Test
    void outsideANodeItFailsClearly() {
        env.remove('WORKSPACE')

        assertEquals('[pushImage] must run on an agent, inside node { ... } (env.WORKSPACE is not set)',
            runStepExpectingError('gpuopsExec', exec()))
    }

    @Test
    void plainEnvironmentVariablesAreSetForTheCommandOnly() {
        cliSucceeds(WORDS, [:])

        runStep('gpuopsExec', exec(environment: [GPUOPS_WEBHOOK_URL: 'http://127.0.0.1:9/hook']))

        assertEquals('http://127.0.0.1:9/hook', commandCalls().first().env.GPUOPS_WEBHOOK_URL)
        assertFalse(env.containsKey('GPUOPS_WEBHOOK_URL'))
        assertFalse(commandCalls().first().script.contains('127.0.0.1'))
    }

}
