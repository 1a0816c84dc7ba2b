package org.gpuops

import static org.junit.Assert.assertEquals
import static org.junit.Assert.assertFalse
import static org.junit.Assert.assertTrue
import static org.junit.Assert.fail

import org.junit.Test

/**
 * The build pod's images come from the controller's global properties: all three filled in,
 * none left as a placeholder, an unset or malformed one refused before any pod is asked for.
 * (The rendered YAML is checked by the real kube-apiserver in tests/python/integration/
 * test_agent_pod.py.)
 */
class AgentPodTest {

    static final Map IMAGES = [
        GPUOPS_JNLP_IMAGE   : 'registry.internal/jenkins/inbound-agent:3309.v27b9314fd1a4-1-jdk17',
        GPUOPS_AGENT_IMAGE  : 'registry.internal/gpu-ops/agent:0.1.0',
        GPUOPS_BUILDER_IMAGE: 'registry.internal:5000/gpu-ops/builder@sha256:' + 'a' * 64,
    ]

    /** What AgentPod uses of the pipeline: env, libraryResource, error. */
    static class FakeScript {
        Map env = [:]
        List<String> resources = []

        String libraryResource(String path) {
            resources.add(path)
            return new File(GpuOpsPipelineTest.REPO_ROOT, "resources/${path}").text
        }

        void error(String message) {
            throw new IllegalArgumentException(message)
        }
    }

    static String refusal(Map env, Map images = [:]) {
        try {
            AgentPod.yaml(new FakeScript(env: env), images)
        } catch (IllegalArgumentException e) {
            return e.message
        }
        fail('AgentPod.yaml accepted ' + env)
        return null
    }

    @Test
    void theThreeImagesComeFromTheGlobalProperties() {
        FakeScript script = new FakeScript(env: new HashMap(IMAGES))
        String yaml = AgentPod.yaml(script)
        assertEquals(['org/gpuops/agent/pod.yaml'], script.resources)
        IMAGES.each { String property, String image ->
            assertTrue("${property} is not in the pod", yaml.contains("image: \"${image}\""))
        }
        assertFalse('a placeholder reached the pod YAML', (yaml =~ /@[A-Z_]+@/).find())
        ['jnlp', 'gpuops', 'builder'].each { assertTrue(yaml.contains("- name: ${it}\n")) }
    }

    @Test
    void explicitImagesWinOverTheProperties() {
        String mine = 'other.registry/gpu-ops/agent:0.1.0'
        String yaml = AgentPod.yaml(new FakeScript(env: new HashMap(IMAGES)), [GPUOPS_AGENT_IMAGE: mine])
        assertTrue(yaml.contains("image: \"${mine}\""))
        assertFalse(yaml.contains(IMAGES.GPUOPS_AGENT_IMAGE))
    }

    @Test
    void anUnsetImageIsRefusedNamingItsProperty() {
        String message = refusal(IMAGES.findAll { it.key != 'GPUOPS_BUILDER_IMAGE' })
        assertTrue(message, message.contains('GPUOPS_BUILDER_IMAGE is not set'))
        assertTrue(message, message.contains('Global properties'))
        assertFalse(message, message.contains('GPUOPS_AGENT_IMAGE'))
        assertTrue(refusal([:]).contains('GPUOPS_JNLP_IMAGE is not set; GPUOPS_AGENT_IMAGE is not set'))
    }

    @Test
    void aMalformedOrUnpinnedImageIsRefused() {
        ['registry.internal/gpu-ops/agent',             // no tag: whatever "latest" is today
         'registry.internal/gpu-ops/agent:0.1.0\n  x: y',  // YAML injection
         'registry.internal/gpu-ops/agent:0.1.0"',
         'registry.internal/Agent:1',
         'registry.internal/gpu-ops/agent@sha256:abc',
         "\$(id):1"].each { String bad ->
            String message = refusal(IMAGES + [GPUOPS_AGENT_IMAGE: bad])
            assertTrue(message, message.contains('GPUOPS_AGENT_IMAGE'))
            assertTrue(message, message.contains('not an image reference with a tag or digest'))
        }
        ['127.0.0.1:5000/lab/agent:1', 'localhost/a_b/c--d:v1.2_3', 'quay.io/podman/stable:v5.2',
         'registry.internal/builder:v5@sha256:' + '0' * 64].each { String good ->
            assertTrue(AgentPod.yaml(new FakeScript(env: IMAGES + [GPUOPS_BUILDER_IMAGE: good])).contains(good))
        }
    }

    @Test
    void theStepsContainerReachesTheBuilderThroughDockerHost() {
        String yaml = new File(GpuOpsPipelineTest.REPO_ROOT, "resources/${AgentPod.RESOURCE}").text
        String socket = '/run/gpuops-builder/podman.sock'
        assertTrue(yaml.contains("- name: DOCKER_HOST\n          value: unix://${socket}"))
        assertTrue(yaml.contains("\"unix://${socket}\"]"))  // the builder's `podman system service`
    }

    @Test
    void theExampleRunsItsBuildInTheGpuopsContainerOfThisPod() {
        String jenkinsfile = new File(GpuOpsPipelineTest.REPO_ROOT, 'Jenkinsfile.example').text
        assertTrue(jenkinsfile.contains('yaml org.gpuops.AgentPod.yaml(this)'))
        assertFalse(jenkinsfile.contains("libraryResource('org/gpuops/agent/pod.yaml')"))
        (jenkinsfile =~ /defaultContainer '([^']+)'/).each { List m -> assertEquals('gpuops', m[1]) }
    }
}
