package org.gpuops.cps

import org.gpuops.JenkinsfileStagesTest
import org.junit.After

/** Jenkinsfile.example's stages (JenkinsfileStagesTest's scenarios, post {} blocks included),
 *  with the library and the Jenkinsfile compiled and run as CPS (CpsPipelineHelper). */
class JenkinsfileStagesCpsTest extends JenkinsfileStagesTest {

    JenkinsfileStagesCpsTest() {
        helper = CpsPipelineHelper.forRepository(REPO_ROOT)
    }

    @After
    void ranAsCps() {
        ((CpsPipelineHelper) helper).assertClean()
    }

}
