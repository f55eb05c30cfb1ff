package engine

import "fmt"

// The quotas in the JSON form of a checkpoint (dumpjson.go): one "quotas"
// record after the garbage, listing each quota as [directory, file limit,
// byte limit].

// jquota is [directory, file limit, byte limit].
type jquota [3]uint64

func (d *decoder) jsonQuotas(put func(*jrec)) {
	rec := &jrec{T: "quotas", Quotas: []jquota{}}
	n := d.uint()
	if d.err == nil && n > maxCkptQuotas {
		d.err = fmt.Errorf("%d quotas", n)
	}
	for i := uint64(0); i < n && d.err == nil; i++ {
		rec.Quotas = append(rec.Quotas, jquota{d.uint(), d.uint(), d.uint()})
	}
	put(rec)
}

// jsonQuotasToCheckpoint writes the "quotas" record that next reads.
func jsonQuotasToCheckpoint(next func(kind string) (*jrec, error), e *encoder) error {
	rec, err := next("quotas")
	if err != nil {
		return err
	}
	e.uint(uint64(len(rec.Quotas)))
	for _, q := range rec.Quotas {
		for _, v := range q {
			e.uint(v)
		}
	}
	return nil
}
