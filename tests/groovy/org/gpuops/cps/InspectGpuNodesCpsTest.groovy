package org.gpuops.cps

import org.gpuops.InspectGpuNodesTest
import org.junit.After

/** InspectGpuNodesTest's scenarios, with the library compiled and run as CPS (CpsPipelineHelper). */
class InspectGpuNodesCpsTest extends InspectGpuNodesTest {

    InspectGpuNodesCpsTest() {
        helper = CpsPipelineHelper.forRepository(REPO_ROOT)
    }

    @After
    void ranAsCps() {
        ((CpsPipelineHelper) helper).assertClean()
    }

}
