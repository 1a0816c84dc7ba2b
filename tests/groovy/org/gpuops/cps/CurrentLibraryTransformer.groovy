package org.gpuops.cps

import com.lesfurets.jenkins.unit.global.lib.LibraryAnnotationTransformer
import org.codehaus.groovy.ast.ClassNode
import org.codehaus.groovy.classgen.GeneratorContext
import org.codehaus.groovy.control.CompilationFailedException
import org.codehaus.groovy.control.CompilePhase
import org.codehaus.groovy.control.SourceUnit
import org.codehaus.groovy.control.customizers.CompilationCustomizer

/** JenkinsPipelineUnit's @Library handling for the running test's helper: the compiled library
 *  is shared between tests (CpsPipelineHelper), and so is its compiler configuration. */
class CurrentLibraryTransformer extends CompilationCustomizer {

    CurrentLibraryTransformer() {
        super(CompilePhase.CONVERSION)
    }

    @Override
    void call(SourceUnit source, GeneratorContext context, ClassNode classNode) throws CompilationFailedException {
        new LibraryAnnotationTransformer(CpsPipelineHelper.current().libraryLoader).call(source, context, classNode)
    }

}
