package org.gpuops

import static org.junit.Assert.assertEquals
import static org.junit.Assert.assertFalse
import static org.junit.Assert.assertTrue

import org.junit.Test

/**
 * Every step follows the library's conventions: `call(Map)`, a commented DEFAULTS map with a
 * declared type per key, a vars/<step>.txt help page listing every parameter with its default,
 * its own test class, and (except the runner itself) no shell of its own: one gpuopsExec call.
 */
class StepConventionsTest extends GpuOpsPipelineTest {

    public static final File VARS = new File(REPO_ROOT, 'vars')

    static List<String> steps() {
        return VARS.listFiles().findAll { it.name.endsWith('.groovy') }*.name*.replace('.groovy', '').sort()
    }

    @Test
    void theLibraryHasItsSteps() {
        assertTrue(steps().containsAll(['checkGpuHeadroom', 'gpuopsExec']))
    }

    @Test
    void everyStepHasCallWithAMap() {
        steps().each { String step ->
            // Property access, not type.getMethod(): the test helper intercepts static calls on the step class.
            List methods = binding.getVariable(step).class.declaredMethods.findAll {
                it.name == 'call' && it.parameterTypes.toList() == [Map]
            }
            assertEquals("vars/${step}.groovy must have one call(Map config) method", 1, methods.size())
        }
    }

    @Test
    void everyStepDeclaresDefaultsAndTheirTypes() {
        steps().each { String step ->
            Map defaults = defaultsOf(step)
            Map types = binding.getVariable(step).TYPES
            assertFalse("vars/${step}.groovy: empty DEFAULTS", defaults.isEmpty())
            assertEquals("vars/${step}.groovy: TYPES must declare exactly the DEFAULTS keys",
                defaults.keySet().sort(), types.keySet().sort())
        }
    }

