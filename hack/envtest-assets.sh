#!/usr/bin/env bash
# Print a folder holding a real control plane for the e2e tier (envtest's convention: the folder
# that KUBEBUILDER_ASSETS names), making one first when none is at hand:
#
#   1. $KUBEBUILDER_ASSETS, when it already holds etcd and kube-apiserver;
#   2. setup-envtest, where it is installed and can download (the README's way, any release);
#   3. otherwise Kubernetes v1.20.2 built from Debian bookworm's `kubernetes` source package with
#      Debian's Go, and etcd from `etcd-server`, into a cache outside the checkout that later runs on
#      the same machine reuse (a warm run costs nothing).
#
# Only the folder goes to standard output; progress goes to standard error (and the build's log
# to the cache). Usage:  export KUBEBUILDER_ASSETS="$(hack/envtest-assets.sh)"
#
# Environment: PLACEMENT_ENVTEST_CACHE (default ${XDG_CACHE_HOME:-~/.cache}/placement-webhook/envtest),
# ENVTEST_K8S_VERSION for setup-envtest (default 1.31.x), PLACEMENT_ENVTEST_NO_DOWNLOAD=1 skips step 2,
# PLACEMENT_ENVTEST_FULL=1 (CI sets it) takes a folder from steps 1 and 2 only when it also holds
# kube-scheduler and kube-controller-manager: setup-envtest ships etcd, kube-apiserver and kubectl only,
# and the tests that need the other two would skip.
set -euo pipefail

say() { printf 'envtest-assets: %s\n' "$*" >&2; }
has_plane() { [ -x "$1/etcd" ] && [ -x "$1/kube-apiserver" ]; }
full_plane() { has_plane "$1" && [ -x "$1/kube-scheduler" ] && [ -x "$1/kube-controller-manager" ]; }

enough() { if [ -n "${PLACEMENT_ENVTEST_FULL:-}" ]; then full_plane "$1"; else has_plane "$1"; fi; }

# 1. Already given.
if [ -n "${KUBEBUILDER_ASSETS:-}" ] && enough "$KUBEBUILDER_ASSETS"; then
  say "using KUBEBUILDER_ASSETS=$KUBEBUILDER_ASSETS"
  printf '%s\n' "$KUBEBUILDER_ASSETS"
  exit 0
fi

# 2. setup-envtest, where it can download.
if [ -z "${PLACEMENT_ENVTEST_NO_DOWNLOAD:-}" ] && command -v setup-envtest >/dev/null 2>&1; then
  if folder=$(timeout 300 setup-envtest use -p path "${ENVTEST_K8S_VERSION:-1.31.x}" 2>/dev/null) \
      && [ -n "$folder" ] && enough "$folder"; then
    say "using setup-envtest's $folder"
    printf '%s\n' "$folder"
    exit 0
  fi
  say "setup-envtest could not provide the binaries needed; building from Debian's source instead"
fi

