#!/usr/bin/env bash
# Builds the Kubernetes testbed's binaries from Go modules into a per-machine cache.
#
#   tools/build.sh k8s etcd            # some components
#   tools/build.sh all                 # k8s etcd containerd crictl runc coredns multus
#   tools/build.sh --update-modules k8s  # rewrite tools/k8s/go.mod from versions.env, tidy
#
# Output: ${JUNEAU_TOOLS_CACHE:-/var/cache/juneau-tools}/<component>-<version>/bin/
# The cache key is the version: a component whose binaries all exist is skipped.
# GOMODCACHE and GOCACHE live under the cache root too, so a later version bump on the
# same machine rebuilds incrementally. Concurrent runs serialize on a per-component lock. Builds are CGO-free (runc's excepted), -trimpath, under `nice -n 19`.
# Prints each component's wall time. Needs Go >= GO_MIN_VERSION (versions.env).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=versions.env
. "$here/versions.env"

root=${JUNEAU_TOOLS_CACHE:-/var/cache/juneau-tools}
export GOMODCACHE="$root/gomod" GOCACHE="$root/gocache"
export CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS="-mod=readonly -buildvcs=false"
NICE=(nice -n 19)

die() { echo "build.sh: $*" >&2; exit 1; }

# component -> version, binaries, packages, ldflags
component_vars() {
	cgo=0 tags="" flavor=""
	case $1 in
	k8s)
		version=$K8S_VERSION mainmod=k8s.io/kubernetes
		# kube-proxy: the nftables baseline of the connection-rate benchmarks (issue 42).
		# kubelet: the testbed's real Nodes (issue 28).
		# kube-controller-manager, kube-scheduler: Juneau's own DaemonSet and Deployments
		# on those Nodes (issue 28): their controllers and the binding of their Pods.
		bins=(kube-apiserver kubectl kube-proxy kubelet kube-controller-manager kube-scheduler)
		pkgs=(k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kubectl
			k8s.io/kubernetes/cmd/kube-proxy k8s.io/kubernetes/cmd/kubelet
			k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-scheduler)
		local p=k8s.io/component-base/version minor
		minor=${K8S_VERSION#v1.}; minor=${minor%%.*}
		# Names from kubernetes hack/lib/version.sh; without them the binaries
		# report v0.0.0-master+$Format:%H$ (kubectl skew warnings, odd /version).
		ldflags="-s -w -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor"
		ldflags+=" -X $p.gitTreeState=clean -X $p.gitCommit=module-$K8S_VERSION"
		ldflags+=" -X $p.buildDate=1970-01-01T00:00:00Z"
		# hack/lib/version.sh sets the same names in client-go's copy (user agents)
		local c=k8s.io/client-go/pkg/version
		ldflags+=" -X $c.gitVersion=$K8S_VERSION -X $c.gitMajor=1 -X $c.gitMinor=$minor"
		ldflags+=" -X $c.gitTreeState=clean -X $c.gitCommit=module-$K8S_VERSION"
		ldflags+=" -X $c.buildDate=1970-01-01T00:00:00Z"
		;;
	etcd)
		version=$ETCD_VERSION mainmod=go.etcd.io/etcd/server/v3
		bins=(etcd)
		pkgs=(go.etcd.io/etcd/server/v3)
		ldflags="-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=module-$ETCD_VERSION"
		;;
	containerd)
		version=$CONTAINERD_VERSION mainmod=github.com/containerd/containerd/v2
		bins=(containerd containerd-shim-runc-v2 ctr)
		pkgs=(github.com/containerd/containerd/v2/cmd/containerd
			github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2
			github.com/containerd/containerd/v2/cmd/ctr)
		local v=github.com/containerd/containerd/v2/version
		ldflags="-s -w -X $v.Version=$CONTAINERD_VERSION -X $v.Revision=module"
		ldflags+=" -X $v.Package=github.com/containerd/containerd/v2"
		;;
	crictl)
		version=$CRICTL_VERSION mainmod=sigs.k8s.io/cri-tools
		bins=(crictl)
		pkgs=(sigs.k8s.io/cri-tools/cmd/crictl)
		ldflags="-s -w -X sigs.k8s.io/cri-tools/pkg/version.Version=$CRICTL_VERSION"
		;;
	runc)
		# Debian's runc 1.1.5 cannot start containers on this kernel ("can't get final
		# child's PID from pipe") and its crun 1.8.1 refuses containerd 2.4's spec
		# version. runc's nsexec is C: the one cgo build here, with the seccomp tag
		# (libseccomp-dev): a kubelet's Pods may ask RuntimeDefault (CoreDNS's do).
		version=$RUNC_VERSION mainmod=github.com/opencontainers/runc
		bins=(runc)
		pkgs=(github.com/opencontainers/runc)
		cgo=1 tags=seccomp flavor=seccomp
		ldflags="-s -w -X main.version=${RUNC_VERSION#v}"
		;;
	coredns)
		# Cluster DNS for the Kubernetes testbed's Services test (issue 29): the
		# kubernetes plugin watches the real API server.
		version=$COREDNS_VERSION mainmod=github.com/coredns/coredns
		bins=(coredns)
		pkgs=(github.com/coredns/coredns)
		ldflags="-s -w -X github.com/coredns/coredns/coremain.GitCommit=module-$COREDNS_VERSION"
		;;
	multus)
		# Multus thin plugin (issue 28): the meta-plugin the kubelet's containerd calls,
		# delegating to Juneau and to the NetworkAttachmentDefinitions' plugins.
		version=$MULTUS_VERSION mainmod=gopkg.in/k8snetworkplumbingwg/multus-cni.v4
		bins=(multus)
		pkgs=(gopkg.in/k8snetworkplumbingwg/multus-cni.v4/cmd/multus)
		ldflags="-s -w -X gopkg.in/k8snetworkplumbingwg/multus-cni.v4/pkg/multus.version=$MULTUS_VERSION"
		;;
	*) die "unknown component '$1' (k8s etcd containerd crictl runc coredns multus all)" ;;
	esac
}

