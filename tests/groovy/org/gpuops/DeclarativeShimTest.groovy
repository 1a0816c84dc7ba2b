package org.gpuops

import static org.junit.Assert.assertEquals
import static org.junit.Assert.assertTrue

import org.junit.Before
import org.junit.Test

/** The Declarative shim's semantics, on a sample pipeline (tests/groovy/pipelines/declarative-sample.jenkins). */
class DeclarativeShimTest extends GpuOpsPipelineTest {

    List<String> console = []
    Declarative shim

    @Before
    void installShim() {
        env.remove('WORKSPACE')
        helper.registerAllowedMethod('echo', [String]) { String text -> console.add(text) }
        shim = installDeclarative(console)
    }

    Object runSample(Map params) {
        binding.setVariable('params', params)
        return runScript('tests/groovy/pipelines/declarative-sample.jenkins')
    }

    @Test
    void runsWhatItsWhenAllowsOnTheRightAgentsAndPostsBySuccess() {
        runSample([JOB: 'build'])

        assertEquals([[stage: 'Skipped before any agent', status: 'skipped (when)'],
                      [stage: 'Skipped on its agent', status: 'skipped (when)'],
                      [stage: 'One', status: 'SUCCESS'], [stage: 'Two', status: 'SUCCESS'],
                      [stage: 'Build', status: 'SUCCESS'], [stage: 'After', status: 'SUCCESS']], shim.stageLog)
        assertEquals('beforeAgent skips without an agent; otherwise the agent is taken first',
            ['looked', 'builder'], agents*.label)
        assertEquals(['looked-1', 'builder-2'], checkouts)
        assertEquals(['one on builder-2', 'two for infer', 'after on no agent', 'stage post', 'pipeline always',
                      'pipeline success'], console.findAll { !it.startsWith('[Pipeline]') && !it.startsWith('Stage ') })
        assertEquals([[timeout: [time: 5, unit: 'MINUTES']]], shim.pipeline.options)
        assertJobStatusSuccess()
    }

    @Test
    void aFailingStageSkipsTheRestAndRunsThePostFailure() {
        try {
            runSample([JOB: 'build', FAIL: true])
            throw new AssertionError((Object) 'the pipeline should have failed')
        } catch (PipelineFailure failure) {
            assertEquals('boom', failure.message)
        }

        assertEquals([[stage: 'Two', status: 'FAILURE'], [stage: 'Build', status: 'FAILURE'],
                      [stage: 'After', status: 'skipped (earlier failure)']], shim.stageLog.drop(3))
        assertTrue(console.contains('pipeline failure'))
        assertTrue(!console.contains('pipeline success') && !console.contains('stage post'))
        assertJobStatusFailure()
    }

    @Test
    void whatItDoesNotSupportFailsLoudly() {
        binding.setVariable('params', [:])
        try {
            runScript('tests/groovy/pipelines/declarative-parallel.jenkins')
            throw new AssertionError((Object) 'parallel should be refused')
        } catch (UnsupportedOperationException e) {
            assertEquals("the Declarative shim does not support 'parallel'", e.message)
        }
    }

}
