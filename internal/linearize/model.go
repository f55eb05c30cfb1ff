package linearize

import (
	"fmt"
	"hash/maphash"
	"maps"
	"path"
	"slices"
	"syscall"
)

// Kind is an operation of the model.
type Kind uint8

const (
	Create Kind = iota + 1 // a regular file, exclusively (O_CREAT|O_EXCL)
	Mkdir                  // an empty directory
	Unlink                 // a name that is not a directory
	Rmdir                  // an (always empty) directory
	Rename                 // Path to Path2, replacing as rename(2) does
	Link                   // a hard link to Path at Path2
	Chmod                  // the permission bits of Path to Mode
	Write                  // Data as the whole content of the file at Path
	Read                   // the content of the file at Path
	Stat                   // type, permission bits, link count and size of Path
)

var kindNames = [...]string{Create: "create", Mkdir: "mkdir", Unlink: "unlink", Rmdir: "rmdir",
	Rename: "rename", Link: "link", Chmod: "chmod", Write: "write", Read: "read", Stat: "stat"}

// readOnly reports whether an operation of kind k never changes the
// namespace.
func (k Kind) readOnly() bool { return k == Read || k == Stat }

func (k Kind) String() string {
	if int(k) < len(kindNames) && kindNames[k] != "" {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", k)
}

// Input is what an operation asks.
type Input struct {
	Kind  Kind
	Path  string // absolute, in a directory the test created
	Path2 string // Rename and Link: the new name
	Mode  uint32 // Chmod: permission bits
	Data  string // Write
}

// Output is what an operation answered.
type Output struct {
	Unknown bool          // the outcome is not known: it may or may not have taken effect
	Errno   syscall.Errno // 0 for success

	// Stat's answer.
	Dir   bool
	Perm  uint32
	Nlink uint32
	Size  uint64

	Data string // Read's answer
}

// node is a file or directory of the model.
type node struct {
	dir   bool
	perm  uint32
	nlink uint32
	data  string
}

// state is the namespace: names to node ids, and the nodes. It is never
// changed in place (the checker keeps old states): every step copies.
type state struct {
	names map[string]int
	nodes map[int]node
	next  int
	canon string // canonical's result, once computed (states never change)
}

func initState() any { return &state{names: map[string]int{}, nodes: map[int]node{}, next: 1} }

func (s *state) clone() *state {
	return &state{names: maps.Clone(s.names), nodes: maps.Clone(s.nodes), next: s.next}
}

// apply returns the state after in and the answer it gets there.
func apply(s *state, in Input) (*state, Output) {
	id, exists := s.names[in.Path]
	n := s.nodes[id]
	fail := func(e syscall.Errno) (*state, Output) { return s, Output{Errno: e} }
	switch in.Kind {
	case Create, Mkdir:
		if exists {
			return fail(syscall.EEXIST)
		}
		t := s.clone()
		perm := uint32(0o644)
		if in.Kind == Mkdir {
			perm = 0o755
		}
		t.names[in.Path] = t.next
		t.nodes[t.next] = node{dir: in.Kind == Mkdir, perm: perm, nlink: 1}
		t.next++
		return t, Output{}
	case Unlink, Rmdir:
		switch {
		case !exists:
			return fail(syscall.ENOENT)
		case in.Kind == Unlink && n.dir:
			return fail(syscall.EISDIR)
		case in.Kind == Rmdir && !n.dir:
			return fail(syscall.ENOTDIR)
		}
		t := s.clone()
		t.unname(in.Path)
		return t, Output{}
	case Rename:
		if !exists {
			return fail(syscall.ENOENT)
		}
		if id2, ok := s.names[in.Path2]; ok {
			if id2 == id {
				return s, Output{} // two names of one node: nothing happens
			}
			switch n2 := s.nodes[id2]; {
			case n.dir && !n2.dir:
				return fail(syscall.ENOTDIR)
			case !n.dir && n2.dir:
				return fail(syscall.EISDIR)
			}
		}
		t := s.clone()
		if _, ok := t.names[in.Path2]; ok {
			t.unname(in.Path2)
		}
		delete(t.names, in.Path)
		t.names[in.Path2] = id
		return t, Output{}
	case Link:
		// As linkat(2): the old name is resolved, then the new one is
		// made (EEXIST), and only then is the node's type checked.
		switch _, taken := s.names[in.Path2]; {
		case !exists:
			return fail(syscall.ENOENT)
		case taken:
			return fail(syscall.EEXIST)
		case n.dir:
			return fail(syscall.EPERM)
		}
		t := s.clone()
		t.names[in.Path2] = id
		n.nlink++
		t.nodes[id] = n
		return t, Output{}
	case Chmod:
		if !exists {
			return fail(syscall.ENOENT)
		}
		t := s.clone()
		n.perm = in.Mode & 0o7777
		t.nodes[id] = n
		return t, Output{}
	case Write, Read:
		switch {
		case !exists:
			return fail(syscall.ENOENT)
		case n.dir:
			return fail(syscall.EISDIR)
		case in.Kind == Read:
			return s, Output{Data: n.data}
		}
		t := s.clone()
		n.data = in.Data
		t.nodes[id] = n
		return t, Output{}
	case Stat:
		if !exists {
			return fail(syscall.ENOENT)
		}
		out := Output{Dir: n.dir, Perm: n.perm, Nlink: n.nlink, Size: uint64(len(n.data))}
		if n.dir {
			out.Nlink, out.Size = 2, 0 // an empty directory; its size is not compared
		}
		return s, out
	}
	return fail(syscall.EINVAL)
}

// unname removes name from t, dropping its node with its last name.
func (t *state) unname(name string) {
	id := t.names[name]
	delete(t.names, name)
	n := t.nodes[id]
	if n.nlink <= 1 || n.dir {
		delete(t.nodes, id)
		return
	}
	n.nlink--
	t.nodes[id] = n
}

// step is the model's step function: whether in could have answered out in
// state st, and the state after it. An unknown outcome is any answer.
func step(st, in, out any) (bool, any) {
	s, op, got := st.(*state), in.(Input), out.(Output)
	next, want := apply(s, op)
	if got.Unknown {
		return true, next
	}
	if op.Kind == Stat && got.Errno == 0 && want.Errno == 0 {
		// A directory's size is the server's to choose.
		sizeOK := want.Dir || got.Size == want.Size
		return got.Dir == want.Dir && got.Perm == want.Perm && got.Nlink == want.Nlink && sizeOK, next
	}
	return got == want, next
}

// equal compares states by what they name, not by node ids, which depend
// on the order of creation.
func equal(a, b any) bool { return canonical(a.(*state)) == canonical(b.(*state)) }

// canonical renders a state with node ids replaced by the first name (in
// order) that names each.
func canonical(s *state) string {
	if s.canon == "" {
		s.canon = render(s)
	}
	return s.canon
}

func render(s *state) string {
	names := slices.Sorted(maps.Keys(s.names))
	first := map[int]string{}
	out := make([]byte, 0, 32*len(names))
	for _, name := range names {
		id := s.names[name]
		if _, seen := first[id]; !seen {
			first[id] = name
		}
		n := s.nodes[id]
		out = fmt.Appendf(out, "%s=%s:%v:%o:%d:%q;", name, first[id], n.dir, n.perm, n.nlink, n.data)
	}
	return "{" + string(out) + "}" // never empty, so that "" means not computed
}

var hashSeed = maphash.MakeSeed()

func hash(st any) uint64 { return maphash.String(hashSeed, canonical(st.(*state))) }

func describe(in, out any) string {
	op, got := in.(Input), out.(Output)
	args := op.Path
	switch op.Kind {
	case Rename, Link:
		args += " " + op.Path2
	case Chmod:
		args += fmt.Sprintf(" %o", op.Mode)
	case Write:
		args += fmt.Sprintf(" %q", op.Data)
	}
	var res string
	switch {
	case got.Unknown:
		res = "?"
	case got.Errno != 0:
		res = got.Errno.Error()
	case op.Kind == Read:
		res = fmt.Sprintf("%q", got.Data)
	case op.Kind == Stat:
		res = fmt.Sprintf("dir=%v perm=%o nlink=%d size=%d", got.Dir, got.Perm, got.Nlink, got.Size)
	default:
		res = "ok"
	}
	return fmt.Sprintf("%s %s -> %s", op.Kind, args, res)
}

// dirs returns the directories an operation names.
func dirs(in Input) []string {
	d := []string{path.Dir(in.Path)}
	if in.Path2 != "" {
		d = append(d, path.Dir(in.Path2))
	}
	return d
}
