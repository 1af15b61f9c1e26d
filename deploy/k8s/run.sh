#!/usr/bin/env bash
# deploy/k8s/run.sh: one model under load on a Kubernetes cluster, from
# several loadgen agents that start at the same instant; their results merged.
#   deploy/k8s/run.sh [OPTIONS]
# Steps: applies deploy/k8s/server.yaml (Deployment servermodels-server and
# Service servermodels-server), waits for it to be ready, picks the start
# instant START_AT = now + --lead, applies deploy/k8s/loadgen-job.yaml (an
# Indexed Job, one pod per agent), waits for it to complete or fail, writes
# each agent's stdout (its JSON, then its HdrHistogram interval log) to
# OUT/agent-<index>.out, and runs bench/compare/merge -o OUT OUT/agent-*.out
# (OUT/merged.json, OUT/merged.hlog, a summary). Then it deletes the Job and
# the server (--keep-server: not the server); on an error or an interrupt too.
# Options (totals are over all agents and divide evenly between them):
#   -a, --agents N            loadgen pods (default 2)
#   -c, --connections N       connections in all (default 64); a multiple of --agents
#   -R, --rate R              requests/s in all, open loop (default 0: closed loop)
#   -d, --duration D          measured time, loadgen's form: 10s, 500ms, 2m (default 30s)
#   -w, --warmup D            load before measuring (default 5s)
#   -p, --path P              the request path (default /plaintext)
#       --agent-threads N     loadgen threads per agent (default 1); --connections / --agents
#                             is at least this
#       --agent-cpus N        whole cores per agent, requests == limits (default: --agent-threads)
#       --agent-memory Q      memory per agent (default 512Mi)
#   -s, --server BINARY       the model's binary in the server image (default server-epoll)
#   -t, --server-threads N    server threads (default 2)
#       --server-cpus N       whole cores of the server, requests == limits (default: --server-threads)
#       --server-memory Q     memory of the server (default 256Mi)
#       --server-image IMAGE  (default servermodels/server:latest)
#       --bench-image IMAGE   loadgen's image (default servermodels/bench:latest)
#   -n, --namespace NS        (default: the current context's)
#       --lead SECONDS        START_AT = now + this, applied with the Job (default 15): enough for the
#                             pods to be scheduled, their images pulled and loadgen started on every node
#       --timeout SECONDS     how long to wait for the server to be ready (default 180)
#   -o, --out DIR             (default bench/results/k8s-RUN_ID)
#       --keep-server         leave the server running (a later run reuses it)
#       --render DIR          only write the two manifests, filled in, to DIR (no cluster needed)
#   -h, --help
# Needs kubectl and a cluster it reaches; the images must be where the nodes
# pull from (docker/build.sh builds them locally: push or load them first).
# SM_K8S_MERGE, when set, is run in place of bench/compare/merge (tests).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
prog=run.sh

die() { echo "$prog: $*" >&2; exit 1; }
usage_error() { echo "$prog: $* (see --help)" >&2; exit 2; }

agents=2 connections=64 rate=0 duration=30s warmup=5s path=/plaintext
agent_threads=1 agent_cpus="" agent_memory=512Mi
server_binary=server-epoll server_threads=2 server_cpus="" server_memory=256Mi
server_image=servermodels/server:latest bench_image=servermodels/bench:latest
namespace="" lead=15 timeout=180 out="" keep_server=0 render=""

need() { if [ $# -lt 2 ] || [ -z "$2" ]; then usage_error "$1 needs a value"; fi; }
while [ $# -gt 0 ]; do
  opt=$1 val=""
  case "$opt" in
    --*=*) val=${opt#*=}; opt=${opt%%=*}; set -- "$opt" "$val" "${@:2}" ;;
  esac
  case "$opt" in
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    --keep-server) keep_server=1; shift; continue ;;
    -a|--agents|-c|--connections|-R|--rate|-d|--duration|-w|--warmup|-p|--path|--agent-threads|--agent-cpus|\
    --agent-memory|-s|--server|-t|--server-threads|--server-cpus|--server-memory|--server-image|--bench-image|\
    -n|--namespace|--lead|--timeout|-o|--out|--render) need "$@" ;;
    *) usage_error "unknown argument '$opt'" ;;
  esac
  case "$opt" in
    -a|--agents) agents=$2 ;;
    -c|--connections) connections=$2 ;;
    -R|--rate) rate=$2 ;;
    -d|--duration) duration=$2 ;;
    -w|--warmup) warmup=$2 ;;
    -p|--path) path=$2 ;;
    --agent-threads) agent_threads=$2 ;;
    --agent-cpus) agent_cpus=$2 ;;
    --agent-memory) agent_memory=$2 ;;
    -s|--server) server_binary=$2 ;;
    -t|--server-threads) server_threads=$2 ;;
    --server-cpus) server_cpus=$2 ;;
    --server-memory) server_memory=$2 ;;
    --server-image) server_image=$2 ;;
    --bench-image) bench_image=$2 ;;
    -n|--namespace) namespace=$2 ;;
    --lead) lead=$2 ;;
    --timeout) timeout=$2 ;;
    -o|--out) out=$2 ;;
    --render) render=$2 ;;
  esac
  shift 2
