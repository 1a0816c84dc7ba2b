package org.gpuops

import static org.junit.Assert.assertEquals
import static org.junit.Assert.assertFalse
import static org.junit.Assert.assertNull
import static org.junit.Assert.assertTrue

import org.junit.Before
import org.junit.Test

/** buildImage: the CLI call, defaults from the build, the record as a Map, description, archive, credentials. */
class BuildImageTest extends GpuOpsPipelineTest {

    static final List<String> WORDS = ['image', 'build']
    static final String DIGEST = 'sha256:' + 'ab' * 32
    static final Map RECORD = [
        image       : 'harbor.example.invalid/ai/infer',
        tags        : ['harbor.example.invalid/ai/infer:42', 'harbor.example.invalid/ai/infer:git-0123456789ab'],
        digest      : DIGEST,
        reference   : "harbor.example.invalid/ai/infer@${DIGEST}".toString(),
        cuda_version: '12.2.2',
        summary     : 'harbor.example.invalid/ai/infer:42 (abababababab, CUDA 12.2.2)',
    ]
    static final String REVISION = '0123456789abcdef0123456789abcdef01234567'

    List<Map> archived = []

    @Before
    void agentOfABuild() {
        env.BUILD_NUMBER = '42'
        env.GIT_COMMIT = REVISION
        env.BUILD_URL = 'https://jenkins.example.invalid/job/infer/42/'
        helper.registerAllowedMethod('archiveArtifacts', [Map]) { Map args -> archived.add(args) }
        binding.setVariable('currentBuild', [result: 'SUCCESS', description: null])
    }

    @Test
    void takesThisBuildsNumberRevisionAndUrlAndReturnsTheRecord() {
        cliSucceeds(WORDS, RECORD)

        Object result = runStep('buildImage', [image: 'harbor.example.invalid/ai/infer'])

        assertEquals(RECORD, result)
        assertEquals([VERSION_SCRIPT, "'gpuops' 'image' 'build'"], shCalls*.script)
        assertEquals([image       : 'harbor.example.invalid/ai/infer', build_number: '42', git_revision: REVISION,
                      link        : 'https://jenkins.example.invalid/job/infer/42/',
                      record_file : 'gpuops-image-record.json'],
            paramsOfLastCall())
        assertEquals(RECORD.summary, binding.getVariable('currentBuild').description)
        assertEquals([[artifacts: 'gpuops-image-record.json', fingerprint: true]], archived)
        assertTrue('no credentials without a credential id', boundVariables.isEmpty())
        assertJobStatusSuccess()
    }

    @Test
    void whatTheUserSetsWinsAndEveryOptionTravelsAsJson() {
        cliSucceeds(WORDS, RECORD)

        runStep('buildImage', [
            image: 'harbor.example.invalid/ai/infer', buildNumber: '7', gitRevision: 'abcdef1',
            link: 'https://x.invalid/1',
            context: 'docker', dockerfile: 'docker/Dockerfile', tags: ['latest', 'rc'], buildArgs: [PY: '3.11'],
            labels: 'team=ai', target: 'runtime', platform: 'linux/amd64', timeout: 600, noPush: true,
            recordFile: 'out/record.json', registryCa: '/etc/pki/harbor.pem',
        ])

        assertEquals([image: 'harbor.example.invalid/ai/infer', build_number: '7', git_revision: 'abcdef1',
                      link: 'https://x.invalid/1', context: 'docker', dockerfile: 'docker/Dockerfile',
                      tags: ['latest', 'rc'], build_args: [PY: '3.11'], labels: 'team=ai', target: 'runtime',
                      platform: 'linux/amd64', timeout: 600, no_push: true, record_file: 'out/record.json',
                      registry_ca: '/etc/pki/harbor.pem'],
            paramsOfLastCall())
        assertEquals([[artifacts: 'out/record.json', fingerprint: true]], archived)
    }

