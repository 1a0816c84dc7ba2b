package org.gpuops.cps

import groovy.transform.CompileStatic

/**
 * Hides the compiled copies of a library's classes (src/ on the test class path, vars/ and
 * offenders compiled with the tests) so that CpsClassLoader compiles them from source, with CPS.
 */
@CompileStatic  // plain Java calls: Groovy 2.4 cannot reach ClassLoader's protected methods on Java 17
class HidingClassLoader extends ClassLoader {

    private final Set<String> hidden = [] as Set

    HidingClassLoader(ClassLoader parent, List<String> roots) {
        super(parent)
        roots.each { String root ->
            File src = new File(root, 'src')
            if (src.directory) {
                src.eachFileRecurse { File f ->
                    if (f.name.endsWith('.groovy')) {
                        String relative = src.toURI().relativize(f.toURI()).path
                        hidden.add(relative.substring(0, relative.length() - 7).replace('/', '.'))
                    }
                }
            }
            new File(root, 'vars').listFiles()?.each { File f ->
                if (f.name.endsWith('.groovy')) {
                    hidden.add(f.name.substring(0, f.name.length() - 7))
                }
            }
        }
    }

    private boolean hides(String className) {
        int dollar = className.indexOf('$')
        return hidden.contains(dollar < 0 ? className : className.substring(0, dollar))
    }

    @Override
    protected Class<?> loadClass(String name, boolean resolve) throws ClassNotFoundException {
        if (hides(name)) {
            throw new ClassNotFoundException(name)
        }
        return parent.loadClass(name)
    }

    @Override
    URL getResource(String name) {
        if (name.endsWith('.class') && hides(name.substring(0, name.length() - 6).replace('/', '.'))) {
            return null
        }
        return parent.getResource(name)
    }

}
