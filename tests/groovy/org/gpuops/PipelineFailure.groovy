package org.gpuops

/** What the `error` step throws in the tests (hudson.AbortException in Jenkins). */
class PipelineFailure extends RuntimeException {

    PipelineFailure(String message) {
        super((String) message)
    }

}