    @Test
    void outsideABuildNothingIsMadeUp() {
        env.remove('BUILD_NUMBER')
        env.remove('GIT_COMMIT')
        env.remove('BUILD_URL')
        cliSucceeds(WORDS, RECORD)

        runStep('buildImage', [image: 'harbor.example.invalid/ai/infer', tags: 'manual'])

        assertEquals([image      : 'harbor.example.invalid/ai/infer', tags: 'manual',
                      record_file: 'gpuops-image-record.json'],
            paramsOfLastCall())
    }

    @Test
    void registryCredentialsReachTheCliOnlyAsEnvironment() {
        String password = 'Harb0r-s3cret-t0ken'
        credentialStore.harbor = [username: 'robot$ci', password: password]
        cliSucceeds(WORDS, RECORD)

        runStep('buildImage', [image: 'harbor.example.invalid/ai/infer', registryCredentialsId: 'harbor'])

        Map call = commandCalls().first()
        assertEquals('robot$ci', call.env.GPUOPS_REGISTRY_USERNAME)
        assertEquals(password, call.env.GPUOPS_REGISTRY_PASSWORD)
        assertEquals([['GPUOPS_REGISTRY_USERNAME', 'GPUOPS_REGISTRY_PASSWORD']], boundVariables)
        assertNoCallCarries(password)
        assertFalse(files.get(call.env.GPUOPS_PARAMS_FILE).contains(password))
        assertFalse('the version check runs without the secret',
            shCalls.first().env.containsKey('GPUOPS_REGISTRY_PASSWORD'))
    }

    @Test
    void theCredentialIsBoundToTheVariablesTheCliReads() {
        credentialStore.harbor = [username: 'ci', password: 'pw-0000']
        cliSucceeds(WORDS, RECORD)

        runStep('buildImage', [image: 'harbor.example.invalid/ai/infer', registryCredentialsId: 'harbor',
                               registryUsernameEnv: 'HARBOR_USER', registryPasswordEnv: 'HARBOR_TOKEN'])

        Map call = commandCalls().first()
        assertEquals(['ci', 'pw-0000'], [call.env.HARBOR_USER, call.env.HARBOR_TOKEN])
        assertEquals([['HARBOR_USER', 'HARBOR_TOKEN']], boundVariables)
        assertEquals(['HARBOR_USER', 'HARBOR_TOKEN'],
            [paramsOfLastCall().registry_username_env, paramsOfLastCall().registry_password_env])
    }

    @Test
    void aRefusedPushFailsTheBuildAndNothingIsArchivedOrDescribed() {
        cliFails(WORDS, 1, [message : 'the registry harbor.example.invalid refused the push of ' +
                                      'harbor.example.invalid/ai/infer:42 (authentication or permission)',
                            category: 'failed', hint: 'check the registry credentials'])

        String message = runStepExpectingError('buildImage', [image: 'harbor.example.invalid/ai/infer'])

        assertEquals('[buildImage] the registry harbor.example.invalid refused the push of ' +
            'harbor.example.invalid/ai/infer:42 (authentication or permission) (failed)\n' +
            'Hint: check the registry credentials', message)
        assertTrue(archived.isEmpty())
        assertNull(binding.getVariable('currentBuild').description)
        assertJobStatusFailure()
    }

    @Test
    void aBadValueNamesTheStepParameter() {
        cliFails(WORDS, 2, [message : 'Dockerfile docker/Dockerfile does not exist', category: 'invalid-input',
                            field   : 'dockerfile'])

        assertEquals('[buildImage] dockerfile: Dockerfile docker/Dockerfile does not exist (invalid-input)',
            runStepExpectingError('buildImage',
                [image: 'harbor.example.invalid/ai/infer', dockerfile: 'docker/Dockerfile']))
    }

    @Test
    void archivingAndTheDescriptionCanBeTurnedOff() {
        cliSucceeds(WORDS, RECORD)

        runStep('buildImage', [image: 'harbor.example.invalid/ai/infer', archiveRecord: false, setDescription: false,
                               recordFile: '/tmp/record.json'])

        assertTrue(archived.isEmpty())
        assertNull(binding.getVariable('currentBuild').description)
        assertEquals('/tmp/record.json', paramsOfLastCall().record_file)
    }

