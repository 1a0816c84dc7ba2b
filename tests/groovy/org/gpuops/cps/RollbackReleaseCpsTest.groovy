package org.gpuops.cps

import org.gpuops.RollbackReleaseTest
import org.junit.After

/** RollbackReleaseTest's scenarios with the library compiled and run as CPS (CpsPipelineHelper). */
class RollbackReleaseCpsTest extends RollbackReleaseTest {

    RollbackReleaseCpsTest() {
        helper = CpsPipelineHelper.forRepository(REPO_ROOT)
    }

    @After
    void ranAsCps() {
        ((CpsPipelineHelper) helper).assertClean()
    }

}
