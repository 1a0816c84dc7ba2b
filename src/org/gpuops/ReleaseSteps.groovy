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

    /** The options of `release resume` that say who answered the approval step and how: set
     * here, never taken over from the release's own parameters. */
    static final List<String> ANSWER_OPTIONS = ['approved_by', 'requested_by', 'reject', 'reason'].asImmutable()

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
     * not paused. `flow`: [stepName:, command: (the CLI's words), params: (the release's CLI
     * parameters), requesters: (FourEyes.requesters), keeps: (those of the release's parameters
     * `release resume` takes too: {@link #kept})]. Returns the last result; fails the build with
     * the CLI's message (after the table) when the release failed or was refused.
     */
    static Map run(Object script, Map flow, Closure onAgent) {
        String stepName = flow.stepName
        Map result = settled(script, stepName, onAgent(flow.command, flow.params, SHOWN_BEFORE_FAILING) as Map)
        while (result.state == 'paused') {
            Map answer = ask(script, flow, result)
            if (answer.approver) {
                Map resumed = resumeParams(flow, answer.approver as String, null)
                result = settled(script, stepName, onAgent(RESUME, resumed, SHOWN_BEFORE_FAILING) as Map)
            } else {
                reject(script, flow, result, answer, onAgent)
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
     * what it threw, by: the user who pressed Abort (null: nobody did)]. The `input` runs where
     * this is called: outside any agent.
     */
    @SuppressWarnings('CatchException')  // `input` ended unanswered: Jenkins' FlowInterruptedException
    static Map ask(Object script, Map flow, Map result) {
        List<String> requesters = flow.requesters as List
        Map paused = result.paused ?: [:]
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
            answer = [problem: "not approved: ${reasonOf(interrupted)}".toString(), interrupted: interrupted,
                      by: rejecterOf(interrupted)]
        }
        return answer
    }

    /**
     * `release resume --reject`: the previous release restored, then the build stops: with what
     * the `input` threw (ABORTED, as a refused or timed-out approval ends today), or with the
     * four-eyes error. When someone else's change ended the release meanwhile (state `aborted`),
     * the build fails with the CLI's message; when the CLI did not reject it (its record did not
     * end: refused, bad input, unreachable), saying the release stays paused.
     */
    static void reject(Object script, Map flow, Map waiting, Map answer, Closure onAgent) {
        String stepName = flow.stepName
        String why = "approval step ${stepOf(waiting)} in Jenkins: ${answer.problem}"
        Map rejected = resumeParams(flow, answer.by as String, why)
        Map outcome = onAgent(RESUME, rejected, failureCategories()) as Map
        Map result = (outcome.result ?: [:]) as Map
        String shown = table(stepName, result)
        if (shown) {
            script.echo(shown)
        }
        Map error = (outcome.error ?: [:]) as Map
        if (result.state == 'aborted') {
            StepParams.settle(script, stepName, outcome, 'fail')  // someone else's change ended it: the CLI says
        }
        if (result.state != 'failed') {
            script.error(notRejected(stepName, answer.problem as String, waiting, error, outcome.verdict as String))
        }
        String text = "[${stepName}] ${answer.problem}: ${error.message ?: 'the previous release restored'} " +
            '(gate-refused)'
        if (answer.interrupted != null) {
            script.echo(text)
            throw (Throwable) answer.interrupted
        }
        script.error(text)
    }

    /** Every error category of the CLI: the reject's outcome comes back whatever it is. */
    @NonCPS
    static List<String> failureCategories() {
        return CliContract.CATEGORIES.values().findAll { it != 'ok' } as List<String>
    }

    /** The build's error when `release resume --reject` did not restore the previous release. */
    @NonCPS
    static String notRejected(String stepName, String problem, Map waiting, Map error, String verdict) {
        String said = CliContract.errorText(stepName, error, verdict)
        String prefix = "[${stepName}] "
        return "${prefix}${problem}; release #${recordOf(waiting)} could not be rejected: " +
            "${said.startsWith(prefix) ? said.substring(prefix.length()) : said}\n" +
            'It stays paused, its canary running, until `gpuops release resume --reject` or the next ' +
            '`release promote` of the environment restores the previous release.'
    }

    /**
     * The release's own parameters `release resume` takes as well (the environment, how to reach
     * its cluster, the link), from the CLI's description of its commands (the JSON text of
     * StepParams.RESOURCE); who answered and how are the approval's, never the release's.
     */
    @NonCPS
    static List<String> kept(String description) {
        List<Map> options = StepParams.options(description, RESUME)
        return options.collect { it.name.toString() }.findAll { !ANSWER_OPTIONS.contains(it) }
    }

    /** The parameters of `release resume`: the release's environment and cluster options, who
     * asked, and who answered (`approver`); with a `reason`, rejected. */
    @NonCPS
    static Map resumeParams(Map flow, String approver, String reason) {
        Map given = flow.params as Map
        Map params = [:]
        (flow.keeps as List).each { Object key ->
            if (given.containsKey(key)) {
                params.put(key, given.get(key))
            }
        }
        if (flow.requesters) {
            params.requested_by = new ArrayList<String>(flow.requesters as List)
        }
        if (approver) {
            params.approved_by = approver
        }
        if (reason != null) {
            params.reject = true
            params.reason = clean(reason, REASON_LIMIT)
        }
        return params
    }

    /** The `input`'s question: which release, which step, who asked, what no answer does. */
    @NonCPS
    static String question(Map result, List<String> requesters, int minutes) {
        Map wanted = result.wanted ?: [:]
        String what = [wanted.tag, wanted.model ? "model ${wanted.model}" : null].findAll().join(', ')
        String by = requesters ? " Requested by ${requesters.join(', ')}, who cannot approve it." : ''
        return "Release #${recordOf(result)} (${what} to ${result.environment}) is paused at step " +
            "${stepOf(result)} (approval): continue with its remaining steps?${by} Abort, or no answer " +
            "within ${minutes} minutes, restores the previous release."
    }

    /** The release's number: its record, else the paused record's. */
    @NonCPS
    static Object recordOf(Map result) {
        Map record = result.release ?: [:]
        Map paused = result.paused ?: [:]
        return record.number ?: paused.record ?: '?'
    }

    /** The step the release is paused at, numbered from 1 as the CLI says it. */
    @NonCPS
    static Object stepOf(Map result) {
        Map paused = result.paused ?: [:]
        return paused.step instanceof Number ? ((Number) paused.step).intValue() + 1 : '?'
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
        causesOf(thrown).each { Object cause ->
            Object text = cause.metaClass.respondsTo(cause, 'getShortDescription') ? cause.shortDescription : null
            if (text) {
                said.add(text.toString())
            }
        }
        String text = said ? said.join('; ') : (thrown.message ?: thrown.class.simpleName)
        return clean(text, REASON_LIMIT)
    }

    /** The user id of who pressed Abort (pipeline-input-step's Rejection cause); null: nobody. */
    @NonCPS
    static String rejecterOf(Throwable thrown) {
        for (Object cause in causesOf(thrown)) {
            Object user = cause.metaClass.respondsTo(cause, 'getUser') ? cause.user : null
            if (user?.id) {
                return user.id.toString()
            }
        }
        return null
    }

    @NonCPS
    static List causesOf(Throwable thrown) {
        Object causes = thrown.metaClass.respondsTo(thrown, 'getCauses') ? thrown.causes : null
        return causes instanceof Collection ? ((Collection) causes).findAll { it != null } as List : []
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
     * state, then one row per step: its number (from 1, as the CLI's progress lines say it;
     * `all` for the last), kind, state, started, finished and its detail; an analysis adds its
     * name, provider, failed and taken measurements and verdict.
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
        String number = step.kind == 'all' ? 'all' : (step.index instanceof Number ?
            (((Number) step.index).intValue() + 1).toString() : '-')
        return [number, cell(step.kind), cell(step.state), cell(step.started), cell(step.finished),
                clean(detail.join('; '), DETAIL_LIMIT) ?: '-']
    }

    @NonCPS
    static String cell(Object value) {
        return value == null ? '-' : clean(value, 40)
    }

}
