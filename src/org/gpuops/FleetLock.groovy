package org.gpuops

import com.cloudbees.groovy.cps.NonCPS

/**
 * The lock of a fleet of GPU nodes: one Lockable Resources name per fleet, whatever the spelling
 * of its inventory. `deploy/inventory/production`, `./deploy/inventory/production/` and
 * `deploy//inventory/x/../production` are one fleet: `gpuops-fleet:inventory:deploy/inventory/production`.
 * An explicit fleet name (`fleet: 'production'`) is `gpuops-fleet:production`; use one of the
 * two for a fleet everywhere. The path is the inventory's place in the repository (the job's
 * workspace): absolute paths and paths leaving it are refused. It is computed without an agent
 * (no file system), so two symbolic links to one inventory are two names.
 *
 * Jenkinsfile (stage level, before the agent is taken; the step sees the variable and takes no
 * second lock of its own):
 *   options { lock(resource: org.gpuops.FleetLock.name(inventory: "deploy/inventory/${params.APP_ENV}"),
 *                  variable: 'GPUOPS_FLEET_LOCK') }
 * Only updates lock; an inspection (inspectGpuNodes) reads and takes no lock.
 */
class FleetLock implements Serializable {

    private static final long serialVersionUID = 1L

    static final String PREFIX = 'gpuops-fleet:'
    /** The variable `lock(..., variable: VARIABLE)` sets to the names it holds, while its body runs. */
    static final String VARIABLE = 'GPUOPS_FLEET_LOCK'
    static final String FLEET = /[a-z0-9]([a-z0-9._-]{0,61}[a-z0-9])?/
    /** An inventory path's characters: a lock name never holds a ',' (the variable's separator). */
    static final String PATH = /[A-Za-z0-9._\/-]+/

    /** The lock name of [fleet: name] or [inventory: path]; IllegalArgumentException when invalid. */
    @NonCPS
    static String name(Map args) {
        Object fleet = args.fleet
        if (fleet != null) {
            if (!(fleet instanceof CharSequence) || !(fleet.toString() ==~ FLEET)) {
                throw new IllegalArgumentException("fleet must be a name (lower-case letters, digits, '.', '_', " +
                    "'-'; at most 63), not ${fleet instanceof CharSequence ? 'that' : fleet.getClass().simpleName}")
            }
            return PREFIX + fleet
        }
        return PREFIX + 'inventory:' + inventoryPath(args.inventory)
    }

    /** The inventory's path inside the repository, normalised: no '.', no '..', no '//', no trailing '/'. */
    @NonCPS
    static String inventoryPath(Object inventory) {
        if (!(inventory instanceof CharSequence) || !inventory.toString().trim()) {
            throw new IllegalArgumentException('inventory must be the path of the inventory in the repository')
        }
        String path = inventory
        if (path.startsWith('/') || path.startsWith('~') || path.contains('\\') || path =~ /[\x00-\x1f\x7f]/) {
            throw new IllegalArgumentException('inventory must be a relative path inside the repository ' +
                "(no '/' or '~' at the start, no '\\', no control characters)")
        }
        if (!(path ==~ PATH)) {
            throw new IllegalArgumentException("inventory ${shown(path)} must be a path of letters, digits, " +
                "'.', '_' and '-', parts separated by '/' (no spaces, no ',', no ':')")
        }
        List<String> parts = []
        path.split('/').each { String part ->
            if (part == '..') {
                if (parts.isEmpty()) {
                    throw new IllegalArgumentException("inventory ${path} leaves the repository ('..')")
                }
                parts.remove(parts.size() - 1)
            } else if (part && part != '.') {
                parts.add(part)
            }
        }
        if (parts.isEmpty()) {
            throw new IllegalArgumentException("inventory ${path} names the repository itself, not an inventory")
        }
        return parts.join('/')
    }

    /** Why [fleet:, inventory:] has no lock name (null: it has one). */
    @NonCPS
    static String problem(Object inventory, Object fleet) {
        try {
            name(fleet: fleet, inventory: inventory)
            return null
        } catch (IllegalArgumentException e) {
            return e.message
        }
    }

    /**
     * What a `lock(variable: VARIABLE)` around this code holds, as one exact name (none outside
     * one). Lockable Resources joins several names with ','; the value is never split, so a
     * resource named 'x,gpuops-fleet:...' is not taken for the fleet's lock. Lock the fleet alone.
     */
    @NonCPS
    static List<String> held(Object variable) {
        return variable ? [variable.toString()] : []
    }

    /** value for a message: the allowed characters as they are, any other as \\uXXXX; at most 120. */
    @NonCPS
    static String shown(String value) {
        StringBuilder out = new StringBuilder()
        value.take(120).each { String c ->
            out.append(c ==~ PATH ? c : String.format('\\u%04x', (int) c.charAt(0)))
        }
        return "'" + out + (value.length() > 120 ? "'..." : "'")
    }

}
