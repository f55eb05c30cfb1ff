package protocol

import "strings"

// The extended attributes under RecordXattrPrefix on a partition's root
// are the system's own records of that partition, written by root through
// the ordinary SETXATTR (so they are logged, checkpointed, replicated and
// dumped like any other attribute) and read back by STATUS: each holds
// one RunRecord (api/meta.proto).
const (
	RecordXattrPrefix = "trusted.canopy."
	// XattrCollectorRun is the collector's last recorded pass.
	XattrCollectorRun = RecordXattrPrefix + "collector_run"
	// XattrFsckRun is the last run of `canopy fsck`.
	XattrFsckRun = RecordXattrPrefix + "fsck_run"
)

// IsRecordXattr reports whether name is one of the system's records,
// which a tree's checksum leaves out: they change with every run of the
// collector without the tree changing.
func IsRecordXattr(name string) bool { return strings.HasPrefix(name, RecordXattrPrefix) }
