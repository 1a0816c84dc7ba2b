package org.gpuops.cps

import org.gpuops.JenkinsfileFleetLockTest
import org.junit.After

/**
 * JenkinsfileFleetLockTest's scenarios with the library and the Jenkinsfile compiled and run
 * as CPS (CpsPipelineHelper).
 */
class JenkinsfileFleetLockCpsTest extends JenkinsfileFleetLockTest {

    JenkinsfileFleetLockCpsTest() {
        helper = CpsPipelineHelper.forRepository(REPO_ROOT)
    }

    @After
    void ranAsCps() {
        ((CpsPipelineHelper) helper).assertClean()
    }

}
