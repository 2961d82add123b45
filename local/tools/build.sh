#!/usr/bin/env bash
# Builds the local control plane's binaries from this module into DIR
# (default: .cache/bin at the repository root): etcd, kube-apiserver,
# kube-scheduler, kube-controller-manager, kwok, and kwok-stages.yaml (kwok's
# fast node and pod stages). It does nothing when DIR holds all of them and
# its stamp matches the hash of this module's go.mod, go.sum and sources and
# of the Go version, so a warm run takes well under a second. The builds
# run with -v: the Makefile's progress wrapper (local/buildprogress) reads
# the package names from stderr to say what is being built.
set -euo pipefail
tools="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$tools/../.." && pwd)"
dir="${1:-$root/.cache/bin}"
mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"
go="${GO:-go}"

bins=(etcd kube-apiserver kube-scheduler kube-controller-manager kwok kwok-stages.yaml)
stamp="$( (cd "$tools" && cat go.mod go.sum build.sh kwokstages/*.go && "$go" version) | sha256sum | cut -d' ' -f1)"

up_to_date=1
for b in "${bins[@]}"; do
	[[ -e "$dir/$b" ]] || up_to_date=0
done
if [[ $up_to_date == 1 && -f "$dir/controlplane.stamp" && "$(cat "$dir/controlplane.stamp")" == "$stamp" ]]; then
	echo "controlplane: up to date in $dir"
	exit 0
fi

rm -f "$dir/controlplane.stamp"
start=$SECONDS
echo "controlplane: building into $dir"
cd "$tools"
# The version stamps are what the binaries report (kubectl version,
# /version); k8s.io/kubernetes' own build sets them the same way.
kver=v1.37.2
ldflags="-s -w"
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
	ldflags+=" -X $p.gitVersion=$kver -X $p.gitMajor=1 -X $p.gitMinor=37 -X $p.gitTreeState=clean"
done
export CGO_ENABLED=0
"$go" build -v -trimpath -ldflags "$ldflags" -o "$dir/" \
	k8s.io/kubernetes/cmd/kube-apiserver \
	k8s.io/kubernetes/cmd/kube-scheduler \
	k8s.io/kubernetes/cmd/kube-controller-manager \
	sigs.k8s.io/kwok/cmd/kwok
"$go" build -v -trimpath -ldflags "-s -w" -o "$dir/etcd" go.etcd.io/etcd/server/v3
"$go" run ./kwokstages "$dir/kwok-stages.yaml"
echo "$stamp" >"$dir/controlplane.stamp"
echo "controlplane: built in $((SECONDS - start)) s"
