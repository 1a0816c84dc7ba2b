package org.gpuops.cps

import com.cloudbees.groovy.cps.ObjectInputStreamWithLoader
import com.lesfurets.jenkins.unit.PipelineTestHelper
import groovy.transform.CompileStatic

import java.lang.reflect.Field
import java.lang.reflect.Modifier

/**
 * Java serialization of the program state, as Jenkins saves a running build (program.dat),
 * then read back with the program's class loader. Scripts (the Jenkinsfile, each vars/ step
 * object) and their bindings are written as references, and their contents after the state:
 * a script's own fields (@Field) and its binding's variables, as Jenkins serializes a CpsScript
 * with its binding. Written as references only: the binding variables in GLOBALS, the
 * JenkinsPipelineUnit helper, and the test's own objects (the test, its step stand-ins, the
 * Declarative shim).
 */
final class CheckpointStreams {

    /** Binding variables that are Jenkins' own globals, written as references (not checked):
     *  Jenkins supplies them and saves them its own way, and here they are the tests' stand-ins
     *  (maps holding closures). Every other binding variable is serialized. */
    static final Map<String, String> GLOBALS = [
        env         : 'the env global (workflow-cps EnvActionImpl, an action of the build)',
        params      : "the build's parameters (its ParametersAction)",
        currentBuild: 'the running build (workflow-support RunWrapper)',
        scm         : "the job's SCM, from the job's configuration",
        steps       : 'the object all steps can be called on (workflow-cps DSL)',
    ].asImmutable()

    private CheckpointStreams() { }

    /** null when the state writes and reads back; else what broke, with the path to it. */
    static String roundTrip(Object state, ClassLoader loader) {
        List<Object> world = []
        Map<String, Class> classes = [:]
        ByteArrayOutputStream bytes = new ByteArrayOutputStream()
        try {
            Output out = new Output(bytes, world, classes)
            out.writeObject(state)
            out.writeContents()
            out.close()
        } catch (NotSerializableException e) {
            return "${e} (${pathTo(state)})"
        }
        try {
            Input input = new Input(new ByteArrayInputStream(bytes.toByteArray()), loader, world, classes)
            input.readObject()
            boolean more = true
            while (more) {  // the contents of each script or binding, read back
                more = input.readObject() != null
            }
        } catch (IOException | ClassNotFoundException e) {
            return "reading it back failed: ${e}"
        }
        return null
    }

    /** What of a script or binding is saved with the program, by a label for pathTo. A script:
     *  its own instance fields (@Field; not those of Script or JenkinsPipelineUnit's base class)
     *  and its binding. A binding: its variables but GLOBALS. */
    static Map<String, Object> contents(Object o) {
        Map<String, Object> saved = [:]
        if (o instanceof Binding) {
            ((Binding) o).variables.each { k, v ->
                if (!GLOBALS.containsKey(k)) {
                    saved.put("binding variable '${k}'".toString(), v)
                }
            }
            return saved
        }
        Script script = (Script) o
        for (Class c = script.getClass(); isOwnScriptClass(c); c = c.superclass) {
            for (Field f : c.declaredFields) {
                if (!Modifier.isStatic(f.modifiers) && !Modifier.isTransient(f.modifiers) && !f.synthetic &&
                    !f.name.startsWith('$') && !f.name.startsWith('__')) {
                    f.accessible = true
                    saved.put("@Field ${f.name} of script ${c.name}".toString(), f.get(script))
                }
            }
        }
        saved.put("binding of script ${script.getClass().name}".toString(), script.binding)
        return saved
    }

    /** A class of the script itself (compiled from vars/, src/ or a Jenkinsfile), not
     *  groovy.lang.Script nor JenkinsPipelineUnit's base script class. */
    private static boolean isOwnScriptClass(Class c) {
        return c != null && c != Script && !c.name.startsWith('com.lesfurets.') && !c.name.startsWith('groovy.')
    }

    static boolean isWorld(Object o) {
        if (o instanceof Script || o instanceof Binding || o instanceof PipelineTestHelper) {
            return true
        }
        String name = o.getClass().name
        return o.getClass().classLoader == CheckpointStreams.classLoader &&
            (name.startsWith('org.gpuops.') || name.startsWith('com.lesfurets.'))
    }

