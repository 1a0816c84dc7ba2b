// PLANTED CPS OFFENDER (a vars/-like step; CpsOffendersTest expects the harness to fail it):
// a java.util.regex.Matcher (not Serializable) is held in a local across a step call, so
// Jenkins cannot save the program at the `echo`.
String call(String text) {
    def matcher = text =~ /build-(\d+)/
    if (!matcher.find()) {
        return null
    }
    echo "found a build number in ${text}"
    return matcher.group(1)
}
