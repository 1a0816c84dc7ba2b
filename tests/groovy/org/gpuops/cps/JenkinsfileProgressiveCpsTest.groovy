package org.gpuops.cps

import org.gpuops.JenkinsfileProgressiveTest
import org.junit.After

/** JenkinsfileProgressiveTest's scenarios (Jenkinsfile.example's Release stage with approval
 *  steps), run as CPS (CpsPipelineHelper). */
class JenkinsfileProgressiveCpsTest extends JenkinsfileProgressiveTest {

    JenkinsfileProgressiveCpsTest() {
        helper = CpsPipelineHelper.forRepository(REPO_ROOT)
    }

    @After
    void ranAsCps() {
        ((CpsPipelineHelper) helper).assertClean()
    }

}
