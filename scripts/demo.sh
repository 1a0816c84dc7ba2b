#!/usr/bin/env bash
# The main job, on the local lab: the seed's incident (S-31, S-38) from both sides, then the
# release story (S-20 .. S-27) through Jenkinsfile.example.
#   1. the lab: registry, Podman builder, 6 SSH GPU nodes, a real Kubernetes control plane
#   2. the fleet as Ansible sees it (S-8) and what nvidia-smi says on each node (S-16)
#   3. inference fills the H800 nodes; a training release asks for 2 x 4 H800 GPUs:
#      the headroom gate refuses it (exit 3) before anything is deployed
#   4. the training Job deployed anyway stays Pending: `gpuops headroom explain` says why,
#      next to the real scheduler's FailedScheduling event, and what would fit
#   Every step's page (capacity, fleet health, release history) is left in $GPUOPS_DEMO_REPORTS
#   (default reports/demo), and the end says where.
#   5. Jenkinsfile.example run end to end (the real library, real sh, the real CLI): build 41,
#      42, 43; staging 41; production 41 and 42 with approval; production 43 cannot be
#      scheduled and is rolled back by itself; the production rollback job; the release history
# Everything it starts is stopped at the end (also on failure or Ctrl-C).
set -euo pipefail
cd "$(dirname "$0")/.."
export GPUOPS_LAB_DIR=${GPUOPS_LAB_DIR:-/tmp/gpuops-demo}
G=(.venv/bin/gpuops)
REPORTS=${GPUOPS_DEMO_REPORTS:-$PWD/reports/demo}
mkdir -p "$REPORTS"
touch "$REPORTS/.started"
say() { printf '\n\033[1;36m### %s\033[0m\n' "$*"; }
run() { printf '\033[2m$ %s\033[0m\n' "$*"; "$@"; }

cleanup() { say "stopping the lab"; "${G[@]}" lab down; }
trap cleanup EXIT

say "1. starting the local lab in $GPUOPS_LAB_DIR"
run "${G[@]}" lab up
status=$("${G[@]}" --output json lab status)
fact() { jq -r ".result.components.$1" <<<"$status"; }
export KUBECONFIG ANSIBLE_CONFIG ANSIBLE_DEPRECATION_WARNINGS=False GPUOPS_KNOWN_HOSTS
KUBECONFIG=$(fact kube.kubeconfig)
GPUOPS_KNOWN_HOSTS=$(fact fleet.known_hosts)  # gpuops checks the hosts' keys
ANSIBLE_CONFIG=$(fact fleet.ansible_cfg)
KUBECTL=$(fact kube.bin_dir)/kubectl

say "2. the fleet: reachability (S-8) and GPU inspection (S-16)"
run .venv/bin/ansible gpu_nodes -m ping -o
run .venv/bin/ansible gpu_nodes -o -m ansible.builtin.command -a \
  "nvidia-smi --query-gpu=index,name,driver_version,temperature.gpu,ecc.errors.uncorrected.volatile.total --format=csv,noheader -i 0"
run "$KUBECTL" get nodes -L accelerator,gpu-driver,nvidia.com/gpu.product
say "   gpuops nodes inspect: every GPU against the thresholds, Xid from the kernel log"
set +e
run "${G[@]}" nodes inspect -i "$(fact fleet.inventory)" --report-dir "$REPORTS/fleet"
rc=$?
set -e
echo "gpuops exit code: $rc (0 = healthy, 3 = a critical finding: the faulty host is named first)"
[[ $rc == 0 || $rc == 3 ]] || { echo "demo: the inspection itself failed" >&2; exit 1; }

say "3. inference takes 14 of the 16 H800 GPUs (7 replicas x 2)"
run "$KUBECTL" create namespace ai
"$KUBECTL" apply -f - <<'YAML'
apiVersion: apps/v1
kind: Deployment
metadata: {name: infer, namespace: ai}
spec:
  replicas: 7
  selector: {matchLabels: {app: infer}}
  template:
    metadata: {labels: {app: infer}}
    spec:
      nodeSelector: {accelerator: nvidia-h800}
      containers:
      - name: infer
        image: registry.local/infer:1
        resources: {limits: {nvidia.com/gpu: 2}}
