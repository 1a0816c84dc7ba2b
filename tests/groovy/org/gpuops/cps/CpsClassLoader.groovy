package org.gpuops.cps

import org.codehaus.groovy.control.CompilationFailedException
import org.codehaus.groovy.control.CompilerConfiguration

/** Compiles the library with the CPS configuration; scripts (vars/, the Jenkinsfile) get
 *  JenkinsPipelineUnit's step interception (sent to the running test's helper), as with its
 *  InterceptingGCL; src/ classes do not. */
class CpsClassLoader extends GroovyClassLoader {

    CpsClassLoader(ClassLoader parent, CompilerConfiguration config) {
        super(parent, config)
    }

    @Override
    Class parseClass(GroovyCodeSource codeSource, boolean shouldCacheSource) throws CompilationFailedException {
        Class type = super.parseClass(codeSource, shouldCacheSource)
        if (Script.isAssignableFrom(type)) {
            type.metaClass.invokeMethod = CpsPipelineHelper.DISPATCH
            type.metaClass.static.invokeMethod = CpsPipelineHelper.DISPATCH
            type.metaClass.methodMissing = CpsPipelineHelper.MISSING
        }
        return type
    }

}
