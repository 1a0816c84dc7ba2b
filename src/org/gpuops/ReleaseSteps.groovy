package org.gpuops

import com.cloudbees.groovy.cps.NonCPS

/**
 * A progressive release's steps on the Jenkins side (issue 20, S-22): the environment's
 * `strategy` in gpuops-release.yaml (a few replicas on a canary, pauses, analyses, approvals,
 * then all) is the CLI's to run; the CLI prints each step's progress line as it passes (its
 * stderr: the build's console) and its result carries the release's `steps`. This class
 * - prints those steps as a table after each CLI call (the steps so far at a pause, all of them
 *   at the end, the failed one when the release failed and was restored);
 * - answers each `approval` step the CLI pauses at (its result's state `paused`): an `input`
 *   outside any agent (no executor or pod held while a person decides), submitter = the step's
 *   approvers, inside `timeout(the step's timeout_minutes)`, four eyes as for the production
 *   approval ({@link FourEyes}); approved: `gpuops release resume --approved-by` on an agent
 *   again (the same label, checkout and credentials as the release), which runs the remaining
 *   steps and may pause again; refused, timed out, aborted or refused by four eyes:
 *   `release resume --reject --reason`, which restores the previous release, then the build
 *   stops (the input's own interruption, so a refusal or timeout ends ABORTED as today, or the
 *   four-eyes error).
 * Values reach the CLI only as parameters (gpuopsExec's params file), secrets only as
 * environment variables (the release's credential bindings).
 */
class ReleaseSteps implements Serializable {

    private static final long serialVersionUID = 1L

    static final List RESUME = ['release', 'resume'].asImmutable()

    /** What `release resume` takes of the release's own parameters: the environment and how to
     * reach its cluster (`--config`, `--kubeconfig`, `--context`; design of issue 20, section 5). */
    static final List<String> RESUME_KEEPS = ['environment', 'config', 'kubeconfig', 'context'].asImmutable()

    /** The CLI's refusals and failures come back to the step (not failing the build in
     * gpuopsExec), so that the steps that ran are shown before the build fails with its message. */
    static final List<String> SHOWN_BEFORE_FAILING = ['failed', 'gate-refused'].asImmutable()

    /** How long an approval step waits when the CLI names no timeout. */
    static final int DEFAULT_TIMEOUT_MINUTES = 60

    /** The longest reason sent with `--reject` (the CLI takes up to 4096 characters). */
    static final int REASON_LIMIT = 1000

    /**
     * Runs the release (`onAgent(words, params, allowCategories)`: gpuopsExec on an agent,
     * returning its outcome), then answers every approval step it pauses at, until its result is
     * not paused. `release`: [stepName:, command: (the CLI's words), params: (the release's CLI
     * parameters), requesters: (FourEyes.requesters)]. Returns the last result; fails the build
     * with the CLI's message (after the table) when the release failed or was refused.
     */
    static Map run(Object script, Map release, Closure onAgent) {
        String stepName = release.stepName
        Map result = settled(script, stepName, onAgent(release.command, release.params, SHOWN_BEFORE_FAILING) as Map)
        while (result.state == 'paused') {
            Map answer = ask(script, release, result)
            if (answer.approver) {
                Map resumed = resumeParams(release.params as Map, release.requesters as List, answer.approver as String,
                                           null)
                result = settled(script, stepName, onAgent(RESUME, resumed, SHOWN_BEFORE_FAILING) as Map)
            } else {
                reject(script, release, result, answer, onAgent)
            }
        }
        return result
    }

    /**
     * Shows the outcome's steps, then fails the build as gpuopsExec would (the CLI's message and
     * hint) unless the CLI succeeded; returns its result.
     */
    static Map settled(Object script, String stepName, Map outcome) {
        Map result = (outcome.result ?: [:]) as Map
        String shown = table(stepName, result)
        if (shown) {
            script.echo(shown)
        }
        StepParams.settle(script, stepName, outcome, 'fail')
        return result
    }

    /**
     * The approval of the step the result is paused at: [approver: id], or [problem: why not]
     * and, when the `input` itself ended (refused, timed out, the build aborted), [interrupted:
     * what it threw]. The `input` runs where this is called: outside any agent.
     */
    @SuppressWarnings('CatchException')  // `input` ended unanswered: Jenkins' FlowInterruptedException
    static Map ask(Object script, Map release, Map result) {
        List<String> requesters = release.requesters as List
        Map paused = (result.paused ?: [:]) as Map
        int minutes = (paused.timeout_minutes ?: DEFAULT_TIMEOUT_MINUTES) as int
        Map args = [message: question(result, requesters, minutes), ok: 'Continue']
        if (paused.approvers) {
            args.submitter = joined(paused.approvers as List)
        }
        Map answer = null
        try {
            script.timeout(time: minutes, unit: 'MINUTES') {
                answer = FourEyes.answer(script, args, requesters)
            }
        } catch (Exception interrupted) {
            answer = [problem: "not approved: ${reasonOf(interrupted)}".toString(), interrupted: interrupted]
        }
        return answer
    }

    /**
     * `release resume --reject`: restores the previous release, then stops the build: with what
     * the `input` threw (ABORTED, as a refused or timed-out approval ends today), or with the
     * four-eyes error. A reject the CLI could not carry out fails the build with its message.
     */
    static void reject(Object script, Map release, Map result, Map answer, Closure onAgent) {
        String stepName = release.stepName
        String why = "approval step ${stepOf(result)} in Jenkins: ${answer.problem}"
        Map rejected = resumeParams(release.params as Map, release.requesters as List, null, why)
        Map outcome = onAgent(RESUME, rejected, SHOWN_BEFORE_FAILING) as Map
        String shown = table(stepName, (outcome.result ?: [:]) as Map)
        if (shown) {
            script.echo(shown)
        }
        if (!outcome.ok && outcome.verdict != 'refused') {
            StepParams.settle(script, stepName, outcome, 'fail')  // the restore itself failed
        }
        String restored = outcome.error?.message ?: "release #${recordOf(result)} stopped, the previous " +
            'release restored'
        String text = "[${stepName}] ${answer.problem}: ${restored} (gate-refused)"
        if (answer.interrupted != null) {
            script.echo(text)
            throw (Throwable) answer.interrupted
        }
        script.error(text)
    }

