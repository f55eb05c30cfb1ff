//go:build !race

package rpc

const sysConnEnabled = true
