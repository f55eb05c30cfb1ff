package engine

import (
	"errors"
	"fmt"
	"io"
)

// User and group quotas in checkpoints: an optional last section, written
// only while there are any (so that a partition without them writes the
// bytes it wrote before they existed): ownerQuotasMagic, the number of
// quotas, then each quota's kind, id, file limit and byte limit, by kind
// and id. Load counts the usage again (checkOwnerQuotas), so it is what a
// replica that applied the same operations keeps.
const ownerQuotasMagic = "CNPYOQ01"

// maxCkptOwnerQuotas bounds the owner quotas a checkpoint may claim.
const maxCkptOwnerQuotas = 1 << 24

func (enc *encoder) ownerQuotas(list []OwnerQuotaLimit) {
	if len(list) == 0 {
		return
	}
	enc.raw([]byte(ownerQuotasMagic))
	enc.uint(uint64(len(list)))
	for _, q := range list {
		enc.uint(uint64(q.Kind))
		enc.uint(uint64(q.ID))
		enc.uint(q.MaxFiles)
		enc.uint(q.MaxBytes)
	}
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

// readOwnerQuotas reads the owner quota section into e, if the checkpoint
// has one; nothing may follow it.
func (d *decoder) readOwnerQuotas(e *Engine) {
	if d.err != nil {
		return
	}
	if _, err := d.r.Peek(1); errors.Is(err, io.EOF) {
		return
	}
	if magic := d.bytes(len(ownerQuotasMagic)); d.err == nil && string(magic) != ownerQuotasMagic {
		d.err = fmt.Errorf("owner quotas section: magic %q", magic)
	}
	n := d.uint()
	if d.err == nil && (n == 0 || n > maxCkptOwnerQuotas) {
		d.err = fmt.Errorf("%d owner quotas", n)
	}
	var list []OwnerQuotaLimit
	for i := uint64(0); i < n && d.err == nil; i++ {
		kind := d.uint()
		q := OwnerQuotaLimit{Kind: QuotaKind(min(kind, 255)), ID: d.uint32(), MaxFiles: d.uint(), MaxBytes: d.uint()}
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
		return
	}
	if _, err := d.r.Peek(1); !errors.Is(err, io.EOF) {
		d.err = errors.New("bytes after the owner quotas")
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
