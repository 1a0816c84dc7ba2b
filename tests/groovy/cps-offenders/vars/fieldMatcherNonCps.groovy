// PLANTED CPS OFFENDER (a vars/-like step; CpsOffendersTest expects the harness to fail it):
// the @Field is set in a @NonCPS method, so the java.util.regex.Matcher (not Serializable) is
// in the script object's own field across the `echo`; Jenkins saves that object.
import com.cloudbees.groovy.cps.NonCPS
import groovy.transform.Field

import java.util.regex.Matcher

@Field Matcher kept = null

String call(String text) {
    keep(text)
    if (!kept.find()) {
        return null
    }
    echo "found a build number in ${text}"
    return kept.group(1)
}

@NonCPS
void keep(String text) {
    kept = text =~ /build-(\d+)/
}
