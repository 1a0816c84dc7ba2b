package org.gpuops.cps

import org.gpuops.DeclarativeShimTest
import org.junit.After

/** DeclarativeShimTest's scenarios (the shim's rules, post {} blocks included), with the
 *  snippets compiled and run as CPS (CpsPipelineHelper). */
class DeclarativeShimCpsTest extends DeclarativeShimTest {

    DeclarativeShimCpsTest() {
        helper = CpsPipelineHelper.forRepository(REPO_ROOT)
    }

    @After
    void ranAsCps() {
        ((CpsPipelineHelper) helper).assertClean()
    }

}
