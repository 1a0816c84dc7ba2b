package org.gpuops.offenders

import com.cloudbees.groovy.cps.NonCPS

/**
 * PLANTED CPS OFFENDER (a src/-like class; CpsOffendersTest expects the harness to fail it):
 * a @NonCPS method calls a CPS method (one that runs a step). Jenkins cannot run the CPS
 * method from plain code: groovy-cps 1.12 silently cuts describe() short, newer workflow-cps
 * reports a CPS mismatch.
 */
class LabelList implements Serializable {

    private static final long serialVersionUID = 1L

    final Object steps

    LabelList(Object steps) {
        this.steps = steps
    }

    @NonCPS
    String describe(List<String> names) {
        return names.collect { String name -> label(name) }.join(', ')
    }

    String label(String name) {
        steps.echo("labelling ${name}")
        return "<${name}>"
    }

}
