package org.gpuops

import com.cloudbees.groovy.cps.NonCPS

/**
 * What the node steps (updateGpuNodes, inspectGpuNodes) share: one lock per inventory, where
 * the reports go in the workspace, and one runner. Their SSH key is bound into environment
 * variables only (S-25: withCredentials(sshUserPrivateKey ...) through gpuopsExec; the
 * bindings: {@link Credentials}).
 */
class NodeSteps implements Serializable {

    private static final long serialVersionUID = 1L

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

    /**
     * One node step's call: inside the inventory's lock, gpuopsExec with the SSH key bound;
     * then the artifacts folder archived, its JUnit report published, its page shown where the
     * HTML Publisher plugin is installed, and the outcome settled by `mode` (fail, unstable).
     * `folder` is the CLI option naming the artifacts folder (artifacts_dir, report_dir); the
     * step is the script of its vars/ file (STEP_NAME, COMMAND).
     */
    static Map run(Object script, Map cli, Map spec) {
        String stepName = script.STEP_NAME
        List command = script.COMMAND
        String dir = reportDir(cli.get(spec.folder), stepName, script.env.BUILD_NUMBER)
        cli.put(spec.folder, dir)
        Map outcome = [:]
        script.lock(resource: lockName(cli.inventory)) {
            outcome = script.gpuopsExec(stepName: stepName, command: command, params: cli,
                                        credentials: spec.credentials, allowCategories: spec.allow)
        }
        script.archiveArtifacts(artifacts: "${dir}/**", allowEmptyArchive: true)
        script.junit(testResults: "${dir}/*-junit.xml", allowEmptyResults: true)
        Reports.publish(script, stepName, [dir: dir, page: spec.page, title: spec.title])
        StepParams.settle(script, stepName, outcome, spec.mode as String)
        return outcome.result
    }

}
