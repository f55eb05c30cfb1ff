// Package fuse mounts a Canopy namespace in the kernel through FUSE, with
// the raw protocol of github.com/hanwen/go-fuse/v2.
//
// FUSE node ids are Canopy inode numbers: the kernel's root (node id 1) is
// the namespace root (inode 1), and every other node id the kernel holds
// is the inode number a LOOKUP, CREATE or READDIRPLUS reply gave it. The
// mount therefore keeps no inode tree of its own and FORGET has nothing to
// do; every operation goes to the metadata service through the SDK's
// inode calls (client/ino.go), acting as the calling process (its uid, gid
// and supplementary groups), so the service's permission checks apply to
// everything that reaches it. By default the kernel also checks (FUSE's
// default_permissions) against the attributes it has, which covers what
// never reaches the mount: opens of FIFOs and device nodes, path walks
// through cached entries.
//
// Goroutines: go-fuse runs each request on its own goroutine, so an FS is
// used by many at once. Its configuration and client are read-only after
// New; the tables of open directories and files, the index of open files
// by inode and the group cache are guarded by their own mutexes, and each
// directory handle by its own (client.File serializes the calls on a
// file). The go-fuse server, kept by Init before the first request, is
// safe for concurrent notifications.
package fuse
