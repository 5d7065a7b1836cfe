//go:build tools

// Package tools records the etcd binary built from this module.
package tools

import _ "go.etcd.io/etcd/server/v3"
