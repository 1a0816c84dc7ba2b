package org.gpuops

import com.cloudbees.groovy.cps.NonCPS

/**
 * What the node steps (updateGpuNodes, inspectGpuNodes) share: the SSH key bound into
 * environment variables only (S-25: withCredentials(sshUserPrivateKey ...), through
 * gpuopsExec), one lock per inventory, and where the reports go in the workspace.
 */
class NodeSteps implements Serializable {

    private static final long serialVersionUID = 1L

    /** The variables the CLI reads the SSH key file and user from (gpuops.adapters.ansible). */
    static final String KEY_FILE_VARIABLE = 'GPUOPS_SSH_KEY_FILE'
    static final String USER_VARIABLE = 'GPUOPS_SSH_USER'

    /** Credential bindings for gpuopsExec: the SSH key and, optionally, a kubeconfig file. */
    @NonCPS
    static List<Map> credentials(String sshId, String kubeconfigId) {
        List<Map> bindings = []
        if (sshId) {
            bindings.add([type: 'sshUserPrivateKey', id: sshId, keyFileVariable: KEY_FILE_VARIABLE,
                          usernameVariable: USER_VARIABLE])
        }
        if (kubeconfigId) {
            bindings.add([type: 'file', id: kubeconfigId, variable: 'KUBECONFIG'])
        }
        return bindings
    }

    /** The lock resource of an inventory: runs against the same inventory never overlap. */
    @NonCPS
    static String lockName(Object inventory) {
        return "gpuops-inventory:${inventory}".toString()
    }

    /** The workspace folder a step's reports go to, unless the caller chose one. */
    @NonCPS
    static String reportDir(Object chosen, String stepName, Object buildNumber) {
        return (chosen ?: "gpuops-artifacts/${stepName}-${buildNumber ?: 'local'}").toString()
    }

}
