package org.gpuops.cps

import org.gpuops.UpdateGpuNodesTest
import org.junit.After

/** UpdateGpuNodesTest's scenarios, with the library compiled and run as CPS (CpsPipelineHelper). */
class UpdateGpuNodesCpsTest extends UpdateGpuNodesTest {

    UpdateGpuNodesCpsTest() {
        helper = CpsPipelineHelper.forRepository(REPO_ROOT)
    }

    @After
    void ranAsCps() {
        ((CpsPipelineHelper) helper).assertClean()
    }

}
