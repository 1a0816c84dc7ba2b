// PLANTED CPS OFFENDER (a vars/-like step; CpsOffendersTest expects the harness to fail it):
// an @Field holds a java.util.regex.Matcher (not Serializable) across the `echo`. Jenkins saves
// the step's script object with the program. Assigned in CPS code, as here, groovy-cps 1.12
// sets it through Script.setProperty, so it lands in the binding (the harness reports a
// binding variable); fieldMatcherNonCps sets the field itself.
import groovy.transform.Field

import java.util.regex.Matcher

@Field Matcher held = null

String call(String text) {
    held = text =~ /build-(\d+)/
    if (!held.find()) {
        return null
    }
    echo "found a build number in ${text}"
    return held.group(1)
}
