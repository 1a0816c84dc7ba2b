package org.gpuops

import com.cloudbees.groovy.cps.NonCPS

/**
 * Resolves a step's configuration against its commented defaults map: rejects unknown
 * keys, missing required keys and values of the wrong type, and returns defaults + config
 * with values normalised (e.g. '2' -> 2). Only Jenkins-side checks live here; value rules
 * (positive counts, valid selectors, ...) belong to the CLI.
 *
 * Types: 'int', 'boolean', 'string', 'map', 'list', 'list<map>', 'list<string>', 'string|map',
 * or a List of the allowed String values.
 * Every method throws IllegalArgumentException with a message naming the parameter.
 */
class StepConfig implements Serializable {

    private static final long serialVersionUID = 1L

    @NonCPS
    static Map resolve(Map defaults, Map types, List required, Map config) {
        Map given = config ?: [:]
        List unknown = given.keySet().findAll { !defaults.containsKey(it) }.collect { it.toString() }
        if (unknown) {
            throw new IllegalArgumentException(
                "unknown parameter(s) ${unknown.join(', ')}; known parameters: ${defaults.keySet().join(', ')}")
        }
        Map resolved = [:]
        defaults.each { String key, Object fallback ->
            Object value = given.get(key) != null ? given.get(key) : fallback
            if (value == null) {
                if (required.contains(key)) {
                    throw new IllegalArgumentException("parameter '${key}' is required")
                }
                resolved.put(key, null)
            } else {
                resolved.put(key, check(key, types.get(key), value))
            }
        }
        return resolved
    }

    /** Throws unless at most one of the two parameters is set. */
    @NonCPS
    static void atMostOne(Map config, String first, String second) {
        if (config.get(first) != null && config.get(second) != null) {
            throw new IllegalArgumentException("parameters '${first}' and '${second}' exclude each other: set only one")
        }
    }

    @NonCPS
    static Object check(String key, Object type, Object value) {
        if (type instanceof List) {
            if (!(value instanceof CharSequence) || !type.contains(value.toString())) {
                String allowed = type.collect { "'${it}'" }.join(', ')
                throw new IllegalArgumentException(
                    "parameter '${key}' must be one of ${allowed}, got ${Shell.describe(value)}")
            }
            return value.toString()
        }
        switch (type) {
            case 'int':
                return integer(key, value)
            case 'boolean':
                return ofType(key, value, Boolean, 'a Boolean')
            case 'string':
                return ofType(key, value, CharSequence, 'a String').toString()
            case 'map':
                return CliContract.jsonValue(key, ofType(key, value, Map, 'a Map'))
            case 'list':
                return CliContract.jsonValue(key, ofType(key, value, List, 'a List'))
            case 'list<map>':
                return listOf(key, value, Map, 'Maps')
            case 'list<string>':
                return listOf(key, value, CharSequence, 'Strings')
            case 'string|map':
                if (value instanceof CharSequence || value instanceof Map) {
                    return CliContract.jsonValue(key, value)
                }
                throw new IllegalArgumentException(
                    "parameter '${key}' must be a Map or a String, got ${Shell.describe(value)}")
            default:
                throw new IllegalStateException("no type declared for parameter '${key}'")
        }
    }

    @NonCPS
    static Integer integer(String key, Object value) {
        if (value instanceof Integer || value instanceof Short || value instanceof Byte) {
            return ((Number) value).intValue()
        }
        if ((value instanceof Long || value instanceof BigInteger)
                && value >= Integer.MIN_VALUE && value <= Integer.MAX_VALUE) {
            return ((Number) value).intValue()
        }
        if (value instanceof CharSequence && value.toString().trim() ==~ /^-?[0-9]{1,9}$/) {
            return Integer.valueOf(value.toString().trim())
        }
        throw new IllegalArgumentException("parameter '${key}' must be an integer, got ${Shell.describe(value)}")
    }

    @NonCPS
    private static Object ofType(String key, Object value, Class type, String name) {
        if (!type.isInstance(value)) {
            throw new IllegalArgumentException("parameter '${key}' must be ${name}, got ${Shell.describe(value)}")
        }
        return value
    }

    @NonCPS
    private static List listOf(String key, Object value, Class type, String name) {
        ofType(key, value, List, "a List of ${name}")
        ((List) value).eachWithIndex { Object item, int index ->
            if (!type.isInstance(item)) {
                throw new IllegalArgumentException(
                    "parameter '${key}' must be a List of ${name}, item ${index} is ${Shell.describe(item)}")
            }
        }
        return (List) CliContract.jsonValue(key, value)
    }

}