    @Test
    void everyStepHasAHelpPageListingEveryParameterWithItsDefault() {
        steps().each { String step ->
            File help = new File(VARS, "${step}.txt")
            assertTrue("vars/${step}.txt is missing", help.isFile())
            List<String> lines = help.readLines()
            Map defaults = defaultsOf(step)
            defaults.each { String key, Object value ->
                String line = lines.find { it.startsWith("- ${key} (") }
                assertTrue("vars/${step}.txt has no line '- ${key} (type, default ...): ...'", line != null)
                boolean says = value == null
                    ? line.contains('required') || line.contains('default none')
                    : line.contains("default ${value.inspect()}")
                assertTrue("vars/${step}.txt: '${key}' must say its default " +
                    "(${value == null ? 'required / default none' : value.inspect()}): ${line}", says)
            }
            List<String> documented = lines.findAll { it ==~ /^- [A-Za-z]+ \(.*/ }.collect { it.split(/[ (]/)[1] }
            List<String> cliParameters = cliOptionsOf(step).collect { StepParams.stepName(it.name.toString()) }
            assertEquals("vars/${step}.txt must list every option of its CLI command (scripts/step-docs.py --write)",
                [], cliParameters - documented)
            assertEquals("vars/${step}.txt documents parameters the step does not have",
                [], documented - defaults.keySet() - cliParameters)
            assertEquals("vars/${step}.groovy declares CLI options as its own parameters: the CLI declares them",
                [], cliParameters.intersect(defaults.keySet() as List))
        }
    }

    @Test
    void everyStepButTheRunnerNamesItsCliCommand() {
        (steps() - 'gpuopsExec').each { String step ->
            Object command = binding.getVariable(step).COMMAND
            assertTrue("vars/${step}.groovy must have @Field final List COMMAND = ['group', 'command']",
                command instanceof List && !command.isEmpty())
            cliOptionsOf(step) // throws unless the library's copy of `gpuops describe` has the command
        }
    }

    @Test
    void everyHelpPageBelongsToAStep() {
        VARS.listFiles().findAll { it.name.endsWith('.txt') }.each { File help ->
            assertTrue("${help.name} has no step", new File(VARS, help.name.replace('.txt', '.groovy')).isFile())
        }
    }

    @Test
    void everyStepHasItsOwnTestClass() {
        steps().each { String step ->
            String name = "${step.capitalize()}Test"
            File source = new File(REPO_ROOT, "tests/groovy/org/gpuops/${name}.groovy")
            assertTrue("vars/${step}.groovy has no test class tests/groovy/org/gpuops/${name}.groovy", source.isFile())
            Class testClass = getClass().classLoader.loadClass("org.gpuops.${name}")
            assertEquals("${name} must extend GpuOpsPipelineTest",
                'org.gpuops.GpuOpsPipelineTest', testClass.superclass.name)
            assertTrue("${name} has no @Test", testClass.methods.any { it.getAnnotation(org.junit.Test) })
        }
    }

    /** The library's step runners: each calls gpuopsExec (checked below with the src/ classes). */
    static final Map<String, String> RUNNERS = ['NodeSteps.run(': 'NodeSteps', 'ReleaseFlow.step(': 'ReleaseFlow']

    @Test
    void stepsRunTheCliOnlyThroughGpuopsExec() {
        List<String> shellish = ['sh(', 'sh ', 'bat(', 'powershell(', 'withCredentials(', 'readFile(', 'writeFile(']
        (steps() - 'gpuopsExec').each { String step ->
            String code = new File(VARS, "${step}.groovy").text
            assertTrue("vars/${step}.groovy must call gpuopsExec (or a runner: ${RUNNERS.keySet().join(' ')})",
                code.contains('gpuopsExec(') || RUNNERS.keySet().any { code.contains(it) })
            shellish.each { String call ->
                assertFalse("vars/${step}.groovy must not use ${call.trim()}: gpuopsExec does that",
                    (code =~ /(?m)^[^\/*]*\b${java.util.regex.Pattern.quote(call)}/).find())
            }
        }
        RUNNERS.values().each { String runner ->
            String code = new File(REPO_ROOT, "src/org/gpuops/${runner}.groovy").text
            assertTrue("src/org/gpuops/${runner}.groovy must run the CLI through script.gpuopsExec",
                code.contains('script.gpuopsExec('))
        }
        new File(REPO_ROOT, 'src/org/gpuops').listFiles().findAll { it.name.endsWith('.groovy') }.each { File f ->
            shellish.each { String call ->
                assertFalse("src/org/gpuops/${f.name} must not use ${call.trim()}: gpuopsExec does that",
                    (f.text =~ /(?m)^[^\/*]*\b${java.util.regex.Pattern.quote(call)}/).find())
            }
        }
    }

    @Test
    void nonCpsIsImportedWhereUsed() {
        // CodeNarc's Jenkins rules only see @NonCPS in vars/ when it resolves (scripts/groovy-lint.sh).
        steps().each { String step ->
            String code = new File(VARS, "${step}.groovy").text
            if (code.contains('@NonCPS')) {
                assertTrue("vars/${step}.groovy uses @NonCPS: import com.cloudbees.groovy.cps.NonCPS",
                    code.contains('import com.cloudbees.groovy.cps.NonCPS'))
            }
        }
    }

    /** The CLI options of the step's command, from the library's copy of `gpuops describe`. */
    protected List<Map> cliOptionsOf(String step) {
        Object command = step == 'gpuopsExec' ? null : binding.getVariable(step).COMMAND
        if (!(command instanceof List)) {
            return []
        }
        return StepParams.options(new File(REPO_ROOT, "resources/${StepParams.RESOURCE}").text, command)
    }

    protected Map defaultsOf(String step) {
        Object defaults = binding.getVariable(step).DEFAULTS
        assertTrue("vars/${step}.groovy must have a @Field Map DEFAULTS", defaults instanceof Map)
        return (Map) defaults
    }

}
