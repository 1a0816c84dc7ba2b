package org.gpuops

/**
 * The stand-in for what Jenkins' `input` throws when a user presses Abort: workflow-step-api's
 * FlowInterruptedException (result ABORTED) with one cause, the input step's Rejection, whose
 * short description is "Rejected by <user>" and whose getUser() is that user (pipeline-input-step's
 * Rejection). Only what the library reads is modelled: getCauses(), each cause's
 * getShortDescription() and the Rejection's getUser().getId() (hudson.model.User: a Map here).
 */
class InputRejected extends PipelineFailure {

    final String result = 'ABORTED'
    final List<Rejection> causes

    InputRejected(String userId) {
        super((String) null)
        causes = [new Rejection(userId)]
    }

    List<Rejection> getCauses() {
        return causes
    }

    /** pipeline-input-step's Rejection (a CauseOfInterruption). */
    static class Rejection implements Serializable {

        private static final long serialVersionUID = 1L

        final String userId

        Rejection(String userId) {
            this.userId = userId
        }

        String getShortDescription() {
            return "Rejected by ${userId}"
        }

        Map getUser() {
            return [id: userId]
        }

    }

}
