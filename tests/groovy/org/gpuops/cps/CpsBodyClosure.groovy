package org.gpuops.cps

import com.cloudbees.groovy.cps.Block
import com.cloudbees.groovy.cps.Env
import com.cloudbees.groovy.cps.impl.CpsCallableInvocation
import com.cloudbees.groovy.cps.impl.CpsClosure

import java.lang.reflect.Field

/**
 * The closure type the CPS harness compiles the library with (groovy-cps's CpsClosure).
 * Inside the CPS program a call throws CpsCallableInvocation, as in Jenkins; called by the
 * test's step stand-ins (a `node` body, a Declarative `steps` block) it runs as a nested
 * CPS program (CpsPipelineHelper.runInline), the way Jenkins runs a step's body.
 */
class CpsBodyClosure extends CpsClosure {

    private static final long serialVersionUID = 1L
    private static final Field DEF = field(CpsClosure, 'def')

    CpsBodyClosure(Object owner, Object thisObject, List<String> parameters, Block body, Env capture) {
        super(owner, thisObject, parameters, body, capture)
    }

    @Override
    Object call() {
        return invokeBody([] as Object[])
    }

    @Override
    Object call(Object... args) {
        return invokeBody(args)
    }

    @Override
    Object call(Object argument) {
        return invokeBody([argument] as Object[])
    }

    @Override
    Object doCall(Object... args) {
        return invokeBody(args)
    }

    private Object invokeBody(Object[] args) {
        CpsCallableInvocation invocation = new CpsCallableInvocation(DEF.get(this), this, args)
        CpsPipelineHelper helper = CpsPipelineHelper.current()
        if (helper == null || (helper.inProgram && !calledByMachinery())) {
            throw invocation
        }
        return helper.runInvocation(invocation)
    }

    /** Whether the caller is a stand-in for Jenkins' own machinery (the Declarative shim's
     *  directive handlers, called straight from the program): it runs the body as Jenkins
     *  would, as a nested program, instead of counting as plain code calling CPS code. */
    private static boolean calledByMachinery() {
        StackTraceElement[] trace = new Throwable().stackTrace
        for (StackTraceElement frame : trace) {
            if (!CpsInvoker.isDispatch(frame) && !CpsInvoker.MARKERS.any { frame.className.startsWith(it) }) {
                return CpsPipelineHelper.MACHINERY.any { frame.className.startsWith(it) }
            }
        }
        return false
    }

    /** groovy-cps 1.12 clones keep running with the original's delegate (the body's `this` is the
     *  original closure): a real copy, so that the Declarative shim's delegates work. */
    @Override
    Object clone() {
        Object definition = DEF.get(this)
        CpsBodyClosure copy = new CpsBodyClosure(getOwner(), getThisObject(),
            (List<String>) field(definition.class.superclass, 'parameters').get(definition),
            (Block) field(definition.class.superclass, 'body').get(definition),
            (Env) field(definition.class, 'capture').get(definition))
        // getters, not properties: a closure's properties resolve through its owner and delegate
        copy.parameterTypes = getParameterTypes()
        copy.maximumNumberOfParameters = getMaximumNumberOfParameters()
        copy.setDelegate(getDelegate())
        copy.setResolveStrategy(getResolveStrategy())
        copy.setDirective(getDirective())
        return copy
    }

    private static Field field(Class type, String name) {
        Field f = type.getDeclaredField(name)
        f.accessible = true
        return f
    }

}