    @Test
    void badParametersAreRejectedBeforeTheCliRuns() {
        Map<Map, String> cases = [
            ([:])                                                     : "parameter 'image' is required",
            ([image: 'r.invalid/x', registryPassword: 'hunter2']): 'unknown parameter(s) registryPassword',
            ([image: 'r.invalid/x', archiveRecord: 'yes'])            : "parameter 'archiveRecord' must be a Boolean",
            ([image: 'r.invalid/x', recordFile: '/abs/record.json'])  :
                "recordFile: '/abs/record.json' must be relative to the workspace",
        ]
        cases.each { Map config, String expected ->
            String message = runStepExpectingError('buildImage', config)
            assertTrue("${config}: ${message}", message.startsWith("[buildImage] ${expected}"))
            assertTrue("${config}: ${message}", message.endsWith('(invalid-input)'))
            assertFalse('a password given as a parameter is not echoed', message.contains('hunter2'))
        }
        assertTrue('nothing may run for bad parameters', shCalls.isEmpty())
    }


    static final List<String> CLEAN = ['image', 'clean']

    Map paramsOf(Map call) {
        return (Map) new groovy.json.JsonSlurperClassic().parseText(files.get(call.env.GPUOPS_PARAMS_FILE))
    }

    @Test
    void cleanupRemovesTheBuildsOwnImagesThenCleansTheAgentsDaemon() {
        cliSucceeds(WORDS, RECORD)
        cliSucceeds(CLEAN, [message: 'removed 3 image(s), freed 5000 bytes'])

        Object result = runStep('buildImage', [image: 'harbor.example.invalid/ai/infer', cleanup: true,
                                               dockerHost: 'unix:///run/b/podman.sock', cleanKeepLast: 2])

        assertEquals(RECORD, result)
        assertEquals(["'gpuops' 'image' 'build'", "'gpuops' 'image' 'clean'"], commandCalls()*.script)
        assertEquals(true, paramsOf(commandCalls()[0]).cleanup)
        assertEquals('unix:///run/b/podman.sock', paramsOf(commandCalls()[0]).docker_host)
        assertEquals([docker_host: 'unix:///run/b/podman.sock', keep_last: 2], paramsOfLastCall())
        assertJobStatusSuccess()
    }

    @Test
    void withoutCleanupTheAgentIsNotCleaned() {
        cliSucceeds(WORDS, RECORD)
        cliSucceeds(CLEAN, [message: 'x'])

        runStep('buildImage', [image: 'harbor.example.invalid/ai/infer', cleanKeepLast: 2])

        assertEquals(["'gpuops' 'image' 'build'"], commandCalls()*.script)
    }

    @Test
    void aFailedBuildIsStillCleanedAfterAndStillFails() {
        cliFails(WORDS, 1, [message: 'the build of harbor.example.invalid/ai/infer:42 failed', category: 'failed'])
        cliSucceeds(CLEAN, [message: 'removed 0 image(s), freed 0 bytes'])

        String message = runStepExpectingError('buildImage', [image: 'harbor.example.invalid/ai/infer', cleanup: true])

        assertTrue(message, message.startsWith('[buildImage] the build of harbor.example.invalid/ai/infer:42 failed'))
        assertEquals(["'gpuops' 'image' 'build'", "'gpuops' 'image' 'clean'"], commandCalls()*.script)
        assertEquals([:], paramsOfLastCall())
        assertJobStatusFailure()
    }

    @Test
    void aCleanTheDaemonRefusedMakesTheBuildUnstableNotFailed() {
        cliSucceeds(WORDS, RECORD)
        cliFails(CLEAN, 1, [message : 'the daemon at unix:///run/b/podman.sock refused to remove 1 image(s)',
                            category: 'failed', hint: 'an image a container uses stays'])

        Object result = runStep('buildImage', [image: 'harbor.example.invalid/ai/infer', cleanup: true])

        assertEquals(RECORD, result)
        assertEquals(RECORD.summary, binding.getVariable('currentBuild').description)
        assertJobStatusUnstable()
    }

}