    /** The parameters of `release resume`: approved by `approver`, or rejected for `reason`. */
    @NonCPS
    static Map resumeParams(Map release, List<String> requesters, String approver, String reason) {
        Map params = [:]
        RESUME_KEEPS.each { String key ->
            if (release.containsKey(key)) {
                params.put(key, release.get(key))
            }
        }
        if (requesters) {
            params.requested_by = new ArrayList<String>(requesters)
        }
        if (approver) {
            params.approved_by = approver
        } else {
            params.reject = true
            params.reason = clean(reason, REASON_LIMIT)
        }
        return params
    }

    /** The `input`'s question: which release, which step, who asked, what no answer does. */
    @NonCPS
    static String question(Map result, List<String> requesters, int minutes) {
        Map wanted = (result.wanted ?: [:]) as Map
        String what = [wanted.tag, wanted.model ? "model ${wanted.model}" : null].findAll().join(', ')
        String by = requesters ? " Requested by ${requesters.join(', ')}, who cannot approve it." : ''
        return "Release #${recordOf(result)} (${what} to ${result.environment}) is paused at step " +
            "${stepOf(result)} (approval): continue with its remaining steps?${by} Abort, or no answer " +
            "within ${minutes} minutes, restores the previous release."
    }

    @NonCPS
    static Object recordOf(Map result) {
        Map release = (result.release ?: [:]) as Map
        Map paused = (result.paused ?: [:]) as Map
        return release.number ?: paused.record ?: '?'
    }

    @NonCPS
    static Object stepOf(Map result) {
        Map paused = (result.paused ?: [:]) as Map
        return paused.step == null ? '?' : paused.step
    }

    @NonCPS
    static String joined(List names) {
        return names.collect { it.toString() }.join(',')
    }

    /**
     * Why an `input` ended without an approval: the short descriptions of a Jenkins
     * FlowInterruptedException's causes ("Rejected by bob", "Timeout has been exceeded"), else
     * the exception's message.
     */
    @NonCPS
    static String reasonOf(Throwable thrown) {
        List<String> said = []
        if (thrown.metaClass.respondsTo(thrown, 'getCauses')) {
            thrown.causes.each { Object cause ->
                Object text = cause?.metaClass?.respondsTo(cause, 'getShortDescription') ? cause.shortDescription : null
                if (text) {
                    said.add(text.toString())
                }
            }
        }
        String text = said ? said.join('; ') : (thrown.message ?: thrown.class.simpleName)
        return clean(text, REASON_LIMIT)
    }

    /** One line of at most `limit` characters: control characters become spaces. */
    @NonCPS
    static String clean(Object text, int limit) {
        String line = (text == null ? '' : text.toString()).replaceAll('\\p{Cntrl}+', ' ').trim()
        return line.length() > limit ? line.substring(0, limit - 3) + '...' : line
    }

    // ---- the table -------------------------------------------------------------------------

    static final List<String> HEADINGS = ['#', 'STEP', 'STATE', 'STARTED', 'FINISHED', 'DETAIL'].asImmutable()

    /** The longest detail shown in a row (the release record keeps all of it). */
    static final int DETAIL_LIMIT = 200

    /**
     * The steps of a release result as a table (null: the result has none): the release, its
     * state, then one row per step: index, kind, state, started, finished and its detail; an
     * analysis adds its name, provider, failed and taken measurements and verdict.
     */
    @NonCPS
    static String table(String stepName, Map result) {
        if (!(result.steps instanceof List) || !result.steps) {
            return null
        }
        List<List<String>> rows = [HEADINGS]
        result.steps.each { Object step ->
            rows.add(row(step instanceof Map ? (Map) step : [:]))
        }
        List<Integer> widths = (0..<HEADINGS.size()).collect { int column ->
            rows.collect { List<String> cells -> cells[column].length() }.max()
        }
        List<String> lines = ["[${stepName}] release #${recordOf(result)}: ${result.state}".toString()]
        rows.each { List<String> cells ->
            List<String> padded = []
            cells.eachWithIndex { String cell, int column ->
                padded.add(column == cells.size() - 1 ? cell : cell.padRight(widths[column]))
            }
            lines.add('  ' + padded.join('  ').trim())
        }
        return lines.join('\n')
    }

    @NonCPS
    static List<String> row(Map step) {
        List<String> detail = []
        if (step.kind == 'analysis') {
            String name = [step.name, step.provider ? "(${step.provider})" : null].findAll().join(' ')
            int taken = step.measurements instanceof List ? step.measurements.size() : 0
            detail.add("${name}: ${step.failures ?: 0} of ${taken} measurements failed".toString())
            if (step.verdict) {
                detail.add("verdict ${step.verdict}".toString())
            }
        }
        if (step.detail) {
            detail.add(step.detail.toString())
        }
        return [cell(step.index), cell(step.kind), cell(step.state), cell(step.started), cell(step.finished),
                clean(detail.join('; '), DETAIL_LIMIT) ?: '-']
    }

    @NonCPS
    static String cell(Object value) {
        return value == null ? '-' : clean(value, 40)
    }

}
