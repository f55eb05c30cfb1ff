package engine

import (
	"fmt"
	"slices"
)

// User and group quotas in checkpoints: an optional section after the
// directory quotas (and before the optional intents of renames across
// partitions), written only while there are any, so that a partition
// without them writes the bytes it wrote before they existed:
// ownerQuotasMagic, the number of quotas, then each quota's kind, id, file
// limit and byte limit, by kind and id. Load counts the usage again
// (checkOwnerQuotas), so it is what a replica that applied the same
// operations keeps. The JSON dump has them as an "owner_quotas" record
// after the "quotas" one, [kind, id, file limit, byte limit] each.
//
// While any of them is a share of a namespace's quota
// (quota_owner_share.go), the section is ownerSharesMagic instead, and
// each quota has a fifth number after its byte limit: 1 for a share, 0
// for a partition's own; in the JSON dump, a share's array has that fifth
// number (1).
const (
	ownerQuotasMagic = "CNPYOQ01"
	ownerSharesMagic = "CNPYOQ02"
)

// maxCkptOwnerQuotas bounds the owner quotas a checkpoint may claim.
const maxCkptOwnerQuotas = 1 << 24

func (enc *encoder) ownerQuotas(list []OwnerQuotaLimit) {
	if len(list) == 0 {
		return
	}
	shares := slices.ContainsFunc(list, func(q OwnerQuotaLimit) bool { return q.Share })
	if shares {
		enc.raw([]byte(ownerSharesMagic))
	} else {
		enc.raw([]byte(ownerQuotasMagic))
	}
	enc.uint(uint64(len(list)))
	for _, q := range list {
		enc.uint(uint64(q.Kind))
		enc.uint(uint64(q.ID))
		enc.uint(q.MaxFiles)
		enc.uint(q.MaxBytes)
		if shares {
			enc.uint(shareFlag(q.Share))
		}
	}
}

func shareFlag(share bool) uint64 {
	if share {
		return 1
	}
	return 0
}

// next reports whether the bytes that follow are magic (without reading
// them).
func (d *decoder) next(magic string) bool {
	if d.err != nil {
		return false
	}
	b, _ := d.r.Peek(len(magic))
	return string(b) == magic
}

// readOwnerQuotas reads the owner quota section into e, if the
// checkpoint has one.
func (d *decoder) readOwnerQuotas(e *Engine) {
	list := d.ownerQuotaList()
	if d.err != nil || list == nil {
		return
	}
	for _, q := range list {
		tab := e.oq.table(q.Kind)
		if *tab == nil {
			*tab = make(map[uint32]*ownerUse)
		}
		(*tab)[q.ID] = &ownerUse{OwnerQuotaLimit: q}
	}
	e.oq.list = list
	e.oq.stale = true
}

// ownerQuotaList reads the owner quota section, if the bytes that follow
// are one: nil if not.
func (d *decoder) ownerQuotaList() []OwnerQuotaLimit {
	shares := d.next(ownerSharesMagic)
	if !shares && !d.next(ownerQuotasMagic) {
		return nil
	}
	d.bytes(len(ownerQuotasMagic))
	n := d.uint()
	if d.err == nil && (n == 0 || n > maxCkptOwnerQuotas) {
		d.err = fmt.Errorf("%d owner quotas", n)
	}
	var list []OwnerQuotaLimit
	for i := uint64(0); i < n && d.err == nil; i++ {
		kind := d.uint()
		q := OwnerQuotaLimit{Kind: QuotaKind(min(kind, 255)), ID: d.uint32(), MaxFiles: d.uint(), MaxBytes: d.uint()}
		if shares {
			switch flag := d.uint(); flag {
			case 0, 1:
				q.Share = flag == 1
			default:
				d.err = fmt.Errorf("owner quota %v %d: share flag %d", q.Kind, q.ID, flag)
			}
		}
		if d.err != nil {
			break
		}
		if err := validKind(q.Kind); err != nil || kind > 255 {
			d.err = fmt.Errorf("owner quota of kind %d", kind)
			break
		}
		if len(list) > 0 && cmpOwnerLimit(list[len(list)-1], q) >= 0 {
			d.err = fmt.Errorf("owner quota %v %d out of order", q.Kind, q.ID)
			break
		}
		list = append(list, q)
	}
	if d.err != nil {
		return nil
	}
	return list
}

// jownerQuota is [kind, id, file limit, byte limit], and 1 after them
// for a share.
type jownerQuota []uint64

// jsonOwnerQuotas puts the "owner_quotas" record, if the checkpoint has
// the section.
func (d *decoder) jsonOwnerQuotas(put func(*jrec)) {
	list := d.ownerQuotaList()
	if d.err != nil || list == nil {
		return
	}
	rec := &jrec{T: "owner_quotas"}
	for _, q := range list {
		jq := jownerQuota{uint64(q.Kind), uint64(q.ID), q.MaxFiles, q.MaxBytes}
		if q.Share {
			jq = append(jq, 1)
		}
		rec.OwnerQuotas = append(rec.OwnerQuotas, jq)
	}
	put(rec)
}

// jsonOwnerQuotasToCheckpoint writes the owner quota section from rec.
func jsonOwnerQuotasToCheckpoint(rec *jrec, enc *encoder) error {
	if rec.T != "owner_quotas" || len(rec.OwnerQuotas) == 0 {
		return fmt.Errorf("%w: a %q record after the quotas", ErrBadJSONDump, rec.T)
	}
	list := make([]OwnerQuotaLimit, len(rec.OwnerQuotas))
	for i, q := range rec.OwnerQuotas {
		if len(q) != 4 && (len(q) != 5 || q[4] != 1) || q[0] > 255 || q[1] > 1<<32-1 {
			return fmt.Errorf("%w: owner quota %v", ErrBadJSONDump, q)
		}
		list[i] = OwnerQuotaLimit{Kind: QuotaKind(q[0]), ID: uint32(q[1]), MaxFiles: q[2], MaxBytes: q[3], Share: len(q) == 5}
	}
	enc.ownerQuotas(list)
	return nil
}
