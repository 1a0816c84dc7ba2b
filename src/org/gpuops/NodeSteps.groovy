package org.gpuops

import com.cloudbees.groovy.cps.NonCPS

/**
 * What the node steps (updateGpuNodes, inspectGpuNodes) share: the fleet's lock for changes
 * ({@link FleetLock}; an inspection takes none), where the reports go in the workspace, and one
 * runner. Their SSH key is bound into environment variables only (S-25: withCredentials(
 * sshUserPrivateKey ...) through gpuopsExec; the bindings: {@link Credentials}).
 */
class NodeSteps implements Serializable {

    private static final long serialVersionUID = 1L

    /** The fleet's lock name ({@link FleetLock}); a bad inventory or fleet fails the step. */
    static String lockOf(Object script, String stepName, Object inventory, Object fleet) {
        String problem = FleetLock.problem(inventory, fleet)
        if (problem) {
            script.error("[${stepName}] ${problem} (invalid-input)")
        }
        return FleetLock.name(fleet: fleet, inventory: inventory)
    }

    /**
     * Runs body under the fleet's lock. Held already by the stage (`options { lock(resource: ...,
     * variable: 'GPUOPS_FLEET_LOCK') }`): no second lock (the same resource locked again inside
     * would wait for itself). The stage holding another fleet's lock fails. No lock around:
     * the step takes it here, inside node, so a build waiting for it holds its agent; it says so.
     * The variable must be exactly `name` (never split on ','). A stage lock without the variable
     * is invisible here: the step locks again and the build waits on itself (documented only).
     */
    static void underFleetLock(Object script, String stepName, String name, Closure body) {
        List<String> held = FleetLock.held(script.env[FleetLock.VARIABLE])
        if (held.contains(name)) {
            body()
            return
        }
        if (held) {
            script.error("[${stepName}] this build holds ${held.join(', ')}, but the inventory is ${name}: lock " +
                'the fleet the step changes (org.gpuops.FleetLock.name with the same inventory or fleet) ' +
                '(invalid-input)')
        }
        script.echo("[${stepName}] took ${name} here, on the agent: a build waiting for it holds its agent; " +
            "lock it at stage level instead: options { lock(resource: org.gpuops.FleetLock.name(...), " +
            "variable: '${FleetLock.VARIABLE}') }")
        script.lock(resource: name, variable: FleetLock.VARIABLE) {
            body()
        }
    }

    /** Where a node change's record id waits for a later promoteTag of the same build (S-24). */
    static final String NODE_CHANGE_VARIABLE = 'GPUOPS_NODE_CHANGE'
    /** A node change history record id as the CLI writes it: <fleet>-<number>, or a number. */
    static final String NODE_CHANGE_ID = /([a-z0-9]([a-z0-9.-]{0,88}[a-z0-9])?-)?[0-9]{1,10}/

    /**
     * After a node change: its node history record id (the result's `record`) into
     * env.GPUOPS_NODE_CHANGE, so that promoteTag later in the same build records it with the
     * release (`release promote --node-change`). A run that wrote no record (a check, no
     * Kubernetes) leaves the variable as it was; an id of another shape is not passed on.
     */
    static void rememberNodeChange(Object script, String stepName, Map result) {
        Object id = result?.record
        if (id == null) {
            return
        }
        if (!(id instanceof String) || !(id ==~ NODE_CHANGE_ID)) {
            script.echo("[${stepName}] the node change record id is not of the known shape; not passed on to " +
                'promoteTag')
            return
        }
        script.env[NODE_CHANGE_VARIABLE] = id
        script.echo("[${stepName}] node change record ${id}: a later promoteTag in this build records it (S-24)")
    }

    /** The workspace folder a step's reports go to, unless the caller chose one. */
    @NonCPS
    static String reportDir(Object chosen, String stepName, Object buildNumber) {
        return (chosen ?: "gpuops-artifacts/${stepName}-${buildNumber ?: 'local'}").toString()
    }

    /**
     * One node step's call: gpuopsExec with the SSH key bound (a change under the fleet's lock,
     * `spec.fleet` set; an inspection without); then the artifacts folder archived, its JUnit
     * report published, its page shown where the HTML Publisher plugin is installed, and the
     * outcome settled by `mode` (fail, unstable; a category in `spec.alwaysFail` fails the
     * build whatever the mode, after the reports are published). `folder` is the CLI option naming the
     * artifacts folder (artifacts_dir, report_dir); the step is the script of its vars/ file
     * (STEP_NAME, COMMAND).
     */
    static Map run(Object script, Map cli, Map spec) {
        String stepName = script.STEP_NAME
        List command = script.COMMAND
        String dir = reportDir(cli.get(spec.folder), stepName, script.env.BUILD_NUMBER)
        cli.put(spec.folder, dir)
        Map outcome = [:]
        Closure exec = {
            outcome = script.gpuopsExec(stepName: stepName, command: command, params: cli,
                                        credentials: spec.credentials, allowCategories: spec.allow)
        }
        if (spec.containsKey('fleet')) {
            underFleetLock(script, stepName, lockOf(script, stepName, cli.inventory, spec.fleet), exec)
        } else {
            exec()
        }
        script.archiveArtifacts(artifacts: "${dir}/**", allowEmptyArchive: true)
        script.junit(testResults: "${dir}/*-junit.xml", allowEmptyResults: true)
        Reports.publish(script, stepName, [dir: dir, page: spec.page, title: spec.title])
        List alwaysFail = (spec.alwaysFail ?: []) as List
        String mode = alwaysFail.contains(outcome.error?.category) ? 'fail' : spec.mode as String
        StepParams.settle(script, stepName, outcome, mode)
        return outcome.result
    }

}
