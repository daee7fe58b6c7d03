//go:build tools

// Package tools pins etcd's server main package (go.etcd.io/etcd/server/v3 is itself
// package main) so that `go mod tidy` keeps it; tools/build.sh builds it.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
)
