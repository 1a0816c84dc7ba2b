package org.gpuops.cps

import com.cloudbees.groovy.cps.Continuable
import com.cloudbees.groovy.cps.Continuation
import com.cloudbees.groovy.cps.CpsTransformer
import com.cloudbees.groovy.cps.Envs
import com.cloudbees.groovy.cps.Outcome
import com.cloudbees.groovy.cps.TransformerConfiguration
import com.cloudbees.groovy.cps.impl.CpsCallableInvocation
import com.lesfurets.jenkins.unit.MethodSignature
import com.lesfurets.jenkins.unit.PipelineTestHelper
import com.lesfurets.jenkins.unit.global.lib.LibraryLoader
import org.codehaus.groovy.control.CompilerConfiguration
import org.codehaus.groovy.control.customizers.ImportCustomizer

/**
 * JenkinsPipelineUnit's helper, made to run the library as Jenkins' CPS engine does:
 * - vars/, src/ (their compiled copies on the test class path are hidden, so that src/ is
 *   compiled here too: JenkinsPipelineUnit #159) and the Jenkinsfile are compiled with
 *   groovy-cps's CpsTransformer (@NonCPS methods stay plain Groovy);
 * - they run as a CPS program (groovy-cps Continuable); every pipeline step call suspends the
 *   program, which is then serialized and read back (Java serialization of all live
 *   continuations, as Jenkins saves a running build) before the step's stand-in runs;
 * - a step's body (node, withCredentials, Declarative blocks) runs as a nested program, its
 *   steps checkpointed the same way, with the outer programs in the same snapshot;
 * - a CPS call that Jenkins would not run as written (CpsInvoker: a CPS method or step reached
 *   from @NonCPS code, a CPS closure passed to a Java/Groovy method such as findAll) fails.
 * Failures are thrown into the program and recorded in `violations` (assertClean()).
 * The stand-ins of Jenkins itself (scripts' bindings, the test, the Declarative shim) are
 * not part of the program state: CheckpointStreams writes them as references.
 */
class CpsPipelineHelper extends PipelineTestHelper {

    private static final ThreadLocal<CpsPipelineHelper> CURRENT = new ThreadLocal<CpsPipelineHelper>()
    /** One CPS-compiled library per set of roots and JVM: compiling it takes seconds, and each
     *  test's helper reaches it through current() (the step interception below is static). */
    private static final Map<String, GroovyClassLoader> LOADERS = [:]
    /** JenkinsPipelineUnit's interception of script calls, sent to this thread's helper. */
    static final Closure DISPATCH = { String name, Object[] args -> current().intercept(delegate, name, args) }
    static final Closure MISSING = { String name, Object args ->
        Closure missing = (Closure) current().methodMissingInterceptor.clone()
        missing.delegate = delegate
        return missing.call(name, args)
    }

    /** The planted offenders' library (CpsOffendersTest), relative to the repository. */
    static final String OFFENDERS = 'tests/groovy/cps-offenders'

    /** Classes that stand in for Jenkins' machinery and call bodies from inside the program. */
    static final List<String> MACHINERY = ['org.gpuops.Declarative'].asImmutable()

    /** Library roots (with src/ and vars/) compiled with CPS here. */
    List<String> libraryRoots = []
    /** What broke CPS rules, in order; each one was also thrown into the program. */
    final List<String> violations = []
    /** Steps at which the program state was serialized. */
    final List<String> checkpoints = []
    /** true while groovy-cps interprets the program (a step call suspends it). */
    boolean inProgram = false

    private final List<Continuable> programs = []
    private GroovyClassLoader programLoader

    /** A helper for this repository's library (and the planted offenders' library, which
     *  CpsOffendersTest registers): one set of roots, so the library is compiled once. */
    static CpsPipelineHelper forRepository(String root) {
        CpsPipelineHelper helper = new CpsPipelineHelper()
        helper.libraryRoots = [root, new File(root, OFFENDERS).path]
        return helper
    }

    LibraryLoader getLibraryLoader() {
        return libLoader
    }

    @SuppressWarnings('ConfusingMethodName')  // the helper of this thread's test (CURRENT)
    static CpsPipelineHelper current() {
        return CURRENT.get()
    }

    @Override
    PipelineTestHelper init() {
        CURRENT.set(this)
        CompilerConfiguration configuration = new CompilerConfiguration()
        String key = libraryRoots.join(File.pathSeparator)
        programLoader = LOADERS.get(key)
        if (programLoader == null) {
            programLoader = new CpsClassLoader(new HidingClassLoader(baseClassloader, libraryRoots), configuration)
            LOADERS.put(key, programLoader)
        }
        libLoader = new LibraryLoader(programLoader, libraries)
        configuration.addCompilationCustomizers(new CurrentLibraryTransformer())
        ImportCustomizer importCustomizer = new ImportCustomizer()
        imports.each { k, v -> importCustomizer.addImport(k, v) }
        configuration.addCompilationCustomizers(importCustomizer)
        CpsTransformer transformer = new CpsTransformer()
        transformer.setConfiguration(new TransformerConfiguration().withClosureType(CpsBodyClosure))
        configuration.addCompilationCustomizers(transformer)
        configuration.setDefaultScriptExtension(scriptExtension)
        configuration.setScriptBaseClass(scriptBaseClass.name)
        gse = new GroovyScriptEngine(scriptRoots, programLoader)
        gse.setConfig(configuration)
        return this
    }

