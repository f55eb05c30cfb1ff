// Package trashname is the one definition of how a removed entry is named
// in the trash's hour directories, /.trash/<hour>/<parent>-<inode>-<name>
// (docs/operations.md): the engine names entries so and the model, which
// must agree with it, reads them the same way.
package trashname

import (
	"strconv"
	"strings"
)

// Entry is the name, in an hour directory, of the entry name of directory
// parent that named inode ino. The name is cut so that the whole fits in
// maxLen bytes.
func Entry(parent, ino uint64, name string, maxLen int) string {
	prefix := strconv.FormatUint(parent, 10) + "-" + strconv.FormatUint(ino, 10) + "-"
	if len(prefix)+len(name) > maxLen {
		name = name[:maxLen-len(prefix)]
	}
	return prefix + name
}

// Parse splits an hour directory's entry name; ok is false for a name
// that is not of the form Entry makes.
func Parse(s string) (parent, ino uint64, name string, ok bool) {
	p, rest, ok1 := strings.Cut(s, "-")
	i, name, ok2 := strings.Cut(rest, "-")
	if !ok1 || !ok2 {
		return 0, 0, "", false
	}
	pn, err1 := strconv.ParseUint(p, 10, 64)
	in, err2 := strconv.ParseUint(i, 10, 64)
	if err1 != nil || err2 != nil || name == "" {
		return 0, 0, "", false
	}
	return pn, in, name, true
}