# Rewrites tools/<component>/go.mod from versions.env and tidies it (needs the proxy).
update_module() {
	local comp=$1 dir="$here/$1"
	component_vars "$comp"
	cd "$dir"
	rm -f go.mod go.sum
	GOFLAGS=-buildvcs=false go mod init "juneau.local/tools/$comp" 2>/dev/null
	GOFLAGS=-buildvcs=false go mod edit -go="$GO_MIN_VERSION"
	case $comp in
	k8s)
		GOFLAGS=-buildvcs=false go mod edit -require="k8s.io/kubernetes@$K8S_VERSION"
		# k8s.io/kubernetes requires every staging module at v0.0.0 and replaces it
		# with ./staging/...; replaces do not apply in a dependency, so mirror each
		# one here with the published v0.<minor>.<patch> tag.
		local mod staging
		mod=$(GOFLAGS= "${NICE[@]}" go mod download -json "k8s.io/kubernetes@$K8S_VERSION" |
			sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
		staging=$(sed -n 's#^[[:space:]]*\(k8s\.io/[^ ]*\) => \./staging/.*#\1#p' "$mod")
		[ -n "$staging" ] || die "no staging replaces found in $mod"
		local args=()
		for m in $staging; do args+=(-replace="$m=$m@$K8S_STAGING_VERSION"); done
		GOFLAGS=-buildvcs=false go mod edit "${args[@]}"
		;;
	etcd) GOFLAGS=-buildvcs=false go mod edit -require="go.etcd.io/etcd/server/v3@$ETCD_VERSION" ;;
	containerd) GOFLAGS=-buildvcs=false go mod edit -require="github.com/containerd/containerd/v2@$CONTAINERD_VERSION" ;;
	crictl) GOFLAGS=-buildvcs=false go mod edit -require="sigs.k8s.io/cri-tools@$CRICTL_VERSION" ;;
	runc) GOFLAGS=-buildvcs=false go mod edit -require="github.com/opencontainers/runc@$RUNC_VERSION" ;;
	coredns) GOFLAGS=-buildvcs=false go mod edit -require="github.com/coredns/coredns@$COREDNS_VERSION" ;;
	multus) GOFLAGS=-buildvcs=false go mod edit -require="gopkg.in/k8snetworkplumbingwg/multus-cni.v4@$MULTUS_VERSION" ;;
	esac
	GOFLAGS=-buildvcs=false "${NICE[@]}" go mod tidy
	# a dependency could raise the pinned module through MVS; refuse that drift
	local got
	got=$(GOFLAGS=-buildvcs=false go list -m -f '{{.Version}}' "$mainmod")
	[ "$got" = "$version" ] || die "$comp: go.mod resolved $mainmod $got, versions.env says $version"
	echo "updated $dir/go.mod ($mainmod $got)"
}

