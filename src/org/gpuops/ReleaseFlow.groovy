package org.gpuops

/**
 * The Jenkins side of a release (promoteTag, rollbackRelease), in this order:
 * 1. plan on an agent: the CLI's dry run checks the input and every gate and says whether the
 *    environment needs an approval, who may give it, and the target's lock name;
 * 2. the approval, outside any agent: `input` with `submitter` inside `timeout`, so that no
 *    executor is held while a person decides; never by the build's requester (four eyes,
 *    {@link FourEyes}: refused when no requester is known); the names go to the CLI
 *    (requested_by, a list; approved_by), which checks them again and records them;
 * 3. the release on an agent inside `lock(resource: <target>)`: one release per target at a
 *    time in this Jenkins (the CLI's Lease in the cluster covers every other caller); with a
 *    progressive strategy, inside the same lock, each `approval` step it pauses at is asked
 *    outside any agent and resumed (or rejected) on an agent again ({@link ReleaseSteps}), and
 *    the steps are shown as a table.
 * Every decision is the CLI's (the four-eyes check is also made here, so that a requester's
 * approval never reaches an agent); this class only orders Jenkins steps around it.
 */
class ReleaseFlow implements Serializable {

    private static final long serialVersionUID = 1L

    /** The step's own Jenkins parameters (promoteTag and rollbackRelease share them). */
    static final Map DEFAULTS = [
        kubeconfigCredentialsId: null,     // file credential with the kubeconfig -> env KUBECONFIG
        registryCredentialsId  : null,     // username/password credential -> env GPUOPS_REGISTRY_USERNAME/_PASSWORD
        agentLabel             : 'gpuops', // agents that run the CLI; taken only while it runs
        checkout               : true,     // `checkout scm` on each agent: the environments file is in the repository
        approvalTimeoutMinutes : null,     // unset: the environment's approval.timeout_minutes
    ].asImmutable()

    static final Map TYPES = [
        kubeconfigCredentialsId: 'string', registryCredentialsId: 'string', agentLabel: 'string',
        checkout: 'boolean', approvalTimeoutMinutes: 'int',
    ].asImmutable()

    /** rollbackRelease's own parameters beside these: what its nodes need (withNodes: true). */
    static final Map NODE_DEFAULTS = [
        sshCredentialsId       : null,  // sshUserPrivateKey credential -> env GPUOPS_SSH_KEY_FILE, GPUOPS_SSH_USER
        knownHostsCredentialsId: null,  // file credential with the nodes' known_hosts -> env GPUOPS_KNOWN_HOSTS
        fleet                  : null,  // the fleet's name for its lock; unset: the inventory's normalised path
    ].asImmutable()

    static final Map NODE_TYPES = [
        sshCredentialsId: 'string', knownHostsCredentialsId: 'string', fleet: 'string',
    ].asImmutable()

    static final List PROMOTE = ['release', 'promote'].asImmutable()

    /** A release step (promoteTag, rollbackRelease: a vars/ script with STEP_NAME, COMMAND and
     * this class's DEFAULTS and TYPES): its parameters, then run() with gpuopsExec. */
    static Map step(Object script, Map config) {
        Map params = StepParams.prepare(script, config)
        // rollbackRelease(withNodes: true) reaches the nodes over SSH too (S-25: env only)
        List credentials = Credentials.bindings(kubeconfig: params.step.kubeconfigCredentialsId,
                                                registry: params.step.registryCredentialsId,
                                                ssh: params.step.sshCredentialsId,
                                                knownHosts: params.step.knownHostsCredentialsId)
        String stepName = script.STEP_NAME
        List command = script.COMMAND
        if (command == PROMOTE && !params.cli.containsKey('node_change') && script.env[NodeSteps.NODE_CHANGE_VARIABLE]) {
            // S-24: the node change updateGpuNodes made earlier in this build goes on the record
            params.cli.node_change = script.env[NodeSteps.NODE_CHANGE_VARIABLE].toString()
        }
        return run(script, params.step, params.cli) { List words, Map values, List allow ->
            script.gpuopsExec(stepName: stepName, command: words, params: values, credentials: credentials,
                              allowCategories: allow)
        }
    }