    /** Fails with every violation seen; and when pipeline code ran but no step was ever
     *  checkpointed (it did not run as CPS). */
    void assertClean() {
        assert violations.isEmpty(): "CPS violations:\n${violations.join('\n')}"
        assert callStack.isEmpty() || !checkpoints.isEmpty(): 'no pipeline step ran inside the CPS program'
    }

    // ---- dispatch ----------------------------------------------------------------

    @Override
    def getMethodInterceptor() {
        return DISPATCH
    }

    Object intercept(Object target, String name, Object[] args) {
        registerMethodCall(target, 0, name, args)
        Map.Entry<MethodSignature, Closure> entry = getAllowedMethodEntry(name, args)
        if (entry != null && !isLibraryVar(name)) {
            StepRequest step = new StepRequest(name: name, handler: entry.value, target: target, args: args)
            return inProgram ? Continuable.suspend(step) : perform(step)
        }
        Closure call
        if (entry != null) {
            Closure handler = entry.value
            call = { -> callClosure(handler, args) }
        } else {
            MetaMethod method = target.metaClass.getMetaMethod(name, args)
            call = { ->
                method ? callMethod(method, target, args) : target.metaClass.invokeMissingMethod(target, name, args)
            }
        }
        return inProgram ? call() : runInline(call)
    }

    private boolean isLibraryVar(String name) {
        return libLoader.libRecords.values().any { it.definedGlobalVars?.containsKey(name) }
    }

    @Override
    protected Object runScriptInternal(Script script) {
        return runInline { -> script.run() }
    }

    /** Runs code from outside the program: when it reaches CPS code, that runs as a program. */
    Object runInline(Closure code) {
        try {
            return code()
        } catch (CpsCallableInvocation invocation) {
            return runInvocation(invocation)
        }
    }

    /** Runs one CPS invocation (a step, a script, a body) as a program, to its end. */
    Object runInvocation(CpsCallableInvocation invocation) {
        Continuable program = new Continuable(
            invocation.invoke(Envs.empty(new CpsInvoker()), null, Continuation.HALT))
        programs.add(program)
        try {
            Outcome outcome = resume(program, new Outcome(null, null))
            while (outcome.normal instanceof StepRequest) {
                StepRequest step = (StepRequest) outcome.normal
                Throwable broken = checkpoint(step, program)
                outcome = broken == null ? performOutcome(step) : new Outcome(null, broken)
                outcome = resume(program, outcome)
            }
            return outcome.replay()
        } finally {
            programs.remove(programs.size() - 1)
        }
    }

    private Outcome resume(Continuable program, Outcome outcome) {
        boolean was = inProgram
        inProgram = true
        try {
            return program.run0(outcome)
        } finally {
            inProgram = was
        }
    }

    @SuppressWarnings('CatchThrowable')  // the step's failure goes back into the program, as in Jenkins
    private Outcome performOutcome(StepRequest step) {
        try {
            return new Outcome(perform(step), null)
        } catch (Throwable t) {
            return new Outcome(null, t)
        }
    }

    /** Runs a step's stand-in outside the program (JenkinsPipelineUnit's semantics). */
    private Object perform(StepRequest step) {
        boolean was = inProgram
        inProgram = false
        try {
            if (step.handler != null) {
                step.handler.delegate = step.target
                return callClosure(step.handler, step.args)
            }
            Object result = null  // a step registered without a stand-in runs its closures
            step.args.each { Object arg -> if (arg instanceof Closure) { result = callClosure((Closure) arg) } }
            return result
        } finally {
            inProgram = was
        }
    }

    // ---- checks ------------------------------------------------------------------

    /** Serializes and reads back every live program (a build's saved state); null when that works. */
    private Throwable checkpoint(StepRequest step, Continuable innermost) {
        String where = innermost.stackTrace ? innermost.stackTrace.first().toString() : '?'
        checkpoints.add(step.name)
        String problem = CheckpointStreams.roundTrip(new ArrayList<Continuable>(programs), programLoader)
        if (problem == null) {
            return null
        }
        return violation("program state not serializable at step '${step.name}' (${where}): ${problem}")
    }

    /** Records a CPS violation; the returned error is thrown into the program. */
    CpsViolation violation(String message) {
        violations.add(message)
        return new CpsViolation(message)
    }

    /** A pipeline step call, yielded by the program to the harness. */
    static class StepRequest {
        String name
        Closure handler
        Object target
        Object[] args
    }

}
