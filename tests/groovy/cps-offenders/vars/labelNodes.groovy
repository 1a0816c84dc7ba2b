// Calls the planted src/-like offender (LabelList.describe: @NonCPS calling CPS).
import org.gpuops.offenders.LabelList

String call(List<String> names) {
    return new LabelList(this).describe(names)
}
