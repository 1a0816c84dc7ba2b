package org.gpuops.cps

import org.gpuops.JenkinsfileNodeChangeTest
import org.junit.After

/** Jenkinsfile.example run through the Declarative shim (JenkinsfileNodeChangeTest's scenarios),
 *  with the library and the Jenkinsfile compiled and run as CPS (CpsPipelineHelper). */
class JenkinsfileNodeChangeCpsTest extends JenkinsfileNodeChangeTest {

    JenkinsfileNodeChangeCpsTest() {
        helper = CpsPipelineHelper.forRepository(REPO_ROOT)
    }

    @After
    void ranAsCps() {
        ((CpsPipelineHelper) helper).assertClean()
    }

}
