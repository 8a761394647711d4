#!/usr/bin/env bash
# A real Kubernetes control plane on loopback for gpupool's Kubernetes tests and bench:
# etcd + kube-apiserver (RBAC on), and kube-scheduler for the side-by-side bench.
#
#   scripts/k8s-control-plane.sh build            build or reuse the binaries; prints their folder
#   scripts/k8s-control-plane.sh start RUN_DIR    PKI, tokens, kubeconfigs, etcd, kube-apiserver
#   scripts/k8s-control-plane.sh scheduler RUN_DIR   start kube-scheduler (client QPS raised)
#   scripts/k8s-control-plane.sh stop RUN_DIR     stop what start/scheduler started, by PID
#
# kube-apiserver and kube-scheduler run with the alpha gates DRA needs beyond v1.34's GA
# core (partitionable devices for MIG counters, consumable capacity for shares, extended
# resources served by DRA for old nvidia.com/gpu pods; gpupool.kube.dra), or
# GPUPOOL_K8S_FEATURE_GATES.
#
# Binaries are cached outside the clone, keyed by version:
#   ${GPUPOOL_K8S_CACHE:-$HOME/.cache/gpupool/k8s}/<version>/bin/{etcd,kube-apiserver,kube-scheduler}
# A cold build (Go from the module proxy) is ~590 CPU-seconds; a warm Go build cache makes it ~12 s.
# Versions and flags follow the recipe measured on this machine kind (k8s.io/kubernetes v1.34.4).
set -euo pipefail

K8S_VERSION="${GPUPOOL_K8S_VERSION:-v1.34.4}"
CACHE="${GPUPOOL_K8S_CACHE:-$HOME/.cache/gpupool/k8s}"
BIN="$CACHE/$K8S_VERSION/bin"
PORT_ETCD="${GPUPOOL_K8S_ETCD_PORT:-23790}"
PORT_API="${GPUPOOL_K8S_API_PORT:-26443}"
GPUPOOL_SA="system:serviceaccount:gpupool-system:gpupool-scheduler"
PLUGIN_SA="system:serviceaccount:gpupool-system:gpupool-device-plugin"

die() { echo "k8s-control-plane: $*" >&2; exit 1; }

GATES="${GPUPOOL_K8S_FEATURE_GATES:-DRAPartitionableDevices=true,DRAConsumableCapacity=true,DRAExtendedResource=true}"
have_binaries() { [ -x "$BIN/etcd" ] && [ -x "$BIN/kube-apiserver" ] && [ -x "$BIN/kube-scheduler" ]; }

