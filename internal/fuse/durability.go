package fuse

import (
	"context"
	"time"

	gofuse "github.com/hanwen/go-fuse/v2/fuse"

	"github.com/canopyfs/canopy/client"
)

// Durability through the mount (docs/fuse.md, "Durability"): with the
// client in client.DurabilityPOSIX, changes are answered once ordered in
// the service's log, and the mount waits for durability where POSIX
// does: fsync and fdatasync of a file (Fsync: commit, then SYNC),
// fsync of a directory (FsyncDir: SYNC), writes to a file opened O_SYNC
// or O_DSYNC (the kernel follows each with an FSYNC), and unmount
// (SyncAll). With client.DurabilityStrict each of these finds nothing to
// wait for.

// syncIno waits until the log of ino's partition is durable up to every
// change answered so far.
func (fs *FS) syncIno(ino client.Ino) gofuse.Status {
	if err := fs.c.SyncIno(context.Background(), ino); err != nil {
		return fs.fail("fsync", err)
	}
	return gofuse.OK
}

// FsyncDir makes the changes to a directory durable.
func (fs *FS) FsyncDir(cancel <-chan struct{}, in *gofuse.FsyncIn) (st gofuse.Status) {
	defer fs.observe(opFsync, time.Now(), &st)
	return fs.syncIno(client.Ino(in.NodeId))
}

// SyncAll waits until every change the mount made is durable, in every
// partition it changed (syncfs(2) of the mount, and its unmount).
func (fs *FS) SyncAll(ctx context.Context) error {
	return fs.c.Sync(ctx)
}

// syncAtEnd makes the mount's changes durable once the kernel has ended
// the connection (unmount), bounded by a minute; a failure is logged.
func (fs *FS) syncAtEnd() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := fs.SyncAll(ctx); err != nil {
		fs.log.Error("sync at unmount", "err", err)
	}
}
