package org.gpuops.cps

import org.gpuops.PromoteTagTest
import org.junit.After

/** PromoteTagTest's scenarios, with the library compiled and run as CPS (CpsPipelineHelper). */
class PromoteTagCpsTest extends PromoteTagTest {

    PromoteTagCpsTest() {
        helper = CpsPipelineHelper.forRepository(REPO_ROOT)
    }

    @After
    void ranAsCps() {
        ((CpsPipelineHelper) helper).assertClean()
    }

}