build() {
  if have_binaries; then echo "$BIN"; return; fi
  export PATH="/usr/local/go/bin:$PATH"
  command -v go >/dev/null 2>&1 || die "no Go toolchain and no cached binaries in $BIN"
  local minor staging work kmod ld
  minor="$(echo "$K8S_VERSION" | cut -d. -f2)"
  staging="v0.${K8S_VERSION#v1.}"
  work="$CACHE/$K8S_VERSION/src"
  mkdir -p "$work/cmd/kube-apiserver" "$work/cmd/kube-scheduler" "$work/cmd/etcd"
  cd "$work"
  kmod="$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/^\s*"GoMod": "\(.*\)",$/\1/p')"
  [ -f "$kmod" ] || die "could not download k8s.io/kubernetes@$K8S_VERSION"
  {
    echo "module gpupoolk8s"; echo; echo "go 1.24.0"; echo; echo "godebug default=go1.24"; echo
    echo "require k8s.io/kubernetes $K8S_VERSION"; echo; echo "replace ("
    grep -E '^\s+k8s.io/[a-z0-9-]+ => \./staging/' "$kmod" | awk -v s="$staging" '{print "\t"$1" => "$1" "s}'
    echo ")"
  } > go.mod
  cat > cmd/kube-apiserver/main.go <<'GO'
package main

import (
	"os"
	_ "time/tzdata"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() { os.Exit(cli.Run(app.NewAPIServerCommand())) }
GO
  sed -e 's#cmd/kube-apiserver/app#cmd/kube-scheduler/app#' -e 's#NewAPIServerCommand#NewSchedulerCommand#' \
      -e '/time\/tzdata/d' cmd/kube-apiserver/main.go > cmd/kube-scheduler/main.go
  cat > cmd/etcd/main.go <<'GO'
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
  nice -n 19 go mod tidy >&2
  ld="-s -w"
  for p in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
    ld="$ld -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
  done
  mkdir -p "$BIN.tmp"
  nice -n 19 go build -ldflags "$ld" -o "$BIN.tmp/" ./cmd/kube-apiserver ./cmd/kube-scheduler ./cmd/etcd >&2
  rm -rf "$BIN"; mv "$BIN.tmp" "$BIN"
  echo "$BIN"
}

wait_until() {  # wait_until SECONDS DESCRIPTION COMMAND...
  local deadline=$((SECONDS + $1)) what="$2"; shift 2
  until "$@" >/dev/null 2>&1; do
    [ "$SECONDS" -lt "$deadline" ] || die "$what did not come up in time"
    sleep 0.2
  done
}

start() {
  local run="$1" pki
  have_binaries || die "binaries missing in $BIN: run '$0 build' first"
  mkdir -p "$run/logs"; pki="$run/pki"; mkdir -p "$pki"
  (
    cd "$pki"
    openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 3650 -subj /CN=gpupool-k8s-ca \
      -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign,digitalSignature 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -keyout apiserver.key -out apiserver.csr -subj /CN=kube-apiserver 2>/dev/null
    printf '%s\n' "subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default" \
      keyUsage=critical,digitalSignature,keyEncipherment extendedKeyUsage=serverAuth \
      basicConstraints=critical,CA:FALSE subjectKeyIdentifier=hash authorityKeyIdentifier=keyid,issuer > san.ext
    openssl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out apiserver.crt \
      -days 3650 -extfile san.ext 2>/dev/null
    openssl req -x509 -newkey rsa:2048 -nodes -keyout front-proxy-ca.key -out front-proxy-ca.crt -days 3650 \
      -subj /CN=front-proxy-ca -addext basicConstraints=critical,CA:TRUE 2>/dev/null
    openssl genrsa -out sa.key 2048 2>/dev/null && openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
    # Four identities: the admin (system:masters) that sets the cluster up, gpupool's
    # scheduler and device plugin as the ServiceAccounts deploy/kubernetes/rbac.yaml binds (a
    # static token with that user name: RBAC matches ServiceAccount subjects by it), each
    # holding only what the manifest grants, and a tenant user (tenant-user) with no rights
    # until a RoleBinding gives some.
    echo "$(openssl rand -hex 24),admin,admin-uid,\"system:masters\"" > tokens.csv
    for sa in "$GPUPOOL_SA" "$PLUGIN_SA"; do
      echo "$(openssl rand -hex 24),$sa,${sa##*:}-uid,\"system:serviceaccounts,system:serviceaccounts:gpupool-system\"" >> tokens.csv
    done
    echo "$(openssl rand -hex 24),tenant-user,tenant-user-uid" >> tokens.csv
  )
  local user token file
  for user in admin "$GPUPOOL_SA" "$PLUGIN_SA" tenant-user; do
    token="$(awk -F, -v u="$user" '$2==u {print $1}' "$pki/tokens.csv")"
    case "$user" in
      admin) file="$run/kubeconfig-admin" ;;
      "$GPUPOOL_SA") file="$run/kubeconfig-gpupool" ;;
      tenant-user) file="$run/kubeconfig-tenant" ;;
      *) file="$run/kubeconfig-device-plugin" ;;
    esac
    cat > "$file" <<KC