# 3. Build v1.20.2 from Debian's source package.
VERSION=v1.20.2
cache=${PLACEMENT_ENVTEST_CACHE:-${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/placement-webhook/envtest}
out=$cache/$VERSION/bin
if full_plane "$out"; then
  say "using the cached $VERSION control plane in $out"
  printf '%s\n' "$out"
  exit 0
fi

mkdir -p "$cache"
log=$cache/build-$VERSION.log
say "building kube-apiserver, kube-scheduler and kube-controller-manager $VERSION (about 5 minutes on two cores; log: $log)"
# Everything the build prints goes to the log; fd 3 and 4 keep this script's own stderr and stdout.
exec 3>&2 4>&1 2>>"$log" 1>&2
trap 'rc=$?; [ $rc -eq 0 ] || { echo "envtest-assets: the build failed (exit $rc); the last lines of $log:" >&3; tail -n 30 "$log" >&3; }' EXIT
set -x

# Debian packages: Go, etcd, the reflect2 fix, and dpkg-source to unpack (and patch) the source.
export DEBIAN_FRONTEND=noninteractive
src_list=/etc/apt/sources.list.d/placement-webhook-deb-src.sources
if ! grep -rqs '^Types:.*deb-src' /etc/apt/sources.list.d/ && ! grep -qs '^deb-src .* bookworm main' /etc/apt/sources.list; then
  cat >"$src_list" <<SRC
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
fi
apt-get update -qq
apt-get install -y -qq --no-install-recommends dpkg-dev golang-go etcd-server golang-github-modern-go-reflect2-dev

# The source, unpacked with Debian's patches applied (dpkg-source -x, which apt-get source runs).
work=$cache/$VERSION/work
rm -rf "$work"
mkdir -p "$work/src"
# bookworm carries one kubernetes source package: 1.20.5+really1.20.2, the v1.20.2 tree.
(cd "$work/src" && apt-get source -qq kubernetes)
tree=$(find "$work/src" -mindepth 1 -maxdepth 1 -type d -name 'kubernetes-*' | head -n 1)
[ -n "$tree" ] && [ -f "$tree/cmd/kube-apiserver/apiserver.go" ]

# GOPATH mode, as 1.20's own hack/lib builds it: module mode under Go 1.19 asks to update go.mod.
export GOPATH=$work/gopath GO111MODULE=off GOFLAGS= CGO_ENABLED=0 GOCACHE=$cache/go-build
mkdir -p "$GOPATH/src/k8s.io"
ln -sfn "$tree" "$GOPATH/src/k8s.io/kubernetes"
cd "$GOPATH/src/k8s.io/kubernetes"

# reflect2 1.0.1 (vendored) crashes under Go >= 1.18 when maps are iterated; Debian ships 1.0.2.
reflect2=/usr/share/gocode/src/github.com/modern-go/reflect2
rm -rf vendor/github.com/modern-go/reflect2
cp -r "$reflect2" vendor/github.com/modern-go/reflect2
rm -rf vendor/github.com/modern-go/reflect2/go.mod vendor/github.com/modern-go/reflect2/go.sum

# The one generated file the source package lacks: the OpenAPI definitions, made by openapi-gen over
# the packages tagged +k8s:openapi-gen= (build/root/Makefile.generated_files selects them the same way).
if [ ! -s pkg/generated/openapi/zz_generated.openapi.go ]; then
  go build -o "$work/openapi-gen" k8s.io/kubernetes/vendor/k8s.io/kube-openapi/cmd/openapi-gen
  dirs=$(grep -rl --include='*.go' '+k8s:openapi-gen=' cmd pkg plugin staging/src vendor/k8s.io/kube-openapi 2>/dev/null \
    | grep -v -e '^staging/src/k8s.io/code-generator/' -e '^staging/src/k8s.io/sample-apiserver/' -e '/testdata/' \
    | xargs -n1 dirname | LC_ALL=C sort -u \
    | sed -e 's#^staging/src/#k8s.io/kubernetes/vendor/#' -e 's#^vendor/#k8s.io/kubernetes/vendor/#' -e 't' -e 's#^#k8s.io/kubernetes/#' \
    | paste -sd, -)
  "$work/openapi-gen" --input-dirs "$dirs" \
    --output-base "$GOPATH/src" --output-package k8s.io/kubernetes/pkg/generated/openapi \
    -O zz_generated.openapi --go-header-file hack/boilerplate/boilerplate.generatego.txt \
    --report-filename "$work/openapi-violations.txt"
fi

# The binaries report v1.20.2, as hack/lib/version.sh stamps them.
ldflags=""
for pkg in k8s.io/kubernetes/vendor/k8s.io/client-go/pkg/version k8s.io/kubernetes/vendor/k8s.io/component-base/version; do
  ldflags="$ldflags -X $pkg.gitVersion=$VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=20"
  ldflags="$ldflags -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done
mkdir -p "$work/bin"
for cmd in kube-apiserver kube-scheduler kube-controller-manager; do
  go build -tags providerless -ldflags "-s -w $ldflags" -o "$work/bin/$cmd" "k8s.io/kubernetes/cmd/$cmd"
done
cp "$(command -v etcd)" "$work/bin/etcd"
"$work/bin/kube-apiserver" --version

# Publish the folder whole, then drop the source and objects (the Go build cache stays for a rebuild).
rm -rf "$out"
mkdir -p "$(dirname "$out")"
mv "$work/bin" "$out"
rm -rf "$work"
set +x
exec 2>&3 1>&4
say "built the $VERSION control plane in $out"
printf '%s\n' "$out"
