package org.gpuops

import com.cloudbees.groovy.cps.NonCPS

/**
 * The HTML report a step asks gpuopsExec to keep: a folder in the workspace (the CLI writes
 * it through its --report-dir option), the page in it, and the title it gets on the build page.
 */
class Reports implements Serializable {

    private static final long serialVersionUID = 1L

    /** A report folder: relative to the workspace, no '..', no shell or glob characters. */
    static final String DIR_PATTERN = /^[A-Za-z0-9_.-]+(\/[A-Za-z0-9_.-]+)*$/

    /**
     * Checks a report spec [dir:, page:, title:] and puts its folder into the CLI parameters
     * (report_dir), unless the user chose one there; returns the spec with the folder used, or
     * an empty map when no report is asked for.
     */
    @NonCPS
    static Map resolve(Map report, Map params) {
        if (!report) {
            return [:]
        }
        String dir = params?.report_dir ?: report.dir
        if (!dir || !(dir ==~ DIR_PATTERN) || dir.split('/').any { it == '..' || it == '.' }) {
            throw new IllegalArgumentException(
                "report folder ${Shell.describe(dir)} must be a relative path inside the workspace " +
                    "(letters, digits, '.', '_', '-' and '/', no '..')")
        }
        if (!(report.page ==~ /^[A-Za-z0-9_.-]+\.html$/)) {
            throw new IllegalArgumentException("report page ${Shell.describe(report.page)} must be a file name *.html")
        }
        params.report_dir = dir
        return [dir: dir, page: report.page.toString(), title: (report.title ?: report.page).toString()]
    }

    /**
     * Shows a report [dir:, page:, title:] on the build page where the HTML Publisher plugin is
     * installed; without it, says where the page is archived. Nothing when the page is not there
     * (the command wrote none). Archiving is the caller's: gpuopsExec archives the report folder,
     * the node steps their artifacts folder.
     */
    static void publish(Object script, String stepName, Map report) {
        if (!script.fileExists("${report.dir}/${report.page}")) {
            return
        }
        try {
            script.publishHTML(target: [reportDir: report.dir, reportFiles: report.page, reportName: report.title,
                                        keepAll: true, alwaysLinkToLastBuild: false, allowMissing: true])
        } catch (NoSuchMethodError e) {
            script.echo("[${stepName}] ${report.title}: archived as ${report.dir}/${report.page} " +
                        '(install the HTML Publisher plugin to see it on the build page)')
        }
    }

}