apiVersion: v1
kind: Config
clusters: [{name: local, cluster: {server: "https://127.0.0.1:$PORT_API", certificate-authority: $pki/ca.crt}}]
users: [{name: $user, user: {token: $token}}]
contexts: [{name: local, context: {cluster: local, user: $user}}]
current-context: local
KC
  done
  cp "$run/kubeconfig-admin" "$run/kubeconfig"
  setsid "$BIN/etcd" --name gpupool --data-dir "$run/etcd" \
    --listen-client-urls "http://127.0.0.1:$PORT_ETCD" --advertise-client-urls "http://127.0.0.1:$PORT_ETCD" \
    --listen-peer-urls "http://127.0.0.1:$((PORT_ETCD + 10))" \
    --initial-advertise-peer-urls "http://127.0.0.1:$((PORT_ETCD + 10))" \
    --initial-cluster "gpupool=http://127.0.0.1:$((PORT_ETCD + 10))" \
    --unsafe-no-fsync --log-level warn > "$run/logs/etcd.log" 2>&1 &
  echo "etcd $!" >> "$run/pids"
  wait_until 30 etcd curl -sf "http://127.0.0.1:$PORT_ETCD/health"
  setsid "$BIN/kube-apiserver" --etcd-servers="http://127.0.0.1:$PORT_ETCD" \
    --bind-address=127.0.0.1 --secure-port="$PORT_API" --cert-dir="$pki" \
    --tls-cert-file="$pki/apiserver.crt" --tls-private-key-file="$pki/apiserver.key" \
    --client-ca-file="$pki/ca.crt" --token-auth-file="$pki/tokens.csv" \
    --requestheader-client-ca-file="$pki/front-proxy-ca.crt" --requestheader-allowed-names=front-proxy-client \
    --requestheader-username-headers=X-Remote-User --requestheader-group-headers=X-Remote-Group \
    --requestheader-extra-headers-prefix=X-Remote-Extra- \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file="$pki/sa.pub" --service-account-signing-key-file="$pki/sa.key" \
    --service-cluster-ip-range=10.0.0.0/24 --endpoint-reconciler-type=none \
    --authorization-mode=RBAC --disable-admission-plugins=ServiceAccount,TaintNodesByCondition \
    --feature-gates="$GATES" \
    > "$run/logs/kube-apiserver.log" 2>&1 &
  echo "kube-apiserver $!" >> "$run/pids"
  local admin_token
  admin_token="$(awk -F, '$2=="admin" {print $1}' "$pki/tokens.csv")"
  wait_until 120 kube-apiserver curl -sf --cacert "$pki/ca.crt" -H "Authorization: Bearer $admin_token" \
    "https://127.0.0.1:$PORT_API/readyz"
  echo "$run/kubeconfig"
}

scheduler() {
  local run="$1"
  cat > "$run/kube-scheduler.yaml" <<YAML
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection: {kubeconfig: $run/kubeconfig-admin, qps: 5000, burst: 5000}
leaderElection: {leaderElect: false}
YAML
  setsid "$BIN/kube-scheduler" --config="$run/kube-scheduler.yaml" \
    --authentication-kubeconfig="$run/kubeconfig-admin" --authorization-kubeconfig="$run/kubeconfig-admin" \
    --bind-address=127.0.0.1 --secure-port="${GPUPOOL_K8S_SCHEDULER_PORT:-30259}" \
    --cert-dir="$run/pki/scheduler" --feature-gates="$GATES" > "$run/logs/kube-scheduler.log" 2>&1 &
  echo "kube-scheduler $!" >> "$run/pids"
}

stop() {
  local run="$1" name pid
  [ -f "$run/pids" ] || return 0
  tac "$run/pids" | while read -r name pid; do
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  done
  rm -f "$run/pids"
}

case "${1:-}" in
  build) build ;;
  start) [ -n "${2:-}" ] || die "usage: $0 start RUN_DIR"; start "$2" ;;
  scheduler) [ -n "${2:-}" ] || die "usage: $0 scheduler RUN_DIR"; scheduler "$2" ;;
  stop) [ -n "${2:-}" ] || die "usage: $0 stop RUN_DIR"; stop "$2" ;;
  *) die "usage: $0 build | start RUN_DIR | scheduler RUN_DIR | stop RUN_DIR" ;;
esac
