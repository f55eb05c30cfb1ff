package model

// Shrink cuts a failing op list down to a short one that still fails the
// same way (the same Failure.Signature): it drops the ops after the failure,
// then removes ranges of ops, halving the range length down to single ops
// (delta debugging), then simplifies each remaining op's arguments (the
// caller to root, flags and odd modes to plain ones, long strings to short
// ones), and removes again until nothing changes. newTarget makes a fresh
// target for each attempt; after cfg.ShrinkAttempts attempts (5,000 if 0)
// it stops with what it has. It returns the shrunk list and its failure;
// if ops does not fail, it returns ops and nil.
func Shrink(cfg Config, ops []Op, newTarget func() Target) ([]Op, *Failure) {
	f := Replay(cfg, ops, newTarget())
	if f == nil {
		return ops, nil
	}
	sig := f.Signature()
	ops = f.Ops
	budget := cfg.ShrinkAttempts
	if budget == 0 {
		budget = 5000
	}
	try := func(cand []Op) bool {
		if budget == 0 {
			return false
		}
		budget--
		g := Replay(cfg, cand, newTarget())
		if g == nil || g.Signature() != sig {
			return false
		}
		ops, f = g.Ops, g
		return true
	}
	for changed := true; changed; {
		changed = false
		for n := len(ops) / 2; n >= 1; n /= 2 {
			for i := len(ops) - n; i >= 0; i -= n {
				if i+n > len(ops) {
					continue
				}
				cand := append(append([]Op(nil), ops[:i]...), ops[i+n:]...)
				if try(cand) {
					changed = true
				}
			}
		}
		for i := 0; i < len(ops); i++ {
			for _, simpler := range simplifications(ops[i]) {
				cand := append([]Op(nil), ops...)
				cand[i] = simpler
				if try(cand) {
					changed = true
				}
			}
		}
	}
	return ops, f
}

// simplifications returns simpler versions of op, one change each.
func simplifications(op Op) []Op {
	var out []Op
	add := func(f func(o *Op) bool) {
		o := op
		o.Value = append([]byte(nil), op.Value...)
		if op.Value == nil {
			o.Value = nil
		}
		if f(&o) {
			out = append(out, o)
		}
	}
	add(func(o *Op) bool {
		changed := o.Cred.UID != 0 || o.Cred.GID != 0 || len(o.Cred.Groups) != 0
		o.Cred = CredRoot
		return changed
	})
	add(func(o *Op) bool { c := o.Flags != 0; o.Flags = 0; return c })
	add(func(o *Op) bool { c := o.Rdev != 0; o.Rdev = 0; return c })
	add(func(o *Op) bool { c := o.Limit != 0; o.Limit = 0; return c })
	add(func(o *Op) bool { c := o.Cursor != ""; o.Cursor = ""; return c })
	add(func(o *Op) bool { c := o.Attrs; o.Attrs = false; return c })
	add(func(o *Op) bool {
		plain := uint32(0o755)
		if o.Kind == KMknod || o.Kind == KMknodIno {
			plain = o.Mode&S_IFMT | 0o644
		}
		c := o.Mode != 0 && o.Mode != plain
		o.Mode = plain
		return c && o.Kind != KSetAttr
	})
	add(func(o *Op) bool { c := len(o.Value) > 1; o.Value = []byte("v"); return c })
	add(func(o *Op) bool { c := len(o.Target) > 1; o.Target = "a"; return c })
	for _, p := range []*string{&op.Path, &op.Path2} {
		if len(*p) > 2 {
			short := []string{"/a", "/b", "/a/b"}
			for _, s := range short {
				s := s
				if s == *p {
					continue
				}
				field := p == &op.Path
				add(func(o *Op) bool {
					if field {
						o.Path = s
					} else {
						o.Path2 = s
					}
					return true
				})
			}
		}
	}
	return out
}
