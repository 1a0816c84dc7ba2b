package org.gpuops.cps

import org.gpuops.GpuopsExecTest
import org.junit.After

/** GpuopsExecTest's scenarios, with the library compiled and run as CPS (CpsPipelineHelper). */
class GpuopsExecCpsTest extends GpuopsExecTest {

    GpuopsExecCpsTest() {
        helper = CpsPipelineHelper.forRepository(REPO_ROOT)
    }

    @After
    void ranAsCps() {
        ((CpsPipelineHelper) helper).assertClean()
    }

}