done

# --- the values, checked before anything is made --------------------------
positive() { [[ $2 =~ ^[1-9][0-9]*$ ]] || usage_error "$1 '$2': expected a whole number above 0"; }
positive --agents "$agents"
positive --connections "$connections"
positive --agent-threads "$agent_threads"
positive --server-threads "$server_threads"
positive --lead "$lead"
positive --timeout "$timeout"
agent_cpus=${agent_cpus:-$agent_threads}
server_cpus=${server_cpus:-$server_threads}
# Whole cores only: with a fraction ("1500m") the pod is still Guaranteed,
# but the static CPU manager policy gives it no cores of its own.
positive "--agent-cpus (whole cores)" "$agent_cpus"
positive "--server-cpus (whole cores)" "$server_cpus"
for q in "--agent-memory:$agent_memory" "--server-memory:$server_memory"; do
  [[ ${q#*:} =~ ^[1-9][0-9]*(Ki|Mi|Gi|Ti|k|M|G|T)?$ ]] || usage_error "${q%%:*} '${q#*:}': expected a quantity such as 512Mi"
done
[[ $rate =~ ^[0-9]+(\.[0-9]+)?$ ]] || usage_error "--rate '$rate': expected requests/s (0: closed loop)"
[[ $path =~ ^/[A-Za-z0-9._~/?\&=%+-]*$ ]] || usage_error "--path '$path': expected a path such as /plaintext"
[[ $server_binary =~ ^server-[a-z0-9_-]+$ ]] || usage_error "--server '$server_binary': expected a binary such as server-epoll"
for i in "--server-image:$server_image" "--bench-image:$bench_image"; do
  [[ ${i#*:} =~ ^[A-Za-z0-9][A-Za-z0-9._/:@-]*$ ]] || usage_error "${i%%:*} '${i#*:}': not an image reference"
done
[ -z "$namespace" ] || [[ $namespace =~ ^[a-z0-9]([a-z0-9-]*[a-z0-9])?$ ]] ||
  usage_error "--namespace '$namespace': not a namespace name"

# Seconds (rounded up) of loadgen's durations: 10s, 500ms, 2m, 1h, 1.5s; a bare number is seconds.
seconds() {
  [[ $2 =~ ^([0-9]+(\.[0-9]+)?)(ms|s|m|h)?$ ]] || usage_error "$1 '$2': expected a duration such as 30s, 500ms, 2m"
  awk -v n="${BASH_REMATCH[1]}" -v u="${BASH_REMATCH[3]:-s}" 'BEGIN {
    f = (u == "ms") ? 0.001 : (u == "m") ? 60 : (u == "h") ? 3600 : 1
    s = n * f; printf "%d\n", (s == int(s)) ? s : int(s) + 1 }'
}
duration_s=$(seconds --duration "$duration")
warmup_s=$(seconds --warmup "$warmup")
[ "$duration_s" -gt 0 ] || usage_error "--duration '$duration': expected more than 0"

(( connections % agents == 0 )) ||
  usage_error "--connections $connections does not divide between $agents agents: give a multiple of $agents"
agent_connections=$(( connections / agents ))
(( agent_connections >= agent_threads )) ||
  usage_error "$agent_connections connections per agent is fewer than --agent-threads $agent_threads"
agent_rate=$(awk -v r="$rate" -v n="$agents" 'BEGIN { printf "%.6f\n", r / n }' | sed 's/0*$//; s/\.$//')

run_id=$(date -u +%Y%m%d-%H%M%S)-$(od -An -N2 -tx2 /dev/urandom | tr -d ' ')
job=servermodels-loadgen-$run_id
start_at=""   # set when the Job is applied
# The Job ends by itself this long after it is applied: the lead, the
# warm-up, the measured time, and a margin for loadgen's own timeouts.
deadline_s=$(( lead + warmup_s + duration_s + 120 ))

# --- templating ------------------------------------------------------------
# The manifests hold ${NAME} placeholders (the list below, no others); each
# is replaced by its value, as text. A placeholder left over is an error.
placeholders() {
  cat <<EOF
RUN_ID=$run_id
AGENTS=$agents
AGENT_THREADS=$agent_threads
AGENT_CONNECTIONS=$agent_connections
AGENT_RATE=$agent_rate
AGENT_CPUS=$agent_cpus
AGENT_MEMORY=$agent_memory
DURATION=$duration
WARMUP=$warmup
START_AT=$start_at
DEADLINE_SECONDS=$deadline_s
REQUEST_PATH=$path
BENCH_IMAGE=$bench_image
SERVER_IMAGE=$server_image
SERVER_BINARY=$server_binary
SERVER_THREADS=$server_threads
SERVER_CPUS=$server_cpus
SERVER_MEMORY=$server_memory
EOF
}
render_to() {  # render_to TEMPLATE OUTPUT
  local text name value
  text=$(<"$1")
  while IFS='=' read -r name value; do
    # Quoted pattern and replacement: no glob, no '&' (bash 5.2's patsub_replacement).
    text=${text//"\${$name}"/"$value"}
  done < <(placeholders)
  if [[ $text =~ \$\{[A-Za-z_][A-Za-z0-9_]*\} ]]; then
    die "$1: placeholder ${BASH_REMATCH[0]} has no value (placeholders: $(placeholders | cut -d= -f1 | paste -sd' '))"
  fi
  printf '%s\n' "$text" >"$2"
}

now() {  # wall clock, epoch seconds with a fraction (whole seconds where date has no %N)
  local t
  t=$(date +%s.%N)
  [[ $t =~ ^[0-9]+\.[0-9]+$ ]] || t=$(date +%s)
  echo "$t"
}
instant() { awk -v l="$lead" -v t="$(now)" 'BEGIN { printf "%.3f\n", t + l }'; }

if [ -n "$render" ]; then
  start_at=$(instant)
  mkdir -p "$render"
  render_to "$here/server.yaml" "$render/server.yaml"
  render_to "$here/loadgen-job.yaml" "$render/loadgen-job.yaml"
  echo "$prog: wrote $render/server.yaml and $render/loadgen-job.yaml (START_AT $start_at)"
  exit 0
fi

# --- the cluster -------------------------------------------------------------
command -v kubectl >/dev/null ||
  die "kubectl not found: install it (https://kubernetes.io/docs/tasks/tools/) and point it at a cluster"
kc=(kubectl)
[ -z "$namespace" ] || kc+=(--namespace "$namespace")
if ! why=$(kubectl get --raw /version --request-timeout=10s 2>&1 >/dev/null); then
  die "no Kubernetes cluster reachable (context '$(kubectl config current-context 2>/dev/null || echo none)'): ${why##*$'\n'}"
fi
if [ -n "$namespace" ] && ! kubectl get namespace "$namespace" >/dev/null 2>&1; then
  die "namespace '$namespace' does not exist: kubectl create namespace $namespace"
fi
merge=${SM_K8S_MERGE:-$repo/bench/compare/merge}
[ -x "$merge" ] || die "$merge not found: it merges the agents' streams"

out=${out:-$repo/bench/results/k8s-$run_id}
mkdir -p "$out"
rm -f "$out"/agent-*.out "$out"/agent-*.kubectl.err "$out/pods.txt"
echo "$prog: run $run_id, results in $out"

# --- clean-up, whatever happens ---------------------------------------------
made_job=0 made_server=0
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [ "$made_job" = 1 ]; then
    "${kc[@]}" delete job "$job" --cascade=foreground --ignore-not-found --wait=true --timeout=120s >/dev/null ||
      echo "$prog: could not delete job $job: kubectl delete job $job" >&2
  fi
  if [ "$made_server" = 1 ] && [ "$keep_server" = 0 ]; then
    "${kc[@]}" delete -f "$out/server.yaml" --cascade=foreground --ignore-not-found --wait=true --timeout=120s \
      >/dev/null ||
      echo "$prog: could not delete the server: kubectl delete -f $out/server.yaml" >&2
  elif [ "$made_server" = 1 ]; then
    echo "$prog: the server is kept (kubectl delete -f $out/server.yaml removes it)"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- the server ---------------------------------------------------------------
render_to "$here/server.yaml" "$out/server.yaml"
made_server=1
"${kc[@]}" apply -f "$out/server.yaml"
echo "$prog: waiting up to ${timeout}s for deployment/servermodels-server to be ready"
"${kc[@]}" rollout status deployment/servermodels-server --timeout="${timeout}s" ||
  die "the server did not get ready in ${timeout}s: kubectl describe pod -l app.kubernetes.io/component=server"

# --- the load -----------------------------------------------------------------
# The instant every agent starts loading (loadgen --start-at, wall clock,
# epoch seconds): the nodes' clocks must agree (NTP or PTP), see README.md.
start_at=$(instant)
render_to "$here/loadgen-job.yaml" "$out/loadgen-job.yaml"
made_job=1
"${kc[@]}" apply -f "$out/loadgen-job.yaml"
echo "$prog: $agents agents x $agent_connections connections$( [ "$rate" = 0 ] || echo ", $agent_rate requests/s each") start at $start_at ($(date -d "@${start_at%.*}" +%T)), ${warmup} warm-up, ${duration} measured"

pods() {  # one line per pod: INDEX PHASE NAME
  "${kc[@]}" get pods -l "app.kubernetes.io/instance=$run_id" -o \
    jsonpath='{range .items[*]}{.metadata.annotations.batch\.kubernetes\.io/job-completion-index}{" "}{.status.phase}{" "}{.metadata.name}{"\n"}{end}'
}

# Every agent should have started before the instant: say which had not.
while :; do
  running=$({ pods || true; } | awk 'NF == 3 && $2 != "Pending"' | wc -l)
  [ "$running" -ge "$agents" ] && break
  if awk -v s="$start_at" -v t="$(now)" 'BEGIN { exit !(t > s) }'; then
    echo "$prog: warning: only $running of $agents agents were running at the start instant" \
         "(raise --lead; pending: $(pods | awk '$2 == "Pending" { printf "%s ", $1 }'))" >&2
    break
  fi
  sleep 1
done

echo "$prog: waiting for job/$job (about $(( warmup_s + duration_s ))s of load; deadline ${deadline_s}s)"
state="" give_up=$(( SECONDS + deadline_s + 60 ))
while [ -z "$state" ]; do
  conditions=$("${kc[@]}" get job "$job" -o \
    jsonpath='{range .status.conditions[?(@.status=="True")]}{.type}{" "}{end}') || conditions=""
  case " $conditions " in
    *" Failed "*) state=failed ;;
    *" Complete "*) state=complete ;;
    *) [ "$SECONDS" -lt "$give_up" ] || die "job/$job neither completed nor failed in $(( deadline_s + 60 ))s"
       sleep 2 ;;
  esac
done

# Each agent's stdout. kubectl logs gives the container's stderr too,
# interleaved: with -q loadgen writes only errors there.
while read -r index phase pod; do
  [ -n "$index" ] || continue
  "${kc[@]}" logs "$pod" -c loadgen >"$out/agent-$index.out" 2>"$out/agent-$index.kubectl.err" ||
    echo "$prog: agent $index ($pod): no log: $(tail -1 "$out/agent-$index.kubectl.err")" >&2
  [ -s "$out/agent-$index.kubectl.err" ] || rm -f "$out/agent-$index.kubectl.err"
  echo "$index $phase $pod" >>"$out/pods.txt"
done < <(pods | sort -n)

if [ "$state" = failed ]; then
  reason=$("${kc[@]}" get job "$job" -o jsonpath='{.status.conditions[?(@.type=="Failed")].message}')
  failed=$(awk '$2 != "Succeeded" { printf "%s%s (%s, %s)", sep, $1, $3, $2; sep = ", " }' "$out/pods.txt" 2>/dev/null)
  echo "$prog: the job failed: ${reason:-no reason given}" >&2
  echo "$prog: failed agent(s), by index: ${failed:-none reported}; their output: $out/agent-<index>.out" >&2
  exit 1
fi

logs=("$out"/agent-*.out)
[ -e "${logs[0]}" ] || die "job/$job completed, but no agent's output could be read (kubectl get pods -l app.kubernetes.io/instance=$run_id)"
[ "${#logs[@]}" -eq "$agents" ] ||
  echo "$prog: warning: the output of ${#logs[@]} of $agents agents was read (see $out/pods.txt)" >&2
echo "$prog: job complete; merging ${#logs[@]} agents"
"$merge" -o "$out" "${logs[@]}" || {
  rc=$?
  echo "$prog: the merge failed (exit $rc, above); each agent's output is in $out/agent-<index>.out" >&2
  exit "$rc"
}
echo "$prog: done: $out (merged.json, merged.hlog, agent-<index>.out, the manifests as applied)"