build_component() {
	local comp=$1 dir="$here/$1"
	component_vars "$comp"
	local out="$root/$comp-$version/bin" missing=0 b
	for b in "${bins[@]}"; do [ -x "$out/$b" ] || missing=1; done
	# A build of another flavor (build tags) under the same version is not this one.
	[ "$(cat "$out/.flavor" 2>/dev/null)" = "$flavor" ] || missing=1
	if [ $missing = 0 ]; then
		echo "$comp $version: cached in $out"
		return
	fi
	[ -f "$dir/go.mod" ] || die "$dir/go.mod missing (run with --update-modules $comp)"
	grep -qE "^[[:space:]]*(require )?$mainmod $version( |\$)" "$dir/go.mod" ||
		die "$dir/go.mod does not require $mainmod $version (run --update-modules $comp)"
	mkdir -p "$root"
	exec 9>"$root/$comp-$version.lock"
	flock 9
	missing=0
	for b in "${bins[@]}"; do [ -x "$out/$b" ] || missing=1; done
	[ "$(cat "$out/.flavor" 2>/dev/null)" = "$flavor" ] || missing=1
	if [ $missing = 0 ]; then
		echo "$comp $version: built meanwhile by another run, in $out"
		exec 9>&-
		return
	fi
	local tmp="$root/$comp-$version/bin.tmp.$$" start=$SECONDS
	rm -rf "$tmp" && mkdir -p "$tmp"
	echo "$comp $version: building ${bins[*]} ..."
	# -o DIR/ names each binary after its package path (go.etcd.io/etcd/server/v3 would
	# become "server"), so a single package gets its binary name explicitly.
	local o="$tmp/"
	[ ${#pkgs[@]} = 1 ] && o="$tmp/${bins[0]}"
	(cd "$dir" && CGO_ENABLED=$cgo "${NICE[@]}" go build -trimpath -tags "$tags" -ldflags "$ldflags" -o "$o" "${pkgs[@]}") ||
		{ rm -rf "$tmp"; die "$comp: go build failed"; }
	for b in "${bins[@]}"; do [ -x "$tmp/$b" ] || { rm -rf "$tmp"; die "$comp: $b was not built"; }; done
	printf '%s' "$flavor" >"$tmp/.flavor"
	rm -rf "$out" && mv "$tmp" "$out"
	exec 9>&-
	echo "$comp $version: built in $((SECONDS - start)) s -> $out"
}

update=0
comps=()
for a in "$@"; do
	case $a in
	--update-modules) update=1 ;;
	all) comps+=(k8s etcd containerd crictl runc coredns multus) ;;
	-h | --help) sed -n '2,12p' "$0"; exit 0 ;;
	*) comps+=("$a") ;;
	esac
done
[ ${#comps[@]} -gt 0 ] || die "usage: tools/build.sh [--update-modules] k8s|etcd|containerd|crictl|runc|all ..."
have=$(go env GOVERSION) || die "go not found"
have=${have#go}
[ "$(printf '%s\n' "$GO_MIN_VERSION" "$have" | sort -V | head -1)" = "$GO_MIN_VERSION" ] ||
	die "Go $have is older than $GO_MIN_VERSION (versions.env); GOTOOLCHAIN=local forbids a download"
mkdir -p "$GOMODCACHE" "$GOCACHE"
for c in "${comps[@]}"; do
	if [ $update = 1 ]; then (update_module "$c"); else build_component "$c"; fi
done
# The build cache (about 6 GB after every component) only speeds up a later version
# bump; the binaries above are what the suite needs. On a disk with less than
# JUNEAU_TOOLS_MIN_FREE_GB (default 20) free, it goes, so that the Rust build that
# follows has room (a CI run failed with "No space left on device" compiling it).
free_gb=$(df -P --block-size=1G "$GOCACHE" | awk 'NR == 2 { print $4 }')
if [ "${free_gb:-0}" -lt "${JUNEAU_TOOLS_MIN_FREE_GB:-20}" ]; then
	echo "build.sh: ${free_gb} GB free: removing the Go build cache $GOCACHE" >&2
	go clean -cache
fi
