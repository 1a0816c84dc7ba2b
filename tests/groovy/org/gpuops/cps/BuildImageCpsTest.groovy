package org.gpuops.cps

import org.gpuops.BuildImageTest
import org.junit.After

/** BuildImageTest's scenarios, with the library compiled and run as CPS (CpsPipelineHelper). */
class BuildImageCpsTest extends BuildImageTest {

    BuildImageCpsTest() {
        helper = CpsPipelineHelper.forRepository(REPO_ROOT)
    }

    @After
    void ranAsCps() {
        ((CpsPipelineHelper) helper).assertClean()
    }

}