YAML
run "$KUBECTL" -n ai rollout status deployment/infer --timeout=120s

say "   release gate: can a training run of 2 pods x 4 GPUs start on H800?"
set +e
run "${G[@]}" headroom check --namespace ai --gpus-per-pod 4 --pods 2 \
  --node-selector accelerator=nvidia-h800 --show-nodes --report-dir "$REPORTS/capacity"
rc=$?
set -e
echo "gpuops exit code: $rc (3 = gate refused: the release stops here, nothing deployed)"
[[ $rc == 3 ]] || { echo "demo: expected the gate to refuse" >&2; exit 1; }

say "   the same shape on any GPU class fits (the seed's fix: relax the training selector)"
run "${G[@]}" headroom check --namespace ai --gpus-per-pod 4 --pods 2

say "4. deployed without the gate, the training Job stays Pending"
"$KUBECTL" apply -f - <<'YAML'
apiVersion: batch/v1
kind: Job
metadata: {name: train, namespace: ai}
spec:
  parallelism: 2
  completions: 2
  template:
    spec:
      restartPolicy: Never
      nodeSelector: {accelerator: nvidia-h800}
      containers:
      - name: train
        image: registry.local/train:1
        resources: {limits: {nvidia.com/gpu: 4}}
YAML
for _ in $(seq 1 60); do
  "$KUBECTL" -n ai get events --field-selector reason=FailedScheduling -o name | grep -q . && break
  sleep 0.5
done
run "$KUBECTL" -n ai get events --field-selector reason=FailedScheduling \
  -o custom-columns=OBJECT:.involvedObject.name,MESSAGE:.message
run "${G[@]}" headroom explain --namespace ai job/train
say "   the gate refused what the scheduler could not place, and said why"

say "5. the release story: Jenkinsfile.example end to end on the lab"
run "$KUBECTL" delete namespace ai --wait=true
REGISTRY=$(jq -r '.result.components.registry.url' <<<"$status")
BASE=$(jq -r '.result.components.builder.base_image' <<<"$status")
BUILDER=$(jq -r '.result.components.builder.base_url' <<<"$status")
STORY=$(.venv/bin/python scripts/release_story.py prepare --kubeconfig "$KUBECONFIG" \
  --kubectl "$KUBECTL" --registry "$REGISTRY" --base-image "$BASE" --builder "$BUILDER" \
  --out "$GPUOPS_LAB_DIR/story")
echo "the application's repository: $(dirname "$STORY")/app (gpuops-release.yaml, Dockerfile, tests/)"
# The pipeline's console as Jenkins shows it (classic console log), followed as the test
# writes it: gradle -q itself prints nothing of a test's output.
CONSOLE="$(dirname "$STORY")/console.log"
: >"$CONSOLE"
tail -n +1 -F "$CONSOLE" 2>/dev/null &
TAIL=$!
set +e
run gradle --console=plain -q labTest -Dgpuops.story="$STORY"
rc=$?
set -e
sleep 1  # the last lines
kill "$TAIL"
wait "$TAIL" 2>/dev/null || true
[[ $rc == 0 ]] || { echo "demo: the pipeline story failed (console: $CONSOLE)" >&2; exit "$rc"; }
APP_CONFIG="$(dirname "$STORY")/app/gpuops-release.yaml"
say "   the release history, from the cluster"
run "${G[@]}" release history -e staging --config "$APP_CONFIG"
run "${G[@]}" release history -e production --config "$APP_CONFIG" --report-dir "$REPORTS/releases"
run "$KUBECTL" -n ai-production rollout history deployment/infer
say "done: one safe release path, from build to rollback, recorded where the cluster is"
echo "the pages of this run (open in a browser; Jenkins archives and publishes the same):"
find "$REPORTS" -name '*.html' -newer "$REPORTS/.started" | sort
