package org.gpuops

import com.cloudbees.groovy.cps.NonCPS

/**
 * The credential bindings of every step, in one place: each kind of secret the CLI reads, bound
 * by gpuopsExec's withCredentials into the environment variable the CLI reads it from (never
 * argv, never a Groovy string). A step names the Jenkins credential IDs it was given; an absent
 * ID binds nothing. Bindings come in one order (SSH key, known hosts, kubeconfig, registry,
 * webhook, Alertmanager token, Pushgateway).
 */
class Credentials implements Serializable {

    private static final long serialVersionUID = 1L

    /** The variables the CLI reads the SSH key file and user from (gpuops.adapters.ansible). */
    static final String SSH_KEY_FILE_VARIABLE = 'GPUOPS_SSH_KEY_FILE'
    static final String SSH_USER_VARIABLE = 'GPUOPS_SSH_USER'
    /** The known-hosts file the nodes' host keys are checked against (gpuops.adapters.hostkeys). */
    static final String KNOWN_HOSTS_VARIABLE = 'GPUOPS_KNOWN_HOSTS'
    /** Where the kubernetes client and gpuops look for a kubeconfig. */
    static final String KUBECONFIG_VARIABLE = 'KUBECONFIG'
    /** The CLI's defaults; a step may name others (its *_env parameters). */
    static final String REGISTRY_USERNAME_VARIABLE = 'GPUOPS_REGISTRY_USERNAME'
    static final String REGISTRY_PASSWORD_VARIABLE = 'GPUOPS_REGISTRY_PASSWORD'
    static final String WEBHOOK_VARIABLE = 'GPUOPS_WEBHOOK_URL'
    /** Alertmanager's bearer token (gpuops.usecases.nodes.alerts: nodes update --alerts-url). */
    static final String ALERTS_TOKEN_VARIABLE = 'GPUOPS_ALERTS_TOKEN'
    /** The Pushgateway's basic auth (gpuops.usecases.nodes.inspect: nodes inspect --pushgateway). */
    static final String PUSHGATEWAY_USERNAME_VARIABLE = 'GPUOPS_PUSHGATEWAY_USERNAME'
    static final String PUSHGATEWAY_PASSWORD_VARIABLE = 'GPUOPS_PUSHGATEWAY_PASSWORD'

    /**
     * Bindings for gpuopsExec from credential IDs: [ssh: id, knownHosts: id, kubeconfig: id,
     * registry: id, webhook: id, alerts: id, pushgateway: id], and optionally the variables the CLI
     * was told to read instead of its defaults ([registryUsernameVariable:, registryPasswordVariable:,
     * webhookVariable:]).
     */
    @NonCPS
    static List<Map> bindings(Map ids) {
        List<Map> out = []
        if (ids.ssh) {
            out.add([type: 'sshUserPrivateKey', id: ids.ssh, keyFileVariable: SSH_KEY_FILE_VARIABLE,
                     usernameVariable: SSH_USER_VARIABLE])
        }
        if (ids.knownHosts) {
            out.add([type: 'file', id: ids.knownHosts, variable: KNOWN_HOSTS_VARIABLE])
        }
        if (ids.kubeconfig) {
            out.add([type: 'file', id: ids.kubeconfig, variable: KUBECONFIG_VARIABLE])
        }
        if (ids.registry) {
            out.add([type: 'usernamePassword', id: ids.registry,
                     usernameVariable: ids.registryUsernameVariable ?: REGISTRY_USERNAME_VARIABLE,
                     passwordVariable: ids.registryPasswordVariable ?: REGISTRY_PASSWORD_VARIABLE])
        }
        if (ids.webhook) {
            out.add([type: 'string', id: ids.webhook, variable: ids.webhookVariable ?: WEBHOOK_VARIABLE])
        }
        if (ids.alerts) {
            out.add([type: 'string', id: ids.alerts, variable: ALERTS_TOKEN_VARIABLE])
        }
        if (ids.pushgateway) {
            out.add([type: 'usernamePassword', id: ids.pushgateway, usernameVariable: PUSHGATEWAY_USERNAME_VARIABLE,
                     passwordVariable: PUSHGATEWAY_PASSWORD_VARIABLE])
        }
        return out
    }

}
