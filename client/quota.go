package client

import (
	"context"
	"fmt"
	"strconv"

	pb "github.com/canopyfs/canopy/api/metapb"
)

// Quota is a directory quota: its limits (0: none) and what lies below
// the directory now.
type Quota struct {
	Dir      Ino    // the directory
	Path     string // the directory's path in its partition
	MaxFiles uint64 // nodes below the directory
	MaxBytes uint64 // bytes of the regular files below the directory
	Files    uint64 // nodes below the directory now, each once
	Bytes    uint64 // sizes of the regular files below it now
}

// QuotaMismatch is a quota whose kept usage differs from a full count.
type QuotaMismatch struct {
	Quota                         // with the usage kept
	CountFiles, CountBytes uint64 // counted
}

// SetQuota sets the limits of directory p's quota, making one if there is
// none: at most maxFiles nodes and maxBytes bytes of regular files below
// it (0: no limit). Only root may. Limits below the usage are refused with
// EDQUOT.
func (c *Client) SetQuota(ctx context.Context, p string, maxFiles, maxBytes uint64) (Quota, error) {
	var r pb.QuotaReply
	req := &pb.QuotaSetRequest{Path: p, MaxFiles: maxFiles, MaxBytes: maxBytes}
	if err := c.call(ctx, pb.Method_QUOTA_SET, req, &r, "quota set", p); err != nil {
		return Quota{}, err
	}
	return quotaOf(r.Quota), nil
}

// GetQuota returns directory p's quota; ENODATA if it has none.
func (c *Client) GetQuota(ctx context.Context, p string) (Quota, error) {
	var r pb.QuotaReply
	if err := c.call(ctx, pb.Method_QUOTA_GET, &pb.NodeRequest{Path: p}, &r, "quota get", p); err != nil {
		return Quota{}, err
	}
	return quotaOf(r.Quota), nil
}

// RemoveQuota removes directory p's quota; ENODATA if it has none. Only
// root may.
func (c *Client) RemoveQuota(ctx context.Context, p string) error {
	return c.call(ctx, pb.Method_QUOTA_REMOVE, &pb.NodeRequest{Path: p}, &pb.Empty{}, "quota rm", p)
}

// Quotas returns the quotas of the partition that holds p, by directory.
func (c *Client) Quotas(ctx context.Context, p string) ([]Quota, error) {
	var r pb.QuotaListReply
	if err := c.call(ctx, pb.Method_QUOTA_LIST, &pb.NodeRequest{Path: p}, &r, "quota ls", p); err != nil {
		return nil, err
	}
	out := make([]Quota, len(r.Quotas))
	for i, q := range r.Quotas {
		out[i] = quotaOf(q)
	}
	return out, nil
}

// CheckQuotas counts the usage of every quota of the partition that holds
// p from its tree and returns the number of quotas and those whose kept
// usage differs; with repair (root only) the usage is set to the count.
func (c *Client) CheckQuotas(ctx context.Context, p string, repair bool) (int, []QuotaMismatch, error) {
	m, op := pb.Method_QUOTA_CHECK, "quota check"
	if repair {
		m, op = pb.Method_QUOTA_REPAIR, "quota check --repair"
	}
	var r pb.QuotaCheckReply
	if err := c.call(ctx, m, &pb.NodeRequest{Path: p}, &r, op, p); err != nil {
		return 0, nil, err
	}
	out := make([]QuotaMismatch, len(r.Mismatches))
	for i, b := range r.Mismatches {
		out[i] = QuotaMismatch{Quota: quotaOf(b.Quota), CountFiles: b.CountFiles, CountBytes: b.CountBytes}
	}
	return int(r.Quotas), out, nil
}

func quotaOf(q *pb.Quota) Quota {
	if q == nil {
		return Quota{}
	}
	return Quota{Dir: Ino(q.Dir), Path: q.Path, MaxFiles: q.MaxFiles, MaxBytes: q.MaxBytes, Files: q.Files, Bytes: q.Bytes}
}

// The kinds of owner quota.
const (
	QuotaUser  uint32 = 1 // counts the nodes a uid owns
	QuotaGroup uint32 = 2 // counts the nodes of a gid
)

// OwnerQuota is a user or group quota: its limits (0: none) and what the
// uid or gid holds now. Through a router it is the whole namespace's: the
// router splits the limits among the partitions and moves unused parts
// of them to where they are needed, and the figures are the sums over
// the partitions. Asked of one partition directly, it is that
// partition's own.
type OwnerQuota struct {
	Kind     uint32 // QuotaUser or QuotaGroup
	ID       uint32 // the uid or gid
	MaxFiles uint64 // nodes the id owns
	MaxBytes uint64 // bytes of the regular files among them
	Files    uint64 // nodes with a link the id owns now, each once
	Bytes    uint64 // sizes of the regular files among them
	// Share: a partition's share of a namespace's quota, as asked of the
	// partition directly (its limits may be 0, which allows nothing
	// more; no limit is 2^64-1).
	Share bool
}

