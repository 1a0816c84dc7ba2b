package org.gpuops.cps

/** What Jenkins' CPS engine would refuse or run wrongly (an Error: the library's catch (Exception) lets it through). */
class CpsViolation extends AssertionError {

    CpsViolation(String message) {
        super((Object) message)
    }

}
