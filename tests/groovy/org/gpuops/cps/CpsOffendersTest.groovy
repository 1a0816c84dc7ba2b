package org.gpuops.cps

import static com.lesfurets.jenkins.unit.global.lib.LibraryConfiguration.library
import static org.junit.Assert.assertEquals
import static org.junit.Assert.assertTrue

import org.gpuops.GpuOpsPipelineTest
import org.gpuops.RepositorySource
import org.junit.Before
import org.junit.Test

/**
 * The planted offenders (tests/groovy/cps-offenders: a src/-like class, vars/-like steps,
 * Jenkinsfiles) fail under the CPS harness, each with its reason. Run without CPS (plain
 * JenkinsPipelineUnit, as every other test here) the same code passes: that is what the
 * harness is for.
 */
class CpsOffendersTest extends GpuOpsPipelineTest {

    static final String OFFENDERS = new File(REPO_ROOT, CpsPipelineHelper.OFFENDERS).path

    CpsOffendersTest() {
        helper = CpsPipelineHelper.forRepository(REPO_ROOT)
    }

    @Before
    @Override
    void setUp() throws Exception {
        helper.registerSharedLibrary(library().name('gpu-ops-offenders')
            .defaultVersion('main').allowOverride(false).implicit(true)
            .targetPath(OFFENDERS).retriever(new RepositorySource(OFFENDERS)).build())
        super.setUp()
        pipeline = loadScript('tests/groovy/cps-offenders/Jenkinsfile.offenders')
    }

    CpsPipelineHelper cps() {
        return (CpsPipelineHelper) helper
    }

    /** Runs the call and returns the CpsViolation it fails with. */
    String violation(Closure call) {
        try {
            call()
        } catch (CpsViolation violation) {
            assertEquals('the harness recorded it too', [violation.message], cps().violations)
            println(violation.message)  // the reason, in the test report
            return violation.message
        }
        throw new AssertionError((Object) 'the harness let the offender pass')
    }

    @Test
    void aVarsStepHoldingAMatcherAcrossAStepCannotBeSaved() {
        String message = violation { pipeline.invokeMethod('heldMatcher', ['from build-42'] as Object[]) }

        assertTrue(message, message.startsWith("program state not serializable at step 'echo' (heldMatcher.call("))
        assertTrue(message, message.contains('java.io.NotSerializableException: java.util.regex.Matcher'))
        assertTrue(message, message.contains('is a java.util.regex.Matcher'))
    }

    @Test
    void aVarsStepHoldingAMatcherInAnAtFieldAcrossAStepCannotBeSaved() {
        String message = violation { pipeline.invokeMethod('fieldMatcher', ['from build-42'] as Object[]) }

        assertTrue(message, message.startsWith("program state not serializable at step 'echo' (fieldMatcher.call("))
        assertTrue(message, message.contains('java.io.NotSerializableException: java.util.regex.Matcher'))
        // assigned in CPS code, the @Field goes through Script.setProperty into the binding
        assertTrue(message, message.contains("binding variable 'held' is a java.util.regex.Matcher"))
    }

    @Test
    void aVarsStepHoldingAMatcherInItsOwnAtFieldAcrossAStepCannotBeSaved() {
        String message = violation { pipeline.invokeMethod('fieldMatcherNonCps', ['from build-42'] as Object[]) }

        assertTrue(message, message.startsWith(
            "program state not serializable at step 'echo' (fieldMatcherNonCps.call("))
        assertTrue(message, message.contains('java.io.NotSerializableException: java.util.regex.Matcher'))
        assertTrue(message, message.contains('@Field kept of script fieldMatcherNonCps is a java.util.regex.Matcher'))
    }

    @Test
    void aJenkinsfileHoldingAMatcherInItsBindingAcrossAStepCannotBeSaved() {
        installDeclarative([])

        String message = violation { runScript('tests/groovy/cps-offenders/Jenkinsfile.bindingMatcher') }

        assertTrue(message, message.startsWith("program state not serializable at step 'echo' ("))
        assertTrue(message, message.contains('java.io.NotSerializableException: java.util.regex.Matcher'))
        assertTrue(message, message.contains("binding variable 'm' is a java.util.regex.Matcher"))
    }

    @Test
    void aSrcClassCallingCpsCodeFromNonCpsFails() {
        String message = violation { pipeline.invokeMethod('labelNodes', [['gpu-1', 'gpu-2']] as Object[]) }

        assertTrue(message, message.startsWith('CPS-unsafe call: CPS code org.gpuops.offenders.LabelList.label('))
        assertTrue(message, message.contains(
            'reached from non-CPS code org.gpuops.offenders.LabelList$_describe_closure1.doCall('))
    }

    @Test
    void aJenkinsfileGivingACpsClosureToFindAllFails() {
        installDeclarative([])

        String message = violation { runScript('tests/groovy/cps-offenders/Jenkinsfile.findAll') }

        assertTrue(message, message.startsWith('CPS-unsafe call: a CPS closure reached from non-CPS code '))
        assertTrue(message, message.contains(
            'reached from non-CPS code org.codehaus.groovy.runtime.DefaultGroovyMethods.findAll('))
        assertTrue(message, message.contains('(the program called java.util.ArrayList.findAll)'))
    }

    @Test
    void theCleanStepsOfTheSameLibraryPass() {
        String number = pipeline.invokeMethod('heldMatcher', ['no number here'] as Object[])

        assertEquals(null, number)
        assertTrue(cps().violations.isEmpty())
    }

}
