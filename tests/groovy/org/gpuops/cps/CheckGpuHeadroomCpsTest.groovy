package org.gpuops.cps

import static org.junit.Assert.assertTrue

import org.gpuops.CheckGpuHeadroomTest
import org.junit.After
import org.junit.Test

/** CheckGpuHeadroomTest's scenarios with the library compiled and run as CPS (CpsPipelineHelper). */
class CheckGpuHeadroomCpsTest extends CheckGpuHeadroomTest {

    CheckGpuHeadroomCpsTest() {
        helper = CpsPipelineHelper.forRepository(REPO_ROOT)
    }

    @After
    void ranAsCps() {
        ((CpsPipelineHelper) helper).assertClean()
    }

    /** The plain test's cases, but `pods: new Object()`: under CPS that value cannot even be held
     *  across the step that reads the CLI's description, so Jenkins fails the build there. */
    @Override
    @Test
    void badParametersAreRejectedBeforeTheCliRuns() {
        CpsPipelineHelper cps = (CpsPipelineHelper) helper
        try {
            runStep('checkGpuHeadroom', [gpusPerPod: 1, pods: new Object()])
            throw new AssertionError((Object) 'a parameter that is not Serializable passed')
        } catch (CpsViolation violation) {
            assertTrue(violation.message, violation.message.contains("not serializable at step 'libraryResource'"))
            assertTrue(violation.message, violation.message.contains('is a java.lang.Object'))
        }
        cps.violations.clear()
        Map<Map, String> cases = [
            ([:])                                  : "parameter 'gpusPerPod' is required",
            ([gpusPerPod: 1, onShortage: 'ignore']) :
                "parameter 'onShortage' must be one of 'fail', 'unstable', got 'ignore'",
            ([gpusPerPod: 1, kubeconfigCredentialsId: 7]): "parameter 'kubeconfigCredentialsId' must be a String",
            ([gpusPerPod: 1, gpuPerPod: 2])         : 'unknown parameter(s) gpuPerPod; known parameters: context, ',
            ([gpusPerPod: 1, pods: Double.NaN])     : "parameter 'pods' is NaN, which JSON cannot carry",
            ([gpusPerPod: 1, nodeSelector: [a: null]]): "parameter 'nodeSelector' cannot be passed to the CLI: null",
        ]
        cases.each { Map config, String expected ->
            String message = runStepExpectingError('checkGpuHeadroom', config)
            assertTrue("${config}: ${message}", message.startsWith("[checkGpuHeadroom] ${expected}"))
        }
        assertTrue('nothing may run for bad parameters', shCalls.isEmpty())
    }

}
