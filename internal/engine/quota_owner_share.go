package engine

import (
	"fmt"
	"math"
	"syscall"
)

// Shares of a namespace's quota. In a federation, a user's or group's
// quota is the whole namespace's, and each partition holds a share of it:
// the routers split the limit among the partitions and move the unused
// part of it between them as partitions run short. A share is an owner
// quota with Share set: its limits may be 0 (nothing more may be added
// here), and a share without a limit on files or bytes has
// math.MaxUint64 there. A share counts and refuses exactly as any owner
// quota does.

// NoShareLimit is a share's limit on files or bytes when the namespace
// has none.
const NoShareLimit = math.MaxUint64

// SetOwnerQuotaShare sets the limits of uid or gid id's share (by kind)
// of a namespace quota, making one if there is none; a quota already
// kept as a partition's own becomes a share. Only root may (EPERM).
// Limits below what the id holds here are refused (EDQUOT).
func (e *Engine) SetOwnerQuotaShare(c Cred, kind QuotaKind, id uint32, maxFiles, maxBytes uint64) (OwnerQuota, error) {
	return e.setOwnerQuota(c, OwnerQuotaLimit{Kind: kind, ID: id, MaxFiles: maxFiles, MaxBytes: maxBytes, Share: true})
}

// NewOwnerQuotaShare makes a share of uid or gid id's (by kind) namespace
// quota that holds what the id holds here and allows nothing more: the
// first step of giving a partition its share, taken before any limit is
// moved to it. EEXIST if the id has a quota here. Only root may (EPERM).
func (e *Engine) NewOwnerQuotaShare(c Cred, kind QuotaKind, id uint32) (OwnerQuota, error) {
	if !c.IsRoot() {
		return OwnerQuota{}, syscall.EPERM
	}
	if err := validKind(kind); err != nil {
		return OwnerQuota{}, err
	}
	if _, ok := (*e.oq.table(kind))[id]; ok {
		return OwnerQuota{}, fmt.Errorf("%v %d has a quota here: %w", kind, id, syscall.EEXIST)
	}
	files, bytes := e.countOwned(kind, id)
	return e.setOwnerQuota(c, OwnerQuotaLimit{Kind: kind, ID: id, MaxFiles: files, MaxBytes: bytes, Share: true})
}

// AdjustOwnerQuota moves the limits of uid or gid id's share (by kind) by
// files and bytes, each up or down, and returns the share as it now is.
// It is the step by which routers move the unused part of a namespace
// quota from one partition to another: down in one partition, then up in
// another, so that the shares never add up to more than the namespace's
// limit. A limit may not go below what the id holds here, which refuses
// the whole change (EDQUOT); moving a limit that is none, or the limits
// of a quota that is not a share, is EINVAL; ENODATA means the id has no
// quota here. The access layer takes it only from routers and
// administrators; it checks no credential itself.
func (e *Engine) AdjustOwnerQuota(kind QuotaKind, id uint32, files, bytes int64) (OwnerQuota, error) {
	if err := validKind(kind); err != nil {
		return OwnerQuota{}, err
	}
	u, ok := (*e.oq.table(kind))[id]
	if !ok {
		return OwnerQuota{}, syscall.ENODATA
	}
	if !u.Share {
		return OwnerQuota{}, fmt.Errorf("%v %d: the quota is this partition's own, not a share: %w", kind, id, syscall.EINVAL)
	}
	maxFiles, err := moveLimit("files", u.MaxFiles, u.files, files)
	if err != nil {
		return OwnerQuota{}, fmt.Errorf("%v %d: %w", kind, id, err)
	}
	maxBytes, err := moveLimit("bytes", u.MaxBytes, u.bytes, bytes)
	if err != nil {
		return OwnerQuota{}, fmt.Errorf("%v %d: %w", kind, id, err)
	}
	if maxFiles == u.MaxFiles && maxBytes == u.MaxBytes {
		return u.quota(), nil
	}
	u.MaxFiles, u.MaxBytes = maxFiles, maxBytes
	e.replaceOwnerList()
	return u.quota(), nil
}

// moveLimit returns a share's limit moved by delta, which may not take it
// below used.
func moveLimit(what string, limit, used uint64, delta int64) (uint64, error) {
	switch {
	case delta == 0:
		return limit, nil
	case limit == NoShareLimit:
		return 0, fmt.Errorf("no limit on %s to move: %w", what, syscall.EINVAL)
	case delta > 0:
		if limit+uint64(delta) < limit || limit+uint64(delta) == NoShareLimit {
			return 0, fmt.Errorf("limit on %s overflows: %w", what, syscall.EINVAL)
		}
		return limit + uint64(delta), nil
	}
	down := uint64(-delta)
	if down > limit || limit-down < used {
		return 0, fmt.Errorf("limit on %s of %d cannot give %d with %d in use: %w", what, limit, down, used, syscall.EDQUOT)
	}
	return limit - down, nil
}
