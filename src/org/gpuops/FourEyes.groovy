package org.gpuops

import com.cloudbees.groovy.cps.NonCPS

/**
 * Four eyes (S-27) on the Jenkins side: whoever asked for the build cannot approve what it does.
 * The requesters are the users of this build's user causes (queued identical requests merge
 * into one build with several) and of every upstream build's (a release started by
 * `build job:` from a job a user started). `input` names its submitter (submitterParameter);
 * an approval by any requester fails the step, whatever Jenkins let through (an administrator
 * may answer any input). Where an approval is needed and no requester is found (a timer, SCM
 * or remote-token trigger), the step refuses: four eyes cannot be checked. `anonymous` and
 * `SYSTEM` are never a person. The release CLI checks the same again (`--requested-by`,
 * `--approved-by`) and records the names. What this cannot prevent:
 * docs/RELEASES.md#what-jenkins-administrators-can-still-do.
 */
class FourEyes implements Serializable {

    private static final long serialVersionUID = 1L

    /** The build cause a person gives by starting a build (Build Now, Build with Parameters, Replay). */
    static final String USER_CAUSE = 'hudson.model.Cause$UserIdCause'

    /** A Jenkins user id as the CLI accepts it (no spaces: a display name is not an id). */
    static final String USER_ID = /[A-Za-z0-9_][A-Za-z0-9_.@+-]{0,99}/

    /** Jenkins' technical ids: never a person, so never a requester or an approver. */
    static final List<String> TECHNICAL_IDS = ['anonymous', 'SYSTEM'].asImmutable()

    /** What the step says when four eyes stops an approval before anything changed. */
    static final String NOTHING_CHANGED = 'nothing was changed'

    /** Why four eyes needs a requester (a build no user started names nobody). */
    static final String NO_REQUESTER = 'four eyes needs to know who asked for this release: start it as a user ' +
        '(Build with Parameters), or from a job a user started; a timer, SCM or remote-token trigger names nobody'

    /** Who asked for this build: the user ids of its user causes and of every upstream build's,
     * each once, in order; empty when no user started any of them (timer, SCM, remote token). */
    static List<String> requesters(Object script) {
        List found = []
        found.addAll(userIdsOf(script.currentBuild.getBuildCauses(USER_CAUSE)))
        for (Object upstream in (script.currentBuild.getUpstreamBuilds() ?: [])) {
            found.addAll(userIdsOf(upstream.getBuildCauses(USER_CAUSE)))
        }
        return distinct(found)
    }

    @NonCPS
    static List<String> userIdsOf(Object causes) {
        List<String> ids = []
        for (Object cause in ((causes ?: []) as List)) {
            Object id = cause?.userId
            if (id && !isTechnical(id.toString())) {
                ids.add(id.toString())
            }
        }
        return ids
    }

    @NonCPS
    static List<String> distinct(List ids) {
        List<String> kept = []
        for (Object id in ids) {
            if (!kept.any { samePerson(it as String, id as String) }) {
                kept.add(id as String)
            }
        }
        return kept
    }

    /** The requester that `approver` is (ignoring case), or null. */
    @NonCPS
    static String sameAs(String approver, List<String> requesters) {
        return requesters.find { samePerson(approver, it) }
    }

    /** Whether an id is `anonymous` or `SYSTEM` (any case). */
    @NonCPS
    static boolean isTechnical(String id) {
        return id != null && TECHNICAL_IDS.any { it.equalsIgnoreCase(id.trim()) }
    }

    /** Whether two ids name one user: Jenkins' default IdStrategy ignores case, so this does too. */
    @NonCPS
    static boolean samePerson(String a, String b) {
        return a != null && b != null && a.trim().equalsIgnoreCase(b.trim())
    }

    /** {@link #approve} with this build's requesters: for a Jenkinsfile's own approval stage. */
    static String ask(Object script, String what, Map args) {
        return approve(script, what, args, requesters(script))
    }

    /**
     * Asks `input` (its arguments `args`; the caller's `timeout` around it) and returns the user
     * id that approved. Fails the step, before asking, when there is no requester to compare
     * with; after, when the approver is a requester, a technical id, or when Jenkins gave no id.
     */
    static String approve(Object script, String stepName, Map args, List<String> requesters) {
        Map answer = answer(script, args, requesters)
        if (answer.problem) {
            script.error("[${stepName}] ${answer.problem}: ${NOTHING_CHANGED} (gate-refused)")
        }
        return answer.approver
    }

    /**
     * {@link #approve} without failing the step: [approver: id] when a person other than the
     * requesters approved, else [problem: why not] (no requester known: `input` is not asked).
     * An `input` that is refused or times out throws as `input` does.
     */
    static Map answer(Object script, Map args, List<String> requesters) {
        if (!requesters) {
            return [problem: NO_REQUESTER]
        }
        Map asked = new LinkedHashMap(args)
        asked.submitterParameter = 'GPUOPS_APPROVER'
        Object answer = script.input(asked)
        String approver = answer == null ? null : answer.toString()
        String problem = problemWith(approver, requesters)
        return problem ? [problem: problem] : [approver: approver]
    }

    /** Why `approver` (what `input` returned) cannot approve what `requesters` asked; null: it can. */
    @NonCPS
    static String problemWith(String approver, List<String> requesters) {
        if (!approver || !(approver ==~ USER_ID)) {
            return "the approval did not name a Jenkins user id (${approver == null ? 'none' : 'not an id'})"
        }
        if (isTechnical(approver)) {
            return "${approver} is a technical id, not a person: it cannot approve (four eyes)"
        }
        String requester = sameAs(approver, requesters)
        if (requester) {
            return "${approver} cannot approve what ${requester} requested (four eyes: the requester never " +
                'approves; someone else among the approvers must)'
        }
        return null
    }

}
