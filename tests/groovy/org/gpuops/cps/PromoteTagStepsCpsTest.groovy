package org.gpuops.cps

import org.gpuops.PromoteTagStepsTest
import org.junit.After

/** PromoteTagStepsTest's scenarios (approval steps, refusals, timeouts, four eyes), with the
 *  library compiled and run as CPS (CpsPipelineHelper). */
class PromoteTagStepsCpsTest extends PromoteTagStepsTest {

    PromoteTagStepsCpsTest() {
        helper = CpsPipelineHelper.forRepository(REPO_ROOT)
    }

    @After
    void ranAsCps() {
        ((CpsPipelineHelper) helper).assertClean()
    }

}
