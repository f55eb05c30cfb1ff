//go:build !linux

package vfs

import "os"

// datasync falls back to a full sync where fdatasync(2) is not offered.
func datasync(f *os.File) error { return f.Sync() }
