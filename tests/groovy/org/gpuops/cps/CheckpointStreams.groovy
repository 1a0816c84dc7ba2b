package org.gpuops.cps

import com.cloudbees.groovy.cps.ObjectInputStreamWithLoader
import com.lesfurets.jenkins.unit.PipelineTestHelper
import groovy.transform.CompileStatic

import java.lang.reflect.Field
import java.lang.reflect.Modifier

/**
 * Java serialization of the program state, as Jenkins saves a running build (program.dat),
 * then read back with the program's class loader. The stand-ins of Jenkins itself are written
 * as references, not serialized: scripts and their bindings (Jenkins pickles its CpsScript and
 * global variables its own way), the JenkinsPipelineUnit helper, and the test's own objects
 * (the test, its step stand-ins, the Declarative shim).
 */
final class CheckpointStreams {

    private CheckpointStreams() { }

    /** null when the state writes and reads back; else what broke, with the path to it. */
    static String roundTrip(Object state, ClassLoader loader) {
        List<Object> world = []
        Map<String, Class> classes = [:]
        ByteArrayOutputStream bytes = new ByteArrayOutputStream()
        try {
            Output out = new Output(bytes, world, classes)
            out.writeObject(state)
            out.close()
        } catch (NotSerializableException e) {
            return "${e} (${pathTo(state)})"
        }
        try {
            new Input(new ByteArrayInputStream(bytes.toByteArray()), loader, world, classes).readObject()
        } catch (IOException | ClassNotFoundException e) {
            return "reading it back failed: ${e}"
        }
        return null
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
            if (o == null || seen.containsKey(o) || isWorld(o) || o instanceof Class || o instanceof String ||
                o instanceof Number || o instanceof Boolean || o instanceof Enum) {
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

        Output(OutputStream out, List<Object> world, Map<String, Class> classes) {
            super(out)
            this.world = world
            this.classes = classes
            enableReplaceObject(true)
        }

        @Override
        protected Object replaceObject(Object o) {
            if (o != null && !(o instanceof WorldRef) && isWorld(o)) {
                world.add(o)
                return new WorldRef(index: world.size() - 1)
            }
            return o
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
