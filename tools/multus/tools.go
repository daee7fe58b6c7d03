//go:build tools

// Package tools pins the Multus thin plugin that tools/build.sh builds, so that
// `go mod tidy` keeps its dependencies in go.mod and go.sum.
package tools

import (
	_ "gopkg.in/k8snetworkplumbingwg/multus-cni.v4/cmd/multus"
)
