package data

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/canopyfs/canopy/internal/object"
	"github.com/canopyfs/canopy/internal/protocol"
)

// FsckReport is what Fsck found in one partition.
type FsckReport struct {
	Objects        int      `json:"objects"`         // block objects of the partition in the store
	Slices         int      `json:"slices"`          // slices in use
	Garbage        int      `json:"garbage"`         // freed slices not yet purged
	Orphans        []string `json:"orphans"`         // objects no slice names
	MissingObjects []string `json:"missing_objects"` // objects of used slices that are not stored
	Deleted        int      `json:"deleted"`         // orphans removed (repair)
	Zeroed         int      `json:"zeroed"`          // missing objects replaced by zeros (repair)
}

// Clean reports whether nothing is wrong.
func (r *FsckReport) Clean() bool { return len(r.Orphans) == 0 && len(r.MissingObjects) == 0 }

// FsckOptions configures Fsck.
type FsckOptions struct {
	BlockSize int // default layout.BlockSize
	// Repair deletes orphans older than Grace and stores zeros in place
	// of missing objects of used slices (their data is lost; the files
	// that use them read zeros there instead of failing).
	Repair bool
	Grace  time.Duration
	// Peers are the other partitions of the namespace: an object of this
	// partition that one of them names (a file renamed there) is no
	// orphan.
	Peers []Admin
}

// Fsck compares the objects of one partition's slices in the store with
// the slices its metadata knows, and with opt.Repair fixes what it can.
// Objects written by writers that have not committed yet show as orphans
// until they commit; repair leaves orphans younger than opt.Grace alone.
func Fsck(ctx context.Context, store object.Store, admin Admin, opt FsckOptions) (*FsckReport, error) {
	if opt.BlockSize <= 0 {
		opt.BlockSize = (&Config{}).withDefaults().BlockSize
	}
	stored := map[string]object.Info{}
	err := listPartition(ctx, store, admin.Partition(), func(info object.Info, _ uint64) {
		stored[info.Key] = info
	})
	if err != nil {
		return nil, fmt.Errorf("fsck: %w", err)
	}
	known, err := knownEverywhere(ctx, admin, opt.Peers)
	if err != nil {
		return nil, fmt.Errorf("fsck: %w", err)
	}
	part := admin.Partition()
	rep := &FsckReport{Objects: len(stored), Orphans: []string{}, MissingObjects: []string{}}
	expected := map[string]bool{}
	for id, s := range known {
		if s.garbage {
			rep.Garbage++
		} else {
			rep.Slices++
		}
		for _, key := range SliceKeys(id, int(s.size), opt.BlockSize) {
			expected[key] = true
			if s.garbage || s.inline {
				continue
			}
			if _, ok := stored[key]; ok {
				continue
			}
			// A slice of another partition (a file renamed here) is
			// stored in that partition's share, which was not listed.
			if protocol.PartitionOf(id) != part {
				if _, err := store.Head(ctx, key); err == nil {
					continue
				}
			}
			rep.MissingObjects = append(rep.MissingObjects, key)
		}
	}
	for key := range stored {
		if !expected[key] {
			rep.Orphans = append(rep.Orphans, key)
		}
	}
	sort.Strings(rep.Orphans)
	sort.Strings(rep.MissingObjects)
	if !opt.Repair {
		return rep, nil
	}
	cutoff := time.Now().Add(-opt.Grace)
	for _, key := range rep.Orphans {
		if stored[key].Modified.After(cutoff) {
			continue
		}
		if err := store.Delete(ctx, key); err != nil {
			return rep, fmt.Errorf("fsck: delete %s: %w", key, err)
		}
		rep.Deleted++
	}
	for _, key := range rep.MissingObjects {
		// Stored since the listing (a writer or the inline flusher
		// between the store's listing and the slices'): not missing.
		if _, err := store.Head(ctx, key); err == nil {
			continue
		}
		_, _, size, _ := parseKey(key)
		if err := store.Put(ctx, key, make([]byte, size)); err != nil {
			return rep, fmt.Errorf("fsck: store zeros at %s: %w", key, err)
		}
		rep.Zeroed++
	}
	if rep.Zeroed > 0 {
		if err := object.Sync(ctx, store); err != nil {
			return rep, fmt.Errorf("fsck: %w", err)
		}
	}
	return rep, nil
}
