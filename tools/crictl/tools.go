//go:build tools

// Package tools pins crictl so that `go mod tidy` keeps its dependencies in go.mod and
// go.sum; tools/build.sh builds it.
package tools

import (
	_ "sigs.k8s.io/cri-tools/cmd/crictl"
)