// OwnerQuotaMismatch is an owner quota whose kept usage differs from a
// full count.
type OwnerQuotaMismatch struct {
	OwnerQuota                    // with the usage kept
	CountFiles, CountBytes uint64 // counted
}

// ownerOp names an owner quota call in errors: "quota get --uid 7".
func ownerOp(verb string, kind, id uint32) string {
	flag := "--uid"
	if kind == QuotaGroup {
		flag = "--gid"
	}
	return "quota " + verb + " " + flag + " " + strconv.FormatUint(uint64(id), 10)
}

// SetOwnerQuota sets the limits of uid or gid id's quota (kind QuotaUser
// or QuotaGroup), making one if there is none: at most maxFiles nodes and
// maxBytes bytes of regular files (0: no limit), in the whole namespace
// through a router, else in the partition that holds p. Only root may.
// Limits below the usage are refused with EDQUOT.
func (c *Client) SetOwnerQuota(ctx context.Context, p string, kind, id uint32, maxFiles, maxBytes uint64) (OwnerQuota, error) {
	var r pb.OwnerQuotaReply
	req := &pb.OwnerQuotaSetRequest{Path: p, Kind: kind, Id: id, MaxFiles: maxFiles, MaxBytes: maxBytes}
	if err := c.call(ctx, pb.Method_OWNER_QUOTA_SET, req, &r, ownerOp("set", kind, id), p); err != nil {
		return OwnerQuota{}, err
	}
	return ownerQuotaOf(r.Quota), nil
}

// GetOwnerQuota returns uid or gid id's quota (the namespace's through a
// router, else that of the partition that holds p); ENODATA if there is
// none.
func (c *Client) GetOwnerQuota(ctx context.Context, p string, kind, id uint32) (OwnerQuota, error) {
	var r pb.OwnerQuotaListReply
	req := &pb.OwnerQuotaRequest{Path: p, Kind: kind, Id: id}
	if err := c.call(ctx, pb.Method_OWNER_QUOTA_LIST, req, &r, ownerOp("get", kind, id), p); err != nil {
		return OwnerQuota{}, err
	}
	if len(r.Quotas) != 1 {
		return OwnerQuota{}, fmt.Errorf("%s: %d quotas in the reply", ownerOp("get", kind, id), len(r.Quotas))
	}
	return ownerQuotaOf(r.Quotas[0]), nil
}

// OwnerQuotas returns the user quotas by uid, then the group quotas by
// gid (the namespace's through a router, else those of the partition
// that holds p).
func (c *Client) OwnerQuotas(ctx context.Context, p string) ([]OwnerQuota, error) {
	var r pb.OwnerQuotaListReply
	if err := c.call(ctx, pb.Method_OWNER_QUOTA_LIST, &pb.OwnerQuotaRequest{Path: p}, &r, "quota ls", p); err != nil {
		return nil, err
	}
	out := make([]OwnerQuota, len(r.Quotas))
	for i, q := range r.Quotas {
		out[i] = ownerQuotaOf(q)
	}
	return out, nil
}

// RemoveOwnerQuota removes uid or gid id's quota (from every partition
// through a router, else from the partition that holds p); ENODATA if
// there is none. Only root may.
func (c *Client) RemoveOwnerQuota(ctx context.Context, p string, kind, id uint32) error {
	req := &pb.OwnerQuotaRequest{Path: p, Kind: kind, Id: id}
	return c.call(ctx, pb.Method_OWNER_QUOTA_REMOVE, req, &pb.Empty{}, ownerOp("rm", kind, id), p)
}

// CheckOwnerQuotas counts the usage of every user and group quota from
// the nodes (of every partition through a router, else of the partition
// that holds p) and returns the number of quotas and those whose kept
// usage differs; with repair (root only) the usage is set to the count.
func (c *Client) CheckOwnerQuotas(ctx context.Context, p string, repair bool) (int, []OwnerQuotaMismatch, error) {
	m, op := pb.Method_OWNER_QUOTA_CHECK, "quota check"
	if repair {
		m, op = pb.Method_OWNER_QUOTA_REPAIR, "quota check --repair"
	}
	var r pb.OwnerQuotaCheckReply
	if err := c.call(ctx, m, &pb.OwnerQuotaRequest{Path: p}, &r, op, p); err != nil {
		return 0, nil, err
	}
	out := make([]OwnerQuotaMismatch, len(r.Mismatches))
	for i, b := range r.Mismatches {
		out[i] = OwnerQuotaMismatch{OwnerQuota: ownerQuotaOf(b.Quota), CountFiles: b.CountFiles, CountBytes: b.CountBytes}
	}
	return int(r.Quotas), out, nil
}

func ownerQuotaOf(q *pb.OwnerQuota) OwnerQuota {
	if q == nil {
		return OwnerQuota{}
	}
	return OwnerQuota{Kind: q.Kind, ID: q.Id, MaxFiles: q.MaxFiles, MaxBytes: q.MaxBytes, Files: q.Files, Bytes: q.Bytes, Share: q.Share}
}