    /**
     * Plans, asks for the approval when the environment needs one, and releases under the lock
     * (with the approvals of a progressive strategy's steps). `exec(words, params, allowCategories)`
     * runs `gpuops <words>` (gpuopsExec) and returns its outcome; the script's STEP_NAME and
     * COMMAND name the step and its command.
     */
    static Map run(Object script, Map step, Map cli, Closure exec) {
        String stepName = script.STEP_NAME
        List command = script.COMMAND
        if (cli.containsKey('approved_by')) {
            script.error("[${stepName}] approvedBy is not a parameter you set: ${stepName} asks for the " +
                'approval (input) and passes the approver on (invalid-input)')
        }
        if (cli.containsKey('requested_by')) {
            script.error("[${stepName}] requestedBy is not a parameter you set: ${stepName} takes it from " +
                "the build's cause (the user who started it) (invalid-input)")
        }
        if (script.env.NODE_NAME) {
            script.error("[${stepName}] call ${stepName} outside node { }: it takes an agent only while the " +
                'CLI runs, never while a person approves (invalid-input)')
        }
        // withNodes: the fleet's lock too, checked before anything runs
        Map fleetLock = cli.with_nodes ? withFleet(script, stepName, cli.inventory, step.fleet) : [:]
        // what `release resume` (an approval step answered) takes of the release's parameters
        List<String> keeps = ReleaseSteps.kept(script.libraryResource(StepParams.RESOURCE) as String)
        Map asked = new LinkedHashMap(cli)
        List<String> requesters = FourEyes.requesters(script)
        if (requesters) {
            asked.requested_by = requesters
        }
        Map plan = onAgent(script, step) { exec(command, asked + [dry_run: true], []) }.result as Map
        if (cli.dry_run) {
            return plan
        }
        Map params = new LinkedHashMap(asked)
        Map approval = plan.approval ?: [:]
        if (approval.required) {
            params.approved_by = approve(script, stepName, step, plan, requesters)
        }
        Map result = null
        script.lock([resource: plan.lock.resource] + fleetLock) {
            // the approval steps are asked inside the lock: a paused release is still running
            Map flow = [stepName: stepName, command: command, params: params, requesters: requesters,
                        keeps: keeps]
            result = ReleaseSteps.run(script, flow) { List words, Map values, List allow ->
                onAgent(script, step) { exec(words, values, allow) }
            }
        }
        return result
    }

    /**
     * rollbackRelease(withNodes: true) changes nodes too: the fleet's lock ({@link FleetLock})
     * is taken with the target's in one `lock` step (`extra`, returned here: both or neither,
     * so no two builds each hold one and wait for the other), outside any agent. A build that
     * holds the fleet's lock already (GPUOPS_FLEET_LOCK) takes only the target's; one that
     * holds another fleet's fails.
     */
    static Map withFleet(Object script, String stepName, Object inventory, Object fleet) {
        String name = NodeSteps.lockOf(script, stepName, inventory, fleet)
        List<String> held = FleetLock.held(script.env[FleetLock.VARIABLE])
        if (held.contains(name)) {
            return [:]
        }
        if (held) {
            script.error("[${stepName}] this build holds ${held.join(', ')}, but the inventory is ${name}: lock " +
                'the fleet the rollback changes (invalid-input)')
        }
        return [extra: [[resource: name]]]
    }

    static String approve(Object script, String stepName, Map step, Map plan, List<String> requesters) {
        Map approval = plan.approval
        int minutes = (step.approvalTimeoutMinutes ?: approval.timeout_minutes ?: 60) as int
        Map wanted = plan.wanted ?: [:]
        String what = [wanted.tag, wanted.model ? "model ${wanted.model}" : null].findAll().join(', ')
        String by = requesters ? " Requested by ${requesters.join(', ')}, who cannot approve it." : ''
        Map nodes = plan.nodes ?: [:]
        String first = nodes.record ? " The nodes go back to node record ${nodes.record} first." : ''
        Map args = [message: "${plan.action} ${what} to ${plan.environment}${first ? ' with its nodes' : ''}? " +
                    "Every gate passed.${first}${by}".toString(),
                    ok: 'Release']
        if (approval.approvers) {
            args.submitter = approval.approvers.join(',')
        }
        String approver = null
        script.timeout(time: minutes, unit: 'MINUTES') {
            approver = FourEyes.approve(script, stepName, args, requesters)
        }
        return approver
    }

    static Map onAgent(Object script, Map step, Closure body) {
        Map result = null
        script.node(step.agentLabel) {
            if (step.checkout) {
                script.checkout(script.scm)
            }
            result = body()
        }
        return result
    }

}
