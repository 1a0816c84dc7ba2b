package org.gpuops

import com.cloudbees.groovy.cps.NonCPS

/**
 * Four eyes (S-27) on the Jenkins side: the person who started the build (its user cause)
 * cannot approve what it does. `input` names its submitter (submitterParameter); a requester's
 * own approval fails the step, whatever Jenkins let through (an administrator may answer any
 * input). A build started by a timer or an upstream job has no user cause: no requester, and the
 * approval stands alone. The release CLI checks the same again (`--requested-by`, `--approved-by`)
 * and records both names. What this cannot prevent: docs/RELEASES.md#what-jenkins-administrators-can-still-do.
 */
class FourEyes implements Serializable {

    private static final long serialVersionUID = 1L

    /** The build cause a person gives by starting a build (Build Now, Build with Parameters, Replay). */
    static final String USER_CAUSE = 'hudson.model.Cause$UserIdCause'

    /** A Jenkins user id as the CLI accepts it (no spaces: a display name is not an id). */
    static final String USER_ID = /[A-Za-z0-9_][A-Za-z0-9_.@+-]{0,99}/

    /** Who started this build: the user id of its user cause, or null (timer, upstream job, SCM). */
    static String requester(Object script) {
        Object causes = script.currentBuild.getBuildCauses(USER_CAUSE)
        return userIdOf(causes)
    }

    @NonCPS
    static String userIdOf(Object causes) {
        List found = (causes ?: []) as List
        Object id = found ? found[0]?.userId : null
        return id ? id.toString() : null
    }

    /** Whether two ids name one user: Jenkins' default IdStrategy ignores case, so this does too. */
    @NonCPS
    static boolean samePerson(String a, String b) {
        return a != null && b != null && a.trim().equalsIgnoreCase(b.trim())
    }

    /** {@link #approve} with this build's requester: for a Jenkinsfile's own approval stage. */
    static String ask(Object script, String what, Map args) {
        return approve(script, what, args, requester(script))
    }

    /**
     * Asks `input` (its arguments `args`; the caller's `timeout` around it) and returns the user
     * id that approved. Fails the step when it is the requester, or when Jenkins gave no id.
     */
    static String approve(Object script, String stepName, Map args, String requester) {
        Map asked = new LinkedHashMap(args)
        asked.submitterParameter = 'GPUOPS_APPROVER'
        Object answer = script.input(asked)
        String approver = answer == null ? null : answer.toString()
        if (!approver || !(approver ==~ USER_ID)) {
            script.error("[${stepName}] the approval did not name a Jenkins user id " +
                "(${approver == null ? 'none' : 'not an id'}): nothing was changed (gate-refused)")
        }
        if (samePerson(approver, requester)) {
            script.error("[${stepName}] ${approver} cannot approve what ${requester} requested (four eyes: " +
                'the requester never approves; someone else among the approvers must): nothing was changed ' +
                '(gate-refused)')
        }
        return approver
    }

}
