import groovy.transform.Field
import org.gpuops.CliContract
import org.gpuops.StepConfig

// checkGpuHeadroom: does a workload shape fit on the cluster's free GPUs right now?
// Runs `gpuops headroom check`; on shortage fails the build or marks it unstable.
// Returns the CLI's result map (per node class: allocatable, requested, free, nodes usable).
@Field final String STEP_NAME = 'checkGpuHeadroom'

@Field final Map DEFAULTS = [
    gpusPerPod             : null,             // required: GPUs each pod needs, all on one node
    pods                   : 1,                // number of pods of that shape
    nodeSelector           : [:],              // labels the pods are pinned to: Map or 'k=v,k2=v2'
    tolerations            : [],               // Kubernetes tolerations (Maps: key, operator, value, effect)
    namespace              : 'default',        // namespace of the workload (its ResourceQuota applies)
    resource               : 'nvidia.com/gpu', // extended resource, e.g. 'nvidia.com/mig-1g.10gb'
    reserve                : 0,                // GPUs to keep free in total
    reservePerClass        : [:],              // GPUs to keep free per node class, e.g. ['nvidia-h800': 2]
    groupBy                : 'accelerator',    // node label naming a node class
    kubeconfigCredentialsId: null,             // file credential with a kubeconfig -> env KUBECONFIG
    onShortage             : 'fail',           // 'fail' the build, or mark it 'unstable' and go on
    webhookUrl             : null,             // URL the CLI notifies on shortage -> env GPUOPS_WEBHOOK_URL
    webhookCredentialsId   : null,             // or: string credential holding that URL (same env)
]

@Field final Map TYPES = [
    gpusPerPod: 'int', pods: 'int', nodeSelector: 'string|map', tolerations: 'list<map>',
    namespace: 'string', resource: 'string', reserve: 'int', reservePerClass: 'map', groupBy: 'string',
    kubeconfigCredentialsId: 'string', onShortage: ['fail', 'unstable'], webhookUrl: 'string',
    webhookCredentialsId: 'string',
]

Map call(Map config = [:]) {
    Map cfg
    try {
        cfg = StepConfig.resolve(DEFAULTS, TYPES, ['gpusPerPod'], config)
        StepConfig.atMostOne(cfg, 'webhookUrl', 'webhookCredentialsId')
    } catch (IllegalArgumentException e) {
        error("[${STEP_NAME}] ${e.message} (invalid-input)")
    }
    List credentials = []
    if (cfg.kubeconfigCredentialsId) {
        credentials.add([type: 'file', id: cfg.kubeconfigCredentialsId, variable: 'KUBECONFIG'])
    }
    if (cfg.webhookCredentialsId) {
        credentials.add([type: 'string', id: cfg.webhookCredentialsId, variable: 'GPUOPS_WEBHOOK_URL'])
    }
    Map outcome = gpuopsExec(
        stepName: STEP_NAME, command: ['headroom', 'check'], credentials: credentials,
        environment: cfg.webhookUrl ? [GPUOPS_WEBHOOK_URL: cfg.webhookUrl] : [:],
        allowCategories: ['gate-refused'],
        params: [
            gpus_per_pod: cfg.gpusPerPod, pods: cfg.pods, node_selector: cfg.nodeSelector,
            tolerations: cfg.tolerations, namespace: cfg.namespace, resource: cfg.resource,
            reserve: cfg.reserve, reserve_per_class: cfg.reservePerClass, group_by: cfg.groupBy,
        ])
    if (!outcome.ok) {
        String text = CliContract.errorText(STEP_NAME, outcome.error)
        if (cfg.onShortage == 'unstable') {
            unstable(text)
        } else {
            error(text)
        }
    }
    return outcome.result
}