    /** A field path from the state to the first object that is not Serializable (best effort). */
    @SuppressWarnings('CatchRuntimeException')  // Java 17 refuses to open some JDK fields
    static String pathTo(Object root) {
        Map<Object, Boolean> seen = new IdentityHashMap<Object, Boolean>()
        List<List> queue = [[root, 'state']]
        while (!queue.isEmpty()) {
            List next = queue.remove(0)
            Object o = next[0]
            String path = next[1]
            if (o == null || seen.containsKey(o) || o instanceof Class || o instanceof String ||
                o instanceof Number || o instanceof Boolean || o instanceof Enum) {
                continue
            }
            if (o instanceof Script || o instanceof Binding) {
                seen.put(o, true)  // its contents, labelled from here (the path to it is long)
                contents(o).each { String label, Object v -> queue.add([v, label]) }
                continue
            }
            if (isWorld(o)) {
                continue
            }
            seen.put(o, true)
            if (!(o instanceof Serializable)) {
                return "${path} is a ${o.getClass().name}"
            }
            if (o.getClass().array && !o.getClass().componentType.primitive) {
                ((Object[]) o).eachWithIndex { Object item, int i -> queue.add([item, "${path}[${i}]"]) }
                continue
            }
            if (o instanceof Map) {
                ((Map) o).each { k, v -> queue.add([v, "${path}[${k}]"]) }
                continue
            }
            if (o instanceof Collection) {
                ((Collection) o).eachWithIndex { Object item, int i -> queue.add([item, "${path}[${i}]"]) }
                continue
            }
            for (Class c = o.getClass(); c != null && c != Object; c = c.superclass) {
                for (Field f : c.declaredFields) {
                    if (!Modifier.isStatic(f.modifiers) && !Modifier.isTransient(f.modifiers) && !f.type.primitive) {
                        try {
                            f.accessible = true
                            queue.add([f.get(o), "${path}.${f.name}"])
                        } catch (RuntimeException ignored) {
                            // a JDK field Java modules do not open: not followed
                        }
                    }
                }
            }
        }
        return 'path not found'
    }

    /** A stand-in of Jenkins, written as its index in the world list. */
    static class WorldRef implements Serializable {
        private static final long serialVersionUID = 1L
        int index
    }

    @CompileStatic  // plain Java calls to the streams' protected methods (Java 17)
    static class Output extends ObjectOutputStream {
        final List<Object> world
        final Map<String, Class> classes
        /** Scripts and bindings met while writing, whose contents are not written yet. */
        final List<Object> pending = []

        Output(OutputStream out, List<Object> world, Map<String, Class> classes) {
            super(out)
            this.world = world
            this.classes = classes
            enableReplaceObject(true)
        }

        @Override
        protected Object replaceObject(Object o) {
            if (o != null && !(o instanceof WorldRef) && isWorld(o)) {
                if (o instanceof Script || o instanceof Binding) {
                    pending.add(o)
                }
                world.add(o)
                return new WorldRef(index: world.size() - 1)
            }
            return o
        }

        /** Writes the contents of every script and binding met (and met in them), then null. */
        void writeContents() {
            Set<Object> done = Collections.newSetFromMap(new IdentityHashMap<Object, Boolean>())
            while (!pending.isEmpty()) {
                Object next = pending.remove(0)
                if (done.add(next)) {
                    writeObject(new LinkedHashMap<String, Object>(contents(next)))
                }
            }
            writeObject(null)
        }

        @Override
        protected void annotateClass(Class<?> c) {
            classes.put(c.name, c)
        }
    }

    @CompileStatic
    static class Input extends ObjectInputStreamWithLoader {
        final List<Object> world
        final Map<String, Class> classes

        Input(InputStream stream, ClassLoader loader, List<Object> world, Map<String, Class> classes) {
            super(stream, loader)
            this.world = world
            this.classes = classes
            enableResolveObject(true)
        }

        @Override
        protected Class<?> resolveClass(ObjectStreamClass desc) throws IOException, ClassNotFoundException {
            Class known = classes.get(desc.name)
            return known ?: super.resolveClass(desc)
        }

        @Override
        protected Object resolveObject(Object o) {
            return o instanceof WorldRef ? world.get(((WorldRef) o).index) : o
        }
    }

}
