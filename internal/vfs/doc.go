// Package vfs is the file-system seam under Canopy's transaction log and
// checkpoints.
//
// Storage code does its file I/O through the FS interface rather than
// through package os, so that the same code runs against the operating
// system (Default), against MemFS, an in-memory file system that can
// simulate a machine crash, and against FaultyFS, which fails chosen
// operations on demand.
//
// # Durability
//
// FS makes the promises a POSIX file system makes, and no more:
//
//   - a file's bytes are durable once File.Sync returns;
//   - a directory entry (a file or directory created, renamed or removed)
//     is durable once SyncDir of the directory that holds it returns.
//
// Neither implies the other: a synced file whose directory was never synced
// may vanish in a crash, and a durable entry may name a file whose unsynced
// bytes are lost. MemFS.Crash keeps exactly what these two rules promise and
// nothing else, so code that survives crash tests against MemFS has made
// both kinds of sync that a real file system needs.
//
// # Errors
//
// Errors are *fs.PathError values wrapping the io/fs sentinel errors or a
// syscall.Errno, so callers can test them with errors.Is against
// fs.ErrNotExist, fs.ErrExist, fs.ErrClosed and the like, whichever FS
// produced them.
package vfs
