//go:build tools

// Package tools pins the CoreDNS command that tools/build.sh builds, so that
// `go mod tidy` keeps its dependencies in go.mod and go.sum.
package tools

import (
	_ "github.com/coredns/coredns"
)
