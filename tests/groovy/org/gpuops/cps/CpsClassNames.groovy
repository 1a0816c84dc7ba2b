package org.gpuops.cps

/** Frame names the harness recognises. */
final class CpsClassNames {

    /** Continuable.suspend: a pipeline step call (CpsPipelineHelper suspends the program there). */
    static final String SUSPEND = 'com.cloudbees.groovy.cps.Continuable.suspend'

    private CpsClassNames() { }

}
