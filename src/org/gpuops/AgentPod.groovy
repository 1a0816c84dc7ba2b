package org.gpuops

import com.cloudbees.groovy.cps.NonCPS

/**
 * The build pod template (resources/org/gpuops/agent/pod.yaml) with its three images filled in,
 * for `agent { kubernetes { yaml org.gpuops.AgentPod.yaml(this) } }` or podTemplate(yaml: ...).
 * The images come from one place, the controller's global properties (Manage Jenkins > System >
 * Global properties > Environment variables, or JCasC globalNodeProperties), read as env.X:
 *   GPUOPS_JNLP_IMAGE     the Jenkins inbound agent image (container jnlp)
 *   GPUOPS_AGENT_IMAGE    the gpu-ops agent image with the CLI (container gpuops)
 *   GPUOPS_BUILDER_IMAGE  the Podman API service image (container builder)
 * Each must be a full reference with a tag or digest; an unset or malformed one fails the build
 * before any pod is asked for, so no placeholder ever reaches Kubernetes. docs/JENKINS-AGENT.md.
 */
class AgentPod implements Serializable {

    private static final long serialVersionUID = 1L

    static final String RESOURCE = 'org/gpuops/agent/pod.yaml'
    /** Placeholder in pod.yaml -> the global property that fills it. */
    static final Map<String, String> IMAGES = [
        '@GPUOPS_JNLP_IMAGE@'   : 'GPUOPS_JNLP_IMAGE',
        '@GPUOPS_AGENT_IMAGE@'  : 'GPUOPS_AGENT_IMAGE',
        '@GPUOPS_BUILDER_IMAGE@': 'GPUOPS_BUILDER_IMAGE',
    ]
    /** An image reference: [host[:port]/]path, then :tag and/or @sha256:digest (one required). */
    static final String REFERENCE =
        /[a-z0-9]+(?:[._-][a-z0-9]+)*(?::[0-9]{1,5})?(?:\/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*/ +
        /(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}(?:@sha256:[0-9a-f]{64})?|@sha256:[0-9a-f]{64})/

    /**
     * The pod YAML for this build. `script` is the pipeline (`this`); `images` may name images
     * instead of the global properties, by property name ([GPUOPS_AGENT_IMAGE: '...']).
     */
    static String yaml(Object script, Map images = [:]) {
        Map<String, String> chosen = [:]
        for (String property : IMAGES.values()) {  // a plain loop: CPS-transformed code
            chosen[property] = (images[property] ?: script.env[property]) as String
        }
        String problem = problems(chosen)
        if (problem) {
            script.error("[AgentPod] ${problem}: set it as a global property of the Jenkins controller " +
                '(Manage Jenkins > System > Global properties > Environment variables), see ' +
                'docs/JENKINS-AGENT.md (invalid-input)')
        }
        return render(script.libraryResource(RESOURCE) as String, chosen)
    }

    /** What is wrong with the chosen images, or null. */
    @NonCPS
    static String problems(Map<String, String> chosen) {
        List<String> out = []
        chosen.each { String property, String value ->
            if (!value) {
                out.add("${property} is not set")
            } else if (value.length() > 255 || !(value ==~ REFERENCE)) {
                out.add("${property} '${value.take(80)}' is not an image reference with a tag or digest " +
                    '(e.g. registry.internal/gpu-ops/agent:0.1.0)')
            }
        }
        return out ? out.join('; ') : null
    }

    /** pod.yaml with each placeholder replaced; fails if the template has any other @X@ left. */
    @NonCPS
    static String render(String template, Map<String, String> chosen) {
        String text = template
        IMAGES.each { String placeholder, String property ->
            if (!text.contains(placeholder)) {
                throw new IllegalStateException("${RESOURCE} has no ${placeholder}")
            }
            text = text.replace(placeholder, chosen[property])
        }
        if (text =~ /@[A-Z_]+@/) {
            throw new IllegalStateException("${RESOURCE} has a placeholder AgentPod does not fill")
        }
        return text
    }
}
