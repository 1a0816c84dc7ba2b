package org.gpuops.cps

import com.cloudbees.groovy.cps.impl.CallSiteBlock
import com.cloudbees.groovy.cps.impl.CpsCallableInvocation
import com.cloudbees.groovy.cps.sandbox.DefaultInvoker
import com.cloudbees.groovy.cps.sandbox.Invoker

/**
 * groovy-cps's method dispatch, checked: a CpsCallableInvocation (a CPS method, a CPS closure
 * or a step about to run) must come straight from the call the program made, through Groovy's
 * dispatch only. When plain code stands between (a @NonCPS method, a plain closure, a Java or
 * Groovy method such as findAll calling a CPS closure), groovy-cps 1.12 would silently cut that
 * code short; newer workflow-cps reports such a mismatch. Here it is a CpsViolation.
 */
class CpsInvoker extends DefaultInvoker {

    private static final long serialVersionUID = 1L

    /** Frames of Groovy's and the harness's own dispatch. */
    static final List<String> DISPATCH = [
        'sun.reflect.', 'jdk.internal.reflect.', 'java.lang.reflect.', 'java.lang.invoke.',
        'org.codehaus.groovy.runtime.callsite.', 'org.codehaus.groovy.runtime.metaclass.',
        'org.codehaus.groovy.runtime.InvokerHelper', 'org.codehaus.groovy.runtime.ScriptBytecodeAdapter',
        'org.codehaus.groovy.runtime.dgm$', 'org.codehaus.groovy.reflection.', 'org.codehaus.groovy.vmplugin.',
        'groovy.lang.MetaClassImpl', 'groovy.lang.ExpandoMetaClass', 'groovy.lang.MetaMethod',
        'groovy.lang.DelegatingMetaClass', 'groovy.lang.Closure', 'groovy.lang.GroovyObjectSupport',
        'groovy.lang.Script', 'com.lesfurets.jenkins.unit.', 'com.cloudbees.groovy.cps.sandbox.',
        'com.cloudbees.groovy.cps.impl.CpsClosure', 'com.cloudbees.groovy.cps.Continuable', 'org.gpuops.cps.',
    ].asImmutable()

    /** Methods Groovy generates for its own dispatch, in any class. */
    static final List<String> SYNTHETIC = ['invokeMethod', 'methodMissing', 'getProperty', 'setProperty',
                                           'getMetaClass'].asImmutable()

    /** Frames that are the callee itself: a step (suspend) or a CPS closure. */
    static final List<String> MARKERS = ['com.cloudbees.groovy.cps.Continuable',
                                         'com.cloudbees.groovy.cps.impl.CpsClosure',
                                         'org.gpuops.cps.CpsBodyClosure'].asImmutable()

    @Override
    Object methodCall(Object receiver, String method, Object[] args) throws Throwable {
        try {
            return super.methodCall(receiver, method, args)
        } catch (CpsCallableInvocation invocation) {
            String problem = mismatch(invocation.stackTrace)
            if (problem != null) {
                CpsPipelineHelper helper = CpsPipelineHelper.current()
                StackTraceElement[] trace = invocation.stackTrace
                String callee = "${trace[calleeIndex(trace)]}"  // mismatch(): trace is not empty
                String what = callee.startsWith(CpsClassNames.SUSPEND) ? 'a pipeline step'
                    : callee.startsWith(CpsBodyClosure.name) ? 'a CPS closure' : "CPS code ${callee}"
                String type = receiver instanceof Class ? ((Class) receiver).name : receiver?.getClass()?.name
                String message = "CPS-unsafe call: ${what} reached from non-CPS code ${problem} " +
                    "(the program called ${type}.${method})"
                throw helper != null ? helper.violation(message) : new CpsViolation(message)
            }
            throw invocation
        }
    }

    @Override
    Invoker contextualize(CallSiteBlock tags) {
        return this
    }

    /** The callee's frame (the CPS method, CPS closure or step that threw the invocation). */
    static int calleeIndex(StackTraceElement[] trace) {
        int i = 0
        // the invocation is built by Groovy's reflective constructor call: skip those frames
        while (i < trace.length - 1 && isDispatch(trace[i]) && !MARKERS.any { trace[i].className.startsWith(it) }) {
            i++
        }
        return i
    }

    /** The first frame between the callee and this invoker that is not dispatch; null: none. */
    static String mismatch(StackTraceElement[] trace) {
        if (trace.length == 0) {
            return null
        }
        int first = calleeIndex(trace)
        StackTraceElement callee = trace[first]
        for (int i = first + 1; i < trace.length; i++) {
            StackTraceElement frame = trace[i]
            if (frame.className == CpsInvoker.name) {
                return null
            }
            boolean sameMethod = frame.className == callee.className && frame.methodName == callee.methodName
            if (!isDispatch(frame) && !sameMethod) {  // sameMethod: default arguments
                return frame.toString()
            }
        }
        return null
    }

    static boolean isDispatch(StackTraceElement frame) {
        return DISPATCH.any { frame.className.startsWith(it) } || SYNTHETIC.contains(frame.methodName) ||
            frame.methodName.contains('$') ||  // $getCallSiteArray, super$2$call, this$dist$invoke$1, access$0
            (frame.className.contains('$') && frame.methodName.startsWith('call') &&
                !frame.className.contains('_closure'))  // Groovy's generated call sites: Type$method.call
    }

}
